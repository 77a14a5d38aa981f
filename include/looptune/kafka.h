/* looptune kafka: the librdkafka glue. Client properties (-X key=value and
 * properties files), an asynchronous producer that never blocks its caller,
 * a consumer-group consumer, a reader of a whole topic (no group), topic
 * administration, the embedded development broker (librdkafka's in-memory
 * mock cluster), and the codecs of the wire schema proto/looptune.proto
 * (every record is one looptune.Envelope). */
#ifndef LOOPTUNE_KAFKA_H
#define LOOPTUNE_KAFKA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "looptune/core.h"
#include "looptune.pb-c.h" /* generated from proto/looptune.proto at build time */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- a member's name ---------------------------------------------------------- */

/* The name a group member goes by in its records (heartbeats, results): the
 * explicit id if given, else its static instance id, else "host:pid". */
void lt_kafka_member_name(const char *explicit_id, const char *instance_id, char *out, size_t n);

/* ---- properties ------------------------------------------------------------ */

/* An ordered set of librdkafka properties (key -> value; setting a key again
 * replaces its value in place). Filled from `-X key=value` arguments and from
 * properties files, then applied to every client after looptune's defaults,
 * so the user's word wins (SASL/SSL and tuning pass through unchanged). */
typedef struct lt_kafka_props lt_kafka_props;

int lt_kafka_props_init(lt_kafka_props **out);
void lt_kafka_props_free(lt_kafka_props *props); /* NULL is a no-op */
/* Copies key and value. LT_EINVAL for an empty key or one with spaces. */
int lt_kafka_props_set(lt_kafka_props *props, const char *key, const char *value);
/* One "key=value" (split at the first '='; surrounding spaces trimmed).
 * LT_EINVAL naming the argument if it has no '=' or no key. */
int lt_kafka_props_parse(lt_kafka_props *props, const char *arg);
/* A properties file: one key=value per line, '#' starts a comment line,
 * blank lines ignored. Errors name the file and line ("k.conf:3: ...");
 * nothing is added from a file with an error. */
int lt_kafka_props_load(lt_kafka_props *props, const char *path);
const char *lt_kafka_props_get(const lt_kafka_props *props, const char *key); /* NULL: unset */
size_t lt_kafka_props_count(const lt_kafka_props *props);
/* The i-th property in insertion order (i < count). Pointers stay valid
 * until the props are changed or freed. */
void lt_kafka_props_at(const lt_kafka_props *props, size_t i, const char **key,
                       const char **value);
/* Applies every property to a throw-away librdkafka configuration, so a
 * misspelled key or bad value is reported before any client starts:
 * LT_ECONFIG "kafka property 'linger.mss': No such configuration property". */
int lt_kafka_props_check(const lt_kafka_props *props);

/* Where and how a client connects. */
typedef struct {
    const char *brokers;         /* bootstrap.servers "host:port[,...]"; NULL: props set it */
    const lt_kafka_props *props; /* applied last, after looptune's defaults; may be NULL */
    const char *client_id;       /* NULL: "looptune" */
    /* The broker is this process's embedded one (lt_devbroker): consumers'
     * fetches wait at most LT_KAFKA_IN_PROCESS_FETCH_WAIT_MS. librdkafka's
     * mock cluster answers an empty fetch only when its whole wait is over
     * (a real broker answers as soon as records arrive), so the usual waits
     * of 50-100 ms would be latency on every hop. */
    bool in_process;
} lt_kafka_conn;

#define LT_KAFKA_IN_PROCESS_FETCH_WAIT_MS "5"

/* ---- producer ---------------------------------------------------------------- */

/* An asynchronous, batching producer (lz4, idempotent, linger) with a bounded
 * local queue. lt_producer_send never blocks: when the queue is full (the
 * broker is slow or down) the record is dropped and counted. A background
 * thread serves delivery reports, which count acknowledged and failed
 * records. Thread-safe: any thread may send. */
typedef struct lt_producer lt_producer;

typedef struct {
    lt_kafka_conn conn;
    const char *topic;      /* the topic records go to (required) */
    int64_t queue_records;  /* local queue bound in records; 0: 100000 */
    int64_t queue_kbytes;   /* local queue bound in KiB; 0: 65536 */
    int32_t linger_ms;      /* batching delay; 0: 20; -1: send at once */
    int32_t close_timeout_ms; /* lt_producer_close waits this long for delivery; 0: 5000 */
} lt_producer_opts;

typedef struct {
    int64_t sent;      /* accepted into the local queue */
    int64_t delivered; /* acknowledged by the broker */
    int64_t dropped;   /* refused by lt_producer_send: local queue full, or too large */
    int64_t failed;    /* accepted but never acknowledged: timed out, rejected, purged at close */
    int64_t errors;    /* client-level errors librdkafka reported (broker down, refused, ...) */
    int64_t in_queue;  /* records not yet acknowledged or failed, at the time of the call */
    char last_error[256]; /* the latest client-level error, "" if none */
} lt_producer_stats;

/* Return value of lt_producer_send when the record was dropped (not an error). */
#define LT_PRODUCER_DROPPED 1

/* Starts a producer. Does not wait for the broker: a wrong or unreachable
 * address shows as warnings on stderr, errors in the stats, and records that
 * are dropped or fail, never as a hang. Free with lt_producer_close. */
int lt_producer_open(lt_producer **out, const lt_producer_opts *opts);
/* Queues one record (copied; key may be NULL). LT_OK when queued,
 * LT_PRODUCER_DROPPED when the local queue is full or the record too large
 * (counted in stats.dropped). Never blocks, never logs. */
int lt_producer_send(lt_producer *p, const void *key, size_t key_len, const void *value,
                     size_t len);
/* The same to partition `partition` of the topic (< 0: the partitioner's
 * choice by key, as lt_producer_send). */
int lt_producer_send_to(lt_producer *p, int32_t partition, const void *key, size_t key_len,
                        const void *value, size_t len);
/* Encodes env and queues it. key NULL: the envelope's natural key
 * (lt_envelope_key). LT_EINVAL for an envelope lt_envelope_encode refuses. */
int lt_producer_send_envelope(lt_producer *p, const char *key, const Looptune__Envelope *env);
/* The same for one Kafka message that carries n_records records (a batch):
 * the stats count n_records for it, sent, dropped, delivered or failed. */
int lt_producer_send_n(lt_producer *p, const void *key, size_t key_len, const void *value,
                       size_t len, int64_t n_records);
int lt_producer_send_envelope_n(lt_producer *p, const char *key, const Looptune__Envelope *env,
                                int64_t n_records);
/* Waits up to timeout_ms until every queued record is acknowledged or failed.
 * LT_ETIMEOUT (with the count left) if some remain. */
int lt_producer_flush(lt_producer *p, int timeout_ms);
void lt_producer_stats_get(lt_producer *p, lt_producer_stats *out);
/* Flushes (up to opts.close_timeout_ms), purges what is left (counted as
 * failed), stops the poll thread and frees. NULL is a no-op. */
void lt_producer_close(lt_producer *p);

/* ---- consumer ---------------------------------------------------------------- */

/* A member of a consumer group subscribed to some topics. One thread at a time. */
typedef struct lt_consumer lt_consumer;

typedef struct {
    lt_kafka_conn conn;
    const char *group;          /* group.id (required) */
    const char *const *topics;  /* [n_topics] */
    size_t n_topics;
    bool from_beginning; /* without a committed offset, start at the oldest record (else newest) */
    bool auto_commit;    /* commit returned positions in the background; else lt_consumer_commit */
    /* Read each partition only up to its end when it was assigned (its high
     * watermark then): later records are not returned, and lt_consumer_at_end
     * says when every assigned partition is read (a snapshot, as kcat -e). */
    bool until_end;
    /* > 0: lt_consumer_open first asks the cluster for its metadata and fails
     * (LT_ETIMEOUT, with librdkafka's last error, which is not logged) when
     * no broker answers within this many ms. 0: no check; librdkafka retries
     * an unreachable broker for ever, with a warning now and then. */
    int connect_timeout_ms;
    /* With connect_timeout_ms: LT_ENOTFOUND from open when a topic does not
     * exist (else poll reports it, and the consumer waits for it). */
    bool topics_must_exist;
} lt_consumer_opts;

/* A consumed record. Pointers are valid until the next poll or close. */
typedef struct {
    const char *topic;
    int32_t partition;
    int64_t offset;
    int64_t timestamp_ms; /* producer's create time, -1 if none */
    const void *key;      /* NULL if the record has no key */
    size_t key_len;
    const void *value;
    size_t len;
} lt_record;

int lt_consumer_open(lt_consumer **out, const lt_consumer_opts *opts);
/* Waits up to timeout_ms for one record: 1 = *rec filled, 0 = none arrived.
 * Transient errors (a broker connection lost) are logged and retried inside;
 * LT_ENOTFOUND when a subscribed topic does not exist, LT_EKAFKA for other
 * errors the caller should see (the consumer stays usable after both). */
int lt_consumer_poll(lt_consumer *c, int timeout_ms, lt_record *rec);
/* Whether the group has assigned this member its partitions (possibly
 * none) at least once: until then no record can arrive, whatever the wait
 * (joining takes a few seconds on a broker with the default
 * group.initial.rebalance.delay.ms). */
bool lt_consumer_assigned(const lt_consumer *c);
/* With opts.until_end: the group has assigned this member its partitions and
 * each of them has been read up to its end at assignment (or is empty).
 * Always false without until_end. */
bool lt_consumer_at_end(const lt_consumer *c);
/* Commits, synchronously, the positions after every record returned so far.
 * LT_OK also when there is nothing new to commit. */
int lt_consumer_commit(lt_consumer *c);
/* Leaves the group (committing first when auto_commit) and frees. NULL is a no-op. */
void lt_consumer_close(lt_consumer *c);

/* ---- stage: consume, process, produce, exactly once ----------------------------- */

/* A consumer-group member on one input topic paired with a producer, for
 * work whose outputs and consumed offsets must land together. With a
 * transactional id, each lt_stage_commit produces its records and commits
 * the given input offsets in ONE Kafka transaction, the consumer's group
 * metadata fencing members that lost their partitions (KIP-447): readers
 * with isolation.level=read_committed see each piece of work's outputs once.
 * Without one (at-least-once), the records are produced and flushed, then
 * the offsets committed (asynchronously: a commit that fails, or a crash
 * before it lands, repeats the work).
 *
 * The group uses cooperative-sticky assignment; the stage (un)assigns
 * itself and tells the caller which partitions it lost, so the caller can
 * drop what it buffered of them; a transaction open at that moment is
 * aborted. librdkafka's transactional traps are handled inside commit: an
 * abortable error aborts and retries, a retriable one retries the call, a
 * fatal one (fenced, an invalid state after a timed-out abort) recreates the
 * producer and retries. One thread at a time (the rebalance callback runs
 * inside poll and commit, on that thread). */
typedef struct lt_stage lt_stage;

typedef struct {
    lt_kafka_conn conn;
    const char *group;            /* group.id (required) */
    const char *topic;            /* the input topic (required) */
    const char *output_topic;     /* NULL, or the topic commits write to: its metadata is
                                     fetched when the producer starts, so the first commit
                                     does not wait up to a second to learn its partitions */
    const char *transactional_id; /* NULL: at-least-once */
    const char *instance_id;      /* group.instance.id (static membership); NULL: dynamic */
    int session_timeout_ms;       /* 0: 6000 */
    int transaction_timeout_ms;   /* 0: 15000: how long a dead member's open transaction
                                     holds back read_committed readers */
    /* > 0: the caller knows the group's members in advance (the workers of
     * the embedded broker of its own process, fixed_members of them, this
     * one fixed_index of them): the stage takes the topic's partitions p
     * with p % fixed_members == fixed_index at once instead of joining the
     * group, whose first join waits out the broker's initial rebalance
     * delay (3 s) and whose members' leaving stalls the others. */
    int fixed_members;
    int fixed_index;
    /* Tests: a commit with records flushes them, says so on stderr ("...
     * records produced, committing in MS ms") and sleeps this long before
     * it commits (the transaction, or at-least-once the offsets), so a test
     * can kill the process in between. 0: none. */
    int test_commit_delay_ms;
    /* Called from poll when partitions of the input topic are revoked or lost. */
    void (*on_revoke)(void *arg, int32_t partition);
    void *arg;
} lt_stage_opts;

/* An output record of a commit. */
typedef struct {
    const char *topic;
    const void *key;
    size_t key_len;
    const void *value;
    size_t len;
} lt_stage_record;

/* A committed position of the input topic: offset is the next to read. */
typedef struct {
    int32_t partition;
    int64_t offset;
} lt_stage_offset;

typedef struct {
    int64_t committed;         /* commits that landed */
    int64_t aborted;           /* transactions aborted (then retried or dropped) */
    int64_t retried;           /* calls retried after a retriable error */
    int64_t producer_restarts; /* producers recreated after a fatal error */
    int64_t dropped;           /* commits given up because the partitions moved away */
    int64_t commit_failed;     /* at-least-once: offset commits the group refused (their
                                  tasks run again) */
    /* Wall time of the calls of the commits that landed, summed, ms: begin_transaction;
     * producing the records (queued: their sending overlaps what follows); the offsets
     * (send_offsets_to_transaction, at-least-once the asynchronous commit); the end
     * (commit_transaction, at-least-once the flush). */
    double ms_begin, ms_produce, ms_offsets, ms_end;
} lt_stage_stats;

/* Joins the group (or takes its fixed share of the partitions) and, with a
 * transactional id, initialises transactions
 * (fencing an earlier producer of the same id). Free with lt_stage_close. */
int lt_stage_open(lt_stage **out, const lt_stage_opts *opts);
/* As lt_consumer_poll: 1 = *rec filled (valid until the next poll), 0 = none. */
int lt_stage_poll(lt_stage *s, int timeout_ms, lt_record *rec);
/* Whether partition p of the input topic is assigned to this member now. */
bool lt_stage_owns(const lt_stage *s, int32_t partition);
/* Produces recs[0..n) and commits offs[0..n_offs) of the input topic
 * together. LT_OK: both landed (at-least-once: the records landed, the
 * offsets' commit is on its way). LT_ESTATE: some offset's partition is no
 * longer this member's, nothing was committed, and the work is dropped (the
 * partition's new owner repeats it). LT_EKAFKA after the retries ran out
 * or a fatal error of the consumer. */
int lt_stage_commit(lt_stage *s, const lt_stage_record *recs, size_t n,
                    const lt_stage_offset *offs, size_t n_offs);
/* Sets partition's position back to its committed offset (the oldest record
 * when none): records read since are read again. For work that was not
 * committed while the partition stayed assigned. */
int lt_stage_rewind(lt_stage *s, int32_t partition);
/* Stops (paused) or restarts fetching from every partition assigned, now
 * and later (partitions assigned while paused start paused): poll then
 * returns no record but still serves the group's rebalances, so a member
 * that cannot take more work keeps its membership without a backlog.
 * Resumed partitions go on after the last record returned. */
int lt_stage_pause(lt_stage *s, bool paused);
bool lt_stage_exactly_once(const lt_stage *s);
void lt_stage_stats_get(const lt_stage *s, lt_stage_stats *out);
/* Leaves the group (revoking its partitions) and frees. NULL is a no-op. */
void lt_stage_close(lt_stage *s);

/* ---- reader: a whole topic, once ---------------------------------------------- */

/* Reads every partition of a topic from its oldest record up to the high
 * watermarks taken when it opens, then ends by itself: records produced
 * later are not returned (a snapshot, e.g. of a compacted topic). Partitions
 * are assigned directly: the reader never joins a consumer group and commits
 * nothing, so it disturbs no group (librdkafka wants a group.id all the
 * same: a fixed one, "looptune.reader", that -X group.id overrides). One
 * thread at a time. */
typedef struct lt_kafka_reader lt_kafka_reader;

/* Looks the topic up (never creating it) and takes each partition's low and
 * high watermarks; timeout_ms bounds each of these requests. LT_ENOTFOUND
 * when the topic does not exist. Free with lt_kafka_reader_close. */
int lt_kafka_reader_open(lt_kafka_reader **out, const lt_kafka_conn *conn, const char *topic,
                         int timeout_ms);
/* The next record, partitions interleaved, each in offset order: 1 = *rec
 * filled (value NULL for a null value, a tombstone; pointers valid until the
 * next call or close), 0 = every partition has reached its end. LT_ETIMEOUT
 * when nothing arrives within timeout_ms although some partition has not,
 * LT_ENOTFOUND if the topic went away, LT_EKAFKA for other errors. */
int lt_kafka_reader_next(lt_kafka_reader *r, int timeout_ms, lt_record *rec);
/* Records between the watermarks at open, summed over partitions: an upper
 * bound of what the reader returns (compaction and aborted transactions
 * leave gaps in the offsets). */
int64_t lt_kafka_reader_span(const lt_kafka_reader *r);
void lt_kafka_reader_close(lt_kafka_reader *r); /* NULL is a no-op */

/* ---- follower: a topic from now on --------------------------------------------- */

/* Every partition of one topic from the high watermarks taken at open
 * onwards, without joining a consumer group (nothing is committed). A run
 * follows the control topic this way: every control produced after open
 * returns is seen, none produced before. One thread at a time. */
typedef struct lt_follower lt_follower;

/* LT_ENOTFOUND if the topic does not exist (waits up to timeout_ms). */
int lt_follower_open(lt_follower **out, const lt_kafka_conn *conn, const char *topic,
                     int timeout_ms);
/* As lt_consumer_poll: 1 = *rec filled (valid until the next poll), 0 = none. */
int lt_follower_poll(lt_follower *f, int timeout_ms, lt_record *rec);
/* Offsets between where the follower has read to and the high watermarks now,
 * summed over partitions (0: caught up), or a negative LT_E* code. An upper
 * bound of what is left to read: transaction markers take offsets too. */
int64_t lt_follower_behind(lt_follower *f, int timeout_ms);
/* Reads what is left to the high watermarks as they are at each look,
 * calling fn(ctx, record) on every record (a non-zero return stops it),
 * until caught up, nothing came for 300 ms while behind (a transaction's
 * marker holds an offset no record fills), or cap_ms passed. A job's
 * coordinator counts the replays still on their way when its last task was
 * applied this way. */
void lt_follower_drain(lt_follower *f, int cap_ms, int (*fn)(void *ctx, const lt_record *rec),
                       void *ctx);
void lt_follower_close(lt_follower *f); /* NULL is a no-op */

/* ---- topics ------------------------------------------------------------------ */

/* The looptune topics; the full name is prefix + suffix ("looptune.telemetry"). */
typedef enum {
    LT_TOPIC_TELEMETRY = 0,
    LT_TOPIC_CONTROL,
    LT_TOPIC_CONFIGS, /* log-compacted: key = kernel|shape|host class */
    LT_TOPIC_TASKS,
    LT_TOPIC_RESULTS,
    LT_TOPIC_TRIALS,
    LT_TOPIC_TASKS_DEAD, /* tasks given up on (dead letters) */
    LT_TOPIC_REQUESTS,    /* stream inference: requests and cancels, key request id */
    LT_TOPIC_COMPLETIONS, /* stream inference: completions, key request id */
    LT_TOPIC_COUNT
} lt_kafka_topic;

#define LT_KAFKA_TOPIC_PREFIX "looptune."
const char *lt_kafka_topic_suffix(lt_kafka_topic t); /* "telemetry", ... */

typedef struct {
    const char *name;
    int32_t partitions;        /* -1: the broker's default */
    int16_t replication;       /* -1: the broker's default */
    const char *const *configs; /* [n_configs] "key=value" topic configs */
    size_t n_configs;
} lt_topic_spec;

typedef struct {
    int32_t partitions;
    int32_t replication;     /* replicas of partition 0 */
    lt_kafka_props *configs; /* every topic config as the broker reports it; free with
                                lt_kafka_props_free */
} lt_topic_info;

typedef struct lt_kafka_admin lt_kafka_admin;

int lt_kafka_admin_open(lt_kafka_admin **out, const lt_kafka_conn *conn);
void lt_kafka_admin_close(lt_kafka_admin *a); /* NULL is a no-op */
/* Creates the topics that do not exist yet; existing ones are left as they
 * are. *created (may be NULL) counts the new ones. Errors name the topic. */
int lt_kafka_admin_create_topics(lt_kafka_admin *a, const lt_topic_spec *specs, size_t n,
                                 int timeout_ms, size_t *created);
/* Creates prefix+suffix for every lt_kafka_topic that is missing, configs
 * with cleanup.policy=compact. */
int lt_kafka_admin_ensure_topics(lt_kafka_admin *a, const char *prefix, int32_t partitions,
                                 int16_t replication, int timeout_ms);
/* Partition count, replication and configs of one topic; LT_ENOTFOUND if it
 * does not exist. */
int lt_kafka_admin_describe_topic(lt_kafka_admin *a, const char *topic, int timeout_ms,
                                  lt_topic_info *out);

/* ---- embedded development broker ------------------------------------------ */

/* librdkafka's mock cluster: the real Kafka protocol on 127.0.0.1, in this
 * process, in memory. Not durable; about 5 MiB per partition (older records
 * are dropped); no log compaction; no transactions to rely on; no CreateTopics
 * (topics are created on first use). For development and fault-injection
 * tests; open says so on stderr. */
typedef struct lt_devbroker lt_devbroker;
struct rd_kafka_mock_cluster_s;

/* n_brokers >= 1. port 0: the brokers' own ports (chosen by the system) form
 * the bootstrap list; port > 0: clients bootstrap through 127.0.0.1:port as
 * well (a relay to broker 1; metadata then points them at the brokers'
 * own ports). */
int lt_devbroker_open(lt_devbroker **out, int n_brokers, int port);
/* "127.0.0.1:P[,...]" for bootstrap.servers; valid until close. */
const char *lt_devbroker_bootstrap(const lt_devbroker *b);
/* The mock cluster, for fault injection (rdkafka_mock.h). */
struct rd_kafka_mock_cluster_s *lt_devbroker_cluster(lt_devbroker *b);
/* Creates a topic on the embedded broker (it has no CreateTopics); an
 * existing one is left as it is. */
int lt_devbroker_create_topic(lt_devbroker *b, const char *topic, int partitions);
void lt_devbroker_close(lt_devbroker *b); /* NULL is a no-op */

/* ---- wire codec ---------------------------------------------------------------- */

/* The schema version this build writes and reads (Envelope.version). */
#define LT_PROTO_VERSION 1

/* looptune__envelope__init, then version = LT_PROTO_VERSION and time_ns =
 * now (CLOCK_REALTIME). The caller then sets one payload (payload_case and
 * the matching pointer). */
void lt_envelope_init(Looptune__Envelope *env);
/* Bytes lt_envelope_pack will write. */
size_t lt_envelope_packed_size(const Looptune__Envelope *env);
/* Validates env (a version, exactly the payload its case names) and packs it
 * into buf of cap >= lt_envelope_packed_size bytes; *len gets the size. */
int lt_envelope_pack(const Looptune__Envelope *env, uint8_t *buf, size_t cap, size_t *len);
/* The same when the caller has just computed need = lt_envelope_packed_size(env)
 * and buf holds that many bytes: the size is not computed again. */
int lt_envelope_pack_sized(const Looptune__Envelope *env, uint8_t *buf, size_t need,
                           size_t *len);
/* Same into a new malloc'd buffer (caller frees with free). */
int lt_envelope_encode(const Looptune__Envelope *env, uint8_t **buf, size_t *len);
/* Decodes len bytes into a new envelope (free with lt_envelope_free).
 * LT_EFORMAT with detail naming the problem for malformed input: where the
 * wire format breaks ("kernel_window.params: length 300 past the end at byte
 * 41"), a wrong wire type, a missing or unknown schema version, no payload. */
int lt_envelope_decode(const void *buf, size_t len, Looptune__Envelope **out);
void lt_envelope_free(Looptune__Envelope *env); /* NULL is a no-op */
/* The payload's field name: "kernel_window", ...; "none" if unset. */
const char *lt_envelope_kind(const Looptune__Envelope *env);
/* The natural record key: run_id for run telemetry and control,
 * "kernel|shape|host_class" for Config, host_id for Host, job_id for Task
 * and Result, study_id for Trial. Writes into buf (always NUL-terminated);
 * returns the length it wanted. */
size_t lt_envelope_key(const Looptune__Envelope *env, char *buf, size_t n);
/* Canonical proto3 JSON of any message, on one line: field names as in the
 * .proto, 64-bit integers as strings, enums by name, bytes in base64,
 * fields at their default value left out. *json is malloc'd (caller frees). */
int lt_message_to_json(const ProtobufCMessage *msg, char **json);
int lt_envelope_to_json(const Looptune__Envelope *env, char **json);
/* s (n bytes) as a JSON string, quotes included, escaped as the records'
 * JSON is: quotes, backslashes and control characters escaped, bytes that
 * are not UTF-8 as U+FFFD. *json is malloc'd (caller frees). */
int lt_json_quote(const char *s, size_t n, char **json);

#ifdef __cplusplus
}
#endif
#endif

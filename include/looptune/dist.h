/* looptune dist: distributed tensor jobs over Kafka. A coordinator cuts a job
 * into tasks on the tasks topic; workers in a consumer group run them and
 * answer on the results topic, each answer and the consumed offsets in one
 * Kafka transaction; the coordinator applies each (job, task) once. Large
 * tensors travel in chunks below Kafka's record size limit, each with its
 * CRC32C. Task kinds (matmul today) are a registry. See docs/distributed.md. */
#ifndef LOOPTUNE_DIST_H
#define LOOPTUNE_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "looptune/core.h"
#include "looptune/kafka.h"
#include "looptune/tune.h" /* tune jobs: strategies, config entries */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CRC32C ------------------------------------------------------------------- */

/* CRC32C (Castagnoli, as iSCSI and Kafka's record batches): of "123456789" it
 * is 0xE3069283. From Intel's ISA-L (Debian libisal). */
uint32_t lt_crc32c(const void *data, size_t n);

/* ---- .npy files ---------------------------------------------------------------- */

/* A numpy array of little-endian f32 in C order ('<f4', fortran_order False),
 * 1 to 4 dimensions. */
typedef struct {
    int ndim;
    int64_t shape[4];
    float *data; /* [prod(shape)], malloc'd; free with lt_npy_free */
} lt_npy;

/* Reads a .npy file of format version 1, 2 or 3. LT_EFORMAT naming the
 * file and the problem for anything else: another magic or version, another
 * dtype ("dtype '<f8': looptune reads '<f4' only"), Fortran order, a header
 * that does not parse, a file shorter than its shape says (truncated) or
 * longer. LT_EIO when it cannot be read. */
int lt_npy_read(const char *path, lt_npy *out);
/* Writes data [prod(shape)] as a version 1 .npy file (version 2 when the
 * header would not fit in 64 KiB), via a temporary file renamed into place. */
int lt_npy_write(const char *path, const float *data, int ndim, const int64_t *shape);
void lt_npy_free(lt_npy *a); /* frees data; a zeroed a is a no-op */

/* ---- tensors in records, and their chunks ----------------------------------------- */

/* Chunks carry at most this many bytes of a tensor by default (Kafka's
 * default record limit is about 1 MB); a tensor of at most a quarter of it
 * travels inline in its task or result. */
#define LT_DIST_CHUNK_BYTES (512 * 1024)
#define LT_DIST_CHUNK_MIN 1024
#define LT_DIST_CHUNK_MAX (900 * 1024)

/* A tensor in memory, row-major: f32, or (dtype) f16, bf16 or q8_0 rows in
 * the library's layouts (the last dimension then a multiple of the dtype's
 * block), data pointing at those bytes. */
typedef struct {
    char name[16];
    int ndim;
    int64_t shape[4];
    float *data;
    lt_dtype dtype; /* LT_F32 (zero) unless it travels converted */
} lt_dist_tensor;

/* Bytes of t's data by its dtype and shape; 0 for a dtype tensors do not
 * travel in (f32, f16, bf16, q8_0 do) or a last dimension that is no
 * multiple of its block. */
size_t lt_dist_tensor_bytes(const lt_dist_tensor *t);

/* Records to produce together, in order: (key, encoded Envelope) pairs. */
typedef struct {
    char **keys;
    uint8_t **values;
    size_t *lens;
    size_t n, cap;
} lt_dist_outbox;

void lt_dist_outbox_free(lt_dist_outbox *o); /* frees the records; a zeroed o is a no-op */
/* Encodes env and appends it under key. */
int lt_dist_outbox_add(lt_dist_outbox *o, const char *key, const Looptune__Envelope *env);
/* Sends every record of o with p, in order, to partition (< 0: by key),
 * waiting out a full local queue (up to 30 s: LT_ETIMEOUT); adds the bytes
 * sent to *bytes_sent (may be NULL). */
int lt_dist_outbox_send(const lt_dist_outbox *o, lt_producer *p, int32_t partition,
                        int64_t *bytes_sent);

/* Where a tensor travels: the record it belongs to. */
typedef struct {
    const char *job_id;
    uint64_t task_index;
    uint32_t attempt;
    size_t chunk_bytes; /* 0: LT_DIST_CHUNK_BYTES */
    const char *key;    /* key of the chunk records (the referencing record's key) */
} lt_dist_route;

/* Describes t in msg (looptune__tensor__init'ed by the caller; its fields
 * then point into t and into *shape_buf [4], which must outlive msg). A
 * tensor above chunk_bytes / 4 is chunked: its Chunk records go into o now
 * (before the record that references it), msg gets their blob id and
 * count. Every tensor gets the CRC32C of its bytes. */
int lt_dist_tensor_put(const lt_dist_tensor *t, const lt_dist_route *r, lt_dist_outbox *o,
                       Looptune__Tensor *msg, int64_t *shape_buf);

/* Chunks received and not yet claimed, keyed by blob id, with the
 * partition and offset of each (what a consumer may commit past). Bounded:
 * beyond max_bytes the oldest blob is dropped (its tensor then reports
 * missing chunks). */
typedef struct lt_dist_blobs lt_dist_blobs;

int lt_dist_blobs_init(lt_dist_blobs **out, size_t max_bytes);
void lt_dist_blobs_free(lt_dist_blobs *b); /* NULL is a no-op */
/* Keeps one chunk (its data copied). A chunk whose data does not match its
 * CRC32C is kept as a mark: the blob then fails to assemble with that
 * reason. LT_EFORMAT for a chunk that cannot belong to any blob (index not
 * below count, a count that changed, a duplicate index with other bytes). */
int lt_dist_blobs_add(lt_dist_blobs *b, const Looptune__Chunk *c, int32_t partition,
                      int64_t offset);
/* The tensor msg describes, as t (data malloc'd: free it), with its blob (if
 * chunked) removed from b. LT_EFORMAT with why: a dtype other than f32, f16,
 * bf16 or q8_0, a shape that disagrees with the bytes or is above max_elems,
 * a missing chunk, a chunk that failed its CRC32C, the whole failing its
 * CRC32C. */
int lt_dist_tensor_get(lt_dist_blobs *b, const Looptune__Tensor *msg, int64_t max_elems,
                       lt_dist_tensor *t);
/* Forgets every blob received from partition p (revoked). */
void lt_dist_blobs_drop_partition(lt_dist_blobs *b, int32_t partition);
/* Forgets blobs whose first chunk arrived more than age_ns ago; returns how many. */
size_t lt_dist_blobs_expire(lt_dist_blobs *b, uint64_t age_ns);
/* The lowest offset of a kept chunk from partition p, or -1 if none. */
int64_t lt_dist_blobs_min_offset(const lt_dist_blobs *b, int32_t partition);
size_t lt_dist_blobs_count(const lt_dist_blobs *b);

/* ---- panels: operands kept for later tasks ---------------------------------------- */

/* A worker's panel cache: tensors that tasks carried with a panel id
 * (Tensor.panel_id), kept so that later tasks may reference them by id
 * (Tensor.panel_ref) instead of carrying the bytes again. Bounded by bytes,
 * least recently used first out; a panel goes when the last partition it
 * came from is revoked. */
#define LT_DIST_PANEL_CACHE_BYTES ((size_t)1 << 30)
typedef struct lt_dist_panels lt_dist_panels;

int lt_dist_panels_init(lt_dist_panels **out, size_t max_bytes); /* 0: 1 GiB */
void lt_dist_panels_free(lt_dist_panels *c); /* NULL is a no-op */
/* Keeps a copy of t (its bytes' CRC32C crc32c) as panel id, received from
 * partition; the least recently used panels make room. The same id and
 * bytes again only adds the partition. A panel above the whole bound is not
 * kept (LT_OK: its references will miss). */
int lt_dist_panels_put(lt_dist_panels *c, uint64_t id, int32_t partition, const lt_dist_tensor *t,
                       uint32_t crc32c);
/* A copy of the panel msg references (msg->panel_id) as t (free t->data),
 * named as msg. LT_ENOTFOUND naming it when the cache does not hold it, or
 * holds another tensor under that id (dtype, shape, bytes or CRC32C
 * differ). c NULL: always LT_ENOTFOUND. */
int lt_dist_panels_get(lt_dist_panels *c, const Looptune__Tensor *msg, lt_dist_tensor *t);
/* Forgets partition p (revoked): panels from no other partition go. */
void lt_dist_panels_drop_partition(lt_dist_panels *c, int32_t partition);
size_t lt_dist_panels_count(const lt_dist_panels *c);
size_t lt_dist_panels_bytes(const lt_dist_panels *c);

/* An input of a task read from partition: a panel reference from the cache
 * c, else the tensor from its inline bytes or its chunks in b (as
 * lt_dist_tensor_get), kept in c too when it carries a panel id. LT_ENOTFOUND
 * only for a reference c cannot serve (the task needs its panel sent again);
 * any other error is the tensor's own. */
int lt_dist_input_get(lt_dist_blobs *b, lt_dist_panels *c, const Looptune__Tensor *msg,
                      int32_t partition, int64_t max_elems, lt_dist_tensor *t);

/* ---- task kinds ------------------------------------------------------------------- */

/* A task in hand: its record and its inputs, assembled. */
typedef struct {
    const Looptune__Task *task;
    const lt_dist_tensor *inputs;
    size_t n_inputs;
    lt_pool *pool; /* the worker's threads */
} lt_dist_task_in;

#define LT_DIST_MAX_OUTPUTS 4

/* A kind runs one task: fills outs[0..*n_outs) (data malloc'd, freed by the
 * caller) or returns an error whose detail is the result's error text
 * (inputs from the network are checked here: shapes, sizes). A kind whose
 * answer is no tensor has answer instead of run: *data (malloc'd, freed by
 * the caller) becomes the result's data (tune: an encoded Config envelope). */
typedef struct {
    const char *name;
    int (*run)(const lt_dist_task_in *in, lt_dist_tensor *outs, size_t *n_outs);
    int (*answer)(const lt_dist_task_in *in, uint8_t **data, size_t *len);
} lt_dist_kind;

/* NULL if no kind has that name. */
const lt_dist_kind *lt_dist_kind_find(const char *name);
/* The i-th kind (NULL past the last). */
const lt_dist_kind *lt_dist_kind_at(size_t i);

/* The matmul kind's product: C[m][n] = A[m][k] B where bt[n][k] is B
 * transposed, with the library's matmul kernel on pool's threads. A tile and
 * the whole matrix give the same bits per element (the kernel adds each
 * element's products in the same order whatever the split), so a
 * distributed product equals the single-node one. */
int lt_dist_matmul(lt_pool *pool, const float *a, const float *bt, int64_t m, int64_t n,
                   int64_t k, float *c);
/* The same with bt [n] rows of k elements in bt_dtype (f32, f16, bf16 or
 * q8_0; q8_0 needs k a multiple of 32), the kernel's weight operand. */
int lt_dist_matmul_dt(lt_pool *pool, const float *a, const void *bt, lt_dtype bt_dtype,
                      int64_t m, int64_t n, int64_t k, float *c);

/* What a matmul job computes, on one node: A and B^T converted to dtype as
 * they travel (A widened back to f32 as the workers do), each k-split of
 * block_k (<= 0: all of k) multiplied with the matmul kernel, the partial
 * products added in split order, split 0 first, as the coordinator adds
 * them. b is B [k][n]. The distributed product equals it bit for bit. */
int lt_dist_matmul_local(lt_pool *pool, const float *a, const float *b, int64_t m, int64_t n,
                         int64_t k, lt_dtype dtype, int64_t block_k, float *c);

/* ---- topics ------------------------------------------------------------------------ */

/* Creates the tasks, results and tasks.dead topics of prefix that are
 * missing, with `partitions` partitions each (<= 0: 6). */
int lt_dist_ensure_topics(const lt_kafka_conn *conn, const char *prefix, int32_t partitions);
/* The partition count of topic. */
int lt_dist_topic_partitions(const lt_kafka_conn *conn, const char *topic, int32_t *out);

/* ---- worker ------------------------------------------------------------------------ */

/* A worker's batch: the tasks it has fetched already, run one after the
 * other, their results and offsets committed together (one transaction).
 * It closes when nothing more is fetched, or at this many tasks, or when it
 * has been open this long. */
#define LT_WORKER_BATCH 1024
#define LT_WORKER_BATCH_MS 20

typedef struct {
    lt_kafka_conn conn;
    const char *prefix;       /* topic prefix; NULL: "looptune." */
    const char *group;        /* NULL: prefix + "workers" ("looptune.workers") */
    const char *instance_id;  /* static membership and a stable transactional id; NULL: none */
    int threads;              /* <= 0: 1 */
    const char *const *kinds; /* [n_kinds] kinds to run; n_kinds 0: every registered kind */
    size_t n_kinds;
    bool at_least_once;       /* no transactions: produce, flush, then commit offsets */
    int32_t partitions;       /* of topics created when missing; <= 0: 6 */
    int heartbeat_ms;         /* <= 0: 1000 */
    int task_delay_ms;        /* sleep before each task (demonstrations, kill tests) */
    int batch_max;            /* tasks per commit at most; <= 0: LT_WORKER_BATCH; 1: none */
    int batch_ms;             /* a batch closes once open this long; <= 0: LT_WORKER_BATCH_MS */
    int test_commit_delay_ms; /* tests: lt_stage_opts.test_commit_delay_ms */
    int session_timeout_ms;   /* <= 0: 6000 */
    size_t panel_cache_bytes; /* bound of the panel cache; 0: LT_DIST_PANEL_CACHE_BYTES */
    const _Atomic bool *stop; /* set (by a signal handler) to finish the task in hand and leave */
    const char *tasks_topic;  /* the topic of its tasks; NULL: prefix + "tasks" (created
                                 by the caller when it is another) */
    const char *worker_id;    /* in results and heartbeats, and its transactional id's tail;
                                 NULL: instance_id, else host:pid */
    bool topics_made;         /* the caller made the topics (a broker without the admin
                                 API's CreateTopics): none created */
    int fixed_members;        /* > 0: lt_stage_opts.fixed_members (workers of an embedded
                                 broker in the caller's process, fixed_index of them this
                                 one): a fixed share of the task partitions, no group join */
    int fixed_index;
} lt_worker_opts;

typedef struct {
    int64_t tasks_done;      /* results committed */
    int64_t tasks_failed;    /* of them, FAILED */
    int64_t tasks_dropped;   /* results not committed: a partition of their batch moved to
                                another member */
    int64_t tasks_expired;   /* tasks past their deadline, skipped */
    int64_t rejected;        /* records that were not a well-formed task or chunk */
    int64_t panels_missed;   /* tasks answered NEED_PANEL: a referenced panel not in the cache */
    lt_stage_stats stage;
} lt_worker_stats;

/* Runs a worker until *stop, or a fatal error. */
int lt_worker_run(const lt_worker_opts *opts, lt_worker_stats *stats);

/* ---- coordinator: submit matmul ------------------------------------------------------ */

typedef enum {
    LT_PANEL_BY_AUTO = 0, /* the one that moves fewer bytes (rows on a tie) */
    LT_PANEL_BY_ROWS,     /* a tile row to a partition: A's row panels reused */
    LT_PANEL_BY_COLS,     /* a tile column to a partition: B's column panels reused */
} lt_dist_panel_by;

typedef struct {
    lt_kafka_conn conn;
    const char *prefix;       /* NULL: "looptune." */
    int32_t partitions;       /* of topics created when missing; <= 0: 6 */
    int64_t block_m, block_n; /* output tile; <= 0: 128 */
    int64_t block_k;          /* k-split: each task a range of k this long; <= 0: all of k */
    lt_dtype dtype;           /* the operands travel as f32 (zero), f16, bf16 or q8_0 */
    size_t chunk_bytes;       /* 0: LT_DIST_CHUNK_BYTES */
    uint32_t max_attempts;    /* 0: 3 */
    double worker_timeout_s;  /* no worker heard from this long: the job fails; <= 0: 30 */
    double job_timeout_s;     /* the job fails after this long; <= 0: 3600 */
    double progress_s;        /* progress line on stderr every this many s; 0: 2; < 0: none */
    const char *job_id;       /* NULL: a random one */
    /* Tests: corrupt a byte of task corrupt_task's first input (after its
     * CRC32C is taken) in its first corrupt_attempts sends. */
    int64_t corrupt_task;     /* -1: none */
    uint32_t corrupt_attempts;
    /* Take up job job_id where an earlier coordinator left it: its results
     * so far are read from the results topic and applied, and only the
     * tasks without one are sent again (as their next attempt). The
     * operands must be the job's (checked against its tasks' CRC32C). */
    bool resume;
    int64_t window;           /* at most this many tasks in flight; <= 0: all at once */
    /* matmul: panel reuse (the default). The tasks of one tile row (or
     * column) go to one partition of the tasks topic, row r to partition r
     * mod the partitions; the row's panel of A travels with its first task
     * and the others reference it by id, as do tasks of the same partition
     * that need a panel of B sent there before (when all of B fits in half
     * the smallest panel cache the workers announce). A worker without the
     * panel answers NEED_PANEL and gets the task again with the bytes. */
    bool no_panel_reuse;      /* the plain tile scheme: every task carries its panels */
    lt_dist_panel_by panel_by;
} lt_submit_opts;

typedef struct {
    char job_id[40];
    int64_t tasks;
    int64_t applied;         /* results applied to C: one per task when the job succeeds */
    int64_t duplicates;      /* results of tasks already applied, dropped */
    int64_t retries;         /* tasks sent again after a failed attempt */
    int64_t failed_results;  /* FAILED results received */
    int64_t dead;            /* tasks dead-lettered */
    int64_t rejected;        /* records on the results topic that were malformed, dropped */
    int64_t chunks_sent;
    int64_t bytes_sent;      /* record bytes (values) produced to the tasks topic */
    int64_t bytes_received;  /* record bytes (values) of the job's chunks and results read */
    /* matmul: what the plain tile scheme sends, every task with its f32 panels
     * of A and B: 4 k (m tiles_n + n tiles_m) bytes, 8 n^2 t for n x n in t x t */
    int64_t bytes_plain;
    int64_t workers_seen;    /* distinct workers heard from */
    int64_t resumed;         /* tasks applied from an earlier coordinator's results (resume) */
    /* panel reuse (matmul) */
    char panel_by[8];        /* "rows", "cols", or "" (the plain tile scheme) */
    int64_t panels_sent;     /* panels sent with their bytes and an id */
    int64_t panel_refs;      /* panels referenced by id instead */
    int64_t need_panel;      /* NEED_PANEL answers received */
    int64_t panel_resends;   /* tasks sent again with their panels after one */
    double rt_median_ms, rt_p99_ms; /* a task's last send to its result applied */
    double seconds;
    double busy_seconds;     /* the first task sent to the last result applied (the job's
                                throughput, without its setup and its wait for a worker) */
    char dead_reason[512];   /* the first dead letter's "task T: reason" */
} lt_submit_stats;

/* C[m][n] = A[m][k] B[k][n] over the cluster: tiles block_m x block_n of C
 * as tasks, results applied once each. With block_k < k each tile is
 * ceil(k / block_k) tasks whose partial tiles are added in split order (C
 * equals lt_dist_matmul_local's bit for bit); opts.dtype converts the
 * operands before they travel (q8_0: k and block_k multiples of 32). LT_ETIMEOUT when no worker is alive
 * (none heard from for worker_timeout_s) or the job timed out; LT_EFORMAT
 * when a task was dead-lettered (stats.dead_reason says why); with resume,
 * LT_ENOTFOUND when the job has no task on the topic, LT_EINVAL when its
 * shape or operands differ, LT_ESTATE when it has a dead letter. */
int lt_submit_matmul(const lt_submit_opts *opts, const float *a, const float *b, int64_t m,
                     int64_t n, int64_t k, float *c, lt_submit_stats *stats);

/* ---- jobs: what the topics say ------------------------------------------------------ */

/* One job as its records on the tasks, results and tasks.dead topics tell it. */
typedef struct {
    char job_id[64];
    char kind[16];
    int64_t tasks;        /* the job's task count (Task.total_tasks) */
    int64_t sent;         /* distinct tasks on the tasks topic */
    int64_t done;         /* distinct tasks with a committed OK result */
    int64_t ok_results;   /* OK results, duplicates included */
    int64_t failed;       /* FAILED results */
    int64_t dead;         /* dead letters */
    uint32_t max_attempt; /* highest attempt sent */
    uint64_t first_ns, last_ns; /* wall clock of its first and last record */
    const char *state;    /* "done", "failed" (a dead letter), "running" (a record in the
                             last 60 s), "stalled" */
} lt_dist_job_info;

typedef struct {
    char worker[128];
    char state[16];
    char job_id[64];
    uint64_t task_index;
    uint64_t tasks_done;
    uint64_t last_ns; /* wall clock of its last heartbeat */
} lt_dist_worker_info;

typedef struct {
    lt_dist_job_info *jobs; /* [n_jobs] by first record */
    size_t n_jobs;
    lt_dist_worker_info *workers; /* [n_workers] heard from within alive_s */
    size_t n_workers;
    int64_t undecodable; /* records that were no looptune envelope */
    bool partial;        /* some partition was not read to its end (an open transaction) */
} lt_dist_jobs;

/* Reads the three topics to their ends once (no consumer group) and sums
 * them up per job (job_id NULL: every job). Workers count as alive with a
 * heartbeat in the last alive_s seconds. Free with lt_dist_jobs_free. */
int lt_dist_jobs_scan(const lt_kafka_conn *conn, const char *prefix, const char *job_id,
                      double alive_s, lt_dist_jobs *out);
void lt_dist_jobs_free(lt_dist_jobs *j);

/* A noop job: tasks tasks, each carrying bytes of payload that the noop kind
 * sends back, checked; for the protocol's round trip and throughput. */
int lt_submit_noop(const lt_submit_opts *opts, int64_t tasks, size_t bytes,
                   lt_submit_stats *stats);

/* ---- tune jobs: a model's config store keys searched on one host class ----------------- */

/* A tune job runs `looptune tune`'s search of each config store key of a
 * model (lt_tune_pass_*) as one task, on the workers of one host class: its
 * tasks travel on that class's tasks topic, <prefix>tasks.<class>, which
 * only workers of the class consume (in group <workers group>.<class>), so
 * no configuration measured on one class is stored for another. A task
 * names the model (its path or, for workers with a models folder, its file
 * name, with its size and the CRC32C of its first MiB), the key, strategy,
 * budget, seed, threads and the configurations already tuned (the looped
 * executor's key is searched with the kernels' in force, as the local tuner
 * does); the worker answers with the Config found. See docs/distributed.md. */

/* The tasks topic of host_class: prefix + "tasks." + the class with every
 * character but letters, digits and '-' as '_' ("AMD-EPYC:avx512:2c" ->
 * "looptune.tasks.AMD-EPYC_avx512_2c"). LT_EINVAL when it does not fit n. */
int lt_dist_tune_topic(const char *prefix, const char *host_class, char *buf, size_t n);
/* The consumer group of a host class's tune workers: group + "." + the
 * class as in its topic. */
int lt_dist_tune_group(const char *group, const char *host_class, char *buf, size_t n);
/* Creates host_class's tasks topic when missing (partitions <= 0: 6). */
int lt_dist_ensure_tune_topic(const lt_kafka_conn *conn, const char *prefix,
                              const char *host_class, int32_t partitions);
/* What identifies a model file across hosts: its size and the CRC32C of its
 * first MiB (of the whole file when smaller). LT_ENOTFOUND when it is not
 * there, LT_EIO when it cannot be read. */
int lt_dist_model_id(const char *path, uint64_t *bytes, uint32_t *crc32c);

/* The tune kind of this process (a worker): model files are looked up by
 * file name in models_dir when it is set (else at the task's path), and the
 * host class it serves is host_class (NULL: lt_host_detect's; another only
 * for tests). It keeps the last model open between tasks; release frees it. */
int lt_dist_tune_setup(const char *models_dir, const char *host_class);
void lt_dist_tune_release(void);
/* The tune kind (the registry's answer function): decodes the task's
 * TuneSpec, checks the host class and the model file, searches the key and
 * encodes the Config envelope found into *data (malloc'd). */
int lt_dist_tune_run(const lt_dist_task_in *in, uint8_t **data, size_t *len);

/* The hpo kind (kind_hpo.c): one trial of a `looptune hpo --brokers` study,
 * its Task.spec and its answer JSON (see docs/hpo.md). */
int lt_dist_hpo_run(const lt_dist_task_in *in, uint8_t **data, size_t *len);

typedef struct {
    lt_submit_opts job;         /* conn, prefix, partitions, max_attempts, timeouts,
                                   progress, job_id, resume, window (block, chunk and
                                   corrupt do not apply) */
    const char *model;          /* the model file here, whose keys are searched */
    const char *remote_model;   /* the model as workers open it; NULL: model's absolute path */
    const char *host_class;     /* NULL: this host's (lt_host_detect) */
    lt_strategy_kind strategy;
    int budget;                 /* configurations tried per key, >= 1 */
    uint64_t seed;
    int threads;                /* the thread pool of every search, >= 1 */
    bool decode, prefill;       /* the regimes whose keys are searched (decode alone if neither) */
} lt_submit_tune_opts;

/* One key of a tune job, in the order the local tuner searches them: the
 * decode program's kernels, the looped executor, the decode thread count,
 * the prefill program's kernels not searched already, its thread count. */
typedef struct {
    char kernel[32];
    char shape[96];
    uint32_t tokens;       /* the step it belongs to: 1 decode, more a prefill batch */
    int stage;             /* keys of a stage are sent once every earlier stage is done */
    bool done;             /* its configuration arrived */
    lt_config_entry entry; /* done: the configuration, for the job's host class */
    char worker[128];      /* done: who found it */
    double seconds;        /* done: the search's time on the worker */
} lt_tune_job_key;

typedef struct {
    char host_class[96];
    char remote_model[1024];
    lt_tune_job_key *keys; /* [n_keys] */
    size_t n_keys;
} lt_tune_job;

void lt_tune_job_free(lt_tune_job *j); /* frees keys; a zeroed j is a no-op */

/* Searches every key of opts.model on the workers of the host class, each
 * key one task, results applied once per (job, task). *job gets the keys
 * (also when the job fails: the done ones are usable). LT_ENOTFOUND when the
 * model is not there; LT_ETIMEOUT when no worker of the class is alive (none
 * heard from for worker_timeout_s) or the job timed out; LT_EFORMAT when a
 * task was dead-lettered (stats.dead_reason says why); with resume,
 * LT_ENOTFOUND when the job has no task on the class's topic, LT_EINVAL when
 * its keys or model differ, LT_ESTATE when it has a dead letter. */
int lt_submit_tune(const lt_submit_tune_opts *opts, lt_tune_job *job, lt_submit_stats *stats);

#ifdef __cplusplus
}
#endif
#endif

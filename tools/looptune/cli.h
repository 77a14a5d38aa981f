/* Shared pieces of the looptune command line: strict number parsing, the
 * one-line error convention, and the subcommand entry points. */
#ifndef LT_CLI_H
#define LT_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "looptune/core.h"
#include "looptune/http.h"
#include "looptune/kafka.h"
#include "looptune/model.h"
#include "looptune/tune.h"

/* Prints "looptune CMD: message" on stderr (one line). Returns 1 (the exit code). */
int lt_cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same, appending ": <lt_errmsg()>" or the status message when empty. */
int lt_cli_fail_status(const char *cmd, int status, const char *what);
/* In a command's body (its name in `cmd`, its clean-up at `done:`): the
 * one-line error, then the clean-up. */
#define FAIL(...)                                                              \
    do {                                                                       \
        lt_cli_fail(cmd, __VA_ARGS__);                                         \
        goto done;                                                             \
    } while (0)

/* load_cli.c: a command's model, opened and (unless use_mmap) copied into
 * memory with progress on stderr; failures printed, status returned. */
typedef struct {
    double open_s, weights_s; /* the file's parse, the weights' copy */
    size_t bytes;             /* weight bytes copied */
} lt_cli_load_stats;
int lt_cli_load_model(const char *cmd, const char *path, const char *tokenizer, bool use_mmap,
                      lt_model **out, lt_cli_load_stats *st);
/* The second half alone: m's weights (opened from path) copied into memory,
 * with the same progress; a command that checks more between the two. */
int lt_cli_load_weights(const char *cmd, const char *path, lt_model *m, lt_cli_load_stats *st);

/* Strict parsers: the whole string must be a number within [lo, hi]. */
bool lt_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool lt_cli_parse_f32(const char *s, float lo, float hi, float *out);
/* The text of file path (malloc'd, NUL-terminated, caller frees), one
 * trailing newline dropped as llama.cpp's -f does. Returns 0, or 1 after
 * printing a one-line error (unreadable, too large, a NUL byte in it). */
int lt_cli_read_text(const char *cmd, const char *path, char **out);
/* "1,400,300" -> ids (malloc'd, caller frees). False on any bad element. */
bool lt_cli_parse_ids(const char *s, int32_t **ids, int64_t *n);

/* SIGINT and SIGTERM set lt_cli_stop: the long-running commands' loops poll
 * it, and the library's loops take its address as their stop flag. */
extern _Atomic bool lt_cli_stop;
void lt_cli_catch_stop_signals(void);

/* Handles getopt_long's '?' and ':' results with a clear line. */
int lt_cli_bad_option(const char *cmd, int opt, const char *arg0);

/* http_cli.c: the HTTP gateway's options (`looptune gateway`, `serve --http`). */
typedef struct {
    lt_gateway_opts go; /* conn and topic_prefix set by lt_cli_http_start */
    bool given;         /* --http was given */
    char *key_buf;      /* --api-key-file's key, owned */
} lt_cli_http;
enum { LT_CLI_O_HTTP = 0x4c00, LT_CLI_O_API_KEY, LT_CLI_O_API_KEY_FILE, LT_CLI_O_MAX_INFLIGHT,
       LT_CLI_O_MAX_CONNS, LT_CLI_O_MAX_TOKENS, LT_CLI_O_TIMEOUT };
#define LT_CLI_HTTP_OPTIONS                                                    \
    {"http", required_argument, 0, LT_CLI_O_HTTP},                             \
    {"api-key", required_argument, 0, LT_CLI_O_API_KEY},                       \
    {"api-key-file", required_argument, 0, LT_CLI_O_API_KEY_FILE},             \
    {"max-inflight", required_argument, 0, LT_CLI_O_MAX_INFLIGHT},             \
    {"max-connections", required_argument, 0, LT_CLI_O_MAX_CONNS},             \
    {"max-tokens", required_argument, 0, LT_CLI_O_MAX_TOKENS},                 \
    {"timeout", required_argument, 0, LT_CLI_O_TIMEOUT}
/* The help lines of the options above but --http (whose line differs by command). */
extern const char lt_cli_http_help[];
void lt_cli_http_init(lt_cli_http *h, const char *default_addr);
void lt_cli_http_free(lt_cli_http *h);
/* As lt_cli_kafka_option: LT_CLI_OPT_HANDLED, _ERROR (after a one-line error) or _NOT_MINE. */
int lt_cli_http_option(const char *cmd, int c, const char *arg, lt_cli_http *h);
/* Opens the gateway on conn's cluster and says where it listens. 0, or 1
 * after printing the error. */
int lt_cli_http_start(const char *cmd, lt_cli_http *h, const lt_kafka_conn *conn,
                      const char *prefix, lt_gateway **out);

int lt_cmd_run(int argc, char **argv);
int lt_cmd_chat(int argc, char **argv);
int lt_cmd_bench(int argc, char **argv);
int lt_cmd_modelgen(int argc, char **argv);
int lt_cmd_quantize(int argc, char **argv);
int lt_cmd_broker(int argc, char **argv);
int lt_cmd_tail(int argc, char **argv);
int lt_cmd_top(int argc, char **argv);
int lt_cmd_tune(int argc, char **argv);
int lt_cmd_optimizer(int argc, char **argv);
int lt_cmd_tokenize(int argc, char **argv);
int lt_cmd_worker(int argc, char **argv);
int lt_cmd_submit(int argc, char **argv);
int lt_cmd_submit_tune(int argc, char **argv); /* cmd_submit_tune.c: submit tune */
int lt_cmd_jobs(int argc, char **argv);
int lt_cmd_serve(int argc, char **argv);
int lt_cmd_gateway(int argc, char **argv);
int lt_cmd_hpo(int argc, char **argv);

/* The Kafka cluster a command talks to: --brokers, -X and --kafka-config,
 * --topic-prefix. One parser (kafka_flags.c) reads them for every command. */
typedef struct {
    lt_kafka_conn conn;       /* brokers NULL: none given (-X bootstrap.servers may set it);
                                 props: the same as the field below */
    const char *topic_prefix; /* NULL: "looptune." */
    lt_kafka_props *props;    /* -X and --kafka-config, owned */
} lt_cli_kafka;

/* The getopt results of the Kafka options (-X is 'X'), above any
 * command's own option codes. */
enum { LT_CLI_O_BROKERS = 0x4b00, LT_CLI_O_KAFKA_CONFIG, LT_CLI_O_TOPIC_PREFIX };
/* Entries of a command's getopt_long table: --brokers and --kafka-config
 * (the connection), and --topic-prefix (for commands that name topics
 * through it). The short options string takes LT_CLI_KAFKA_SHORT ("X:"). */
#define LT_CLI_KAFKA_CONN_OPTIONS                                              \
    {"brokers", required_argument, 0, LT_CLI_O_BROKERS},                       \
    {"kafka-config", required_argument, 0, LT_CLI_O_KAFKA_CONFIG}
#define LT_CLI_KAFKA_PREFIX_OPTION {"topic-prefix", required_argument, 0, LT_CLI_O_TOPIC_PREFIX}
#define LT_CLI_KAFKA_OPTIONS LT_CLI_KAFKA_CONN_OPTIONS, LT_CLI_KAFKA_PREFIX_OPTION
#define LT_CLI_KAFKA_SHORT "X:"

/* What lt_cli_kafka_option did with a getopt result. */
enum { LT_CLI_OPT_HANDLED = 0, LT_CLI_OPT_ERROR = 1, LT_CLI_OPT_NOT_MINE = -1 };

/* Empties *k and allocates its properties. Returns 0, or 1 after printing a
 * one-line error. Free with lt_cli_kafka_free. */
int lt_cli_kafka_init(const char *cmd, lt_cli_kafka *k);
/* Frees k's properties; the strings it points at belong to argv. A zeroed
 * k is a no-op. */
void lt_cli_kafka_free(lt_cli_kafka *k);
/* Takes one getopt result c (with its optarg) if it is a Kafka option:
 * LT_CLI_OPT_HANDLED, LT_CLI_OPT_ERROR after printing a one-line error (a
 * bad -X, an unreadable or bad --kafka-config file), or LT_CLI_OPT_NOT_MINE. */
int lt_cli_kafka_option(const char *cmd, int c, const char *arg, lt_cli_kafka *k);
/* Whether any of the Kafka options was given. */
bool lt_cli_kafka_given(const lt_cli_kafka *k);
/* If any was given, prints "--brokers, -X, --kafka-config and --topic-prefix
 * need WHAT" and returns 1; else 0. For commands where Kafka is optional. */
int lt_cli_kafka_refuse(const char *cmd, const lt_cli_kafka *k, const char *what);
/* Whether a broker address was given: a non-empty --brokers or -X
 * bootstrap.servers. */
bool lt_cli_kafka_has_brokers(const lt_cli_kafka *k);
/* Checks every property against librdkafka. Returns 0, or 1 after printing
 * the error (the property at fault). */
int lt_cli_kafka_check(const char *cmd, const lt_cli_kafka *k);
/* For commands that need a cluster: "no broker: give --brokers HOST:PORT"
 * (then " (why)" if why) when none was given, else lt_cli_kafka_check. */
int lt_cli_kafka_require(const char *cmd, const lt_cli_kafka *k, const char *why);
/* --topic-prefix, or "looptune." */
const char *lt_cli_kafka_prefix(const lt_cli_kafka *k);
/* A command's --help on stdout: head, the lines of -X, --kafka-config and,
 * if prefix, --topic-prefix (their descriptions at column col), then tail.
 * The command's --brokers line is in head: what the broker is for differs. */
void lt_cli_kafka_help(const char *head, int col, bool prefix, const char *tail);

/* --config-store SPEC is the word kafka. */
bool lt_cli_store_is_kafka(const char *spec);
/* The store backend of --config-store SPEC: a file path, or kafka (the topic
 * <prefix>configs on k's cluster, which must have a broker address: the
 * embedded broker would lose the configurations with the process). Returns
 * 0, or 1 after printing a one-line error. */
int lt_cli_store_backend(const char *cmd, const char *spec, const lt_cli_kafka *k,
                         lt_store_backend *out);

/* Warm start for run/bench: unless off, loads the config store (store_spec:
 * a file or kafka on the cluster of kafka; NULL: the default file) and makes
 * its configurations for this host values in force of l's tuning context
 * (lt_store_warm_start); says how many on stderr. Returns 0, or 1 after
 * printing the error. */
struct lt_llama;
int lt_cli_warm_start(const char *cmd, struct lt_llama *l, const char *store_spec,
                      const lt_cli_kafka *kafka, bool off);
/* Its parts, for run (whose warm start is lt_run_open's): the store of
 * spec (*out NULL when off or there is none: no warm start), and whether to
 * say what it gave (*say: named on the command line, or not empty); then
 * the line. Returns 0, or 1 after printing the error. */
int lt_cli_store_open(const char *cmd, const char *spec, const lt_cli_kafka *kafka, bool off,
                      lt_store **out, bool *say);
void lt_cli_warm_report(const lt_store *s, bool say, int applied, int refused);

/* --param NAME.PARAM=VALUE: a kernel's parameter on every node of it, a
 * looped executor parameter (looped.NAME), or a regime's thread count
 * (threads.decode / threads.prefill / threads.batch, 0 = all), pinned in
 * the tuning context. */
typedef struct {
    char name[32];   /* a kernel, "looped" or "threads" */
    char param[32];  /* the parameter (threads: a regime's name) */
    int32_t value;
    int regime;      /* threads: lt_regime; -1 otherwise */
    const char *arg; /* the argument as given, for messages */
} lt_cli_param;
#define LT_CLI_MAX_PARAMS 16

/* Reads the syntax of one --param argument. Returns 0, or 1 after printing
 * a one-line error. */
int lt_cli_param_parse(const char *cmd, const char *arg, lt_cli_param *out);
/* Pins ps[0..n) in l's tuning context (after the warm start, whose values
 * they override): validated there. Returns 0, or 1 after printing the
 * error. */
int lt_cli_param_apply(const char *cmd, struct lt_llama *l, const lt_cli_param *ps, int n);

#endif

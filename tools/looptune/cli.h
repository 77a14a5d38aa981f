/* Shared pieces of the looptune command line: strict number parsing, the
 * one-line error convention, and the subcommand entry points. */
#ifndef LT_CLI_H
#define LT_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "looptune/core.h"
#include "looptune/kafka.h"
#include "looptune/tune.h"

/* Prints "looptune CMD: message" on stderr (one line). Returns 1 (the exit code). */
int lt_cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Same, appending ": <lt_errmsg()>" or the status message when empty. */
int lt_cli_fail_status(const char *cmd, int status, const char *what);

/* Strict parsers: the whole string must be a number within [lo, hi]. */
bool lt_cli_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool lt_cli_parse_f32(const char *s, float lo, float hi, float *out);
/* "1,400,300" -> ids (malloc'd, caller frees). False on any bad element. */
bool lt_cli_parse_ids(const char *s, int32_t **ids, int64_t *n);

/* Handles getopt_long's '?' and ':' results with a clear line. */
int lt_cli_bad_option(const char *cmd, int opt, const char *arg0);

int lt_cmd_run(int argc, char **argv);
int lt_cmd_bench(int argc, char **argv);
int lt_cmd_modelgen(int argc, char **argv);
int lt_cmd_broker(int argc, char **argv);
int lt_cmd_tail(int argc, char **argv);
int lt_cmd_top(int argc, char **argv);
int lt_cmd_tune(int argc, char **argv);
int lt_cmd_optimizer(int argc, char **argv);

/* The Kafka cluster a command talks to: --brokers, -X and --kafka-config,
 * --topic-prefix. */
typedef struct {
    lt_kafka_conn conn;       /* brokers NULL: none given (-X bootstrap.servers may set it) */
    const char *topic_prefix; /* NULL: "looptune." */
} lt_cli_kafka;

/* Whether any of the Kafka options was given. */
bool lt_cli_kafka_given(const lt_cli_kafka *k);
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

/* --param NAME.PARAM=VALUE: a kernel's parameter on every node of it, a
 * looped executor parameter (looped.NAME), or a regime's thread count
 * (threads.decode / threads.prefill, 0 = all), pinned in the tuning
 * context. */
typedef struct {
    char name[32];   /* a kernel, "looped" or "threads" */
    char param[32];  /* the parameter (threads: decode or prefill) */
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

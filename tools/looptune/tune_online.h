/* Online tuning for `looptune run --tune online`: the control listener on
 * the decode program, the in-process optimizer when the broker is the
 * embedded one, per-step timing for the before/after figures, the summary. */
#ifndef LT_TUNE_ONLINE_CLI_H
#define LT_TUNE_ONLINE_CLI_H

#include <stdio.h>

#include "looptune/kafka.h"
#include "looptune/program.h"
#include "looptune/telemetry.h"

struct lt_llama;
typedef struct {
    struct lt_llama *llama; /* for the closing measurement */
    lt_program *decode;
    lt_kafka_props *props; /* -X / --kafka-config (borrowed) */
    const char *prefix;    /* NULL: "looptune." */
    double explore_share;  /* the in-process optimizer's */
    int64_t n_tokens;      /* decode steps planned (sizes the timing log) */
} lt_cli_tune_opts;

typedef struct lt_cli_tune lt_cli_tune;

int lt_cli_tune_init(lt_cli_tune **out, const lt_cli_tune_opts *o);
/* lt_cli_tel_opts.before_open: topics, the in-process optimizer (embedded
 * broker only), the control listener. */
int lt_cli_tune_before_open(void *user, const char *brokers, lt_devbroker *dev,
                            const char *run_id);
void lt_cli_tune_attach(lt_cli_tune *t, lt_tel *tel);
/* After every sampled token, after the telemetry's step end. NULL: no-op. */
void lt_cli_tune_token(lt_cli_tune *t);
/* Stops listening and the in-process optimizer; with f, measures the initial
 * against the tuned parameters (interleaved, same positions) and prints the
 * summary. Frees. NULL is a no-op. */
void lt_cli_tune_finish(lt_cli_tune *t, FILE *f);

#endif

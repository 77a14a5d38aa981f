/* The summary of `looptune run --tune online`: per-step timing for the
 * throughput while tuning, the reason when no trial started, the initial
 * against the tuned parameters, the in-process optimizer's decisions. The
 * loop itself is the runtime's (lt_run). */
#ifndef LT_TUNE_ONLINE_CLI_H
#define LT_TUNE_ONLINE_CLI_H

#include <stdio.h>

#include "looptune/runtime.h"

typedef struct lt_cli_tune lt_cli_tune;

/* n_tokens: decode steps planned (sizes the timing log). */
int lt_cli_tune_init(lt_cli_tune **out, lt_llama *l, int64_t n_tokens);
/* Where the in-process optimizer writes (lt_run_opts.optimizer_log). */
FILE *lt_cli_tune_log(lt_cli_tune *t);
/* The run it summarises, once open. NULL t: no-op. */
void lt_cli_tune_attach(lt_cli_tune *t, lt_run *run);
/* After every sampled token (the run's boundary has passed). NULL: no-op. */
void lt_cli_tune_token(lt_cli_tune *t);
/* Ends run (lt_run_end), with f prints the summary and measures the initial
 * against the tuned parameters (interleaved, same positions), then closes
 * run (*tel_stats: its telemetry's figures; may be NULL) and frees t. With
 * t NULL it only closes run. */
void lt_cli_tune_finish(lt_cli_tune *t, lt_run *run, FILE *f, lt_tel_stats *tel_stats);

#endif

/* Telemetry for `looptune run`: the --telemetry flag (off, file:PATH, kafka
 * with --brokers or the embedded broker) and the summary line of what the
 * run's telemetry (lt_run, the runtime's) did. */
#ifndef LT_TEL_CLI_H
#define LT_TEL_CLI_H

#include <stdio.h>

#include "cli.h"
#include "looptune/runtime.h"

typedef enum { LT_CLI_TEL_OFF = 0, LT_CLI_TEL_FILE, LT_CLI_TEL_KAFKA } lt_cli_tel_mode;

typedef struct {
    lt_cli_tel_mode mode;
    const char *path; /* file mode */
    lt_tel_opts tel;  /* windows, drain, counters, detail */
} lt_cli_tel_opts;

/* "off", "file:PATH" or "kafka" into o->mode (and o->path). */
int lt_cli_tel_parse(const char *s, lt_cli_tel_opts *o);
/* The run's telemetry settings from the flags (the cluster: kafka). */
void lt_cli_tel_run_opts(const lt_cli_tel_opts *o, const lt_cli_kafka *kafka,
                         lt_run_opts *out);
/* The summary line of the run's telemetry (nothing when it was off). */
void lt_cli_tel_report(const lt_run_state *rs, const lt_tel_stats *st, FILE *f);

#endif

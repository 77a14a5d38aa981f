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
    bool given;       /* --telemetry was given */
    bool tune_online; /* --tune online */
    float explore_share; /* --explore-share; 0 until lt_cli_tel_check: 0.25 */
} lt_cli_tel_opts;

/* The telemetry and online tuning flags of `run` and `serve`, one parser. */
enum { LT_CLI_O_TEL = 0x5400, LT_CLI_O_TEL_WTOK, LT_CLI_O_TEL_WMS, LT_CLI_O_TEL_DETAIL,
       LT_CLI_O_TEL_DRAIN, LT_CLI_O_TEL_CTR, LT_CLI_O_TUNE, LT_CLI_O_XSHARE };
#define LT_CLI_TEL_OPTIONS                                                     \
    {"telemetry", required_argument, 0, LT_CLI_O_TEL},                         \
    {"telemetry-window-tokens", required_argument, 0, LT_CLI_O_TEL_WTOK},      \
    {"telemetry-window-ms", required_argument, 0, LT_CLI_O_TEL_WMS},           \
    {"telemetry-detail", required_argument, 0, LT_CLI_O_TEL_DETAIL},           \
    {"telemetry-drain-ms", required_argument, 0, LT_CLI_O_TEL_DRAIN},          \
    {"counters-every", required_argument, 0, LT_CLI_O_TEL_CTR},                \
    {"tune", required_argument, 0, LT_CLI_O_TUNE},                             \
    {"explore-share", required_argument, 0, LT_CLI_O_XSHARE}
/* As lt_cli_kafka_option: LT_CLI_OPT_HANDLED, _ERROR (after a one-line error) or _NOT_MINE. */
int lt_cli_tel_option(const char *cmd, int c, const char *arg, lt_cli_tel_opts *o);
/* After the flags: --tune online implies --telemetry kafka (an error with
 * another --telemetry); the default explore share. 0, or 1 after the error. */
int lt_cli_tel_check(const char *cmd, lt_cli_tel_opts *o);

/* "off", "file:PATH" or "kafka" into o->mode (and o->path). */
int lt_cli_tel_parse(const char *s, lt_cli_tel_opts *o);
/* The run's telemetry settings from the flags (the cluster: kafka). */
void lt_cli_tel_run_opts(const lt_cli_tel_opts *o, const lt_cli_kafka *kafka,
                         lt_run_opts *out);
/* The summary line of the run's telemetry (nothing when it was off). */
void lt_cli_tel_report(const lt_run_state *rs, const lt_tel_stats *st, FILE *f);

#endif

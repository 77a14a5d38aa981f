/* Telemetry for `looptune run`: the flag, the run's telemetry options, and
 * the summary line. */
#include "tel_cli.h"

#include <string.h>

int lt_cli_tel_parse(const char *s, lt_cli_tel_opts *o) {
    if (!strcmp(s, "off")) o->mode = LT_CLI_TEL_OFF;
    else if (!strcmp(s, "kafka")) o->mode = LT_CLI_TEL_KAFKA;
    else if (!strncmp(s, "file:", 5) && s[5]) {
        o->mode = LT_CLI_TEL_FILE;
        o->path = s + 5;
    } else {
        return lt_error(LT_EINVAL, "bad --telemetry '%s': expected off, file:PATH or kafka", s);
    }
    return LT_OK;
}

void lt_cli_tel_run_opts(const lt_cli_tel_opts *o, const lt_cli_kafka *kafka, lt_run_opts *out) {
    static const lt_run_telemetry modes[] = {[LT_CLI_TEL_OFF] = LT_RUN_TEL_OFF,
                                             [LT_CLI_TEL_FILE] = LT_RUN_TEL_FILE,
                                             [LT_CLI_TEL_KAFKA] = LT_RUN_TEL_KAFKA};
    out->telemetry = modes[o->mode];
    out->tel_path = o->path;
    out->tel = o->tel;
    if (kafka) {
        out->conn = kafka->conn;
        out->topic_prefix = kafka->topic_prefix;
    }
}

void lt_cli_tel_report(const lt_run_state *rs, const lt_tel_stats *st, FILE *f) {
    if (!rs->telemetry_where) return;
    fprintf(f,
            "  telemetry run %s to %s: %lld windows; %lld records emitted, %lld dropped, "
            "%lld delivery failures\n",
            rs->run_id, rs->telemetry_where, (long long)st->windows, (long long)st->sink.emitted,
            (long long)(st->ring_dropped + st->sink.dropped), (long long)st->sink.failed);
}

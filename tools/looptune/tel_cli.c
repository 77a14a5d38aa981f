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

int lt_cli_tel_option(const char *cmd, int c, const char *arg, lt_cli_tel_opts *o) {
    int64_t n;
    switch (c) {
    case LT_CLI_O_TEL:
        if (lt_cli_tel_parse(arg, o)) return lt_cli_fail(cmd, "%s", lt_errmsg());
        o->given = true;
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_TUNE:
        if (!strcmp(arg, "online")) o->tune_online = true;
        else if (!strcmp(arg, "off")) o->tune_online = false;
        else return lt_cli_fail(cmd, "bad --tune '%s': expected off or online", arg);
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_XSHARE:
        if (!lt_cli_parse_f32(arg, 0.01f, 0.5f, &o->explore_share))
            return lt_cli_fail(cmd, "bad --explore-share '%s': expected a share in [0.01, 0.5]",
                               arg);
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_TEL_WTOK:
        if (!lt_cli_parse_i64(arg, 1, INT32_MAX, &o->tel.window_tokens))
            return lt_cli_fail(cmd, "bad --telemetry-window-tokens '%s': expected a positive "
                               "number", arg);
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_TEL_WMS:
        if (!lt_cli_parse_i64(arg, 1, 86400000, &o->tel.window_ms))
            return lt_cli_fail(cmd, "bad --telemetry-window-ms '%s': expected 1..86400000", arg);
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_TEL_DRAIN:
        if (!lt_cli_parse_i64(arg, 1, 60000, &o->tel.drain_ms))
            return lt_cli_fail(cmd, "bad --telemetry-drain-ms '%s': expected 1..60000", arg);
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_TEL_DETAIL:
        if (lt_tel_detail_parse(arg, &o->tel.detail)) return lt_cli_fail(cmd, "%s", lt_errmsg());
        return LT_CLI_OPT_HANDLED;
    case LT_CLI_O_TEL_CTR:
        if (!lt_cli_parse_i64(arg, 0, INT32_MAX, &n))
            return lt_cli_fail(cmd, "bad --counters-every '%s': expected a number of steps >= 0",
                               arg);
        o->tel.counters_every = n ? n : -1;
        return LT_CLI_OPT_HANDLED;
    default: return LT_CLI_OPT_NOT_MINE;
    }
}

int lt_cli_tel_check(const char *cmd, lt_cli_tel_opts *o) {
    if (!o->explore_share) o->explore_share = 0.25f;
    if (!o->tune_online) return 0;
    if (o->given && o->mode != LT_CLI_TEL_KAFKA)
        return lt_cli_fail(cmd, "--tune online needs --telemetry kafka (the optimizer learns "
                                "from it)");
    o->mode = LT_CLI_TEL_KAFKA;
    return 0;
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

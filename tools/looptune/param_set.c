/* --param NAME.PARAM=VALUE for run and bench: a parameter pinned in the
 * runtime's tuning context (lt_tuning_pin) after the warm start, so it wins
 * over a stored configuration and reaches every program of the run, built
 * now or later. NAME is a kernel (every node of it), looped (the looped
 * executor), or threads with PARAM a regime, decode, prefill or batch (that
 * regime's thread count). Here only the syntax is read; the context validates the rest. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "looptune/model.h"

int lt_cli_param_parse(const char *cmd, const char *arg, lt_cli_param *out) {
    const char *dot = strchr(arg, '.'), *eq = strchr(arg, '=');
    memset(out, 0, sizeof *out);
    size_t kl = dot ? (size_t)(dot - arg) : 0, pl = dot && eq ? (size_t)(eq - dot - 1) : 0;
    if (!dot || !eq || eq < dot || kl == 0 || kl >= sizeof out->name || pl == 0 ||
        pl >= sizeof out->param)
        return lt_cli_fail(cmd, "bad --param '%s': expected KERNEL.NAME=VALUE", arg);
    memcpy(out->name, arg, kl);
    memcpy(out->param, dot + 1, pl);
    out->arg = arg;
    out->regime = -1;
    int64_t v;
    if (!strcmp(out->name, LT_TUNING_THREADS)) {
        lt_regime r;
        if (lt_regime_parse(out->param, &r))
            return lt_cli_fail(cmd, "bad --param '%s': expected threads.decode, threads.prefill "
                                    "or threads.batch", arg);
        if (!lt_cli_parse_i64(eq + 1, 0, 64, &v))
            return lt_cli_fail(cmd, "bad --param '%s': expected 0..64 threads (0 = all)", arg);
        out->regime = (int)r;
    } else if (!lt_cli_parse_i64(eq + 1, INT32_MIN, INT32_MAX, &v)) {
        return lt_cli_fail(cmd, "bad --param '%s': '%s' is not a number", arg, eq + 1);
    }
    out->value = (int32_t)v;
    return 0;
}

int lt_cli_param_apply(const char *cmd, struct lt_llama *l, const lt_cli_param *ps, int n) {
    lt_tuning *t = lt_llama_tuning(l);
    for (int j = 0; j < n; j++) {
        const lt_cli_param *p = &ps[j];
        if (p->regime < 0) {
            if (lt_tuning_pin(t, p->name, NULL, p->param, p->value))
                return lt_cli_fail(cmd, "bad --param '%s': %s", p->arg, lt_errmsg());
            continue;
        }
        /* the whole pool is 0 in the space (one value for one setting) */
        const int pool = lt_tuning_pool_threads(t);
        const int32_t v = p->value == pool ? 0 : p->value;
        if (lt_tuning_pin(t, LT_TUNING_THREADS, lt_tuning_step_key(t, (lt_regime)p->regime),
                          "threads", v))
            return lt_cli_fail(cmd, "bad --param '%s': expected 1..%d threads (0 = all)", p->arg,
                               pool);
    }
    return 0;
}

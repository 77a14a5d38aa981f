/* --param KERNEL.NAME=VALUE for run and bench: one kernel parameter forced on
 * every node of that kernel, after the warm start (so it wins over a stored
 * configuration). Tests and benchmarks use it to pin a kernel's variant
 * without writing a config store for the host. threads.decode=N and
 * threads.prefill=N pin a regime's thread count the same way, and
 * looped.NAME=V a parameter of the looped executor (tiles_per_thread, ...). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "looptune/model.h"
#include "looptune/program.h"

/* out->value = text, if it is one of d's allowed values. */
static int parse_value(const char *cmd, const char *arg, const char *text, const lt_param_def *d,
                       const char *owner, const char *pname, lt_cli_param *out) {
    int64_t v;
    if (!lt_cli_parse_i64(text, INT32_MIN, INT32_MAX, &v))
        return lt_cli_fail(cmd, "bad --param '%s': '%s' is not a number", arg, text);
    bool allowed = false;
    for (int i = 0; i < d->n_values; i++) allowed |= d->values[i] == v;
    if (!allowed)
        return lt_cli_fail(cmd, "bad --param '%s': %lld is not a value of %s.%s", arg,
                           (long long)v, owner, pname);
    out->value = (int32_t)v;
    return 0;
}

int lt_cli_param_parse(const char *cmd, const char *arg, lt_cli_param *out) {
    const char *dot = strchr(arg, '.'), *eq = strchr(arg, '=');
    if (!dot || !eq || eq < dot)
        return lt_cli_fail(cmd, "bad --param '%s': expected KERNEL.NAME=VALUE", arg);
    char kname[32], pname[32];
    size_t kl = (size_t)(dot - arg), pl = (size_t)(eq - dot - 1);
    if (kl == 0 || kl >= sizeof kname || pl == 0 || pl >= sizeof pname)
        return lt_cli_fail(cmd, "bad --param '%s': expected KERNEL.NAME=VALUE", arg);
    memcpy(kname, arg, kl);
    kname[kl] = '\0';
    memcpy(pname, dot + 1, pl);
    pname[pl] = '\0';
    if (!strcmp(kname, "threads")) {
        bool pre = !strcmp(pname, "prefill");
        if (!pre && strcmp(pname, "decode"))
            return lt_cli_fail(cmd, "bad --param '%s': expected threads.decode or threads.prefill",
                               arg);
        int64_t v;
        if (!lt_cli_parse_i64(eq + 1, 0, 64, &v))
            return lt_cli_fail(cmd, "bad --param '%s': expected 0..64 threads (0 = all)", arg);
        *out = (lt_cli_param){.index = pre, .value = (int32_t)v, .threads = true};
        return 0;
    }
    if (!strcmp(kname, "looped")) {
        int np;
        const lt_param_def *defs = lt_exec_looped_params(&np);
        int idx = 0;
        while (idx < np && strcmp(defs[idx].name, pname)) idx++;
        if (idx == np)
            return lt_cli_fail(cmd, "bad --param '%s': the looped executor has no parameter '%s'",
                               arg, pname);
        *out = (lt_cli_param){.index = idx, .looped = true};
        return parse_value(cmd, arg, eq + 1, &defs[idx], "looped", pname, out);
    }
    const lt_kernel *k = lt_kernel_find(kname);
    if (!k) return lt_cli_fail(cmd, "bad --param '%s': unknown kernel '%s'", arg, kname);
    int idx = lt_kernel_param_index(k, pname);
    if (idx < 0)
        return lt_cli_fail(cmd, "bad --param '%s': kernel %s has no parameter '%s'", arg, kname,
                           pname);
    *out = (lt_cli_param){.kernel = k->id, .index = idx};
    return parse_value(cmd, arg, eq + 1, &k->params[idx], kname, pname, out);
}

/* The forced parameters on every node of program p whose kernel they name. */
static int apply_program(lt_program *p, const lt_cli_param *ps, int n) {
    lt_params xp;
    lt_program_exec_params(p, &xp);
    bool exec_hit = false;
    for (int j = 0; j < n; j++)
        if (ps[j].looped) {
            xp.v[ps[j].index] = ps[j].value;
            exec_hit = true;
        }
    if (exec_hit) {
        int rc = lt_program_set_exec_params(p, &xp);
        if (rc) return rc;
    }
    for (int i = 0; i < lt_program_n_nodes(p); i++) {
        lt_node_info ni;
        lt_program_node(p, i, &ni);
        bool hit = false;
        for (int j = 0; j < n; j++) {
            if (ps[j].threads || ps[j].looped || ps[j].kernel != ni.kernel) continue;
            ni.params.v[ps[j].index] = ps[j].value;
            hit = true;
        }
        if (!hit) continue;
        int rc = lt_program_set_params(p, i, &ni.params);
        if (rc) return rc;
    }
    return LT_OK;
}

int lt_cli_param_apply(const char *cmd, struct lt_llama *l, const lt_cli_param *ps, int n,
                       int64_t prefill_n) {
    if (n == 0) return 0;
    for (int j = 0; j < n; j++)
        if (ps[j].threads && lt_llama_set_threads(l, ps[j].index == 1, ps[j].value))
            return lt_cli_fail(cmd, "bad --param threads.%s=%d: %s",
                               ps[j].index ? "prefill" : "decode", ps[j].value, lt_errmsg());
    for (int pass = 0; pass < 2; pass++) {
        int64_t batch = pass == 0 ? 1 : prefill_n;
        if (batch > lt_llama_max_batch(l)) batch = lt_llama_max_batch(l);
        if (pass == 1 && batch < 2) break;
        lt_program *p;
        int rc = lt_llama_program(l, batch, &p);
        if (!rc) rc = apply_program(p, ps, n);
        if (rc) return lt_cli_fail_status(cmd, rc, "cannot apply --param");
    }
    return 0;
}

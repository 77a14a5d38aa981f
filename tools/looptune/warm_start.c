/* Warm start for run and bench: the best known configurations from the
 * config store (a file or the Kafka topic) applied to the programs before
 * the first token. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "looptune/model.h"
#include "looptune/program.h"
#include "looptune/tune.h"

int lt_cli_warm_start(const char *cmd, struct lt_llama *l, int nthreads, const char *store_spec,
                      const lt_cli_kafka *kafka, bool off, int64_t prefill_n) {
    if (off) return 0;
    char defpath[1024];
    bool explicit_path = store_spec != NULL;
    if (!store_spec) {
        if (!lt_store_default_path(defpath, sizeof defpath)) return 0; /* nowhere to look */
        store_spec = defpath;
    }
    lt_store_backend be;
    lt_store *s = NULL;
    if (lt_cli_store_backend(cmd, store_spec, kafka, &be)) return 1;
    int rc = lt_store_open(&s, &be, NULL);
    if (rc) return lt_cli_fail_status(cmd, rc, "cannot read the config store");
    lt_host host;
    lt_host_detect(&host);
    char xshape[128];
    lt_exec_shape_format(lt_llama_model(l), nthreads, xshape, sizeof xshape);
    int skipped = 0;
    bool *used = calloc((size_t)lt_store_count(s) + 1, sizeof *used);
    if (!used) {
        lt_store_close(s);
        return lt_cli_fail(cmd, "out of memory");
    }
    for (int pass = 0; pass < 2 && rc >= 0; pass++) {
        int64_t n = pass == 0 ? 1 : prefill_n;
        if (n > lt_llama_max_batch(l)) n = lt_llama_max_batch(l);
        if (pass == 1 && n < 2) break;
        lt_program *p;
        int sk = 0;
        rc = lt_llama_program(l, n, &p);
        if (!rc) rc = lt_store_apply(s, p, host.host_class, pass == 0 ? xshape : NULL, used, &sk);
        skipped += sk;
    }
    if (rc >= 0) {
        int sk = 0;
        rc = lt_store_apply_threads(s, l, host.host_class, used, &sk);
        skipped += sk;
    }
    int stored = lt_store_count(s), applied = 0;
    for (int i = 0; i < stored; i++) applied += used[i];
    free(used);
    if (rc < 0) {
        lt_store_close(s);
        return lt_cli_fail_status(cmd, rc, "warm start failed");
    }
    if (explicit_path || stored > 0) { /* no default store yet: nothing to say */
        fprintf(stderr, "warm start: %d configurations from %s", applied, lt_store_name(s));
        if (skipped) fprintf(stderr, " (%d refused)", skipped);
        fputc('\n', stderr);
    }
    lt_store_close(s);
    return 0;
}

/* Warm start for run and bench: the config store named on the command line
 * (a file or the Kafka topic), opened for the library's warm start
 * (lt_store_warm_start, or lt_run_open for run), which makes its entries
 * for this host values in force of the runtime's tuning context before the
 * first token; and the line that says how many. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "looptune/model.h"
#include "looptune/tune.h"

int lt_cli_store_open(const char *cmd, const char *spec, const lt_cli_kafka *kafka, bool off,
                      lt_store **out, bool *say) {
    *out = NULL;
    *say = spec != NULL;
    if (off) return 0;
    char defpath[1024];
    if (!spec) {
        if (!lt_store_default_path(defpath, sizeof defpath)) return 0; /* nowhere to look */
        spec = defpath;
    }
    lt_store_backend be;
    if (lt_cli_store_backend(cmd, spec, kafka, &be)) return 1;
    int rc = lt_store_open(out, &be, NULL);
    if (rc) return lt_cli_fail_status(cmd, rc, "cannot read the config store");
    *say |= lt_store_count(*out) > 0; /* no default store yet: nothing to say */
    return 0;
}

void lt_cli_warm_report(const lt_store *s, bool say, int applied, int refused) {
    if (!s || !say) return;
    fprintf(stderr, "warm start: %d configurations from %s", applied, lt_store_name(s));
    if (refused) fprintf(stderr, " (%d refused)", refused);
    fputc('\n', stderr);
}

int lt_cli_warm_start(const char *cmd, struct lt_llama *l, const char *store_spec,
                      const lt_cli_kafka *kafka, bool off) {
    lt_store *s;
    bool say;
    if (lt_cli_store_open(cmd, store_spec, kafka, off, &s, &say)) return 1;
    if (!s) return 0;
    lt_host host;
    lt_host_detect(&host);
    int refused = 0;
    int applied = lt_store_warm_start(s, lt_llama_tuning(l), host.host_class, &refused);
    lt_cli_warm_report(s, say, applied, refused);
    lt_store_close(s);
    return 0;
}

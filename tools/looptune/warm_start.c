/* Warm start for run and bench: the config store named on the command line
 * (a file or the Kafka topic) opened and handed to the library's warm start
 * (lt_store_warm_start), which makes its entries for this host values in
 * force of the runtime's tuning context before the first token. */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "looptune/model.h"
#include "looptune/tune.h"

int lt_cli_warm_start(const char *cmd, struct lt_llama *l, const char *store_spec,
                      const lt_cli_kafka *kafka, bool off) {
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
    int refused = 0;
    int applied = lt_store_warm_start(s, lt_llama_tuning(l), host.host_class, &refused);
    if (explicit_path || lt_store_count(s) > 0) { /* no default store yet: nothing to say */
        fprintf(stderr, "warm start: %d configurations from %s", applied, lt_store_name(s));
        if (refused) fprintf(stderr, " (%d refused)", refused);
        fputc('\n', stderr);
    }
    lt_store_close(s);
    return 0;
}

/* Configuration snapshots: the tag and every node's parameter values at one
 * lt_tel_retag, so the windows after it report what they ran, not what the
 * program held when telemetry opened. */
#include <stdlib.h>
#include <string.h>

#include "telemetry/tel_internal.h"

lt__tel_snap *lt__tel_snap_new(const lt_program *p, const lt_tel_tag *tag) {
    int n = lt_program_n_nodes(p);
    const char *id = tag && tag->candidate_id ? tag->candidate_id : "";
    size_t idlen = strlen(id);
    /* the node values, then the id's bytes, in one block */
    size_t head = sizeof(lt__tel_snap) + (size_t)n * sizeof(lt_params);
    lt__tel_snap *s = malloc(head + idlen + 1);
    if (!s) return NULL;
    memset(s, 0, sizeof *s);
    char *idcopy = (char *)s + head;
    memcpy(idcopy, id, idlen + 1);
    s->candidate_id = idcopy;
    /* no trial: nothing to be on, no pair to count */
    s->on_candidate = idlen && tag->on_candidate;
    s->pair = idlen ? tag->pair : 0;
    s->n = n;
    for (int i = 0; i < n; i++) {
        lt_node_info info;
        lt_program_node(p, i, &info);
        s->params[i] = info.params;
    }
    return s;
}

void lt__tel_snap_free(lt__tel_snap *s) { free(s); }

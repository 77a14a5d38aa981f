/* The coordinators' shared bookkeeping (coordinator.h). */
#include "dist/coordinator.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

lt__worker_seen *lt__workers_heard(lt__workers *ws, const char *id, bool leaving) {
    if (!id || !*id) return NULL;
    lt__worker_seen *w = NULL;
    for (int i = 0; i < ws->n && !w; i++)
        if (!strcmp(ws->w[i].id, id)) w = &ws->w[i];
    if (!w) {
        if (ws->n == LT__MAX_WORKERS) return NULL;
        w = &ws->w[ws->n++];
        snprintf(w->id, sizeof w->id, "%s", id);
    }
    w->last_ns = lt_now_ns();
    w->leaving = leaving;
    return w;
}

int lt__workers_alive(const lt__workers *ws) {
    const uint64_t now = lt_now_ns();
    int n = 0;
    for (int i = 0; i < ws->n; i++)
        n += !ws->w[i].leaving && now - ws->w[i].last_ns < LT__ALIVE_NS;
    return n;
}

void lt__attempt_errors_add(lt__attempt_errors *e, uint32_t attempt, const char *why) {
    if (e->n == LT__MAX_ERRORS) return;
    char buf[600];
    snprintf(buf, sizeof buf, "attempt %u: %s", attempt, why);
    e->msg[e->n] = strdup(buf);
    if (e->msg[e->n]) e->n++;
}

void lt__attempt_errors_free(lt__attempt_errors *e) {
    for (int i = 0; i < e->n; i++) free(e->msg[i]);
    e->n = 0;
}

int lt__dead_letter_send(lt_producer *dead, const char *key, Looptune__Task *task,
                         const char *reason, const lt__attempt_errors *e, int64_t *bytes_sent) {
    Looptune__DeadLetter dl = LOOPTUNE__DEAD_LETTER__INIT;
    dl.task = task;
    dl.reason = (char *)reason;
    dl.n_errors = (size_t)e->n;
    dl.errors = (char **)e->msg;
    Looptune__Envelope env;
    lt_envelope_init(&env);
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_DEAD_LETTER;
    env.dead_letter = &dl;
    lt_dist_outbox o = {0};
    int rc = lt_dist_outbox_add(&o, key, &env);
    if (!rc) rc = lt_dist_outbox_send(&o, dead, -1, bytes_sent);
    lt_dist_outbox_free(&o);
    return rc;
}

void lt__job_id(char *buf, size_t n, const char *kind) {
    uint64_t x = lt_now_ns() ^ lt_wall_ns() << 7;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        uint64_t r;
        if (fread(&r, sizeof r, 1, f) == 1) x ^= r;
        fclose(f);
    }
    snprintf(buf, n, "%s-%016" PRIx64, kind, x);
}

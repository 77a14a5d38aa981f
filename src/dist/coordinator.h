/* What the coordinators of every job kind (submit.c: matmul and noop;
 * submit_tune.c: tune) share: the table of workers heard from, each task's
 * failed attempts kept for its dead letter, the dead letter itself, and the
 * job's id. */
#ifndef LT_DIST_COORDINATOR_H
#define LT_DIST_COORDINATOR_H

#include "looptune/dist.h"

#define LT__ALIVE_NS (5ull * 1000000000ull) /* a worker heard from within this is alive */
#define LT__MAX_WORKERS 256
#define LT__MAX_ERRORS 8 /* attempt errors kept per task, for its dead letter */

typedef struct {
    char id[128];
    uint64_t last_ns;
    uint64_t cache_bytes; /* its panel cache's bound (0: a worker without one) */
    bool leaving;
} lt__worker_seen;

typedef struct {
    lt__worker_seen w[LT__MAX_WORKERS];
    int n;
} lt__workers;

/* Worker id heard from now (a heartbeat or a result); NULL for an empty id
 * or a full table, else its entry. */
lt__worker_seen *lt__workers_heard(lt__workers *ws, const char *id, bool leaving);
/* Workers heard from within LT__ALIVE_NS that are not leaving. */
int lt__workers_alive(const lt__workers *ws);

typedef struct {
    int n;
    char *msg[LT__MAX_ERRORS];
} lt__attempt_errors;

/* "attempt A: WHY" kept (the first LT__MAX_ERRORS of a task). */
void lt__attempt_errors_add(lt__attempt_errors *e, uint32_t attempt, const char *why);
void lt__attempt_errors_free(lt__attempt_errors *e);

/* Task's dead letter (reason and its attempts' errors) on the dead-letter
 * topic under key; bytes added to *bytes_sent. */
int lt__dead_letter_send(lt_producer *dead, const char *key, Looptune__Task *task,
                         const char *reason, const lt__attempt_errors *e, int64_t *bytes_sent);

/* A fresh job id "KIND-<16 hex digits>" from the clocks and /dev/urandom. */
void lt__job_id(char *buf, size_t n, const char *kind);

#endif

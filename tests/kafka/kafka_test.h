/* Helpers for the kafka tests: where the real test broker is, unique topic
 * and group names, running the looptune CLI with its output captured. */
#ifndef LT_TEST_KAFKA_H
#define LT_TEST_KAFKA_H

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "looptune/core.h"

/* The real broker: $LT_KAFKA_BOOTSTRAP, else the first line of the file
 * $LT_KAFKA_BOOTSTRAP_FILE (written by scripts/kafka/broker.sh start). NULL
 * if neither is there. */
static inline const char *kt_bootstrap(void) {
    static char buf[256];
    const char *env = getenv("LT_KAFKA_BOOTSTRAP");
    if (env && *env) return env;
    const char *path = getenv("LT_KAFKA_BOOTSTRAP_FILE");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) return NULL;
    bool ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    if (!ok) return NULL;
    buf[strcspn(buf, "\r\n")] = 0;
    return buf[0] ? buf : NULL;
}

/* Exits the test with a clear line when no broker is configured. */
static inline const char *kt_require_bootstrap(void) {
    const char *b = kt_bootstrap();
    if (!b) {
        fprintf(stderr, "no Kafka broker: set LT_KAFKA_BOOTSTRAP=host:port or run under ctest, "
                        "which starts one with scripts/kafka/broker.sh\n");
        exit(1);
    }
    return b;
}

/* "PREFIX-<pid>-<ns>": fresh for every run against a long-lived broker. */
static inline void kt_unique(char *buf, size_t n, const char *prefix) {
    snprintf(buf, n, "%s-%ld-%llu", prefix, (long)getpid(),
             (unsigned long long)(lt_now_ns() % 1000000000000ull));
}

static inline const char *kt_work_dir(void) {
    const char *d = getenv("LT_WORK_DIR");
    return d && *d ? d : "/tmp";
}

/* Reads a whole file (malloc'd, NUL-terminated); NULL on error. */
static inline char *kt_slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *s = malloc(cap);
    size_t r;
    while (s && (r = fread(s + len, 1, cap - len - 1, f)) > 0) {
        len += r;
        if (cap - len < 2) {
            char *t = realloc(s, cap *= 2);
            if (!t) {
                free(s);
                s = NULL;
            }
            s = t;
        }
    }
    fclose(f);
    if (s) s[len] = 0;
    return s;
}

/* A program started by kt_start, waited for by kt_check or kt_wait. */
typedef struct {
    pid_t pid; /* -1: could not start */
    uint64_t t0;
    bool done;
    int rc;    /* once done: its exit status (128+signal if killed, -1 if it could not run) */
    double ms; /* once done: the time from its start to its end */
} kt_proc;

/* Starts argv with stdout and stderr sent to the files out and err. */
static inline kt_proc kt_start(char *const argv[], const char *out, const char *err) {
    fflush(stdout); /* else the child writes our buffered lines into its output */
    fflush(stderr);
    kt_proc p = {.t0 = lt_now_ns()};
    p.pid = fork();
    if (p.pid == 0) {
        if (!freopen(out, "w", stdout) || !freopen(err, "w", stderr)) _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    if (p.pid < 0) p.done = true, p.rc = -1;
    return p;
}

/* Whether p has ended (then p->rc and p->ms are set), without waiting; kills
 * it once timeout_ms have passed since its start. */
static inline bool kt_check(kt_proc *p, int timeout_ms) {
    if (p->done) return true;
    int status = 0;
    if (waitpid(p->pid, &status, WNOHANG) != p->pid) {
        if ((int64_t)(lt_now_ns() - p->t0) <= (int64_t)timeout_ms * 1000000) return false;
        kill(p->pid, SIGKILL);
        waitpid(p->pid, &status, 0);
    }
    p->done = true;
    p->ms = (double)(lt_now_ns() - p->t0) / 1e6;
    p->rc = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                                                         : -1;
    return true;
}

/* Waits for p (see kt_check); returns its exit status, *ms its duration. */
static inline int kt_wait(kt_proc *p, int timeout_ms, double *ms) {
    while (!kt_check(p, timeout_ms)) {
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    if (ms) *ms = p->ms;
    return p->rc;
}

/* Runs argv with stdout and stderr sent to the files out and err; kills it
 * after timeout_ms. Returns its exit status (128+signal if killed, -1 if it
 * could not run); *ms gets the time it took. */
static inline int kt_run(char *const argv[], const char *out, const char *err, int timeout_ms,
                         double *ms) {
    kt_proc p = kt_start(argv, out, err);
    return kt_wait(&p, timeout_ms, ms);
}

#endif

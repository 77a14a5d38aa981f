/* perf_event counters per worker thread. Each thread gets two groups (one
 * read() each): hardware (cycles, instructions, cache references and misses,
 * LLC read misses) and software (task-clock, context switches, page faults,
 * CPU migrations). The groups are opened for the workers' thread ids
 * (pid = tid, any CPU), so any thread can read them: the stepping thread
 * reads all of them between steps, when no kernel is running, so a read's
 * delta belongs exactly to the steps since the last read and no worker ever
 * makes a system call for telemetry. Hardware events need a PMU, which many
 * virtual machines lack (ENOENT): they are then simply not available. The
 * run-queue wait is no perf event: it is the second field of each thread's
 * /proc/self/task/TID/schedstat, read with pread on a descriptor kept open. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "telemetry/tel_internal.h"

static const char *const counter_names[LT_CTR_COUNT] = {
    [LT_CTR_CYCLES] = "cycles",
    [LT_CTR_INSTRUCTIONS] = "instructions",
    [LT_CTR_CACHE_REFERENCES] = "cache-references",
    [LT_CTR_CACHE_MISSES] = "cache-misses",
    [LT_CTR_LLC_MISSES] = "LLC-load-misses",
    [LT_CTR_TASK_CLOCK] = "task-clock",
    [LT_CTR_CONTEXT_SWITCHES] = "context-switches",
    [LT_CTR_PAGE_FAULTS] = "page-faults",
    [LT_CTR_CPU_MIGRATIONS] = "cpu-migrations",
    [LT_CTR_RUNQUEUE_WAIT] = "runqueue-wait",
};

const char *lt_tel_counter_name(lt_tel_counter c) {
    return (unsigned)c < LT_CTR_COUNT ? counter_names[c] : "unknown";
}

static void counter_attr(lt_tel_counter c, struct perf_event_attr *a) {
    memset(a, 0, sizeof *a);
    a->size = sizeof *a;
    a->read_format =
        PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    a->exclude_hv = 1;
    switch (c) {
    case LT_CTR_CYCLES: a->type = PERF_TYPE_HARDWARE; a->config = PERF_COUNT_HW_CPU_CYCLES; break;
    case LT_CTR_INSTRUCTIONS:
        a->type = PERF_TYPE_HARDWARE;
        a->config = PERF_COUNT_HW_INSTRUCTIONS;
        break;
    case LT_CTR_CACHE_REFERENCES:
        a->type = PERF_TYPE_HARDWARE;
        a->config = PERF_COUNT_HW_CACHE_REFERENCES;
        break;
    case LT_CTR_CACHE_MISSES:
        a->type = PERF_TYPE_HARDWARE;
        a->config = PERF_COUNT_HW_CACHE_MISSES;
        break;
    case LT_CTR_LLC_MISSES:
        a->type = PERF_TYPE_HW_CACHE;
        a->config = PERF_COUNT_HW_CACHE_LL | (PERF_COUNT_HW_CACHE_OP_READ << 8) |
                    (PERF_COUNT_HW_CACHE_RESULT_MISS << 16);
        break;
    case LT_CTR_TASK_CLOCK:
        a->type = PERF_TYPE_SOFTWARE;
        a->config = PERF_COUNT_SW_TASK_CLOCK;
        break;
    case LT_CTR_CONTEXT_SWITCHES:
        a->type = PERF_TYPE_SOFTWARE;
        a->config = PERF_COUNT_SW_CONTEXT_SWITCHES;
        break;
    case LT_CTR_PAGE_FAULTS:
        a->type = PERF_TYPE_SOFTWARE;
        a->config = PERF_COUNT_SW_PAGE_FAULTS;
        break;
    case LT_CTR_CPU_MIGRATIONS:
        a->type = PERF_TYPE_SOFTWARE;
        a->config = PERF_COUNT_SW_CPU_MIGRATIONS;
        break;
    default: LT_ASSERT(!"unknown counter");
    }
}

/* One group of one thread: members in read order. */
typedef struct {
    int fd[LT_CTR_COUNT];          /* per member; fd[0] is the leader */
    lt_tel_counter ctr[LT_CTR_COUNT];
    int n;
} ctr_group;

struct lt__tel_counters {
    int nth;
    ctr_group *groups; /* [nth][2]: hardware, software */
    int *sched_fd;     /* [nth] schedstat descriptors, -1 if not open */
    uint32_t available;
};

static int open_schedstat(int tid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd >= 0 ? fd : -(errno ? errno : ENOENT);
}

/* The run-queue wait of one thread in ns, or 0 if it cannot be read. */
static uint64_t read_runqueue_wait(int fd) {
    char buf[96];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = 0;
    unsigned long long run, wait;
    return sscanf(buf, "%llu %llu", &run, &wait) == 2 ? (uint64_t)wait : 0;
}

static int perf_open(struct perf_event_attr *a, int tid, int group_fd) {
    return (int)syscall(SYS_perf_event_open, a, tid, -1, group_fd, PERF_FLAG_FD_CLOEXEC);
}

/* Opens counter c for tid into group g. Kernel-side counting first (context
 * switches and page faults happen in the kernel); where only user-space
 * counting is allowed (perf_event_paranoid), hardware events fall back to it,
 * software events that would then read 0 do not. Returns 0 or an errno. */
static int open_member(ctr_group *g, lt_tel_counter c, int tid) {
    struct perf_event_attr a;
    counter_attr(c, &a);
    int leader = g->n ? g->fd[0] : -1;
    int fd = perf_open(&a, tid, leader);
    if (fd < 0 && (errno == EACCES || errno == EPERM) &&
        (c < LT_CTR_FIRST_SOFTWARE || c == LT_CTR_TASK_CLOCK)) {
        a.exclude_kernel = 1;
        fd = perf_open(&a, tid, leader);
    }
    if (fd < 0) return errno ? errno : EINVAL;
    g->fd[g->n] = fd;
    g->ctr[g->n] = c;
    g->n++;
    return 0;
}

static void close_group(ctr_group *g) {
    for (int i = g->n - 1; i >= 0; i--) close(g->fd[i]);
    g->n = 0;
}

static const char *explain(int err) {
    switch (err) {
    case ENOENT: return "no such event on this machine (no PMU exposed: usual in a virtual machine)";
    case EACCES:
    case EPERM: return "not permitted (kernel.perf_event_paranoid, or a seccomp filter)";
    case ENOSYS: return "perf_event_open is not available in this kernel";
    case EOPNOTSUPP: return "not supported by this PMU";
    default: return strerror(err);
    }
}

int lt__tel_counters_open(lt__tel_counters **out, const int *tids, int n, uint32_t *available,
                          char *why, size_t why_len) {
    *out = NULL;
    *available = 0;
    if (why_len) why[0] = 0;
    lt__tel_counters *c = calloc(1, sizeof *c);
    ctr_group *groups = calloc((size_t)(n > 0 ? n : 1) * 2, sizeof *groups);
    if (!c || !groups) {
        free(c);
        free(groups);
        return lt_error(LT_ENOMEM, "telemetry counters: out of memory");
    }
    c->nth = n;
    c->groups = groups;
    c->sched_fd = malloc((size_t)(n > 0 ? n : 1) * sizeof *c->sched_fd);
    if (!c->sched_fd) {
        free(groups);
        free(c);
        return lt_error(LT_ENOMEM, "telemetry counters: out of memory");
    }
    for (int t = 0; t < n; t++) c->sched_fd[t] = -1;
    int first_err[LT_CTR_COUNT] = {0}; /* the first errno per counter */
    uint32_t ok = (1u << LT_CTR_COUNT) - 1;
    for (int t = 0; t < n; t++) {
        for (int ci = 0; ci < LT_CTR_COUNT; ci++) {
            if (ci == LT_CTR_RUNQUEUE_WAIT) {
                int fd = open_schedstat(tids[t]);
                c->sched_fd[t] = fd;
                if (fd < 0) {
                    ok &= ~(1u << ci);
                    if (!first_err[ci]) first_err[ci] = -fd;
                }
                continue;
            }
            ctr_group *g = &groups[2 * t + (ci >= LT_CTR_FIRST_SOFTWARE)];
            int err = open_member(g, (lt_tel_counter)ci, tids[t]);
            if (err) {
                ok &= ~(1u << ci);
                if (!first_err[ci]) first_err[ci] = err;
            }
        }
    }
    c->available = ok;
    *available = ok;
    /* one line: which counters are missing and why, grouped by reason */
    if (why_len && ok != (1u << LT_CTR_COUNT) - 1) {
        size_t len = 0;
        uint32_t said = 0;
        for (int ci = 0; ci < LT_CTR_COUNT; ci++) {
            if (ok & (1u << ci) || said & (1u << ci)) continue;
            int err = first_err[ci] ? first_err[ci] : EINVAL;
            len += (size_t)snprintf(why + len, len < why_len ? why_len - len : 0, "%s",
                                    len ? "; " : "");
            const char *sep = "";
            for (int cj = ci; cj < LT_CTR_COUNT; cj++) {
                if (ok & (1u << cj) || (first_err[cj] ? first_err[cj] : EINVAL) != err) continue;
                said |= 1u << cj;
                len += (size_t)snprintf(why + len, len < why_len ? why_len - len : 0, "%s%s", sep,
                                        counter_names[cj]);
                sep = ", ";
            }
            len += (size_t)snprintf(why + len, len < why_len ? why_len - len : 0, ": %s%s",
                                    ci == LT_CTR_RUNQUEUE_WAIT ? "schedstat: " : "perf_event_open: ",
                                    ci == LT_CTR_RUNQUEUE_WAIT ? strerror(err) : explain(err));
        }
    }
    *out = c;
    return LT_OK;
}

/* Adds group g's scaled values into out. */
static void read_group(const ctr_group *g, uint64_t out[LT_CTR_COUNT]) {
    if (!g->n) return;
    uint64_t buf[3 + LT_CTR_COUNT];
    ssize_t want = (ssize_t)((3 + (size_t)g->n) * sizeof(uint64_t));
    if (read(g->fd[0], buf, sizeof buf) != want || buf[0] != (uint64_t)g->n) return;
    uint64_t enabled = buf[1], running = buf[2];
    for (int i = 0; i < g->n; i++) {
        uint64_t v = buf[3 + i];
        /* multiplexed: the kernel counted only part of the time */
        if (running && running < enabled)
            v = (uint64_t)((double)v * (double)enabled / (double)running);
        out[g->ctr[i]] += v;
    }
}

void lt__tel_counters_read(lt__tel_counters *c, uint64_t out[LT_CTR_COUNT]) {
    memset(out, 0, LT_CTR_COUNT * sizeof *out);
    for (int t = 0; t < c->nth * 2; t++) read_group(&c->groups[t], out);
    for (int t = 0; t < c->nth; t++)
        if (c->sched_fd[t] >= 0) out[LT_CTR_RUNQUEUE_WAIT] += read_runqueue_wait(c->sched_fd[t]);
    /* a counter some thread could not open is not a sum over threads */
    for (int ci = 0; ci < LT_CTR_COUNT; ci++)
        if (!(c->available & (1u << ci))) out[ci] = 0;
}

void lt__tel_counters_close(lt__tel_counters *c) {
    if (!c) return;
    for (int t = 0; t < c->nth * 2; t++) close_group(&c->groups[t]);
    for (int t = 0; t < c->nth; t++)
        if (c->sched_fd[t] >= 0) close(c->sched_fd[t]);
    free(c->sched_fd);
    free(c->groups);
    free(c);
}

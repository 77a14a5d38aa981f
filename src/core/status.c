/* Status codes, per-thread error detail, assertion failure, and logging. */
#include "looptune/core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *lt_strerror(int status) {
    switch (status) {
#define LT__STATUS_CASE(name, value, msg) case value: return msg;
        LT_STATUS_MAP(LT__STATUS_CASE)
#undef LT__STATUS_CASE
    }
    return "unknown status";
}

static _Thread_local char lt__errbuf[512];

int lt_error(int status, const char *fmt, ...) {
    /* format into a copy first: callers may pass lt_errmsg() as an argument
     * to wrap the previous detail with context */
    char tmp[sizeof lt__errbuf];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    memcpy(lt__errbuf, tmp, sizeof tmp);
    return status;
}

const char *lt_errmsg(void) { return lt__errbuf; }

_Noreturn void lt__assert_fail(const char *file, int line, const char *expr) {
    fprintf(stderr, "looptune: %s:%d: assertion failed: %s\n", file, line, expr);
    fflush(stderr);
    abort();
}

static _Atomic int lt__log_level = LT_LOG_INFO;

void lt_log_set_level(lt_log_level level) { atomic_store(&lt__log_level, (int)level); }

void lt_log(lt_log_level level, const char *fmt, ...) {
    static const char *const tag[] = {"error", "warning", "info", "debug"};
    if ((int)level > atomic_load(&lt__log_level)) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "looptune: %s: %s\n", tag[level], line);
}

/* External-command objectives: a trial's command line built from its
 * template ({NAME} placeholders), the process started in a group of its
 * own (so a timeout or a prune kills everything it started), its stdout
 * read without blocking and split into the protocol's lines
 * ("step=N value=V", "value=V"), and its end reaped. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hpo/hpo_internal.h"

/* The piece of an argument at c: a placeholder {NAME} (returns true, *name
 * and *len set), or one literal character (*lit), "{{" and "}}" escaping a
 * brace, a '{' without a '}' after it standing for itself. *next: past it. */
static bool piece_at(const char *c, const char **name, size_t *len, char *lit,
                     const char **next) {
    if ((c[0] == '{' && c[1] == '{') || (c[0] == '}' && c[1] == '}')) {
        *lit = c[0];
        *next = c + 2;
        return false;
    }
    const char *e = c[0] == '{' ? strchr(c + 1, '}') : NULL;
    if (e) {
        *name = c + 1;
        *len = (size_t)(e - c - 1);
        *next = e + 1;
        return true;
    }
    *lit = c[0];
    *next = c + 1;
    return false;
}

/* Calls f(ctx, name, len) for every {NAME} in arg; stops at a non-zero
 * return, which it returns. */
static int each_placeholder(const char *arg, int (*f)(void *, const char *, size_t), void *ctx) {
    for (const char *c = arg; *c;) {
        const char *name;
        size_t len;
        char lit;
        if (!piece_at(c, &name, &len, &lit, &c)) continue;
        int rc = f(ctx, name, len);
        if (rc) return rc;
    }
    return 0;
}

static int find_n(const lt_hpo_space *s, const char *name, size_t len) {
    for (int i = 0; i < lt_hpo_space_size(s); i++) {
        const char *pn = lt_hpo_space_param(s, i)->name;
        if (strlen(pn) == len && !memcmp(pn, name, len)) return i;
    }
    return -1;
}

typedef struct {
    const lt_hpo_space *s;
    const char *arg;
} check_ctx;

static int check_one(void *ctx, const char *name, size_t len) {
    check_ctx *c = ctx;
    if (find_n(c->s, name, len) >= 0) return 0;
    return lt_error(LT_EINVAL, "argument '%s': {%.*s} names no parameter of the space", c->arg,
                    (int)len, name);
}

int lt_hpo_command_check(char *const *argv, int argc, const lt_hpo_space *s) {
    if (argc < 1) return lt_error(LT_EINVAL, "no command");
    for (int i = 0; i < argc; i++) {
        check_ctx c = {s, argv[i]};
        int rc = each_placeholder(argv[i], check_one, &c);
        if (rc) return rc;
    }
    return LT_OK;
}

/* arg with its placeholders replaced (malloc'd). */
static char *substitute(const char *arg, const lt_hpo_space *s, const double *values) {
    size_t cap = strlen(arg) + 64, len = 0;
    char *out = malloc(cap);
    if (!out) return NULL;
    for (const char *c = arg; *c;) {
        const char *name;
        size_t nlen;
        char lit = 0;
        const char *at = c;
        const bool ph = piece_at(c, &name, &nlen, &lit, &c);
        const int i = ph ? find_n(s, name, nlen) : -1;
        char val[512];
        const char *piece = ph ? at : &lit; /* a name of no parameter: kept as written */
        size_t plen = ph ? nlen + 2 : 1;
        if (i >= 0) {
            lt_hpo_value_format(s, i, values[i], val, sizeof val);
            piece = val;
            plen = strlen(val);
        }
        if (len + plen + 1 > cap) {
            cap = 2 * (len + plen + 1);
            char *n = realloc(out, cap);
            if (!n) {
                free(out);
                return NULL;
            }
            out = n;
        }
        memcpy(out + len, piece, plen);
        len += plen;
    }
    out[len] = 0;
    return out;
}

int lt_hpo_proc_start(lt_hpo_proc *p, char *const *argv, int argc, const lt_hpo_space *s,
                      const double *values, int trial) {
    memset(p, 0, sizeof *p);
    p->fd = -1;
    p->pid = -1;
    char **args = calloc((size_t)argc + 1, sizeof *args);
    char *params = lt_hpo_config_json(s, values);
    int rc = LT_OK;
    if (!args || !params) {
        rc = lt_error(LT_ENOMEM, "hpo: out of memory");
        goto out;
    }
    for (int i = 0; i < argc; i++)
        if (!(args[i] = substitute(argv[i], s, values))) {
            rc = lt_error(LT_ENOMEM, "hpo: out of memory");
            goto out;
        }
    int fds[2];
    if (pipe(fds) != 0) {
        rc = lt_error(LT_EIO, "hpo: pipe: %s", strerror(errno));
        goto out;
    }
    char tid[24];
    snprintf(tid, sizeof tid, "%d", trial);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        rc = lt_error(LT_EIO, "hpo: fork: %s", strerror(errno));
        goto out;
    }
    if (pid == 0) { /* the child: its own group, stdout into the pipe */
        setpgid(0, 0);
        /* dies with the process that runs the study (a worker killed mid-trial) */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        signal(SIGPIPE, SIG_DFL);
        setenv("LT_HPO_TRIAL", tid, 1);
        setenv("LT_HPO_PARAMS", params, 1);
        execvp(args[0], args);
        fprintf(stderr, "looptune hpo: cannot run '%s': %s\n", args[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* also here: no race with a kill before the child's own call */
    close(fds[1]);
    fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK);
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    p->pid = pid;
    p->fd = fds[0];
out:
    if (args)
        for (int i = 0; i < argc; i++) free(args[i]);
    free(args);
    free(params);
    return rc;
}

/* A whole number and nothing else. */
static bool parse_i64(const char *s, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno) return false;
    *out = v;
    return true;
}

static bool parse_f64(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !isfinite(v)) return false;
    *out = v;
    return true;
}

/* One complete line: "step=N value=V" or "value=V" (spaces or tabs
 * around); returns on_step's result. */
static int take_line(lt_hpo_proc *p, char *line,
                     int (*on_step)(void *ctx, int64_t step, double value), void *ctx) {
    char *tok[3];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(line, " \t\r", &save); t && n < 3;
         t = strtok_r(NULL, " \t\r", &save))
        tok[n++] = t;
    int64_t step;
    double v;
    if (n == 1 && !strncmp(tok[0], "value=", 6) && parse_f64(tok[0] + 6, &v)) {
        p->has_value = true;
        p->value = v;
    } else if (n == 2 && !strncmp(tok[0], "step=", 5) && !strncmp(tok[1], "value=", 6) &&
               parse_i64(tok[0] + 5, &step) && parse_f64(tok[1] + 6, &v)) {
        return on_step ? on_step(ctx, step, v) : 0;
    }
    return 0;
}

int lt_hpo_proc_read(lt_hpo_proc *p, int (*on_step)(void *ctx, int64_t step, double value),
                     void *ctx) {
    if (p->fd < 0) return 1;
    char buf[4096];
    /* at most 64 reads a call, so one chatty process cannot hold the others */
    for (int reads = 0; reads < 64; reads++) {
        ssize_t got = read(p->fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return 0; /* EAGAIN: nothing more now */
        if (got == 0) {        /* the end: a last line without a newline counts */
            if (p->len && !p->overlong) {
                p->line[p->len] = 0;
                take_line(p, p->line, on_step, ctx);
            }
            p->len = 0;
            close(p->fd);
            p->fd = -1;
            return 1;
        }
        for (ssize_t i = 0; i < got; i++) {
            if (buf[i] == '\n') {
                int stop = 0;
                if (!p->overlong) {
                    p->line[p->len] = 0;
                    stop = take_line(p, p->line, on_step, ctx);
                }
                p->len = 0;
                p->overlong = false;
                if (stop) return 0;
            } else if (p->len + 1 < sizeof p->line) {
                p->line[p->len++] = buf[i];
            } else {
                p->overlong = true;
            }
        }
    }
    return 0;
}

void lt_hpo_proc_kill(lt_hpo_proc *p) {
    if (p->pid > 0 && !p->exited) kill(-p->pid, SIGKILL);
}

bool lt_hpo_proc_reap(lt_hpo_proc *p) {
    if (p->exited) return true;
    if (p->pid <= 0) return true;
    int st;
    pid_t r = waitpid(p->pid, &st, WNOHANG);
    if (r == p->pid) {
        p->exited = true;
        p->wstatus = st;
        kill(-p->pid, SIGKILL); /* what it left running in its group */
    } else if (r < 0 && errno == ECHILD) {
        p->exited = true;
        p->wstatus = 0;
    }
    return p->exited;
}

void lt_hpo_proc_close(lt_hpo_proc *p) {
    if (p->fd >= 0) close(p->fd);
    p->fd = -1;
}

/* Parameter spaces (kernel and executor descriptors as cross products of
 * allowed values), their text form, configuration checks, shape signatures
 * and the host class. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "looptune/model.h"
#include "looptune/tune.h"

void lt_space_init(lt_space *s, const char *name, const lt_param_def *defs, int n) {
    LT_ASSERT(n >= 0 && n <= LT_MAX_PARAMS);
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->n_params = n;
    for (int i = 0; i < n; i++) {
        LT_ASSERT(defs[i].n_values >= 1 && defs[i].n_values <= LT_MAX_PARAM_VALUES);
        s->params[i] = defs[i];
    }
}

void lt_space_from_kernel(lt_space *s, const lt_kernel *k) {
    lt_space_init(s, k->name, k->params, k->n_params);
}

void lt_space_fit_isa(lt_space *s, lt_isa isa) {
    for (int i = 0; i < s->n_params; i++) {
        lt_param_def *d = &s->params[i];
        d->def = lt_param_default(d, isa);
        if (lt_param_applies(d, isa)) continue;
        d->values[0] = d->def;
        d->n_values = 1;
    }
}

int lt_host_class_isa(const char *host_class, lt_isa *out) {
    const char *a = host_class ? strchr(host_class, ':') : NULL;
    const char *b = a ? strchr(a + 1, ':') : NULL;
    char name[16];
    if (!b || b - a - 1 <= 0 || (size_t)(b - a - 1) >= sizeof name)
        return lt_error(LT_EINVAL, "host class '%s' names no ISA", host_class ? host_class : "");
    memcpy(name, a + 1, (size_t)(b - a - 1));
    name[b - a - 1] = 0;
    return lt_isa_parse(name, out);
}

/* Parameters that do nothing on a weight of dtype t stay at their default. */
static void fit_dtype(lt_space *s, lt_dtype t) {
    for (int i = 0; i < s->n_params; i++) {
        lt_param_def *d = &s->params[i];
        if (lt_param_acts_on(d, t)) continue;
        d->values[0] = d->def;
        d->n_values = 1;
    }
}

/* Parameters that do nothing in regime r stay at their default. */
static void fit_regime(lt_space *s, lt_regime r) {
    for (int i = 0; i < s->n_params; i++) {
        lt_param_def *d = &s->params[i];
        if (lt_param_acts_in(d, r)) continue;
        d->values[0] = d->def;
        d->n_values = 1;
    }
}

static void fit_attrs(lt_space *s, lt_kernel_id id, const lt_call *call);

void lt_space_fit_call(lt_space *s, lt_kernel_id id, const lt_call *call) {
    if (call->op[1] && (unsigned)call->op[1]->dtype < LT_DTYPE_COUNT)
        fit_dtype(s, lt_params_dtype(call->op[1]->dtype, call->op[1]->layout));
    lt_shape sh; /* the regime of the call, as its key says it */
    lt_shape_of_call(id, call, &sh);
    fit_regime(s, sh.regime);
    fit_attrs(s, id, call);
}

/* What the call's integer attributes make duplicate. */
static void fit_attrs(lt_space *s, lt_kernel_id id, const lt_call *call) {
    /* attributes may come from a message: only a real head count fits */
    if (id != LT_K_ATTENTION || call->ia[0] <= 0 || call->ia[1] <= 0 || call->ia[0] % call->ia[1])
        return;
    /* attention groups at most the query heads of one kv head: every value
     * from the group size up runs as the group size, so one of them stays */
    const int64_t group = call->ia[0] / call->ia[1];
    for (int i = 0; i < s->n_params; i++) {
        lt_param_def *d = &s->params[i];
        if (strcmp(d->name, "heads_per_task") != 0) continue;
        int n = 0;
        bool at_group = false;
        for (int j = 0; j < d->n_values; j++) {
            if (d->values[j] >= group && at_group) continue; /* values ascend */
            at_group |= d->values[j] >= group;
            d->values[n++] = d->values[j];
        }
        d->n_values = n;
        if (d->def > d->values[n - 1]) d->def = d->values[n - 1];
    }
}

void lt_space_fit_shape(lt_space *s, const char *kernel, const char *shape) {
    const lt_kernel *k = lt_kernel_find(kernel);
    /* the key's first field names the weight ("q4_k:2048x256:decode") */
    const char *colon = shape ? strchr(shape, ':') : NULL;
    lt_dtype t;
    lt_layout l;
    if (k && colon && lt_shape_parse_weight(shape, &t, &l) == LT_OK)
        fit_dtype(s, lt_params_dtype(t, l));
    /* its third the regime ("...:batch", "...:decode:ia=..."); a key that
     * names none is a decode key, as a call without tokens is */
    const char *c2 = colon ? strchr(colon + 1, ':') : NULL;
    lt_regime rg = LT_REGIME_DECODE;
    if (k && c2) {
        char name[16];
        size_t len = strcspn(c2 + 1, ":");
        if (len < sizeof name) {
            memcpy(name, c2 + 1, len);
            name[len] = 0;
            if (lt_regime_parse(name, &rg) != LT_OK) rg = LT_REGIME_DECODE;
        }
    }
    if (k) fit_regime(s, rg);
    const char *ia = shape ? strstr(shape, ":ia=") : NULL;
    if (!k || !ia) return;
    /* from a message: whole numbers of at most 9 digits, comma-separated */
    lt_call c = {0};
    const char *q = ia + 4;
    for (int i = 0; i < 3; i++) {
        char *end;
        errno = 0;
        long long v = strtoll(q, &end, 10);
        if (end == q || errno || v < -999999999LL || v > 999999999LL) return;
        c.ia[i] = v;
        if (*end != ',') break;
        q = end + 1;
    }
    fit_attrs(s, k->id, &c);
}

void lt_space_fit_params(const lt_space *s, lt_params *p) {
    for (int i = 0; i < s->n_params; i++) {
        const lt_param_def *d = &s->params[i];
        int32_t v = p->v[i], keep = d->values[d->n_values - 1];
        bool in = false;
        for (int j = 0; j < d->n_values; j++) in |= d->values[j] == v;
        if (in) continue;
        for (int j = d->n_values - 1; j >= 0; j--) /* the largest kept value below */
            if (d->values[j] <= v) {
                keep = d->values[j];
                break;
            }
        p->v[i] = keep;
    }
}

/* The spaces of the names a value can have are the tuning context's. */
void lt_space_from_exec(lt_space *s) { LT_ASSERT(lt_space_by_name(LT_TUNING_LOOPED, s) == LT_OK); }

void lt_space_threads(lt_space *s, int pool_threads) {
    lt_param_def d[LT_MAX_PARAMS];
    int n;
    LT_ASSERT(lt_tuning_space(LT_TUNING_THREADS, pool_threads, d, &n) == LT_OK);
    lt_space_init(s, LT_TUNING_THREADS, d, n);
}

int lt_space_by_name(const char *kernel, lt_space *out) {
    lt_param_def d[LT_MAX_PARAMS];
    int n;
    int rc = lt_tuning_space(kernel, 0, d, &n);
    if (rc) return rc;
    lt_space_init(out, kernel, d, n);
    return LT_OK;
}

int64_t lt_space_size(const lt_space *s) {
    int64_t n = 1;
    for (int i = 0; i < s->n_params; i++) n *= s->params[i].n_values;
    return n;
}

void lt_space_point(const lt_space *s, int64_t index, lt_params *out) {
    LT_ASSERT(index >= 0 && index < lt_space_size(s));
    memset(out, 0, sizeof *out);
    for (int i = s->n_params - 1; i >= 0; i--) {
        int64_t nv = s->params[i].n_values;
        out->v[i] = s->params[i].values[index % nv];
        index /= nv;
    }
}

static int value_index(const lt_param_def *d, int32_t v) {
    for (int j = 0; j < d->n_values; j++)
        if (d->values[j] == v) return j;
    return -1;
}

int64_t lt_space_index(const lt_space *s, const lt_params *p) {
    int64_t idx = 0;
    for (int i = 0; i < s->n_params; i++) {
        int j = value_index(&s->params[i], p->v[i]);
        if (j < 0) return -1;
        idx = idx * s->params[i].n_values + j;
    }
    return idx;
}

void lt_space_default(const lt_space *s, lt_params *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < s->n_params; i++) out->v[i] = s->params[i].def;
}

int lt_space_validate(const lt_space *s, const lt_params *p) {
    return lt_param_defs_validate(s->name, s->params, s->n_params, p);
}

size_t lt_space_format(const lt_space *s, const lt_params *p, char *buf, size_t n) {
    size_t len = 0;
    if (n) buf[0] = '\0';
    for (int i = 0; i < s->n_params; i++) {
        int w = snprintf(len < n ? buf + len : NULL, len < n ? n - len : 0, "%s%s=%d",
                         i ? "," : "", s->params[i].name, p->v[i]);
        len += (size_t)w;
    }
    return len;
}

int lt_space_parse(const lt_space *s, const char *text, lt_params *out) {
    lt_params p;
    memset(&p, 0, sizeof p);
    bool seen[LT_MAX_PARAMS] = {false};
    const char *c = text;
    while (*c) {
        const char *eq = strchr(c, '=');
        if (!eq) return lt_error(LT_ECONFIG, "%s: '%s': expected name=value", s->name, c);
        int idx = -1;
        for (int i = 0; i < s->n_params; i++)
            if (strlen(s->params[i].name) == (size_t)(eq - c) &&
                !strncmp(s->params[i].name, c, (size_t)(eq - c)))
                idx = i;
        if (idx < 0)
            return lt_error(LT_ECONFIG, "%s: unknown parameter '%.*s'", s->name, (int)(eq - c), c);
        if (seen[idx])
            return lt_error(LT_ECONFIG, "%s: parameter %s given twice", s->name,
                            s->params[idx].name);
        char *end;
        long v = strtol(eq + 1, &end, 10);
        if (end == eq + 1 || (*end && *end != ',') || v < INT32_MIN || v > INT32_MAX)
            return lt_error(LT_ECONFIG, "%s: parameter %s: bad value '%s'", s->name,
                            s->params[idx].name, eq + 1);
        p.v[idx] = (int32_t)v;
        seen[idx] = true;
        c = *end ? end + 1 : end;
    }
    for (int i = 0; i < s->n_params; i++) {
        if (seen[i]) continue;
        /* a parameter of some regimes only is left out of values of the
         * others (and of values stored before it existed): its default */
        if (s->params[i].regimes) {
            p.v[i] = s->params[i].def;
            continue;
        }
        return lt_error(LT_ECONFIG, "%s: parameter %s missing", s->name, s->params[i].name);
    }
    int rc = lt_space_validate(s, &p);
    if (rc) return rc;
    *out = p;
    return LT_OK;
}

int lt_config_check(lt_kernel_id id, const lt_call *call, const lt_params *p) {
    const lt_kernel *k = lt_kernel_get(id);
    lt_space s;
    lt_space_from_kernel(&s, k);
    int rc = lt_space_validate(&s, p);
    if (rc) return rc;
    lt_call trial = *call;
    trial.params = *p;
    return lt_call_check(id, &trial);
}

/* The CPU model reduced to a stable token: brand noise dropped, runs of
 * anything but letters and digits turned into one '-'. */
static void model_token(const char *model, char *out, size_t n) {
    static const char *const noise[] = {"(R)", "(TM)", "(r)", "(tm)", "CPU", "Processor", "@"};
    char tmp[128];
    snprintf(tmp, sizeof tmp, "%s", model);
    for (size_t i = 0; i < sizeof noise / sizeof noise[0]; i++) {
        char *p;
        while ((p = strstr(tmp, noise[i]))) memset(p, ' ', strlen(noise[i]));
    }
    /* a clock frequency ("2.70GHz") is not part of the class */
    char *ghz = strstr(tmp, "GHz");
    if (ghz) {
        char *b = ghz;
        while (b > tmp && (isdigit((unsigned char)b[-1]) || b[-1] == '.')) b--;
        memset(b, ' ', (size_t)(ghz + 3 - b));
    }
    size_t len = 0;
    bool dash = false;
    for (const char *c = tmp; *c && len + 2 < n; c++) {
        if (isalnum((unsigned char)*c)) {
            if (dash && len) out[len++] = '-';
            out[len++] = *c;
            dash = false;
        } else {
            dash = true;
        }
    }
    out[len] = '\0';
    if (!len) snprintf(out, n, "unknown-cpu");
}

void lt_host_detect(lt_host *out) {
    memset(out, 0, sizeof *out);
    const lt_cpu_info *c = lt_cpu();
    char tok[64];
    model_token(c->model, tok, sizeof tok);
    out->isa = (int)lt_isa_active();
    out->cores = c->logical_cpus;
    out->l2_kib = (double)c->l2_bytes / 1024.0;
    out->l3_kib = (double)c->l3_bytes / 1024.0;
    snprintf(out->host_class, sizeof out->host_class, "%s:%s:%dc", tok,
             lt_isa_name((lt_isa)out->isa), out->cores);
}


/* Search spaces of hyperparameter studies: the JSON format read and
 * validated (every error names the file and the entry at fault), the
 * parameters kept parents first, and the mapping between configurations and
 * the unit cube that the samplers work in. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpo/hpo_internal.h"

struct lt_hpo_space {
    int n;
    lt_hpo_param *p; /* [n], parents before children */
};

/* ---- freeing ---------------------------------------------------------------- */

static void param_clear(lt_hpo_param *p) {
    for (int i = 0; i < p->n_choices; i++) free(p->choices[i]);
    free(p->choices);
    free(p->numeric);
    for (int i = 0; i < p->n_when; i++) free(p->when[i].values);
    memset(p, 0, sizeof *p);
}

void lt_hpo_space_free(lt_hpo_space *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) param_clear(&s->p[i]);
    free(s->p);
    free(s);
}

int lt_hpo_space_size(const lt_hpo_space *s) { return s->n; }

const lt_hpo_param *lt_hpo_space_param(const lt_hpo_space *s, int i) {
    LT_ASSERT(i >= 0 && i < s->n);
    return &s->p[i];
}

int lt_hpo_space_find(const lt_hpo_space *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->p[i].name, name)) return i;
    return -1;
}

/* ---- parsing ---------------------------------------------------------------- */

#define BAD(...) lt_error(LT_EFORMAT, __VA_ARGS__)

/* A JSON number that is an integer (2 or 2.0), into *out. */
static bool json_integer_value_of(const json_t *v, int64_t *out) {
    if (json_is_integer(v)) {
        *out = (int64_t)json_integer_value(v);
        return true;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && fabs(d) < 9e15) {
            *out = (int64_t)d;
            return true;
        }
    }
    return false;
}

/* A choice's text: a string as it is, a number as JSON writes it. */
static char *choice_text(const json_t *v, bool *numeric) {
    if (json_is_string(v)) {
        *numeric = false;
        return strdup(json_string_value(v));
    }
    *numeric = true;
    return json_dumps(v, JSON_ENCODE_ANY);
}

static int parse_range(const char *origin, const char *name, const json_t *e, lt_hpo_param *p) {
    const json_t *lo = json_object_get(e, "low"), *hi = json_object_get(e, "high");
    if (!lo || !hi) return BAD("%s:%s: \"low\" and \"high\" are required", origin, name);
    if (!json_is_number(lo) || !json_is_number(hi))
        return BAD("%s:%s: \"low\" and \"high\" must be numbers", origin, name);
    p->low = json_number_value(lo);
    p->high = json_number_value(hi);
    if (!isfinite(p->low) || !isfinite(p->high))
        return BAD("%s:%s: \"low\" and \"high\" must be finite", origin, name);
    if (p->kind == LT_HPO_INT) {
        int64_t a, b;
        if (!json_integer_value_of(lo, &a) || !json_integer_value_of(hi, &b))
            return BAD("%s:%s: an int's \"low\" and \"high\" must be integers", origin, name);
    }
    if (!(p->low < p->high))
        return BAD("%s:%s: \"low\" (%g) must be below \"high\" (%g)", origin, name, p->low,
                   p->high);
    const json_t *lg = json_object_get(e, "log");
    if (lg) {
        if (!json_is_boolean(lg)) return BAD("%s:%s: \"log\" must be true or false", origin, name);
        p->log = json_is_true(lg);
    }
    if (p->log && p->kind == LT_HPO_FLOAT && p->low <= 0)
        return BAD("%s:%s: \"log\" needs \"low\" > 0 (got %g)", origin, name, p->low);
    if (p->log && p->kind == LT_HPO_INT && p->low < 1)
        return BAD("%s:%s: \"log\" needs \"low\" >= 1 for an int (got %g)", origin, name, p->low);
    p->step = 1;
    const json_t *st = json_object_get(e, "step");
    if (st) {
        if (!json_integer_value_of(st, &p->step) || p->step < 1)
            return BAD("%s:%s: \"step\" must be a positive integer", origin, name);
        if (p->log && p->step != 1)
            return BAD("%s:%s: \"step\" and \"log\" cannot be combined", origin, name);
        if ((double)p->step > p->high - p->low)
            return BAD("%s:%s: \"step\" (%lld) is larger than the range", origin, name,
                       (long long)p->step);
    }
    return LT_OK;
}

static int parse_choices(const char *origin, const char *name, const json_t *e, lt_hpo_param *p) {
    const json_t *c = json_object_get(e, "choices");
    if (!c) return BAD("%s:%s: \"choices\" is required for a categorical", origin, name);
    if (!json_is_array(c)) return BAD("%s:%s: \"choices\" must be an array", origin, name);
    size_t n = json_array_size(c);
    if (n == 0) return BAD("%s:%s: \"choices\" is empty", origin, name);
    if (n > 100000) return BAD("%s:%s: too many choices (%zu)", origin, name, n);
    p->choices = calloc(n, sizeof *p->choices);
    p->numeric = calloc(n, sizeof *p->numeric);
    if (!p->choices || !p->numeric) return lt_error(LT_ENOMEM, "%s: out of memory", origin);
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(c, i);
        if (!json_is_string(v) && !json_is_number(v))
            return BAD("%s:%s: choice %zu must be a string or a number", origin, name, i);
        p->choices[i] = choice_text(v, &p->numeric[i]);
        if (!p->choices[i]) return lt_error(LT_ENOMEM, "%s: out of memory", origin);
        p->n_choices = (int)i + 1;
        for (size_t j = 0; j < i; j++)
            if (!strcmp(p->choices[j], p->choices[i]) && p->numeric[j] == p->numeric[i])
                return BAD("%s:%s: choice '%s' is listed twice", origin, name, p->choices[i]);
    }
    return LT_OK;
}

static const char *const float_keys[] = {"type", "low", "high", "log", "when", NULL};
static const char *const int_keys[] = {"type", "low", "high", "log", "step", "when", NULL};
static const char *const cat_keys[] = {"type", "choices", "when", NULL};

static int check_keys(const char *origin, const char *name, json_t *e, const char *const *keys) {
    const char *k;
    json_t *v;
    json_object_foreach(e, k, v) {
        bool known = false;
        for (int i = 0; keys[i]; i++) known |= !strcmp(keys[i], k);
        if (!known) return BAD("%s:%s: unknown key '%s'", origin, name, k);
    }
    return LT_OK;
}

/* One entry, all but its "when". */
static int parse_param(const char *origin, const char *name, json_t *e, lt_hpo_param *p) {
    if (!name[0]) return BAD("%s: a parameter has an empty name", origin);
    if (strlen(name) >= LT_HPO_NAME_MAX)
        return BAD("%s:%.20s...: the name is longer than %d bytes", origin, name,
                   LT_HPO_NAME_MAX - 1);
    for (const char *c = name; *c; c++)
        if (*c == '{' || *c == '}' || (unsigned char)*c < 0x20)
            return BAD("%s:%s: the name may not hold braces or control characters", origin, name);
    snprintf(p->name, sizeof p->name, "%s", name);
    if (!json_is_object(e)) return BAD("%s:%s: not an object", origin, name);
    const json_t *t = json_object_get(e, "type");
    if (!t) return BAD("%s:%s: \"type\" is required (float, int or categorical)", origin, name);
    if (!json_is_string(t)) return BAD("%s:%s: \"type\" must be a string", origin, name);
    const char *ts = json_string_value(t);
    int rc;
    if (!strcmp(ts, "float")) {
        p->kind = LT_HPO_FLOAT;
        if ((rc = check_keys(origin, name, e, float_keys))) return rc;
        return parse_range(origin, name, e, p);
    }
    if (!strcmp(ts, "int")) {
        p->kind = LT_HPO_INT;
        if ((rc = check_keys(origin, name, e, int_keys))) return rc;
        return parse_range(origin, name, e, p);
    }
    if (!strcmp(ts, "categorical")) {
        p->kind = LT_HPO_CATEGORICAL;
        if ((rc = check_keys(origin, name, e, cat_keys))) return rc;
        return parse_choices(origin, name, e, p);
    }
    return BAD("%s:%s: unknown type '%s' (float, int or categorical)", origin, name, ts);
}

/* The value of parent parameter q that JSON value v names, into *out. */
static int when_value(const char *origin, const char *name, const lt_hpo_param *q, const json_t *v,
                      double *out) {
    if (q->kind == LT_HPO_INT) {
        int64_t k;
        if (!json_integer_value_of(v, &k))
            return BAD("%s:%s: \"when\" values of int '%s' must be integers", origin, name,
                       q->name);
        double d = (double)k;
        if (d < q->low || d > q->high || fmod(d - q->low, (double)q->step) != 0)
            return BAD("%s:%s: \"when\": %lld is not a value of '%s'", origin, name, (long long)k,
                       q->name);
        *out = d;
        return LT_OK;
    }
    if (!json_is_string(v) && !json_is_number(v))
        return BAD("%s:%s: \"when\" values of '%s' must be its choices", origin, name, q->name);
    bool numeric;
    char *text = choice_text(v, &numeric);
    if (!text) return lt_error(LT_ENOMEM, "%s: out of memory", origin);
    for (int i = 0; i < q->n_choices; i++) {
        if (q->numeric[i] == numeric && !strcmp(q->choices[i], text)) {
            free(text);
            *out = i;
            return LT_OK;
        }
    }
    int rc = BAD("%s:%s: \"when\": '%s' is not a choice of '%s'", origin, name, text, q->name);
    free(text);
    return rc;
}

/* Entry i's "when", against the parameters of s (in file order). */
static int parse_when(const char *origin, lt_hpo_space *s, int i, const json_t *w) {
    lt_hpo_param *p = &s->p[i];
    if (!json_is_object(w))
        return BAD("%s:%s: \"when\" must be an object {\"PARENT\": [VALUES]}", origin, p->name);
    if (json_object_size(w) == 0) return BAD("%s:%s: \"when\" is empty", origin, p->name);
    if (json_object_size(w) > LT_HPO_MAX_WHEN)
        return BAD("%s:%s: \"when\" has more than %d conditions", origin, p->name,
                   LT_HPO_MAX_WHEN);
    const char *k;
    const json_t *vals;
    json_object_foreach((json_t *)w, k, vals) {
        int q = lt_hpo_space_find(s, k);
        if (q < 0) return BAD("%s:%s: \"when\" names unknown parameter '%s'", origin, p->name, k);
        if (q == i) return BAD("%s:%s: \"when\" names the parameter itself", origin, p->name);
        if (s->p[q].kind == LT_HPO_FLOAT)
            return BAD("%s:%s: \"when\" parent '%s' is a float (int or categorical only)", origin,
                       p->name, k);
        if (!json_is_array(vals) || json_array_size(vals) == 0)
            return BAD("%s:%s: \"when\": '%s' needs a non-empty array of values", origin, p->name,
                       k);
        lt_hpo_cond *c = &p->when[p->n_when++];
        c->parent = q;
        c->values = calloc(json_array_size(vals), sizeof *c->values);
        if (!c->values) return lt_error(LT_ENOMEM, "%s: out of memory", origin);
        for (size_t j = 0; j < json_array_size(vals); j++) {
            int rc = when_value(origin, p->name, &s->p[q], json_array_get(vals, j),
                                &c->values[j]);
            if (rc) return rc;
            c->n_values = (int)j + 1;
        }
    }
    return LT_OK;
}

/* Reorders s->p so that parents come first (stable otherwise); a cycle is
 * an error. */
static int order_parents(const char *origin, lt_hpo_space *s) {
    int n = s->n;
    int *order = malloc((size_t)n * sizeof *order), *pos = malloc((size_t)n * sizeof *pos);
    bool *placed = calloc((size_t)n, sizeof *placed);
    lt_hpo_param *np = malloc((size_t)n * sizeof *np);
    int rc = LT_OK;
    if (!order || !pos || !placed || !np) {
        rc = lt_error(LT_ENOMEM, "%s: out of memory", origin);
        goto out;
    }
    for (int k = 0; k < n; k++) {
        int pick = -1;
        for (int i = 0; i < n && pick < 0; i++) {
            if (placed[i]) continue;
            bool ready = true;
            for (int c = 0; c < s->p[i].n_when; c++) ready &= placed[s->p[i].when[c].parent];
            if (ready) pick = i;
        }
        if (pick < 0) {
            for (int i = 0; i < n; i++)
                if (!placed[i]) {
                    rc = BAD("%s:%s: \"when\" conditions form a cycle", origin, s->p[i].name);
                    goto out;
                }
        }
        placed[pick] = true;
        order[k] = pick;
        pos[pick] = k;
    }
    for (int k = 0; k < n; k++) {
        np[k] = s->p[order[k]];
        for (int c = 0; c < np[k].n_when; c++) np[k].when[c].parent = pos[np[k].when[c].parent];
    }
    free(s->p);
    s->p = np;
    np = NULL;
out:
    free(order);
    free(pos);
    free(placed);
    free(np);
    return rc;
}

int lt_hpo_space_parse(const char *text, const char *origin, lt_hpo_space **out) {
    *out = NULL;
    json_error_t jerr;
    json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return BAD("%s:%d:%d: %s", origin, jerr.line, jerr.column, jerr.text);
    int rc = LT_OK;
    lt_hpo_space *s = calloc(1, sizeof *s);
    if (!s) {
        json_decref(root);
        return lt_error(LT_ENOMEM, "%s: out of memory", origin);
    }
    if (!json_is_object(root)) {
        rc = BAD("%s: the space must be a JSON object of parameters", origin);
        goto out;
    }
    size_t n = json_object_size(root);
    if (n == 0) {
        rc = BAD("%s: the space has no parameters", origin);
        goto out;
    }
    if (n > 10000) {
        rc = BAD("%s: too many parameters (%zu)", origin, n);
        goto out;
    }
    s->p = calloc(n, sizeof *s->p);
    if (!s->p) {
        rc = lt_error(LT_ENOMEM, "%s: out of memory", origin);
        goto out;
    }
    const char *k;
    json_t *e;
    json_object_foreach(root, k, e) {
        rc = parse_param(origin, k, e, &s->p[s->n++]);
        if (rc) goto out;
    }
    int i = 0;
    json_object_foreach(root, k, e) {
        const json_t *w = json_object_get(e, "when");
        if (w && (rc = parse_when(origin, s, i, w))) goto out;
        i++;
    }
    rc = order_parents(origin, s);
out:
    json_decref(root);
    if (rc) {
        lt_hpo_space_free(s);
        return rc;
    }
    *out = s;
    return LT_OK;
}

int lt_hpo_space_load(const char *path, lt_hpo_space **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return lt_error(LT_EIO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? 2 * cap : 8192;
            if (cap > ((size_t)64 << 20)) {
                free(buf);
                fclose(f);
                return lt_error(LT_EFORMAT, "%s: larger than 64 MiB", path);
            }
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return lt_error(LT_ENOMEM, "%s: out of memory", path);
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, 4096, f);
        len += got;
        if (got < 4096) break;
    }
    bool err = ferror(f);
    fclose(f);
    if (err) {
        free(buf);
        return lt_error(LT_EIO, "%s: read error", path);
    }
    buf[len] = 0;
    if (strlen(buf) != len) {
        free(buf);
        return lt_error(LT_EFORMAT, "%s: holds a NUL byte", path);
    }
    int rc = lt_hpo_space_parse(buf, path, out);
    free(buf);
    return rc;
}

/* ---- the unit cube -------------------------------------------------------------- */

static double clamp01(double u) { return u < 0 ? 0 : u > 1 ? 1 : u; }

/* Whether parameter i's conditions hold for values (parents decided). */
static bool active(const lt_hpo_space *s, int i, const double *values) {
    const lt_hpo_param *p = &s->p[i];
    for (int c = 0; c < p->n_when; c++) {
        double v = values[p->when[c].parent];
        if (isnan(v)) return false;
        bool hit = false;
        for (int j = 0; j < p->when[c].n_values; j++) hit |= p->when[c].values[j] == v;
        if (!hit) return false;
    }
    return true;
}

/* Number of values an int with step takes. */
static int64_t int_count(const lt_hpo_param *p) {
    return (int64_t)floor((p->high - p->low) / (double)p->step) + 1;
}

double lt__hpo_decode1(const lt_hpo_param *p, double u) {
    u = clamp01(u);
    switch (p->kind) {
    case LT_HPO_FLOAT: {
        double v = p->log ? exp(log(p->low) + u * (log(p->high) - log(p->low)))
                          : p->low + u * (p->high - p->low);
        return v < p->low ? p->low : v > p->high ? p->high : v;
    }
    case LT_HPO_INT: {
        if (p->log) {
            double a = log(p->low - 0.5), b = log(p->high + 0.5);
            double v = round(exp(a + u * (b - a)));
            return v < p->low ? p->low : v > p->high ? p->high : v;
        }
        int64_t k = int_count(p), i = (int64_t)floor(u * (double)k);
        if (i >= k) i = k - 1;
        return p->low + (double)(i * p->step);
    }
    case LT_HPO_CATEGORICAL: {
        int i = (int)floor(u * p->n_choices);
        return i >= p->n_choices ? p->n_choices - 1 : i;
    }
    }
    return NAN;
}

double lt__hpo_encode1(const lt_hpo_param *p, double v) {
    if (isnan(v)) return NAN;
    switch (p->kind) {
    case LT_HPO_FLOAT:
        return clamp01(p->log ? (log(v) - log(p->low)) / (log(p->high) - log(p->low))
                              : (v - p->low) / (p->high - p->low));
    case LT_HPO_INT: {
        if (p->log) {
            double a = log(p->low - 0.5), b = log(p->high + 0.5);
            return clamp01((log(v) - a) / (b - a));
        }
        double i = round((v - p->low) / (double)p->step);
        return clamp01((i + 0.5) / (double)int_count(p));
    }
    case LT_HPO_CATEGORICAL:
        return clamp01((v + 0.5) / p->n_choices);
    }
    return NAN;
}

void lt_hpo_space_decode(const lt_hpo_space *s, const double *u, double *values) {
    for (int i = 0; i < s->n; i++)
        values[i] = active(s, i, values) ? lt__hpo_decode1(&s->p[i], u[i]) : NAN;
}

void lt_hpo_space_encode(const lt_hpo_space *s, const double *values, double *u) {
    for (int i = 0; i < s->n; i++) u[i] = lt__hpo_encode1(&s->p[i], values[i]);
}

bool lt_hpo_space_valid(const lt_hpo_space *s, const double *values) {
    for (int i = 0; i < s->n; i++) {
        const lt_hpo_param *p = &s->p[i];
        double v = values[i];
        if (!active(s, i, values)) {
            if (!isnan(v)) return false;
            continue;
        }
        if (isnan(v)) return false;
        if (p->kind == LT_HPO_CATEGORICAL) {
            if (v != floor(v) || v < 0 || v >= p->n_choices) return false;
        } else {
            if (!(v >= p->low && v <= p->high)) return false;
            if (p->kind == LT_HPO_INT && (v != floor(v) || fmod(v - p->low, (double)p->step) != 0))
                return false;
        }
    }
    return true;
}

bool lt_hpo_config_equal(const lt_hpo_space *s, const double *a, const double *b) {
    for (int i = 0; i < s->n; i++) {
        if (isnan(a[i]) != isnan(b[i])) return false;
        if (!isnan(a[i]) && a[i] != b[i]) return false;
    }
    return true;
}

/* ---- text ---------------------------------------------------------------------- */

int lt_hpo_value_format(const lt_hpo_space *s, int i, double value, char *buf, size_t n) {
    const lt_hpo_param *p = &s->p[i];
    if (isnan(value)) return snprintf(buf, n, "%s", "");
    switch (p->kind) {
    case LT_HPO_INT:
        return snprintf(buf, n, "%lld", (long long)value);
    case LT_HPO_CATEGORICAL:
        return snprintf(buf, n, "%s", p->choices[(int)value]);
    case LT_HPO_FLOAT:
        break;
    }
    /* The shortest of %.15g, %.16g, %.17g that reads back as the value. */
    char tmp[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, value);
        if (strtod(tmp, NULL) == value) break;
    }
    return snprintf(buf, n, "%s", tmp);
}

char *lt_hpo_config_json(const lt_hpo_space *s, const double *values) {
    json_t *o = json_object();
    if (!o) return NULL;
    for (int i = 0; i < s->n; i++) {
        const lt_hpo_param *p = &s->p[i];
        if (isnan(values[i])) continue;
        json_t *v = NULL;
        if (p->kind == LT_HPO_FLOAT) v = json_real(values[i]);
        else if (p->kind == LT_HPO_INT) v = json_integer((json_int_t)values[i]);
        else if (p->numeric[(int)values[i]])
            v = json_loads(p->choices[(int)values[i]], JSON_DECODE_ANY, NULL);
        else v = json_string(p->choices[(int)values[i]]);
        if (!v || json_object_set_new(o, p->name, v)) {
            json_decref(o);
            return NULL;
        }
    }
    char *text = json_dumps(o, JSON_PRESERVE_ORDER);
    json_decref(o);
    return text;
}

/* The tuning context: the one owner of every parameter value in force in a
 * runtime. A value belongs to a name (a kernel, "looped" for the looped
 * executor, "threads" for a regime's thread count) and a key (a call's
 * lt_call_key, or the model's step key). Every source of values (defaults,
 * the config store, --param, offline trials, control messages, online
 * trials) calls lt_tuning_set or lt_tuning_pin, which validate once; the
 * runtime hands every program it builds to the context, which puts the
 * values on its nodes then and again at each token boundary after a change.
 *
 * A node's value is looked up by its key, then (a matvec with an epilogue or
 * a prologue) by the key without the epilogue, then without either: the
 * work that sets its parameters is the same stream of weights, so values
 * tuned before a fusion pass still serve. Pins (--param) lie on top. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "looptune/program.h"
#include "model/model_internal.h"

enum { CHAIN_MAX = 3 };

typedef struct {
    char name[32];
    char key[LT_KEY_MAX];
    lt_params v;
} tn_entry;

typedef struct {
    char name[32];
    char key[LT_KEY_MAX]; /* "": every key of name */
    int index;            /* into name's parameters */
    int32_t value;
} tn_pin;

typedef struct {
    char name[32];
    char key[LT_KEY_MAX];
    bool fallback; /* only a lookup's fallback: not listed by lt_tuning_key */
} tn_key;

#define LT__TUNING_MAX_PROGRAMS 16
#define LT__TUNING_MAX_PINS 32

struct lt_tuning {
    const lt_model *m;
    int pool_threads;
    char step_key[LT_REGIME_COUNT][LT_KEY_MAX]; /* "threads" per regime; [DECODE]: "looped" */
    tn_entry *set; /* the values set, by (name, key) */
    int n_set, cap_set;
    tn_pin pins[LT__TUNING_MAX_PINS];
    int n_pins;
    tn_key *keys; /* every key a program of this runtime has had */
    int n_keys, cap_keys;
    lt_program *progs[LT__TUNING_MAX_PROGRAMS]; /* attached: built and not freed */
    int n_progs;
    uint64_t gen;
};

/* ---- spaces ------------------------------------------------------------------------ */

/* Thread counts a step may run on besides 0 (= the whole pool): every count
 * up to 8, then sparser. */
static const int32_t thread_values[] = {1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 16, 24, 32, 48, 64};
_Static_assert(sizeof thread_values / sizeof thread_values[0] + 1 <= LT_MAX_PARAM_VALUES,
               "the threads space fits a parameter");

static lt_param_def threads_def(int pool_threads) {
    lt_param_def d = {.name = "threads", .n_values = 1, .values = {0}, .def = 0};
    for (size_t i = 0; i < sizeof thread_values / sizeof thread_values[0]; i++)
        if (pool_threads <= 0 || thread_values[i] < pool_threads)
            d.values[d.n_values++] = thread_values[i];
    return d;
}

int lt_tuning_space(const char *name, int pool_threads, lt_param_def defs[LT_MAX_PARAMS],
                    int *n) {
    if (!strcmp(name, LT_TUNING_THREADS)) {
        defs[0] = threads_def(pool_threads);
        *n = 1;
        return LT_OK;
    }
    if (!strcmp(name, LT_TUNING_LOOPED)) {
        const lt_param_def *d = lt_exec_looped_params(n);
        memcpy(defs, d, (size_t)*n * sizeof *d);
        return LT_OK;
    }
    const lt_kernel *k = lt_kernel_find(name);
    if (!k) return lt_error(LT_ENOTFOUND, "unknown kernel '%s'", name);
    memcpy(defs, k->params, (size_t)k->n_params * sizeof *k->params);
    *n = k->n_params;
    return LT_OK;
}

static void defaults_of(const lt_param_def *defs, int n, lt_params *out) {
    memset(out, 0, sizeof *out);
    for (int i = 0; i < n; i++) out->v[i] = lt_param_default(&defs[i], lt_isa_active());
}

/* ---- lookups ----------------------------------------------------------------------- */

static tn_entry *find_set(const lt_tuning *t, const char *name, const char *key) {
    for (int i = 0; i < t->n_set; i++)
        if (!strcmp(t->set[i].name, name) && !strcmp(t->set[i].key, key)) return &t->set[i];
    return NULL;
}

/* The keys a value of name under key is looked up by, most specific first:
 * key, then for a matvec with an epilogue or prologue (":ia=acc,pre,post")
 * the key without the epilogue, then without either. */
static int key_chain(const char *name, const char *key, char chain[CHAIN_MAX][LT_KEY_MAX]) {
    int n = 0;
    snprintf(chain[n++], LT_KEY_MAX, "%s", key);
    const char *ia = strstr(key, ":ia=");
    long long a[3];
    if (strcmp(name, "matvec") || !ia || sscanf(ia, ":ia=%lld,%lld,%lld", &a[0], &a[1], &a[2]) != 3)
        return n;
    const int plen = (int)(ia - key);
    for (int drop = 2; drop >= 1; drop--) {
        if (a[drop] == 0) continue;
        a[drop] = 0; /* first the epilogue, then the prologue too */
        if (a[0] || a[1] || a[2])
            snprintf(chain[n++], LT_KEY_MAX, "%.*s:ia=%lld,%lld,%lld", plen, key, a[0], a[1], a[2]);
        else
            snprintf(chain[n++], LT_KEY_MAX, "%.*s", plen, key);
    }
    return n;
}

/* The chain of a node, and its kernel's name. */
static int node_chain(const lt_program *p, int node, char chain[CHAIN_MAX][LT_KEY_MAX],
                      const char **name) {
    lt_node_info ni;
    lt_program_node(p, node, &ni);
    char key[LT_KEY_MAX];
    lt_call_key(ni.kernel, lt_program_call(p, node), key, sizeof key);
    *name = lt_kernel_get(ni.kernel)->name;
    return key_chain(*name, key, chain);
}

/* Pins of name that hold for key (every key, or this one) over v. */
static void overlay_pins(const lt_tuning *t, const char *name, const char *key, lt_params *v) {
    for (int i = 0; i < t->n_pins; i++)
        if (!strcmp(t->pins[i].name, name) && (!t->pins[i].key[0] || !strcmp(t->pins[i].key, key)))
            v->v[t->pins[i].index] = t->pins[i].value;
}

/* The value in force for name under the first key of chain with a value
 * set, else the defaults; pins on top (by the most specific key). */
static int value_of(const lt_tuning *t, const char *name, char chain[][LT_KEY_MAX], int n_chain,
                    lt_params *out) {
    lt_param_def defs[LT_MAX_PARAMS];
    int nd;
    int rc = lt_tuning_space(name, t->pool_threads, defs, &nd);
    if (rc) return rc;
    const tn_entry *e = NULL;
    for (int i = 0; i < n_chain && !e; i++) e = find_set(t, name, chain[i]);
    if (e) *out = e->v;
    else defaults_of(defs, nd, out);
    overlay_pins(t, name, chain[0], out);
    return LT_OK;
}

static int node_value(const lt_tuning *t, const lt_program *p, int node, lt_params *out) {
    char chain[CHAIN_MAX][LT_KEY_MAX];
    const char *name;
    int n = node_chain(p, node, chain, &name);
    return value_of(t, name, chain, n, out);
}

int lt_tuning_get(const lt_tuning *t, const char *name, const char *key, lt_params *out) {
    char chain[CHAIN_MAX][LT_KEY_MAX];
    int n = key_chain(name, key, chain);
    return value_of(t, name, chain, n, out);
}

bool lt_tuning_has(const lt_tuning *t, const char *name, const char *key) {
    return find_set(t, name, key) != NULL;
}

bool lt_tuning_uses(const lt_tuning *t, const char *name, const char *key) {
    for (int i = 0; i < t->n_keys; i++)
        if (!strcmp(t->keys[i].name, name) && !strcmp(t->keys[i].key, key)) return true;
    return false;
}

int lt_tuning_n_keys(const lt_tuning *t) {
    int n = 0;
    for (int i = 0; i < t->n_keys; i++) n += !t->keys[i].fallback;
    return n;
}

void lt_tuning_key(const lt_tuning *t, int i, const char **name, const char **key) {
    for (int j = 0; j < t->n_keys; j++) {
        if (t->keys[j].fallback) continue;
        if (i-- == 0) {
            *name = t->keys[j].name;
            *key = t->keys[j].key;
            return;
        }
    }
    *name = *key = NULL;
}

uint64_t lt_tuning_generation(const lt_tuning *t) { return t->gen; }

const char *lt_tuning_step_key(const lt_tuning *t, lt_regime r) { return t->step_key[r]; }

int lt_tuning_pool_threads(const lt_tuning *t) { return t->pool_threads; }

/* ---- changing values ----------------------------------------------------------------- */

/* Whether every node of kernel name in the attached programs takes its value
 * in force (the kernel's constraints on the real call). */
static int check_nodes(const lt_tuning *t, const char *name) {
    const lt_kernel *k = lt_kernel_find(name);
    if (!k) return LT_OK; /* the executor or a thread count: their space is the check */
    for (int j = 0; j < t->n_progs; j++) {
        const lt_program *p = t->progs[j];
        for (int i = 0; i < lt_program_n_nodes(p); i++) {
            lt_node_info ni;
            lt_program_node(p, i, &ni);
            if (ni.kernel != k->id) continue;
            lt_call trial = *lt_program_call(p, i);
            LT_ASSERT(node_value(t, p, i, &trial.params) == LT_OK);
            if (lt_call_check(k->id, &trial))
                return lt_error(LT_ECONFIG, "node %s: %s", ni.label ? ni.label : "?", lt_errmsg());
        }
    }
    return LT_OK;
}

static int known_name(const lt_tuning *t, const char *name, lt_param_def *defs, int *nd) {
    int rc = lt_tuning_space(name, t->pool_threads, defs, nd);
    if (rc) return rc;
    if (*nd == 0) return lt_error(LT_ECONFIG, "kernel %s has no parameters", name);
    return LT_OK;
}

int lt_tuning_set(lt_tuning *t, const char *name, const char *key, const lt_params *p) {
    lt_param_def defs[LT_MAX_PARAMS];
    int nd;
    int rc = known_name(t, name, defs, &nd);
    if (rc) return rc;
    if ((rc = lt_param_defs_validate(name, defs, nd, p))) return rc;
    if (!key || !lt_tuning_uses(t, name, key))
        return lt_error(LT_ENOTFOUND, "this model has no %s of shape %s", name, key ? key : "");
    lt_params v = {{0}};
    memcpy(v.v, p->v, (size_t)nd * sizeof v.v[0]); /* unused slots stay 0 */
    tn_entry *e = find_set(t, name, key);
    tn_entry saved;
    memset(&saved, 0, sizeof saved);
    bool existed = e != NULL;
    if (e) {
        saved = *e;
    } else {
        if (t->n_set == t->cap_set) {
            int cap = t->cap_set ? 2 * t->cap_set : 16;
            tn_entry *ne = realloc(t->set, (size_t)cap * sizeof *ne);
            if (!ne) return lt_error(LT_ENOMEM, "tuning: out of memory");
            t->set = ne;
            t->cap_set = cap;
        }
        e = &t->set[t->n_set++];
        snprintf(e->name, sizeof e->name, "%s", name);
        snprintf(e->key, sizeof e->key, "%s", key);
    }
    e->v = v;
    if ((rc = check_nodes(t, name))) { /* put back what was there */
        if (existed) *e = saved;
        else t->n_set--;
        return rc;
    }
    t->gen++;
    return LT_OK;
}

int lt_tuning_unset(lt_tuning *t, const char *name, const char *key) {
    tn_entry *e = find_set(t, name, key);
    if (!e) return LT_OK;
    tn_entry saved = *e;
    int i = (int)(e - t->set);
    memmove(&t->set[i], &t->set[i + 1], (size_t)(t->n_set - i - 1) * sizeof *t->set);
    t->n_set--;
    int rc = check_nodes(t, name); /* the defaults may not fit where a value did */
    if (rc) {
        memmove(&t->set[i + 1], &t->set[i], (size_t)(t->n_set - i) * sizeof *t->set);
        t->set[i] = saved;
        t->n_set++;
        return rc;
    }
    t->gen++;
    return LT_OK;
}

int lt_tuning_pin(lt_tuning *t, const char *name, const char *key, const char *param,
                  int32_t value) {
    lt_param_def defs[LT_MAX_PARAMS];
    int nd;
    int rc = known_name(t, name, defs, &nd);
    if (rc) return rc;
    int idx = 0;
    while (idx < nd && strcmp(defs[idx].name, param)) idx++;
    if (idx == nd) return lt_error(LT_ECONFIG, "%s has no parameter '%s'", name, param);
    bool allowed = false;
    for (int j = 0; j < defs[idx].n_values; j++) allowed |= defs[idx].values[j] == value;
    if (!allowed)
        return lt_error(LT_ECONFIG, "%s: %d is not a value of %s", name, value, param);
    if (key && !lt_tuning_uses(t, name, key))
        return lt_error(LT_ENOTFOUND, "this model has no %s of shape %s", name, key);
    tn_pin pin = {.index = idx, .value = value};
    snprintf(pin.name, sizeof pin.name, "%s", name);
    snprintf(pin.key, sizeof pin.key, "%s", key ? key : "");
    int at = 0;
    while (at < t->n_pins && !(!strcmp(t->pins[at].name, pin.name) &&
                               !strcmp(t->pins[at].key, pin.key) && t->pins[at].index == idx))
        at++;
    if (at == LT__TUNING_MAX_PINS)
        return lt_error(LT_ECONFIG, "more than %d pinned parameters", LT__TUNING_MAX_PINS);
    tn_pin saved = t->pins[at];
    bool added = at == t->n_pins;
    t->pins[at] = pin;
    if (added) t->n_pins++;
    if ((rc = check_nodes(t, name))) {
        if (added) t->n_pins--;
        else t->pins[at] = saved;
        return rc;
    }
    t->gen++;
    return LT_OK;
}

/* ---- the runtime's side ----------------------------------------------------------------- */

int lt__tuning_init(lt_tuning **out, const lt_model *m, int pool_threads) {
    lt_tuning *t = calloc(1, sizeof *t);
    if (!t) return lt_error(LT_ENOMEM, "tuning: out of memory");
    t->m = m;
    t->pool_threads = pool_threads;
    int rc = LT_OK;
    for (int r = 0; r < LT_REGIME_COUNT && !rc; r++) {
        lt_step_shape_format(m, pool_threads, (lt_regime)r, t->step_key[r], LT_KEY_MAX);
        rc = lt__tuning_add_key(t, LT_TUNING_THREADS, t->step_key[r], false);
    }
    if (!rc) rc = lt__tuning_add_key(t, LT_TUNING_LOOPED, t->step_key[LT_REGIME_DECODE], false);
    if (rc) {
        lt__tuning_free(t);
        return rc;
    }
    *out = t;
    return LT_OK;
}

void lt__tuning_free(lt_tuning *t) {
    if (!t) return;
    free(t->set);
    free(t->keys);
    free(t);
}

int lt__tuning_add_key(lt_tuning *t, const char *name, const char *key, bool fallback) {
    for (int i = 0; i < t->n_keys; i++)
        if (!strcmp(t->keys[i].name, name) && !strcmp(t->keys[i].key, key)) {
            t->keys[i].fallback &= fallback; /* a node's own key is listed */
            return LT_OK;
        }
    if (t->n_keys == t->cap_keys) {
        int cap = t->cap_keys ? 2 * t->cap_keys : 32;
        tn_key *nk = realloc(t->keys, (size_t)cap * sizeof *nk);
        if (!nk) return lt_error(LT_ENOMEM, "tuning: out of memory");
        t->keys = nk;
        t->cap_keys = cap;
    }
    tn_key *k = &t->keys[t->n_keys++];
    snprintf(k->name, sizeof k->name, "%s", name);
    snprintf(k->key, sizeof k->key, "%s", key);
    k->fallback = fallback;
    return LT_OK;
}

int lt__tuning_learn(lt_tuning *t, const lt_program *p) {
    for (int i = 0; i < lt_program_n_nodes(p); i++) {
        lt_node_info ni;
        lt_program_node(p, i, &ni);
        if (lt_kernel_get(ni.kernel)->n_params == 0) continue;
        char chain[CHAIN_MAX][LT_KEY_MAX];
        const char *name;
        int n = node_chain(p, i, chain, &name);
        for (int j = 0; j < n; j++) {
            int rc = lt__tuning_add_key(t, name, chain[j], j > 0);
            if (rc) return rc;
        }
    }
    return LT_OK;
}

int lt__tuning_attach(lt_tuning *t, lt_program *p) {
    if (t->n_progs == LT__TUNING_MAX_PROGRAMS)
        return lt_error(LT_ESTATE, "tuning: more than %d programs", LT__TUNING_MAX_PROGRAMS);
    int rc = lt__tuning_learn(t, p);
    if (rc) return rc;
    t->progs[t->n_progs++] = p;
    lt__tuning_apply(t, p);
    return LT_OK;
}

void lt__tuning_detach(lt_tuning *t, const lt_program *p) {
    for (int i = 0; i < t->n_progs; i++)
        if (t->progs[i] == p) {
            t->progs[i] = t->progs[--t->n_progs];
            return;
        }
}

int lt__tuning_apply(const lt_tuning *t, lt_program *p) {
    int changed = 0;
    for (int i = 0; i < lt_program_n_nodes(p); i++) {
        lt_node_info ni;
        lt_program_node(p, i, &ni);
        if (lt_kernel_get(ni.kernel)->n_params == 0) continue;
        lt_params v;
        LT_ASSERT(node_value(t, p, i, &v) == LT_OK);
        if (!memcmp(&v, &ni.params, sizeof v)) continue;
        /* checked when set on the programs built then; one built since may
         * not take it (a constraint of its call): it keeps what it has */
        if (lt_program_set_params(p, i, &v)) {
            lt_log(LT_LOG_WARN, "tuning: node %s of %s keeps its parameters: %s",
                   ni.label ? ni.label : "?", lt_program_name(p), lt_errmsg());
            continue;
        }
        changed++;
    }
    return changed;
}

int lt__tuning_threads(const lt_tuning *t, lt_regime r) {
    lt_params v;
    LT_ASSERT(lt_tuning_get(t, LT_TUNING_THREADS, t->step_key[r], &v) == LT_OK);
    return v.v[0];
}

void lt__tuning_exec_params(const lt_tuning *t, lt_params *out) {
    LT_ASSERT(lt_tuning_get(t, LT_TUNING_LOOPED, t->step_key[LT_REGIME_DECODE], out) == LT_OK);
}

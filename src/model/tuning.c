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

/* A key of this runtime, and the value set under it if any. Keys are only
 * ever appended, so an index names one for good. */
typedef struct {
    char name[32];        /* a kernel, "looped" or "threads" */
    char key[LT_KEY_MAX];
    bool fallback;        /* only a lookup's fallback: not listed by lt_tuning_key */
    bool set;             /* v was set (else the defaults are in force) */
    lt_params v;
    lt_params def;        /* the active ISA's defaults */
} tn_key;

typedef struct {
    char name[32];
    char key[LT_KEY_MAX]; /* "": every key of name */
    int index;            /* into name's parameters */
    int32_t value;
} tn_pin;

/* A node of an attached program: the keys its value is looked up by,
 * resolved once (a finalized program's calls do not change). */
typedef struct {
    int chain[CHAIN_MAX]; /* indices into keys, most specific first */
    int n_chain;          /* 0: the kernel has no parameters */
} tn_node;

typedef struct {
    lt_program *p;
    tn_node *nodes; /* [lt_program_n_nodes(p)] */
} tn_prog;

#define LT__TUNING_MAX_PROGRAMS 16
#define LT__TUNING_MAX_PINS 32

struct lt_tuning {
    const lt_model *m;
    int pool_threads;
    char step_key[LT_REGIME_COUNT][LT_KEY_MAX];
    int threads_key[LT_REGIME_COUNT], looped_key; /* their indices */
    tn_key *keys; /* every key a program of this runtime has had */
    int n_keys, cap_keys;
    tn_pin pins[LT__TUNING_MAX_PINS];
    int n_pins;
    tn_prog progs[LT__TUNING_MAX_PROGRAMS]; /* attached: built and not freed */
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

static int find_key(const lt_tuning *t, const char *name, const char *key) {
    for (int i = 0; i < t->n_keys; i++)
        if (!strcmp(t->keys[i].name, name) && !strcmp(t->keys[i].key, key)) return i;
    return -1;
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

/* Pins of name that hold for key (every key, or this one) over v. */
static void overlay_pins(const lt_tuning *t, const char *name, const char *key, lt_params *v) {
    for (int i = 0; i < t->n_pins; i++)
        if (!strcmp(t->pins[i].name, name) && (!t->pins[i].key[0] || !strcmp(t->pins[i].key, key)))
            v->v[t->pins[i].index] = t->pins[i].value;
}

/* The value in force under the keys chain[0..n) (indices): the first with
 * a value set, else the first's defaults; pins on top. */
static void value_of(const lt_tuning *t, const int *chain, int n, lt_params *out) {
    const tn_key *k0 = &t->keys[chain[0]];
    *out = k0->def;
    for (int i = 0; i < n; i++)
        if (t->keys[chain[i]].set) {
            *out = t->keys[chain[i]].v;
            break;
        }
    if (t->n_pins) overlay_pins(t, k0->name, k0->key, out);
}

int lt_tuning_get(const lt_tuning *t, const char *name, const char *key, lt_params *out) {
    char chain[CHAIN_MAX][LT_KEY_MAX];
    int idx[CHAIN_MAX], n = 0;
    const int nc = key_chain(name, key, chain);
    for (int i = 0; i < nc; i++) {
        int k = find_key(t, name, chain[i]);
        if (k >= 0) idx[n++] = k;
        else if (i == 0) break; /* not a key of this runtime: its defaults */
    }
    if (n) {
        value_of(t, idx, n, out);
        return LT_OK;
    }
    lt_param_def defs[LT_MAX_PARAMS];
    int nd;
    int rc = lt_tuning_space(name, t->pool_threads, defs, &nd);
    if (rc) return rc;
    defaults_of(defs, nd, out);
    overlay_pins(t, name, key, out);
    return LT_OK;
}

bool lt_tuning_has(const lt_tuning *t, const char *name, const char *key) {
    int k = find_key(t, name, key);
    return k >= 0 && t->keys[k].set;
}

bool lt_tuning_uses(const lt_tuning *t, const char *name, const char *key) {
    return find_key(t, name, key) >= 0;
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
        const tn_prog *tp = &t->progs[j];
        for (int i = 0; i < lt_program_n_nodes(tp->p); i++) {
            const tn_node *tn = &tp->nodes[i];
            if (!tn->n_chain || strcmp(t->keys[tn->chain[0]].name, name)) continue;
            lt_call trial = *lt_program_call(tp->p, i);
            value_of(t, tn->chain, tn->n_chain, &trial.params);
            if (lt_call_check(k->id, &trial)) {
                lt_node_info ni;
                lt_program_node(tp->p, i, &ni);
                return lt_error(LT_ECONFIG, "node %s: %s", ni.label ? ni.label : "?", lt_errmsg());
            }
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

/* Puts (set, v) on key k after checking the calls it reaches; on a refusal
 * puts back what was there. */
static int put(lt_tuning *t, int k, bool set, const lt_params *v) {
    tn_key *e = &t->keys[k];
    const tn_key saved = *e;
    e->set = set;
    if (set) e->v = *v;
    int rc = check_nodes(t, e->name);
    if (rc) {
        *e = saved;
        return rc;
    }
    t->gen++;
    return LT_OK;
}

int lt_tuning_set(lt_tuning *t, const char *name, const char *key, const lt_params *p) {
    lt_param_def defs[LT_MAX_PARAMS];
    int nd;
    int rc = known_name(t, name, defs, &nd);
    if (rc) return rc;
    if ((rc = lt_param_defs_validate(name, defs, nd, p))) return rc;
    const int k = key ? find_key(t, name, key) : -1;
    if (k < 0)
        return lt_error(LT_ENOTFOUND, "this model has no %s of shape %s", name, key ? key : "");
    lt_params v;
    memset(&v, 0, sizeof v);
    memcpy(v.v, p->v, (size_t)nd * sizeof v.v[0]); /* unused slots stay 0 */
    return put(t, k, true, &v);
}

int lt_tuning_unset(lt_tuning *t, const char *name, const char *key) {
    const int k = find_key(t, name, key);
    if (k < 0 || !t->keys[k].set) return LT_OK;
    return put(t, k, false, NULL); /* the defaults may not fit where a value did */
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
    const lt_params one = {{value}}; /* the one parameter, checked as a space of one */
    if ((rc = lt_param_defs_validate(name, &defs[idx], 1, &one))) return rc;
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
        t->threads_key[r] = t->n_keys - 1;
    }
    if (!rc) rc = lt__tuning_add_key(t, LT_TUNING_LOOPED, t->step_key[LT_REGIME_DECODE], false);
    t->looped_key = t->n_keys - 1;
    if (rc) {
        lt__tuning_free(t);
        return rc;
    }
    *out = t;
    return LT_OK;
}

void lt__tuning_free(lt_tuning *t) {
    if (!t) return;
    for (int i = 0; i < t->n_progs; i++) free(t->progs[i].nodes);
    free(t->keys);
    free(t);
}

/* The index of (name, key), added if new. */
static int add_key(lt_tuning *t, const char *name, const char *key, bool fallback) {
    int i = find_key(t, name, key);
    if (i >= 0) {
        t->keys[i].fallback &= fallback; /* a node's own key is listed */
        return i;
    }
    lt_param_def defs[LT_MAX_PARAMS];
    int nd;
    int rc = lt_tuning_space(name, t->pool_threads, defs, &nd);
    if (rc) return rc;
    if (t->n_keys == t->cap_keys) {
        int cap = t->cap_keys ? 2 * t->cap_keys : 32;
        tn_key *nk = realloc(t->keys, (size_t)cap * sizeof *nk);
        if (!nk) return lt_error(LT_ENOMEM, "tuning: out of memory");
        t->keys = nk;
        t->cap_keys = cap;
    }
    tn_key *k = &t->keys[t->n_keys];
    memset(k, 0, sizeof *k);
    snprintf(k->name, sizeof k->name, "%s", name);
    snprintf(k->key, sizeof k->key, "%s", key);
    k->fallback = fallback;
    defaults_of(defs, nd, &k->def);
    return t->n_keys++;
}

int lt__tuning_add_key(lt_tuning *t, const char *name, const char *key, bool fallback) {
    int rc = add_key(t, name, key, fallback);
    return rc < 0 ? rc : LT_OK;
}

/* The keys of every node of p with parameters (added if new), into nodes
 * (may be NULL: only learn them). */
static int resolve(lt_tuning *t, const lt_program *p, tn_node *nodes) {
    for (int i = 0; i < lt_program_n_nodes(p); i++) {
        lt_node_info ni;
        lt_program_node(p, i, &ni);
        tn_node tn = {.n_chain = 0};
        const lt_kernel *kd = lt_kernel_get(ni.kernel);
        if (kd->n_params > 0) {
            char key[LT_KEY_MAX], chain[CHAIN_MAX][LT_KEY_MAX];
            lt_call_key(ni.kernel, lt_program_call(p, i), key, sizeof key);
            const int n = key_chain(kd->name, key, chain);
            for (int j = 0; j < n; j++) {
                int k = add_key(t, kd->name, chain[j], j > 0);
                if (k < 0) return k;
                tn.chain[tn.n_chain++] = k;
            }
        }
        if (nodes) nodes[i] = tn;
    }
    return LT_OK;
}

int lt__tuning_learn(lt_tuning *t, const lt_program *p) { return resolve(t, p, NULL); }

int lt__tuning_attach(lt_tuning *t, lt_program *p) {
    if (t->n_progs == LT__TUNING_MAX_PROGRAMS)
        return lt_error(LT_ESTATE, "tuning: more than %d programs", LT__TUNING_MAX_PROGRAMS);
    const int n = lt_program_n_nodes(p);
    tn_node *nodes = calloc((size_t)(n ? n : 1), sizeof *nodes);
    if (!nodes) return lt_error(LT_ENOMEM, "tuning: out of memory");
    int rc = resolve(t, p, nodes);
    if (rc) {
        free(nodes);
        return rc;
    }
    t->progs[t->n_progs++] = (tn_prog){p, nodes};
    lt__tuning_apply(t, p);
    return LT_OK;
}

void lt__tuning_detach(lt_tuning *t, const lt_program *p) {
    for (int i = 0; i < t->n_progs; i++)
        if (t->progs[i].p == p) {
            free(t->progs[i].nodes);
            t->progs[i] = t->progs[--t->n_progs];
            return;
        }
}

int lt__tuning_apply(const lt_tuning *t, lt_program *p) {
    const tn_prog *tp = NULL;
    for (int i = 0; i < t->n_progs && !tp; i++)
        if (t->progs[i].p == p) tp = &t->progs[i];
    LT_ASSERT(tp != NULL); /* only attached programs */
    int changed = 0;
    for (int i = 0; i < lt_program_n_nodes(p); i++) {
        const tn_node *tn = &tp->nodes[i];
        if (!tn->n_chain) continue;
        lt_params v;
        value_of(t, tn->chain, tn->n_chain, &v);
        if (!memcmp(&v, &lt_program_call(p, i)->params, sizeof v)) continue;
        /* checked when set on the programs built then; one built since may
         * not take it (a constraint of its call): it keeps what it has */
        if (lt_program_set_params(p, i, &v)) {
            lt_node_info ni;
            lt_program_node(p, i, &ni);
            lt_log(LT_LOG_WARN, "tuning: node %s of %s keeps its parameters: %s",
                   ni.label ? ni.label : "?", lt_program_name(p), lt_errmsg());
            continue;
        }
        changed++;
    }
    return changed;
}

void lt_tuning_sync(lt_tuning *t) {
    for (int i = 0; i < t->n_progs; i++) lt__tuning_apply(t, t->progs[i].p);
}

int lt__tuning_threads(const lt_tuning *t, lt_regime r) {
    lt_params v;
    value_of(t, &t->threads_key[r], 1, &v);
    return v.v[0];
}

void lt__tuning_exec_params(const lt_tuning *t, lt_params *out) {
    value_of(t, &t->looped_key, 1, out);
}

/* The tune kind: one config store key of a model searched on this worker,
 * as `looptune tune` searches it (lt_tune_pass_*), answered with the Config
 * found (Result.data). The task's TuneSpec (Task.spec) names the model (a
 * path, or a file name looked up in the worker's models folder), its size
 * and the CRC32C of its first MiB (another file of that name is refused),
 * the host class (a worker of another class refuses: tune tasks travel on
 * their class's own topic, so this only catches a misrouted one), the key,
 * the search's strategy, budget, seed and threads, and the configurations
 * already tuned, put in force first. The last model stays open (its
 * weights resident) for the next task; each task builds its runtime anew,
 * so no task's tuning leaks into another's.
 *
 * Also the names of a host class's topic and group, and a model file's
 * identity. */
#include "looptune/dist.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ID_BYTES (1u << 20) /* the CRC32C of a model covers its first MiB */

/* ---- names and identities ------------------------------------------------------------ */

/* host_class with every character but [A-Za-z0-9-] as '_' after head. */
static int with_class(const char *head, const char *host_class, char *buf, size_t n) {
    if (!host_class || !*host_class) return lt_error(LT_EINVAL, "tune: no host class");
    int k = snprintf(buf, n, "%s", head);
    if (k < 0 || (size_t)k >= n) return lt_error(LT_EINVAL, "tune: '%s' is too long", head);
    size_t len = (size_t)k;
    for (const char *c = host_class; *c; c++) {
        if (len + 1 >= n)
            return lt_error(LT_EINVAL, "tune: host class '%s' is too long", host_class);
        bool keep = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                    (*c >= '0' && *c <= '9') || *c == '-';
        buf[len++] = keep ? *c : '_';
    }
    buf[len] = 0;
    return LT_OK;
}

int lt_dist_tune_topic(const char *prefix, const char *host_class, char *buf, size_t n) {
    char head[256];
    int k = snprintf(head, sizeof head, "%s%s.", prefix ? prefix : LT_KAFKA_TOPIC_PREFIX,
                     lt_kafka_topic_suffix(LT_TOPIC_TASKS));
    if (k < 0 || (size_t)k >= sizeof head) return lt_error(LT_EINVAL, "tune: prefix too long");
    int rc = with_class(head, host_class, buf, n);
    /* Kafka's limit on a topic's name */
    if (!rc && strlen(buf) > 249)
        return lt_error(LT_EINVAL, "tune: topic '%.60s...' is longer than Kafka's 249", buf);
    return rc;
}

int lt_dist_tune_group(const char *group, const char *host_class, char *buf, size_t n) {
    char head[300];
    int k = snprintf(head, sizeof head, "%s.", group);
    if (k < 0 || (size_t)k >= sizeof head) return lt_error(LT_EINVAL, "tune: group too long");
    return with_class(head, host_class, buf, n);
}

int lt_dist_ensure_tune_topic(const lt_kafka_conn *conn, const char *prefix,
                              const char *host_class, int32_t partitions) {
    char name[256];
    int rc = lt_dist_tune_topic(prefix, host_class, name, sizeof name);
    if (rc) return rc;
    lt_topic_spec spec = {.name = name, .partitions = partitions > 0 ? partitions : 6,
                          .replication = -1};
    lt_kafka_admin *a;
    if ((rc = lt_kafka_admin_open(&a, conn))) return rc;
    size_t created = 0;
    rc = lt_kafka_admin_create_topics(a, &spec, 1, 15000, &created);
    lt_kafka_admin_close(a);
    if (!rc && created)
        lt_log(LT_LOG_INFO, "dist: created %s (%d partitions), the tune tasks of host class %s",
               name, (int)spec.partitions, host_class);
    return rc;
}

int lt_dist_model_id(const char *path, uint64_t *bytes, uint32_t *crc32c) {
    struct stat sb;
    if (stat(path, &sb) != 0)
        return lt_error(errno == ENOENT ? LT_ENOTFOUND : LT_EIO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode)) return lt_error(LT_EIO, "%s: not a regular file", path);
    FILE *f = fopen(path, "rb");
    if (!f) return lt_error(LT_EIO, "%s: cannot open: %s", path, strerror(errno));
    uint8_t *buf = malloc(ID_BYTES);
    if (!buf) {
        fclose(f);
        return lt_error(LT_ENOMEM, "out of memory");
    }
    size_t got = fread(buf, 1, ID_BYTES, f);
    bool bad = ferror(f);
    fclose(f);
    if (bad || (got < ID_BYTES && (uint64_t)got != (uint64_t)sb.st_size)) {
        free(buf);
        return lt_error(LT_EIO, "%s: cannot read its first MiB", path);
    }
    *bytes = (uint64_t)sb.st_size;
    *crc32c = lt_crc32c(buf, got);
    free(buf);
    return LT_OK;
}

/* ---- the kind ------------------------------------------------------------------------ */

static struct {
    pthread_mutex_t mu;
    char models_dir[1024];
    char host_class[96];
    /* the last model, open */
    char path[1024];
    uint64_t bytes;
    uint32_t crc;
    lt_model *m;
    lt_pool *pool; /* when the task's threads are not the worker's */
} g = {.mu = PTHREAD_MUTEX_INITIALIZER};

int lt_dist_tune_setup(const char *models_dir, const char *host_class) {
    pthread_mutex_lock(&g.mu);
    int rc = LT_OK;
    g.models_dir[0] = g.host_class[0] = 0;
    if (models_dir && snprintf(g.models_dir, sizeof g.models_dir, "%s", models_dir) >=
                          (int)sizeof g.models_dir)
        rc = lt_error(LT_EINVAL, "models folder '%.60s...' is too long", models_dir);
    if (!rc && host_class && (!*host_class || strlen(host_class) >= sizeof g.host_class))
        rc = lt_error(LT_EINVAL, "bad host class '%s': 1..%zu characters", host_class,
                      sizeof g.host_class - 1);
    if (!rc && host_class) snprintf(g.host_class, sizeof g.host_class, "%s", host_class);
    pthread_mutex_unlock(&g.mu);
    return rc;
}

void lt_dist_tune_release(void) {
    pthread_mutex_lock(&g.mu);
    lt_model_close(g.m);
    g.m = NULL;
    g.path[0] = 0;
    lt_pool_free(g.pool);
    g.pool = NULL;
    pthread_mutex_unlock(&g.mu);
}

/* The model file the spec names, as this worker finds it. */
static int resolve(const Looptune__TuneSpec *s, char *path, size_t n) {
    const char *name = s->model;
    int k;
    if (g.models_dir[0]) {
        const char *slash = strrchr(name, '/');
        k = snprintf(path, n, "%s/%s", g.models_dir, slash ? slash + 1 : name);
    } else {
        k = snprintf(path, n, "%s", name);
    }
    if (k < 0 || (size_t)k >= n) return lt_error(LT_EINVAL, "model path too long");
    return LT_OK;
}

/* The model of the spec, open and resident (g.mu held). */
static int open_model(const Looptune__TuneSpec *s, lt_model **out) {
    char path[1024];
    int rc = resolve(s, path, sizeof path);
    if (rc) return rc;
    uint64_t bytes;
    uint32_t crc;
    rc = lt_dist_model_id(path, &bytes, &crc);
    if (rc == LT_ENOTFOUND)
        return lt_error(rc, "model %s not found on this worker (a tune job's model must be at "
                        "that path on every worker, or under a worker's --models-dir)", path);
    if (rc) return lt_error(rc, "model %s: %s", path, lt_errmsg());
    if (bytes != s->model_bytes || crc != s->model_crc32c)
        return lt_error(LT_EINVAL, "model %s is not the job's: %llu bytes, CRC32C of its first "
                        "MiB %08x; the job's model: %llu bytes, %08x", path,
                        (unsigned long long)bytes, crc, (unsigned long long)s->model_bytes,
                        s->model_crc32c);
    if (g.m && !strcmp(g.path, path) && g.bytes == bytes && g.crc == crc) {
        *out = g.m;
        return LT_OK;
    }
    lt_model_close(g.m);
    g.m = NULL;
    g.path[0] = 0;
    lt_model *m;
    if ((rc = lt_model_open(&m, path, NULL)))
        return lt_error(rc, "model %s: %s", path, lt_errmsg());
    /* the weights copied into memory, as `looptune tune` and `run` have them */
    if ((rc = lt_model_make_resident(m))) {
        lt_model_close(m);
        return lt_error(rc, "model %s: %s", path, lt_errmsg());
    }
    g.m = m;
    snprintf(g.path, sizeof g.path, "%s", path);
    g.bytes = bytes;
    g.crc = crc;
    *out = m;
    return LT_OK;
}

/* A pool of the task's threads: the worker's, or one kept here (g.mu held). */
static int pool_of(lt_pool *worker_pool, int threads, lt_pool **out) {
    if (worker_pool && lt_pool_size(worker_pool) == threads) {
        *out = worker_pool;
        return LT_OK;
    }
    if (!g.pool || lt_pool_size(g.pool) != threads) {
        lt_pool_free(g.pool);
        g.pool = NULL;
        int rc = lt_pool_init(&g.pool, threads);
        if (rc) return rc;
    }
    *out = g.pool;
    return LT_OK;
}

/* The configurations tuned before this key, in force in l's tuning context. */
static int put_in_force(lt_llama *l, const Looptune__TuneSpec *s) {
    for (size_t i = 0; i < s->n_in_force; i++) {
        Looptune__Envelope env;
        lt_envelope_init(&env);
        env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_CONFIG;
        env.config = s->in_force[i];
        lt_config_entry e;
        lt_space sp;
        lt_params p;
        int rc = lt_config_from_envelope(&env, &e);
        if (!rc) rc = lt_space_by_name(e.kernel, &sp);
        if (!rc) rc = lt_space_parse(&sp, e.params, &p);
        if (!rc) rc = lt_tuning_set(lt_llama_tuning(l), e.kernel, e.shape, &p);
        if (rc) return lt_error(rc, "configuration in force %zu: %s", i, lt_errmsg());
    }
    return LT_OK;
}

/* Runs the spec's search; fills the entry for host_class. */
static int search(const Looptune__TuneSpec *s, lt_pool *worker_pool, const char *host_class,
                  lt_tune_result *r) {
    lt_strategy_kind kind;
    int rc = lt_strategy_parse(s->strategy, &kind);
    if (rc) return rc;
    lt_model *m = NULL;
    lt_pool *pool = NULL;
    if ((rc = open_model(s, &m))) return rc;
    if ((rc = pool_of(worker_pool, (int)s->threads, &pool))) return rc;
    lt_llama *l = NULL;
    lt_llama_opts lo = {.executor = LT_EXEC_LOOPED};
    if ((rc = lt_llama_init(&l, m, pool, &lo)))
        return lt_error(rc, "cannot build the program: %s", lt_errmsg());
    lt_tune_pass *tp = NULL;
    rc = put_in_force(l, s);
    if (!rc && (int64_t)s->tokens > lt_llama_max_batch(l))
        rc = lt_error(LT_EINVAL, "a step of %u tokens: the model's runtime takes %lld", s->tokens,
                      (long long)lt_llama_max_batch(l));
    if (!rc && (rc = lt_tune_pass_open(&tp, l, pool, s->tokens)))
        rc = lt_error(rc, "cannot evaluate the model: %s", lt_errmsg());
    lt_tune_opts to = {.strategy = kind, .budget = (int)s->budget, .seed = s->seed};
    lt_host_detect(&to.host);
    snprintf(to.host.host_class, sizeof to.host.host_class, "%s", host_class);
    if (!rc) {
        if (!strcmp(s->kernel, LT_TUNING_LOOPED)) {
            rc = lt_tune_pass_search_looped(tp, &to, r);
        } else if (!strcmp(s->kernel, LT_TUNING_THREADS)) {
            rc = lt_tune_pass_search_threads(tp, &to, r);
        } else {
            int i = lt_tune_pass_find(tp, s->kernel, s->shape);
            rc = i < 0 ? lt_error(LT_ENOTFOUND, "the model's program of %u-token steps has no "
                                  "%s %s", s->tokens, s->kernel, s->shape)
                       : lt_tune_pass_search(tp, i, &to, r);
        }
    }
    if (!rc && strcmp(r->shape, s->shape))
        rc = lt_error(LT_EINVAL, "this worker's key is %s %s, the task's %s", r->kernel, r->shape,
                      s->shape);
    lt_tune_pass_close(tp);
    lt_llama_free(l);
    return rc;
}

int lt_dist_tune_run(const lt_dist_task_in *in, uint8_t **data, size_t *len) {
    *data = NULL;
    *len = 0;
    const Looptune__Task *t = in->task;
    if (!t->spec.len) return lt_error(LT_EFORMAT, "tune task: no spec");
    Looptune__TuneSpec *s = looptune__tune_spec__unpack(NULL, t->spec.len, t->spec.data);
    if (!s) return lt_error(LT_EFORMAT, "tune task: its spec is no TuneSpec");
    int rc = LT_OK;
    if (!*s->model || !*s->kernel || !*s->shape || !*s->host_class)
        rc = lt_error(LT_EFORMAT, "tune task: model, kernel, shape and host class are required");
    else if (s->tokens < 1 || s->budget < 1 || s->budget > 100000 || s->threads < 1 ||
             s->threads > 256)
        rc = lt_error(LT_EFORMAT, "tune task: tokens %u, budget %u, threads %u: expected >= 1, "
                      "1..100000, 1..256", s->tokens, s->budget, s->threads);
    pthread_mutex_lock(&g.mu);
    lt_host me;
    lt_host_detect(&me);
    char host_class[96];
    snprintf(host_class, sizeof host_class, "%s", g.host_class[0] ? g.host_class : me.host_class);
    if (!rc && strcmp(s->host_class, host_class))
        rc = lt_error(LT_EINVAL, "a tune task for host class %s on a worker of host class %s: "
                      "refused (a configuration holds for the class it was measured on)",
                      s->host_class, host_class);
    uint64_t t0 = lt_now_ns();
    lt_tune_result r;
    if (!rc) rc = search(s, in->pool, host_class, &r);
    pthread_mutex_unlock(&g.mu);
    if (!rc) {
        lt_config_entry e;
        lt_tune_result_entry(&r, host_class, (int)s->budget, &e);
        lt_config_msg msg;
        rc = lt_config_to_envelope(&e, &msg);
        if (!rc) rc = lt_envelope_encode(&msg.env, data, len);
        if (!rc)
            lt_log(LT_LOG_INFO, "tune %s/%llu: %s %s: %d trial%s, %.3fx (%s) in %.1f s",
                   t->job_id, (unsigned long long)t->task_index, r.kernel, r.shape, r.trials,
                   r.trials == 1 ? "" : "s", r.speedup, r.params,
                   (double)(lt_now_ns() - t0) * 1e-9);
    }
    looptune__tune_spec__free_unpacked(s, NULL);
    return rc;
}

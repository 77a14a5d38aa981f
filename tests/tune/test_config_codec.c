/* Config store entries as wire records: entry -> Config envelope -> bytes ->
 * envelope -> entry gives back every field; the message holds one Param per
 * parameter of the space with the values of the entry's text; parameters in
 * any order come back in the space's; a Config that would not pass
 * lt_store_put is refused with the reason; the file backend keeps its seven
 * columns (trials and converged load as 0 and false). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "looptune/tune.h"
#include "test.h"

static const char *MV = "rows_per_task=64,unroll=2,k_block=256,prefetch=4096,"
                        "act_int16=1,act_int8=1,tok_chunk_kb=512";

static lt_config_entry entry(const char *kernel, const char *shape, const char *params) {
    lt_config_entry e;
    memset(&e, 0, sizeof e);
    snprintf(e.kernel, sizeof e.kernel, "%s", kernel);
    snprintf(e.shape, sizeof e.shape, "%s", shape);
    snprintf(e.host, sizeof e.host, "%s", "Intel-Xeon-8481C:avx512:2c");
    snprintf(e.params, sizeof e.params, "%s", params);
    e.median_ns = 21934.123456789; /* not round: doubles must survive exactly */
    e.samples = 48;
    e.speedup = 1.0 / 0.77;
    e.trials = 4000000000LL; /* above INT32_MAX: the wire field is uint32 */
    e.converged = true;
    return e;
}

static void expect_same(const lt_config_entry *a, const lt_config_entry *b) {
    ASSERT_STREQ(a->kernel, b->kernel);
    ASSERT_STREQ(a->shape, b->shape);
    ASSERT_STREQ(a->host, b->host);
    ASSERT_STREQ(a->params, b->params);
    ASSERT_TRUE(a->median_ns == b->median_ns);
    ASSERT_EQ(a->samples, b->samples);
    ASSERT_TRUE(a->speedup == b->speedup);
    ASSERT_EQ(a->trials, b->trials);
    ASSERT_EQ(a->converged, b->converged);
}

/* entry -> envelope -> bytes -> envelope -> entry */
static int through_wire(const lt_config_entry *in, lt_config_entry *out) {
    lt_config_msg m;
    int rc = lt_config_to_envelope(in, &m);
    if (rc) return rc;
    uint8_t *buf;
    size_t len;
    if ((rc = lt_envelope_encode(&m.env, &buf, &len))) return rc;
    Looptune__Envelope *env;
    rc = lt_envelope_decode(buf, len, &env);
    free(buf);
    if (rc) return rc;
    rc = lt_config_from_envelope(env, out);
    lt_envelope_free(env);
    return rc;
}

static void test_roundtrip(void) {
    const lt_config_entry cases[] = {
        entry("matvec", "q8_0:288x768:decode", MV),
        entry("matmul", "f32:64x288:prefill", "n_block=12,m_block=32,k_block=64"),
        entry("looped", "llama:d288:h768:l6:q8_0:t2:decode",
              "tiles_per_thread=8,prefetch_kb=64,sync=0,min_task_kb=32"),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        lt_config_entry back;
        ASSERT_EQ(through_wire(&cases[i], &back), LT_OK);
        expect_same(&cases[i], &back);
    }
    /* converged false and trials 0 survive as well (proto3 leaves them out) */
    lt_config_entry z = cases[0], back;
    z.trials = 0;
    z.converged = false;
    ASSERT_EQ(through_wire(&z, &back), LT_OK);
    expect_same(&z, &back);
}

static void test_message_fields(void) {
    lt_config_entry e = entry("matvec", "q8_0:288x768:decode", MV);
    lt_config_msg m;
    ASSERT_EQ(lt_config_to_envelope(&e, &m), LT_OK);
    ASSERT_EQ(m.env.version, LT_PROTO_VERSION);
    ASSERT_EQ(m.env.payload_case, LOOPTUNE__ENVELOPE__PAYLOAD_CONFIG);
    ASSERT_STREQ(m.env.config->kernel, "matvec");
    ASSERT_STREQ(m.env.config->host_class, "Intel-Xeon-8481C:avx512:2c");
    /* the values of MV, written out by hand */
    static const char *const names[] = {"rows_per_task", "unroll", "k_block", "prefetch",
                                        "act_int16", "act_int8", "tok_chunk_kb"};
    static const int64_t values[] = {64, 2, 256, 4096, 1, 1, 512};
    ASSERT_EQ(m.env.config->n_params, 7);
    for (size_t i = 0; i < 7 && i < m.env.config->n_params; i++) {
        ASSERT_STREQ(m.env.config->params[i]->name, names[i]);
        ASSERT_EQ(m.env.config->params[i]->value, values[i]);
    }
    ASSERT_EQ(m.env.config->stats->trials, 4000000000u);
    ASSERT_TRUE(m.env.config->stats->converged);
    ASSERT_EQ(m.env.config->stats->samples, 48);
    ASSERT_TRUE(m.env.config->stats->gb_s == 0);
    char key[256];
    lt_envelope_key(&m.env, key, sizeof key);
    ASSERT_STREQ(key, "matvec|q8_0:288x768:decode|Intel-Xeon-8481C:avx512:2c");
    /* the JSON a Python reader would see names the new fields */
    char *json = NULL;
    ASSERT_EQ(lt_envelope_to_json(&m.env, &json), LT_OK);
    ASSERT_TRUE(json && strstr(json, "\"trials\":4000000000") && strstr(json, "\"converged\":true"));
    free(json);
}

static void test_order_and_refusals(void) {
    lt_config_entry e = entry("matvec", "q8_0:288x768:decode", MV), out;
    lt_config_msg m;
    ASSERT_EQ(lt_config_to_envelope(&e, &m), LT_OK);
    /* reversed order in the message: canonical order back */
    Looptune__Param *rev[7];
    for (int i = 0; i < 7; i++) rev[i] = m.pp[6 - i];
    m.cfg.params = rev;
    ASSERT_EQ(lt_config_from_envelope(&m.env, &out), LT_OK);
    ASSERT_STREQ(out.params, MV);
    m.cfg.params = m.pp;

    /* a value outside the space (unroll 3), then outside int32 */
    m.prm[1].value = 3;
    ASSERT_EQ(lt_config_from_envelope(&m.env, &out), LT_ECONFIG);
    ASSERT_TRUE(strstr(lt_errmsg(), "unroll") != NULL);
    m.prm[1].value = 2 + (INT64_C(1) << 32);
    ASSERT_EQ(lt_config_from_envelope(&m.env, &out), LT_ECONFIG);
    m.prm[1].value = 2;
    /* a parameter missing, one given twice, an unknown one, a name with '=' */
    m.cfg.n_params = 5;
    ASSERT_EQ(lt_config_from_envelope(&m.env, &out), LT_ECONFIG);
    ASSERT_TRUE(strstr(lt_errmsg(), "act_int8") != NULL);
    /* a parameter of one regime only (a record from before it existed):
     * its default */
    m.cfg.n_params = 6;
    ASSERT_EQ(lt_config_from_envelope(&m.env, &out), LT_OK);
    ASSERT_STREQ(out.params, "rows_per_task=64,unroll=2,k_block=256,prefetch=4096,act_int16=1,"
                             "act_int8=1,tok_chunk_kb=256");
    m.cfg.n_params = 7;
    m.pp[5] = &m.prm[0];
    ASSERT_EQ(lt_config_from_envelope(&m.env, &out), LT_ECONFIG);
    m.pp[5] = &m.prm[5];
    char bogus[] = "bogus", eq[] = "unroll=2";
    m.prm[5].name = bogus;
    ASSERT_EQ(lt_config_from_envelope(&m.env, &out), LT_ECONFIG);
    m.prm[5].name = eq;
    ASSERT_EQ(lt_config_from_envelope(&m.env, &out), LT_EFORMAT);
    m.prm[5].name = m.names[5];
    ASSERT_EQ(lt_config_from_envelope(&m.env, &out), LT_OK);
    /* an unknown kernel; stats missing or not positive */
    char nokernel[] = "conv3d";
    m.cfg.kernel = nokernel;
    ASSERT_EQ(lt_config_from_envelope(&m.env, &out), LT_ENOTFOUND);
    m.cfg.kernel = e.kernel;
    m.cfg.stats = NULL;
    ASSERT_EQ(lt_config_from_envelope(&m.env, &out), LT_EFORMAT);
    m.cfg.stats = &m.stats;
    m.stats.samples = 0;
    ASSERT_EQ(lt_config_from_envelope(&m.env, &out), LT_EINVAL);
    m.stats.samples = 48;
    m.stats.median_ns = -1;
    ASSERT_EQ(lt_config_from_envelope(&m.env, &out), LT_EINVAL);
    m.stats.median_ns = 1;
    /* a shape longer than the entry holds; blanks in the host */
    char longshape[200];
    memset(longshape, 'x', sizeof longshape - 1);
    longshape[sizeof longshape - 1] = 0;
    m.cfg.shape = longshape;
    ASSERT_EQ(lt_config_from_envelope(&m.env, &out), LT_EFORMAT);
    m.cfg.shape = e.shape;
    char blank[] = "cpu A";
    m.cfg.host_class = blank;
    ASSERT_EQ(lt_config_from_envelope(&m.env, &out), LT_EINVAL);
    m.cfg.host_class = e.host;
    ASSERT_EQ(lt_config_from_envelope(&m.env, &out), LT_OK);
    /* another payload */
    Looptune__Host host = LOOPTUNE__HOST__INIT;
    Looptune__Envelope he;
    lt_envelope_init(&he);
    he.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_HOST;
    he.host = &host;
    ASSERT_EQ(lt_config_from_envelope(&he, &out), LT_EFORMAT);
    ASSERT_TRUE(strstr(lt_errmsg(), "host") != NULL);

    /* to_envelope validates too: params outside the space, trials out of range */
    lt_config_entry bad = entry("matvec", "s", MV);
    snprintf(bad.params, sizeof bad.params, "rows_per_task=3,unroll=1,k_block=0,prefetch=0,"
                                            "act_int16=1,act_int8=1");
    ASSERT_EQ(lt_config_to_envelope(&bad, &m), LT_ECONFIG);
    bad = entry("matvec", "s", MV);
    bad.trials = -1;
    ASSERT_EQ(lt_config_to_envelope(&bad, &m), LT_EINVAL);
    bad.trials = (int64_t)UINT32_MAX + 1;
    ASSERT_EQ(lt_config_to_envelope(&bad, &m), LT_EINVAL);
}

/* The file keeps seven columns: trials and converged come back as 0/false. */
static void test_file_columns(void) {
    char path[600];
    const char *dir = getenv("LT_WORK_DIR");
    snprintf(path, sizeof path, "%s/codec-%ld.tsv", dir && *dir ? dir : "/tmp", (long)getpid());
    lt_store_backend be;
    lt_store *s;
    ASSERT_EQ(lt_store_backend_file(&be, path), LT_OK);
    ASSERT_EQ(lt_store_open(&s, &be, NULL), LT_OK);
    lt_config_entry e = entry("matvec", "q8_0:288x768:decode", MV);
    e.median_ns = 1234.5;
    e.speedup = 1.25;
    ASSERT_EQ(lt_store_put(s, &e), LT_OK);
    ASSERT_EQ(lt_store_save(s), LT_OK);
    lt_store_close(s);
    ASSERT_EQ(lt_store_backend_file(&be, path), LT_OK);
    ASSERT_EQ(lt_store_open(&s, &be, NULL), LT_OK);
    ASSERT_EQ(lt_store_count(s), 1);
    const lt_config_entry *g = lt_store_at(s, 0);
    if (g) {
        lt_config_entry want = e;
        want.trials = 0;
        want.converged = false;
        expect_same(g, &want);
    }
    lt_store_close(s);
    FILE *f = fopen(path, "r");
    char line[512];
    int tabs = -1;
    while (f && fgets(line, sizeof line, f))
        if (line[0] != '#') {
            tabs = 0;
            for (char *c = line; *c; c++) tabs += *c == '\t';
        }
    if (f) fclose(f);
    ASSERT_EQ(tabs, 6);
    unlink(path);
}

int main(void) {
    test_roundtrip();
    test_message_fields();
    test_order_and_refusals();
    test_file_columns();
    return lt_test_finish();
}

/* Tensors in records: CRC32C against the published check values (RFC 3720
 * B.4), chunking and reassembly in any order, and every way a chunk set can
 * be wrong (corrupted, missing, foreign) reported, never assembled short;
 * the matmul kind's tile equals the whole product bit for bit and a float64
 * reference within f32 rounding. */
#include "looptune/dist.h"

#include <stdlib.h>

#include "test.h"

static void test_crc32c(void) {
    ASSERT_EQ(lt_crc32c("123456789", 9), 0xE3069283u);
    uint8_t buf[32];
    memset(buf, 0, sizeof buf);
    ASSERT_EQ(lt_crc32c(buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, sizeof buf);
    ASSERT_EQ(lt_crc32c(buf, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++) buf[i] = (uint8_t)i;
    ASSERT_EQ(lt_crc32c(buf, 32), 0x46DD794Eu);
    ASSERT_EQ(lt_crc32c(buf, 0), 0u);
}

/* Decodes every record of o; chunks go into b (in the order given by perm),
 * the last record must be a Result whose first output is returned. */
static Looptune__Envelope *feed(const lt_dist_outbox *o, lt_dist_blobs *b, const size_t *perm) {
    Looptune__Envelope *last = NULL;
    for (size_t i = 0; i < o->n; i++) {
        size_t k = perm ? perm[i] : i;
        Looptune__Envelope *env;
        ASSERT_EQ(lt_envelope_decode(o->values[k], o->lens[k], &env), LT_OK);
        if (env->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_CHUNK) {
            ASSERT_TRUE(o->lens[k] < 1000000); /* below Kafka's default record limit */
            ASSERT_EQ(lt_dist_blobs_add(b, env->chunk, 0, (int64_t)k), LT_OK);
            lt_envelope_free(env);
        } else {
            lt_envelope_free(last);
            last = env;
        }
    }
    return last;
}

/* A result with one tensor of n floats, chunked at chunk bytes. */
static void make(lt_dist_outbox *o, float *data, int64_t rows, int64_t cols, size_t chunk) {
    lt_dist_tensor t = {.name = "c", .ndim = 2, .shape = {rows, cols}, .data = data};
    lt_dist_route r = {.job_id = "j1", .task_index = 7, .attempt = 1, .chunk_bytes = chunk,
                       .key = "j1/7"};
    Looptune__Tensor msg = LOOPTUNE__TENSOR__INIT, *outs[1] = {&msg};
    int64_t shape[4];
    ASSERT_EQ(lt_dist_tensor_put(&t, &r, o, &msg, shape), LT_OK);
    Looptune__Result res = LOOPTUNE__RESULT__INIT;
    res.job_id = "j1";
    res.task_index = 7;
    res.status = LOOPTUNE__STATUS__STATUS_OK;
    res.n_outputs = 1;
    res.outputs = outs;
    Looptune__Envelope env;
    lt_envelope_init(&env);
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_RESULT;
    env.result = &res;
    ASSERT_EQ(lt_dist_outbox_add(o, "j1/7", &env), LT_OK);
}

static void test_roundtrip(void) {
    /* 600 x 1000 floats = 2.4 MB: over Kafka's record limit, five chunks */
    const int64_t rows = 600, cols = 1000, n = rows * cols;
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)(i % 977) * 0.25f - 50.0f;
    lt_dist_outbox o = {0};
    make(&o, x, rows, cols, 0);
    ASSERT_EQ(o.n, 6); /* ceil(2.4e6 / 524288) = 5 chunks, then the result */
    lt_dist_blobs *b;
    ASSERT_EQ(lt_dist_blobs_init(&b, 0), LT_OK);
    size_t perm[6] = {3, 1, 4, 0, 2, 5}; /* chunks in any order */
    Looptune__Envelope *env = feed(&o, b, perm);
    ASSERT_EQ(lt_dist_blobs_count(b), 1);
    ASSERT_EQ(lt_dist_blobs_min_offset(b, 0), 0);
    lt_dist_tensor t;
    ASSERT_EQ(lt_dist_tensor_get(b, env->result->outputs[0], n, &t), LT_OK);
    ASSERT_EQ(t.shape[0], rows);
    ASSERT_EQ(t.shape[1], cols);
    ASSERT_TRUE(t.data && !memcmp(t.data, x, (size_t)n * sizeof *x));
    ASSERT_EQ(lt_dist_blobs_count(b), 0); /* claimed */
    ASSERT_EQ(lt_dist_blobs_min_offset(b, 0), -1);
    free(t.data);
    /* a limit on the elements refuses the tensor */
    lt_envelope_free(env);
    lt_dist_blobs_free(b);
    lt_dist_outbox_free(&o);

    /* small: inline, no chunk record */
    make(&o, x, 10, 10, 0);
    ASSERT_EQ(o.n, 1);
    ASSERT_EQ(lt_dist_blobs_init(&b, 0), LT_OK);
    env = feed(&o, b, NULL);
    ASSERT_EQ(lt_dist_tensor_get(b, env->result->outputs[0], 1000, &t), LT_OK);
    ASSERT_TRUE(!memcmp(t.data, x, 100 * sizeof *x));
    free(t.data);
    ASSERT_EQ(lt_dist_tensor_get(b, env->result->outputs[0], 50, &t), LT_EFORMAT);
    ASSERT_TRUE(strstr(lt_errmsg(), "shape out of range") != NULL);
    lt_envelope_free(env);
    lt_dist_blobs_free(b);
    lt_dist_outbox_free(&o);
    free(x);
}

/* Flips one byte of the data of chunk record k (its CRC32C field unchanged). */
static void corrupt(lt_dist_outbox *o, size_t k) {
    Looptune__Envelope *env;
    ASSERT_EQ(lt_envelope_decode(o->values[k], o->lens[k], &env), LT_OK);
    env->chunk->data.data[17] ^= 0x40;
    free(o->values[k]);
    ASSERT_EQ(lt_envelope_encode(env, &o->values[k], &o->lens[k]), LT_OK);
    lt_envelope_free(env);
}

static void test_bad_chunks(void) {
    const int64_t rows = 64, cols = 256, n = rows * cols; /* 64 KiB: 4 chunks of 16 KiB */
    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = (float)i;
    lt_dist_tensor t;
    lt_dist_blobs *b;

    /* a corrupted chunk: named, with both CRCs */
    lt_dist_outbox o = {0};
    make(&o, x, rows, cols, 16384);
    ASSERT_EQ(o.n, 5);
    corrupt(&o, 2);
    ASSERT_EQ(lt_dist_blobs_init(&b, 0), LT_OK);
    Looptune__Envelope *env = feed(&o, b, NULL);
    ASSERT_EQ(lt_dist_tensor_get(b, env->result->outputs[0], n, &t), LT_EFORMAT);
    ASSERT_TRUE(strstr(lt_errmsg(), "chunk 3 of 4: CRC32C mismatch") != NULL);
    ASSERT_TRUE(t.data == NULL);
    lt_envelope_free(env);
    lt_dist_blobs_free(b);

    /* a missing chunk: named */
    ASSERT_EQ(lt_dist_blobs_init(&b, 0), LT_OK);
    size_t skip1[5] = {0, 2, 3, 4, 4};
    lt_dist_outbox_free(&o);
    make(&o, x, rows, cols, 16384);
    env = NULL;
    for (size_t i = 0; i < 4; i++) {
        Looptune__Envelope *e;
        ASSERT_EQ(lt_envelope_decode(o.values[skip1[i]], o.lens[skip1[i]], &e), LT_OK);
        if (e->payload_case == LOOPTUNE__ENVELOPE__PAYLOAD_CHUNK) {
            ASSERT_EQ(lt_dist_blobs_add(b, e->chunk, 3, 100 + (int64_t)i), LT_OK);
            lt_envelope_free(e);
        } else {
            env = e;
        }
    }
    ASSERT_EQ(lt_dist_blobs_min_offset(b, 3), 100);
    ASSERT_EQ(lt_dist_tensor_get(b, env->result->outputs[0], n, &t), LT_EFORMAT);
    ASSERT_TRUE(strstr(lt_errmsg(), "chunk 2 of 4 missing") != NULL);
    lt_envelope_free(env);

    /* chunks of another blob with a count that changed, an index past the count */
    Looptune__Chunk c = LOOPTUNE__CHUNK__INIT;
    c.blob_id = 42;
    c.count = 2;
    c.index = 2;
    ASSERT_EQ(lt_dist_blobs_add(b, &c, 0, 1), LT_EFORMAT);
    c.index = 0;
    ASSERT_EQ(lt_dist_blobs_add(b, &c, 0, 1), LT_OK);
    c.count = 3;
    ASSERT_EQ(lt_dist_blobs_add(b, &c, 0, 2), LT_EFORMAT);
    c.blob_id = 0;
    ASSERT_EQ(lt_dist_blobs_add(b, &c, 0, 2), LT_EFORMAT);
    /* a revoked partition's chunks are forgotten */
    ASSERT_EQ(lt_dist_blobs_count(b), 1);
    lt_dist_blobs_drop_partition(b, 0);
    ASSERT_EQ(lt_dist_blobs_count(b), 0);
    lt_dist_blobs_free(b);

    /* a tensor whose inline bytes were altered: the whole tensor's CRC */
    lt_dist_outbox_free(&o);
    make(&o, x, 4, 4, 0);
    ASSERT_EQ(lt_dist_blobs_init(&b, 0), LT_OK);
    env = feed(&o, b, NULL);
    env->result->outputs[0]->data.data[3] ^= 1;
    ASSERT_EQ(lt_dist_tensor_get(b, env->result->outputs[0], n, &t), LT_EFORMAT);
    ASSERT_TRUE(strstr(lt_errmsg(), "CRC32C mismatch") != NULL);
    /* a shape that disagrees with the bytes, a dtype that is not f32 */
    env->result->outputs[0]->shape[0] = 5;
    ASSERT_EQ(lt_dist_tensor_get(b, env->result->outputs[0], n, &t), LT_EFORMAT);
    ASSERT_TRUE(strstr(lt_errmsg(), "announced") != NULL);
    char *dtype = env->result->outputs[0]->dtype;
    env->result->outputs[0]->dtype = "f64";
    ASSERT_EQ(lt_dist_tensor_get(b, env->result->outputs[0], n, &t), LT_EFORMAT);
    ASSERT_TRUE(strstr(lt_errmsg(), "dtype") != NULL);
    env->result->outputs[0]->dtype = dtype;
    lt_envelope_free(env);
    lt_dist_blobs_free(b);
    lt_dist_outbox_free(&o);
    free(x);
}

/* Converted tensors travel as their dtype's bytes (f16: 2 a value, q8_0: 34
 * per 32), chunked or inline, and come back with their dtype; a q8_0 row
 * that is no multiple of 32 is refused on both sides. */
static void test_dtypes(void) {
    const int64_t rows = 64, cols = 4096; /* f16: 512 KiB, two chunks; q8_0: 139264 bytes */
    float *x = malloc((size_t)(rows * cols) * sizeof *x);
    for (int64_t i = 0; i < rows * cols; i++) x[i] = (float)(i % 613) * 0.01f - 3.0f;
    static const lt_dtype dts[] = {LT_F16, LT_BF16, LT_Q8_0};
    for (size_t d = 0; d < 3; d++) {
        size_t rb = lt_dtype_row_bytes(dts[d], cols);
        uint8_t *raw = malloc(rb * (size_t)rows);
        for (int64_t i = 0; i < rows; i++)
            lt_row_from_f32(dts[d], x + i * cols, raw + (size_t)i * rb, cols);
        lt_dist_tensor t = {.name = "b_t", .ndim = 2, .shape = {rows, cols},
                            .data = (float *)raw, .dtype = dts[d]};
        ASSERT_EQ(lt_dist_tensor_bytes(&t), rb * (size_t)rows);
        lt_dist_route r = {.job_id = "j1", .task_index = 1, .attempt = 1, .key = "j1/1",
                           .chunk_bytes = 256 * 1024};
        lt_dist_outbox o = {0};
        Looptune__Tensor msg = LOOPTUNE__TENSOR__INIT;
        int64_t shape[4];
        ASSERT_EQ(lt_dist_tensor_put(&t, &r, &o, &msg, shape), LT_OK);
        ASSERT_STREQ(msg.dtype, lt_dtype_name(dts[d]));
        ASSERT_EQ(msg.nbytes, rb * (size_t)rows);
        ASSERT_EQ(o.n, (rb * (size_t)rows + 256 * 1024 - 1) / (256 * 1024));
        lt_dist_blobs *b;
        ASSERT_EQ(lt_dist_blobs_init(&b, 0), LT_OK);
        for (size_t i = 0; i < o.n; i++) {
            Looptune__Envelope *env;
            ASSERT_EQ(lt_envelope_decode(o.values[i], o.lens[i], &env), LT_OK);
            ASSERT_EQ(lt_dist_blobs_add(b, env->chunk, 0, (int64_t)i), LT_OK);
            lt_envelope_free(env);
        }
        lt_dist_tensor back;
        ASSERT_EQ(lt_dist_tensor_get(b, &msg, rows * cols, &back), LT_OK);
        ASSERT_EQ(back.dtype, dts[d]);
        ASSERT_TRUE(back.data && !memcmp(back.data, raw, rb * (size_t)rows));
        free(back.data);
        lt_dist_blobs_free(b);
        lt_dist_outbox_free(&o);
        free(raw);
    }
    /* q8_0 rows of 40 elements: no whole blocks */
    uint8_t junk[34 * 4] = {0};
    lt_dist_tensor bad = {.name = "a", .ndim = 2, .shape = {2, 40}, .data = (float *)junk,
                          .dtype = LT_Q8_0};
    ASSERT_EQ(lt_dist_tensor_bytes(&bad), 0);
    lt_dist_route r = {.job_id = "j1", .task_index = 1, .attempt = 1, .key = "j1/1"};
    lt_dist_outbox o = {0};
    Looptune__Tensor msg = LOOPTUNE__TENSOR__INIT;
    int64_t shape[4];
    ASSERT_EQ(lt_dist_tensor_put(&bad, &r, &o, &msg, shape), LT_EINVAL);
    Looptune__Tensor in = LOOPTUNE__TENSOR__INIT;
    int64_t sh[2] = {2, 40};
    in.name = "a";
    in.dtype = "q8_0";
    in.n_shape = 2;
    in.shape = sh;
    in.nbytes = 34 * 4;
    in.data.data = junk;
    in.data.len = sizeof junk;
    lt_dist_tensor t;
    ASSERT_EQ(lt_dist_tensor_get(NULL, &in, 1000, &t), LT_EFORMAT);
    ASSERT_TRUE(strstr(lt_errmsg(), "a multiple of 32") != NULL);
    lt_dist_outbox_free(&o);
    free(x);
}

/* The matmul kind on converted panels: b_t in f16 or q8_0 is the kernel's
 * weight as it came, a is widened first; the result equals the product of
 * the widened operands within f32 rounding, and the f32 product within the
 * conversion's error. */
static void test_matmul_dtypes(void) {
    const int64_t m = 24, n = 40, k = 128;
    float *a = malloc((size_t)(m * k) * sizeof *a), *bt = malloc((size_t)(n * k) * sizeof *bt);
    float *c = malloc((size_t)(m * n) * sizeof *c);
    uint64_t s = 99;
    for (int64_t i = 0; i < m * k; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        a[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    for (int64_t i = 0; i < n * k; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        bt[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    lt_pool *pool;
    ASSERT_EQ(lt_pool_init(&pool, 1), LT_OK);
    static const lt_dtype dts[] = {LT_F16, LT_Q8_0};
    for (size_t d = 0; d < 2; d++) {
        size_t rb = lt_dtype_row_bytes(dts[d], k);
        uint8_t *qa = malloc(rb * (size_t)m), *qb = malloc(rb * (size_t)n);
        float *wa = malloc((size_t)(m * k) * sizeof *wa), *wb = malloc((size_t)(n * k) * sizeof *wb);
        for (int64_t i = 0; i < m; i++) {
            lt_row_from_f32(dts[d], a + i * k, qa + (size_t)i * rb, k);
            lt_row_to_f32(dts[d], qa + (size_t)i * rb, wa + i * k, k);
        }
        for (int64_t i = 0; i < n; i++) {
            lt_row_from_f32(dts[d], bt + i * k, qb + (size_t)i * rb, k);
            lt_row_to_f32(dts[d], qb + (size_t)i * rb, wb + i * k, k);
        }
        lt_dist_tensor ins[2] = {
            {.name = "a", .ndim = 2, .shape = {m, k}, .data = (float *)qa, .dtype = dts[d]},
            {.name = "b_t", .ndim = 2, .shape = {n, k}, .data = (float *)qb, .dtype = dts[d]},
        };
        Looptune__Task task = LOOPTUNE__TASK__INIT;
        lt_dist_task_in in = {.task = &task, .inputs = ins, .n_inputs = 2, .pool = pool};
        lt_dist_tensor out[LT_DIST_MAX_OUTPUTS];
        size_t n_out = 0;
        ASSERT_EQ(lt_dist_kind_find("matmul")->run(&in, out, &n_out), LT_OK);
        ASSERT_EQ(n_out, 1);
        ASSERT_EQ(out[0].dtype, LT_F32);
        ASSERT_EQ(lt_dist_matmul_dt(pool, wa, qb, dts[d], m, n, k, c), LT_OK);
        ASSERT_TRUE(!memcmp(c, out[0].data, (size_t)(m * n) * sizeof *c));
        double worst_w = 0, worst_f = 0;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double rw = 0, rf = 0;
                for (int64_t l = 0; l < k; l++) {
                    rw += (double)wa[i * k + l] * wb[j * k + l];
                    rf += (double)a[i * k + l] * bt[j * k + l];
                }
                double g = out[0].data[i * n + j];
                if (fabs(rw - g) > worst_w) worst_w = fabs(rw - g);
                if (fabs(rf - g) > worst_f) worst_f = fabs(rf - g);
            }
        ASSERT_TRUE(worst_w < 1e-4);
        /* f16: 2^-11 relative per operand; q8_0: 1/254 of a block's absmax */
        ASSERT_TRUE(worst_f < (dts[d] == LT_F16 ? 0.05 : 0.5));
        ASSERT_TRUE(worst_f > 0);
        free(out[0].data);
        free(qa);
        free(qb);
        free(wa);
        free(wb);
    }
    lt_pool_free(pool);
    free(a);
    free(bt);
    free(c);
}

/* A tile of the product equals the same rows and columns of the whole one
 * bit for bit, and both a float64 reference within f32 rounding. */
static void test_matmul_tiles(void) {
    const int64_t m = 96, n = 80, k = 200, i0 = 32, mt = 40, j0 = 16, nt = 48;
    float *a = malloc((size_t)(m * k) * sizeof *a), *bt = malloc((size_t)(n * k) * sizeof *bt);
    float *c = malloc((size_t)(m * n) * sizeof *c), *ct = malloc((size_t)(mt * nt) * sizeof *ct);
    uint64_t s = 12345;
    for (int64_t i = 0; i < m * k; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        a[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    for (int64_t i = 0; i < n * k; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        bt[i] = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    for (int nth = 1; nth <= 2; nth++) {
        lt_pool *pool;
        ASSERT_EQ(lt_pool_init(&pool, nth), LT_OK);
        ASSERT_EQ(lt_dist_matmul(pool, a, bt, m, n, k, c), LT_OK);
        ASSERT_EQ(lt_dist_matmul(pool, a + i0 * k, bt + j0 * k, mt, nt, k, ct), LT_OK);
        int64_t diff = 0;
        double worst = 0;
        for (int64_t i = 0; i < mt; i++)
            for (int64_t j = 0; j < nt; j++)
                diff += memcmp(&ct[i * nt + j], &c[(i0 + i) * n + j0 + j], sizeof(float)) != 0;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                double r = 0;
                for (int64_t l = 0; l < k; l++) r += (double)a[i * k + l] * bt[j * k + l];
                double d = fabs(r - c[i * n + j]);
                if (d > worst) worst = d;
            }
        ASSERT_EQ(diff, 0);
        ASSERT_TRUE(worst < 1e-4); /* k = 200 products of |x| < 1: f32 rounding ~ k * 2^-24 */
        lt_pool_free(pool);
    }
    free(a);
    free(bt);
    free(c);
    free(ct);
}

int main(void) {
    test_crc32c();
    test_roundtrip();
    test_bad_chunks();
    test_matmul_tiles();
    test_dtypes();
    test_matmul_dtypes();
    return lt_test_finish();
}

/* The worker's panel cache: a carried panel is kept and serves later
 * references by id; a reference to a panel it does not hold, or to another
 * tensor under the id, is LT_ENOTFOUND (the task then asks for it again);
 * the least recently used panels go first beyond the byte bound; a revoked
 * partition's panels go unless another partition brought them too. */
#include "looptune/dist.h"

#include <stdlib.h>

#include "test.h"

/* A 2-D f32 tensor of rows x cols filled from seed. */
static lt_dist_tensor make(const char *name, int64_t rows, int64_t cols, float seed) {
    lt_dist_tensor t = {.ndim = 2, .shape = {rows, cols}};
    snprintf(t.name, sizeof t.name, "%s", name);
    t.data = malloc((size_t)(rows * cols) * sizeof(float));
    for (int64_t i = 0; i < rows * cols; i++) t.data[i] = seed + (float)i;
    return t;
}

/* The reference a later task carries for panel id of t. */
static void ref_of(const lt_dist_tensor *t, uint64_t id, Looptune__Tensor *msg, int64_t *shape) {
    looptune__tensor__init(msg);
    msg->name = (char *)t->name;
    msg->dtype = (char *)lt_dtype_name(t->dtype);
    msg->n_shape = (size_t)t->ndim;
    for (int i = 0; i < t->ndim; i++) shape[i] = t->shape[i];
    msg->shape = shape;
    msg->nbytes = lt_dist_tensor_bytes(t);
    msg->crc32c = lt_crc32c(t->data, msg->nbytes);
    msg->panel_id = id;
    msg->panel_ref = true;
}

static void test_hit_miss(void) {
    lt_dist_panels *c;
    ASSERT_EQ(lt_dist_panels_init(&c, 0), LT_OK);
    lt_dist_tensor a = make("a", 8, 16, 1.0f);
    ASSERT_EQ(lt_dist_panels_put(c, 77, 2, &a, lt_crc32c(a.data, 8 * 16 * 4)), LT_OK);
    ASSERT_EQ(lt_dist_panels_count(c), 1);
    ASSERT_EQ(lt_dist_panels_bytes(c), 8 * 16 * 4);
    Looptune__Tensor msg;
    int64_t shape[4];
    ref_of(&a, 77, &msg, shape);
    lt_dist_tensor got;
    ASSERT_EQ(lt_dist_panels_get(c, &msg, &got), LT_OK);
    ASSERT_TRUE(got.data != a.data && !memcmp(got.data, a.data, 8 * 16 * 4));
    ASSERT_EQ(got.shape[0], 8);
    ASSERT_EQ(got.dtype, LT_F32);
    free(got.data);
    /* another id: a miss, named */
    msg.panel_id = 78;
    ASSERT_EQ(lt_dist_panels_get(c, &msg, &got), LT_ENOTFOUND);
    ASSERT_TRUE(strstr(lt_errmsg(), "panel 000000000000004e is not in this worker's cache"));
    ASSERT_TRUE(got.data == NULL);
    /* the id with another CRC32C or shape: not this panel */
    msg.panel_id = 77;
    msg.crc32c ^= 1;
    ASSERT_EQ(lt_dist_panels_get(c, &msg, &got), LT_ENOTFOUND);
    ASSERT_TRUE(strstr(lt_errmsg(), "another tensor") != NULL);
    msg.crc32c ^= 1;
    shape[0] = 4;
    shape[1] = 32;
    ASSERT_EQ(lt_dist_panels_get(c, &msg, &got), LT_ENOTFOUND);
    ASSERT_EQ(lt_dist_panels_get(NULL, &msg, &got), LT_ENOTFOUND);
    /* revoking a partition it did not come from keeps it; its own drops it,
     * unless another partition brought it too */
    lt_dist_panels_drop_partition(c, 3);
    ASSERT_EQ(lt_dist_panels_count(c), 1);
    ASSERT_EQ(lt_dist_panels_put(c, 77, 3, &a, lt_crc32c(a.data, 8 * 16 * 4)), LT_OK);
    ASSERT_EQ(lt_dist_panels_count(c), 1);
    lt_dist_panels_drop_partition(c, 2);
    ASSERT_EQ(lt_dist_panels_count(c), 1);
    lt_dist_panels_drop_partition(c, 3);
    ASSERT_EQ(lt_dist_panels_count(c), 0);
    ASSERT_EQ(lt_dist_panels_bytes(c), 0);
    free(a.data);
    lt_dist_panels_free(c);
}

static void test_lru(void) {
    const size_t one = 64 * 64 * 4; /* 16 KiB a panel; room for two */
    lt_dist_panels *c;
    ASSERT_EQ(lt_dist_panels_init(&c, 2 * one + 100), LT_OK);
    lt_dist_tensor p[3] = {make("a", 64, 64, 0), make("a", 64, 64, 5), make("a", 64, 64, 9)};
    Looptune__Tensor msg[3];
    int64_t shape[3][4];
    for (int i = 0; i < 3; i++) ref_of(&p[i], 100 + (uint64_t)i, &msg[i], shape[i]);
    lt_dist_tensor got;
    ASSERT_EQ(lt_dist_panels_put(c, 100, 0, &p[0], msg[0].crc32c), LT_OK);
    ASSERT_EQ(lt_dist_panels_put(c, 101, 0, &p[1], msg[1].crc32c), LT_OK);
    ASSERT_EQ(lt_dist_panels_get(c, &msg[0], &got), LT_OK); /* 100 used last: 101 goes */
    free(got.data);
    ASSERT_EQ(lt_dist_panels_put(c, 102, 0, &p[2], msg[2].crc32c), LT_OK);
    ASSERT_EQ(lt_dist_panels_count(c), 2);
    ASSERT_TRUE(lt_dist_panels_bytes(c) <= 2 * one + 100);
    ASSERT_EQ(lt_dist_panels_get(c, &msg[1], &got), LT_ENOTFOUND);
    ASSERT_EQ(lt_dist_panels_get(c, &msg[0], &got), LT_OK);
    free(got.data);
    ASSERT_EQ(lt_dist_panels_get(c, &msg[2], &got), LT_OK);
    free(got.data);
    lt_dist_panels_free(c);
    /* a panel above the whole bound is not kept */
    ASSERT_EQ(lt_dist_panels_init(&c, one / 2), LT_OK);
    ASSERT_EQ(lt_dist_panels_put(c, 100, 0, &p[0], msg[0].crc32c), LT_OK);
    ASSERT_EQ(lt_dist_panels_count(c), 0);
    lt_dist_panels_free(c);
    for (int i = 0; i < 3; i++) free(p[i].data);
}

/* A task's input: the carried panel (chunked) is assembled and kept, a later
 * reference is served from the cache, a reference after the partition was
 * revoked is LT_ENOTFOUND; a broken carried panel is its own error and not
 * kept. */
static void test_input_get(void) {
    lt_dist_tensor a = make("a", 64, 256, 3.0f); /* 64 KiB: 4 chunks of 16 KiB */
    lt_dist_route r = {.job_id = "j", .task_index = 0, .attempt = 1, .chunk_bytes = 16384,
                       .key = "j/0"};
    lt_dist_outbox o = {0};
    Looptune__Tensor carried = LOOPTUNE__TENSOR__INIT;
    int64_t shape[4];
    ASSERT_EQ(lt_dist_tensor_put(&a, &r, &o, &carried, shape), LT_OK);
    carried.panel_id = 0xabc;
    ASSERT_EQ(o.n, 4);
    lt_dist_blobs *b;
    lt_dist_panels *c;
    ASSERT_EQ(lt_dist_blobs_init(&b, 0), LT_OK);
    ASSERT_EQ(lt_dist_panels_init(&c, 0), LT_OK);
    for (size_t i = 0; i < o.n; i++) {
        Looptune__Envelope *env;
        ASSERT_EQ(lt_envelope_decode(o.values[i], o.lens[i], &env), LT_OK);
        ASSERT_EQ(lt_dist_blobs_add(b, env->chunk, 5, (int64_t)i), LT_OK);
        lt_envelope_free(env);
    }
    lt_dist_tensor t;
    ASSERT_EQ(lt_dist_input_get(b, c, &carried, 5, 1 << 20, &t), LT_OK);
    ASSERT_TRUE(!memcmp(t.data, a.data, 64 * 256 * 4));
    free(t.data);
    ASSERT_EQ(lt_dist_blobs_count(b), 0);
    ASSERT_EQ(lt_dist_panels_count(c), 1);
    Looptune__Tensor ref;
    int64_t rshape[4];
    ref_of(&a, 0xabc, &ref, rshape);
    ASSERT_EQ(lt_dist_input_get(b, c, &ref, 5, 1 << 20, &t), LT_OK);
    ASSERT_TRUE(!memcmp(t.data, a.data, 64 * 256 * 4));
    free(t.data);
    lt_dist_panels_drop_partition(c, 5);
    ASSERT_EQ(lt_dist_input_get(b, c, &ref, 5, 1 << 20, &t), LT_ENOTFOUND);
    /* carried again, with its chunks missing: the tensor's error, nothing kept */
    ASSERT_EQ(lt_dist_input_get(b, c, &carried, 5, 1 << 20, &t), LT_EFORMAT);
    ASSERT_TRUE(strstr(lt_errmsg(), "none of its 4 chunks arrived") != NULL);
    ASSERT_EQ(lt_dist_panels_count(c), 0);
    lt_dist_outbox_free(&o);
    lt_dist_blobs_free(b);
    lt_dist_panels_free(c);
    free(a.data);
}

int main(void) {
    test_hit_miss();
    test_lru();
    test_input_get();
    return lt_test_finish();
}

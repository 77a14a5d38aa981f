/* The mlp-digits objective: the digits file read and split (sizes, every
 * digit in every set, the file's first image found intact in one set, a
 * malformed file refused with its line), the MLP's gradients against
 * central finite differences of its loss (independent of backpropagation),
 * and training: a sound configuration reaches a validation and test
 * accuracy well above what a poor one reaches, every epoch is reported, a
 * stop after epoch 3 stops it, and the same seed gives the same result. */
#include <math.h>
#include <unistd.h>

#include "hpo/hpo_internal.h"
#include "test.h"

/* The first line of digits.csv.gz: a 0. */
static const int first_image[64] = {0, 0, 5,  13, 9, 1,  0,  0, 0, 0, 13, 15, 10, 15, 5, 0,
                                    0, 3, 15, 2,  0, 11, 8,  0, 0, 4, 12, 0,  0,  8,  8, 0,
                                    0, 5, 8,  0,  0, 9,  8,  0, 0, 4, 11, 0,  1,  12, 7, 0,
                                    0, 2, 14, 5,  10, 12, 0, 0, 0, 0, 6,  13, 10, 0,  0, 0};

static void test_load(const lt_hpo_digits *d, const char *dir) {
    ASSERT_EQ(d->train.n, 1078);
    ASSERT_EQ(d->val.n, 359);
    ASSERT_EQ(d->test.n, 360);
    const lt_hpo_digits_set *sets[3] = {&d->train, &d->val, &d->test};
    int found = 0;
    for (int s = 0; s < 3; s++) {
        int count[10] = {0};
        for (int i = 0; i < sets[s]->n; i++) {
            count[sets[s]->y[i]]++;
            const float *x = &sets[s]->x[(size_t)i * 64];
            bool same = sets[s]->y[i] == 0;
            for (int k = 0; k < 64 && same; k++) same = x[k] == first_image[k] / 16.0f;
            found += same;
        }
        for (int k = 0; k < 10; k++) ASSERT_TRUE(count[k] >= 20);
    }
    ASSERT_EQ(found, 1);
    /* a malformed file: its line named */
    char path[600];
    snprintf(path, sizeof path, "%s/hpo_digits_bad_%d.csv", dir, (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f) return;
    for (int i = 0; i < 3; i++) {
        for (int k = 0; k < 64; k++) fprintf(f, "%d,", i == 2 && k == 5 ? 17 : 1);
        fprintf(f, "3\n");
    }
    fclose(f);
    lt_hpo_digits bad;
    ASSERT_EQ(lt_hpo_digits_load(path, &bad), LT_EFORMAT);
    ASSERT_TRUE(strstr(lt_errmsg(), ":3: expected 64 pixel counts") != NULL);
    remove(path);
    ASSERT_EQ(lt_hpo_digits_load("/nonexistent/digits.csv.gz", &bad), LT_EIO);
    lt_hpo_digits_free(&bad);
}

typedef struct {
    int calls;
    int64_t last;
    int stop_after;
} epochs_seen;

static int on_epoch(void *ctx, int64_t epoch, double acc) {
    epochs_seen *e = ctx;
    e->calls++;
    if (epoch != e->last + 1 || !(acc >= 0 && acc <= 1)) e->calls = -1000;
    e->last = epoch;
    return e->stop_after && epoch >= e->stop_after;
}

static void test_train(const lt_hpo_digits *d) {
    lt_mlp_config c;
    lt_mlp_config_default(&c);
    c.epochs = 15;
    c.hidden = 48;
    c.lr = 3e-3;
    epochs_seen e = {0};
    double va, ta;
    ASSERT_EQ(lt_mlp_train(d, &c, on_epoch, &e, &va, &ta), LT_OK);
    printf("adam, 1 x 48 relu, 15 epochs: validation %.4f, test %.4f\n", va, ta);
    ASSERT_EQ(e.calls, 15);
    ASSERT_TRUE(va > 0.93);
    ASSERT_TRUE(ta > 0.92);
    double va2, ta2;
    ASSERT_EQ(lt_mlp_train(d, &c, NULL, NULL, &va2, &ta2), LT_OK);
    ASSERT_NEAR(va2, va, 0); /* deterministic */
    ASSERT_NEAR(ta2, ta, 0);
    /* tanh, 2 layers, momentum, dropout: also learns */
    lt_mlp_config m = c;
    m.layers = 2;
    m.act = LT_MLP_TANH;
    m.opt = LT_MLP_MOMENTUM;
    m.lr = 0.02;
    m.dropout = 0.2;
    m.epochs = 10;
    ASSERT_EQ(lt_mlp_train(d, &m, NULL, NULL, &va2, &ta2), LT_OK);
    printf("momentum, 2 x 48 tanh, dropout 0.2, 10 epochs: validation %.4f, test %.4f\n", va2, ta2);
    ASSERT_TRUE(va2 > 0.9);
    /* a poor one: plain SGD at a tiny rate, 2 epochs */
    lt_mlp_config p = c;
    p.opt = LT_MLP_SGD;
    p.lr = 1e-4;
    p.epochs = 2;
    ASSERT_EQ(lt_mlp_train(d, &p, NULL, NULL, &va2, &ta2), LT_OK);
    printf("sgd at 1e-4, 2 epochs: validation %.4f\n", va2);
    ASSERT_TRUE(va2 < va - 0.2);
    /* stopped after epoch 3 */
    epochs_seen s = {.stop_after = 3};
    ASSERT_EQ(lt_mlp_train(d, &c, on_epoch, &s, &va2, NULL), LT_OK);
    ASSERT_EQ(s.calls, 3);
}

static void test_config(void) {
    lt_hpo_space *s = NULL;
    ASSERT_EQ(lt_hpo_space_parse(lt_hpo_mlp_digits_space, "mlp", &s), LT_OK);
    if (!s) return;
    double v[6];
    for (int i = 0; i < 6; i++) v[i] = NAN;
    v[lt_hpo_space_find(s, "lr")] = 0.01;
    v[lt_hpo_space_find(s, "hidden")] = 32;
    v[lt_hpo_space_find(s, "layers")] = 2;
    v[lt_hpo_space_find(s, "dropout")] = 0.25;
    v[lt_hpo_space_find(s, "opt")] = 1;
    v[lt_hpo_space_find(s, "activation")] = 1;
    ASSERT_TRUE(lt_hpo_space_valid(s, v));
    lt_mlp_config c;
    lt_mlp_config_default(&c);
    ASSERT_EQ(lt_mlp_config_from(s, v, &c), LT_OK);
    ASSERT_NEAR(c.lr, 0.01, 0);
    ASSERT_EQ(c.hidden, 32);
    ASSERT_EQ(c.layers, 2);
    ASSERT_EQ(c.opt, LT_MLP_MOMENTUM);
    ASSERT_EQ(c.act, LT_MLP_TANH);
    ASSERT_EQ(c.epochs, 20);
    lt_hpo_space_free(s);
    ASSERT_EQ(lt_hpo_space_parse("{\"opt\": {\"type\": \"categorical\", \"choices\": [\"rmsprop\"]}}", "x", &s), LT_OK);
    double o[1] = {0};
    ASSERT_EQ(lt_mlp_config_from(s, o, &c), LT_ECONFIG);
    ASSERT_TRUE(strstr(lt_errmsg(), "'rmsprop' is not one of sgd, momentum, adam") != NULL);
    lt_hpo_space_free(s);
}

static void test_gradients(const lt_hpo_digits *d) {
    lt_mlp_config c;
    lt_mlp_config_default(&c);
    c.hidden = 8;
    c.layers = 2;
    c.act = LT_MLP_TANH; /* smooth: no kink for the differences to straddle */
    double worst = lt__mlp_grad_check(&d->train, 5, &c);
    printf("gradient vs finite differences (tanh, 2 x 8): worst relative difference %.2e\n", worst);
    ASSERT_TRUE(worst < 5e-3);
    c.act = LT_MLP_RELU;
    c.layers = 1;
    c.hidden = 12;
    worst = lt__mlp_grad_check(&d->train, 5, &c);
    printf("gradient vs finite differences (relu, 1 x 12): worst relative difference %.2e\n", worst);
    ASSERT_TRUE(worst < 1e-2);
}

int main(void) {
    const char *data = getenv("LT_DATA_DIR"), *work = getenv("LT_WORK_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/digits.csv.gz", data ? data : "tests/data");
    lt_hpo_digits d;
    int rc = lt_hpo_digits_load(path, &d);
    ASSERT_EQ(rc, LT_OK);
    if (rc) {
        fprintf(stderr, "%s\n", lt_errmsg());
        return lt_test_finish();
    }
    test_load(&d, work ? work : "/tmp");
    test_config();
    test_gradients(&d);
    test_train(&d);
    lt_hpo_digits_free(&d);
    return lt_test_finish();
}

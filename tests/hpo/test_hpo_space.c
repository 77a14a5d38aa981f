/* Search spaces: valid spaces parse, order parents first, and round-trip
 * between configurations and the unit cube (conditionals included); every
 * kind of malformed space is refused with a message naming the entry and
 * what is wrong. */
#include <math.h>
#include <unistd.h>

#include "looptune/hpo.h"
#include "test.h"

static const char *const example =
    "{\"units3\": {\"type\": \"int\", \"low\": 16, \"high\": 256, \"when\": {\"layers\": [3, 4]}},"
    " \"lr\": {\"type\": \"float\", \"low\": 1e-4, \"high\": 0.3, \"log\": true},"
    " \"layers\": {\"type\": \"int\", \"low\": 1, \"high\": 4},"
    " \"mom\": {\"type\": \"float\", \"low\": 0.5, \"high\": 0.99, \"when\": {\"opt\": [\"momentum\"]}},"
    " \"batch\": {\"type\": \"int\", \"low\": 16, \"high\": 512, \"log\": true},"
    " \"width\": {\"type\": \"int\", \"low\": 8, \"high\": 64, \"step\": 8},"
    " \"opt\": {\"type\": \"categorical\", \"choices\": [\"sgd\", \"momentum\", \"adam\"]},"
    " \"bits\": {\"type\": \"categorical\", \"choices\": [4, 8, 16]}}";

static void test_parse_example(void) {
    lt_hpo_space *s = NULL;
    ASSERT_EQ(lt_hpo_space_parse(example, "ex.json", &s), LT_OK);
    if (!s) return;
    ASSERT_EQ(lt_hpo_space_size(s), 8);
    int units3 = lt_hpo_space_find(s, "units3"), layers = lt_hpo_space_find(s, "layers");
    int opt = lt_hpo_space_find(s, "opt"), mom = lt_hpo_space_find(s, "mom");
    ASSERT_TRUE(units3 >= 0 && layers >= 0 && opt >= 0 && mom >= 0);
    ASSERT_TRUE(layers < units3); /* parents first */
    ASSERT_TRUE(opt < mom);
    ASSERT_EQ(lt_hpo_space_find(s, "nope"), -1);
    const lt_hpo_param *p = lt_hpo_space_param(s, lt_hpo_space_find(s, "lr"));
    ASSERT_EQ(p->kind, LT_HPO_FLOAT);
    ASSERT_TRUE(p->log);
    ASSERT_NEAR(p->low, 1e-4, 0);
    p = lt_hpo_space_param(s, units3);
    ASSERT_EQ(p->n_when, 1);
    ASSERT_EQ(p->when[0].parent, layers);
    ASSERT_EQ(p->when[0].n_values, 2);
    p = lt_hpo_space_param(s, mom);
    ASSERT_EQ(p->when[0].values[0], 1); /* "momentum" is choice 1 */
    p = lt_hpo_space_param(s, lt_hpo_space_find(s, "bits"));
    ASSERT_EQ(p->n_choices, 3);
    ASSERT_STREQ(p->choices[2], "16");
    ASSERT_TRUE(p->numeric[2]);
    lt_hpo_space_free(s);
}

/* Random points of the cube decode into valid configurations, which encode
 * and decode back to themselves; every value of the ints and choices
 * appears; conditionals are active exactly when their parent allows. */
static void test_round_trip(void) {
    lt_hpo_space *s = NULL;
    ASSERT_EQ(lt_hpo_space_parse(example, "ex.json", &s), LT_OK);
    if (!s) return;
    int n = lt_hpo_space_size(s);
    int layers = lt_hpo_space_find(s, "layers"), units3 = lt_hpo_space_find(s, "units3");
    int width = lt_hpo_space_find(s, "width"), opt = lt_hpo_space_find(s, "opt");
    int mom = lt_hpo_space_find(s, "mom"), batch = lt_hpo_space_find(s, "batch");
    int lr = lt_hpo_space_find(s, "lr");
    lt_hpo_rng r;
    lt_hpo_rng_seed(&r, 7);
    double u[8], v[8], u2[8], v2[8];
    int seen_layers[5] = {0}, seen_width[65] = {0}, seen_opt[3] = {0}, bad = 0, bad_rt = 0;
    int bad_cond = 0;
    double lr_min = 1, lr_max = 0, batch_min = 1e9, batch_max = 0;
    int lr_low_decade = 0;
    for (int t = 0; t < 20000; t++) {
        for (int i = 0; i < n; i++) u[i] = lt_hpo_rng_uniform(&r);
        lt_hpo_space_decode(s, u, v);
        if (!lt_hpo_space_valid(s, v)) bad++;
        lt_hpo_space_encode(s, v, u2);
        lt_hpo_space_decode(s, u2, v2);
        for (int i = 0; i < n; i++) {
            const lt_hpo_param *p = lt_hpo_space_param(s, i);
            bool same = (isnan(v[i]) && isnan(v2[i])) ||
                        (p->kind == LT_HPO_FLOAT ? fabs(v[i] - v2[i]) <= 1e-12 * fabs(v[i])
                                                 : v[i] == v2[i]);
            if (!same) bad_rt++;
        }
        seen_layers[(int)v[layers]]++;
        seen_width[(int)v[width]]++;
        seen_opt[(int)v[opt]]++;
        if (isnan(v[units3]) != !(v[layers] == 3 || v[layers] == 4)) bad_cond++;
        if (isnan(v[mom]) != (v[opt] != 1)) bad_cond++;
        lr_min = fmin(lr_min, v[lr]);
        lr_max = fmax(lr_max, v[lr]);
        lr_low_decade += v[lr] < 1e-3;
        batch_min = fmin(batch_min, v[batch]);
        batch_max = fmax(batch_max, v[batch]);
    }
    ASSERT_EQ(bad, 0);
    ASSERT_EQ(bad_rt, 0);
    ASSERT_EQ(bad_cond, 0);
    for (int k = 1; k <= 4; k++) ASSERT_TRUE(seen_layers[k] > 4000);
    for (int k = 8; k <= 64; k++) ASSERT_EQ(seen_width[k] > 0, k % 8 == 0);
    for (int k = 0; k < 3; k++) ASSERT_TRUE(seen_opt[k] > 6000);
    ASSERT_TRUE(lr_min >= 1e-4 && lr_max <= 0.3);
    /* log scale: [1e-4, 1e-3) is 1 decade of log10(3000) = 3.48, ~29% */
    ASSERT_NEAR(lr_low_decade / 20000.0, 1.0 / log10(3000.0), 0.02);
    ASSERT_EQ(batch_min, 16);
    ASSERT_EQ(batch_max, 512);
    /* the cube's corners reach the ends */
    for (int i = 0; i < n; i++) u[i] = 0;
    lt_hpo_space_decode(s, u, v);
    ASSERT_NEAR(v[lr], 1e-4, 1e-15);
    ASSERT_EQ(v[layers], 1);
    ASSERT_TRUE(isnan(v[units3]));
    for (int i = 0; i < n; i++) u[i] = 1;
    lt_hpo_space_decode(s, u, v);
    ASSERT_NEAR(v[lr], 0.3, 1e-15);
    ASSERT_EQ(v[layers], 4);
    ASSERT_EQ(v[units3], 256);
    ASSERT_EQ(v[width], 64);
    /* invalid configurations */
    for (int i = 0; i < n; i++) u[i] = 0.5;
    lt_hpo_space_decode(s, u, v);
    ASSERT_TRUE(lt_hpo_space_valid(s, v));
    memcpy(v2, v, sizeof v);
    v2[width] = 12; /* off step */
    ASSERT_TRUE(!lt_hpo_space_valid(s, v2));
    memcpy(v2, v, sizeof v);
    v2[lr] = 0.5;
    ASSERT_TRUE(!lt_hpo_space_valid(s, v2));
    memcpy(v2, v, sizeof v);
    v2[layers] = 1; /* units3 must then be inactive */
    ASSERT_TRUE(isnan(v[units3]) || !lt_hpo_space_valid(s, v2));
    ASSERT_TRUE(lt_hpo_config_equal(s, v, v));
    ASSERT_TRUE(!lt_hpo_config_equal(s, v, v2) || isnan(v[units3]));
    lt_hpo_space_free(s);
}

static void test_format(void) {
    lt_hpo_space *s = NULL;
    ASSERT_EQ(lt_hpo_space_parse("{\"lr\": {\"type\": \"float\", \"low\": 0, \"high\": 1},"
                                 " \"n\": {\"type\": \"int\", \"low\": 1, \"high\": 9},"
                                 " \"o\": {\"type\": \"categorical\", \"choices\": [\"a\\\"b\", 2.5]},"
                                 " \"c\": {\"type\": \"int\", \"low\": 1, \"high\": 9, \"when\": {\"o\": [2.5]}}}",
                                 "f.json", &s),
              LT_OK);
    if (!s) return;
    double v[4] = {0.1, 3, 0, NAN};
    char buf[64];
    lt_hpo_value_format(s, lt_hpo_space_find(s, "lr"), 0.1, buf, sizeof buf);
    ASSERT_STREQ(buf, "0.1");
    lt_hpo_value_format(s, lt_hpo_space_find(s, "n"), 3, buf, sizeof buf);
    ASSERT_STREQ(buf, "3");
    lt_hpo_value_format(s, lt_hpo_space_find(s, "o"), 1, buf, sizeof buf);
    ASSERT_STREQ(buf, "2.5");
    ASSERT_TRUE(lt_hpo_space_valid(s, v));
    char *j = lt_hpo_config_json(s, v);
    ASSERT_TRUE(j != NULL);
    if (j) ASSERT_STREQ(j, "{\"lr\": 0.10000000000000001, \"n\": 3, \"o\": \"a\\\"b\"}");
    free(j);
    v[2] = 1;
    v[3] = 4;
    ASSERT_TRUE(lt_hpo_space_valid(s, v));
    j = lt_hpo_config_json(s, v);
    if (j) ASSERT_TRUE(strstr(j, "\"o\": 2.5, \"c\": 4") != NULL);
    free(j);
    lt_hpo_space_free(s);
}

/* text refused, with the message that must be part of the error */
static void refused(const char *text, const char *want) {
    lt_hpo_space *s = (lt_hpo_space *)1;
    int rc = lt_hpo_space_parse(text, "bad.json", &s);
    lt_test_checks++;
    if (rc != LT_EFORMAT || s != NULL) {
        LT__FAIL("accepted (rc %d): %s", rc, text);
        lt_hpo_space_free(rc == LT_OK ? s : NULL);
        return;
    }
    const char *m = lt_errmsg();
    if (!strstr(m, want) || strncmp(m, "bad.json", 8) != 0 || strchr(m, '\n'))
        LT__FAIL("message '%s' lacks '%s' (for %s)", m, want, text);
}

static void test_refused(void) {
    refused("[1, 2]", "bad.json: the space must be a JSON object");
    refused("{}", "bad.json: the space has no parameters");
    refused("{\"a\": ", "bad.json:1:");
    refused("{\"a\": 3}", "bad.json:a: not an object");
    refused("{\"a\": {\"low\": 1}}", "bad.json:a: \"type\" is required");
    refused("{\"a\": {\"type\": 4}}", "bad.json:a: \"type\" must be a string");
    refused("{\"a\": {\"type\": \"double\", \"low\": 0, \"high\": 1}}",
            "bad.json:a: unknown type 'double'");
    refused("{\"a\": {\"type\": \"float\", \"low\": 1, \"high\": 1}}",
            "bad.json:a: \"low\" (1) must be below \"high\" (1)");
    refused("{\"a\": {\"type\": \"float\", \"low\": 2, \"high\": 1}}", "must be below");
    refused("{\"a\": {\"type\": \"float\", \"low\": 0}}", "bad.json:a: \"low\" and \"high\" are required");
    refused("{\"a\": {\"type\": \"float\", \"low\": \"0\", \"high\": 1}}", "must be numbers");
    refused("{\"a\": {\"type\": \"float\", \"low\": 0, \"high\": 1, \"log\": true}}",
            "bad.json:a: \"log\" needs \"low\" > 0");
    refused("{\"a\": {\"type\": \"float\", \"low\": -1, \"high\": 1, \"log\": true}}", "needs \"low\" > 0");
    refused("{\"a\": {\"type\": \"int\", \"low\": 0, \"high\": 8, \"log\": true}}", "needs \"low\" >= 1");
    refused("{\"a\": {\"type\": \"float\", \"low\": 0, \"high\": 1, \"log\": 1}}", "\"log\" must be true or false");
    refused("{\"a\": {\"type\": \"int\", \"low\": 0.5, \"high\": 8}}", "must be integers");
    refused("{\"a\": {\"type\": \"int\", \"low\": 0, \"high\": 8, \"step\": 0}}", "\"step\" must be a positive integer");
    refused("{\"a\": {\"type\": \"int\", \"low\": 0, \"high\": 8, \"step\": 9}}", "larger than the range");
    refused("{\"a\": {\"type\": \"float\", \"low\": 0, \"high\": 8, \"step\": 1}}", "bad.json:a: unknown key 'step'");
    refused("{\"a\": {\"type\": \"float\", \"low\": 0, \"high\": 8, \"lo\": 1}}", "bad.json:a: unknown key 'lo'");
    refused("{\"a\": {\"type\": \"categorical\", \"choices\": []}}", "bad.json:a: \"choices\" is empty");
    refused("{\"a\": {\"type\": \"categorical\"}}", "\"choices\" is required");
    refused("{\"a\": {\"type\": \"categorical\", \"choices\": \"x\"}}", "\"choices\" must be an array");
    refused("{\"a\": {\"type\": \"categorical\", \"choices\": [\"x\", \"x\"]}}", "'x' is listed twice");
    refused("{\"a\": {\"type\": \"categorical\", \"choices\": [[1]]}}", "choice 0 must be a string or a number");
    refused("{\"a\": {\"type\": \"int\", \"low\": 0, \"high\": 8, \"when\": {\"b\": [1]}}}",
            "bad.json:a: \"when\" names unknown parameter 'b'");
    refused("{\"a\": {\"type\": \"int\", \"low\": 0, \"high\": 8, \"when\": {\"a\": [1]}}}", "names the parameter itself");
    refused("{\"a\": {\"type\": \"int\", \"low\": 0, \"high\": 8, \"when\": [1]}}", "\"when\" must be an object");
    refused("{\"a\": {\"type\": \"int\", \"low\": 0, \"high\": 8, \"when\": {}}}", "\"when\" is empty");
    refused("{\"f\": {\"type\": \"float\", \"low\": 0, \"high\": 1},"
            " \"a\": {\"type\": \"int\", \"low\": 0, \"high\": 8, \"when\": {\"f\": [1]}}}",
            "bad.json:a: \"when\" parent 'f' is a float");
    refused("{\"n\": {\"type\": \"int\", \"low\": 0, \"high\": 8},"
            " \"a\": {\"type\": \"int\", \"low\": 0, \"high\": 8, \"when\": {\"n\": [9]}}}",
            "bad.json:a: \"when\": 9 is not a value of 'n'");
    refused("{\"n\": {\"type\": \"int\", \"low\": 0, \"high\": 8},"
            " \"a\": {\"type\": \"int\", \"low\": 0, \"high\": 8, \"when\": {\"n\": []}}}",
            "needs a non-empty array");
    refused("{\"o\": {\"type\": \"categorical\", \"choices\": [\"x\"]},"
            " \"a\": {\"type\": \"int\", \"low\": 0, \"high\": 8, \"when\": {\"o\": [\"y\"]}}}",
            "bad.json:a: \"when\": 'y' is not a choice of 'o'");
    refused("{\"a\": {\"type\": \"int\", \"low\": 0, \"high\": 8, \"when\": {\"b\": [1]}},"
            " \"b\": {\"type\": \"int\", \"low\": 0, \"high\": 8, \"when\": {\"a\": [1]}}}",
            "form a cycle");
    refused("{\"a\": {\"type\": \"int\", \"low\": 0, \"high\": 8}, \"a\": {\"type\": \"int\", \"low\": 0, \"high\": 8}}",
            "bad.json:1:");
    refused("{\"\": {\"type\": \"int\", \"low\": 0, \"high\": 8}}", "empty name");
    refused("{\"a{b}\": {\"type\": \"int\", \"low\": 0, \"high\": 8}}", "braces");
}

static void test_load(void) {
    lt_hpo_space *s = (lt_hpo_space *)1;
    ASSERT_EQ(lt_hpo_space_load("/nonexistent/space.json", &s), LT_EIO);
    ASSERT_TRUE(s == NULL);
    ASSERT_TRUE(strstr(lt_errmsg(), "/nonexistent/space.json: cannot open") != NULL);
    const char *dir = getenv("LT_WORK_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/hpo_space_%d.json", dir ? dir : "/tmp", (int)getpid());
    FILE *f = fopen(path, "w");
    ASSERT_TRUE(f != NULL);
    if (!f) return;
    fputs(example, f);
    fclose(f);
    ASSERT_EQ(lt_hpo_space_load(path, &s), LT_OK);
    if (s) ASSERT_EQ(lt_hpo_space_size(s), 8);
    lt_hpo_space_free(s);
    remove(path);
    lt_hpo_space_free(NULL);
}

/* The quasi-random sequence: Halton's radical inverses, and an even spread
 * of the first points over a 2-D grid. */
static void test_halton(void) {
    ASSERT_NEAR(lt_hpo_halton(1, 2), 0.5, 0);
    ASSERT_NEAR(lt_hpo_halton(6, 2), 0.375, 0);
    ASSERT_NEAR(lt_hpo_halton(7, 3), 1.0 / 3 + 2.0 / 9, 1e-15);
    int cells[4][4] = {{0}};
    for (uint64_t i = 1; i <= 48; i++)
        cells[(int)(lt_hpo_halton(i, 2) * 4)][(int)(lt_hpo_halton(i, 3) * 4)]++;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) ASSERT_TRUE(cells[a][b] >= 2 && cells[a][b] <= 4);
}

int main(void) {
    test_parse_example();
    test_round_trip();
    test_format();
    test_refused();
    test_load();
    test_halton();
    return lt_test_finish();
}

/* The wire codec without a broker: round trips of every message kind,
 * hand-assembled known bytes, precise errors for malformed input, refusal
 * to encode incomplete envelopes, known JSON text, and random corruption
 * that must be reported, never crash. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "looptune/kafka.h"
#include "samples.h"
#include "test.h"

static void test_round_trip_every_kind(void) {
    for (int k = 0; k < SAMPLE_KINDS; k++) {
        for (int i = 0; i < 4; i++) {
            sample s;
            Looptune__Envelope *want = sample_build(&s, k, i);
            uint8_t *buf;
            size_t len;
            ASSERT_EQ(lt_envelope_encode(want, &buf, &len), LT_OK);
            Looptune__Envelope *got = NULL;
            int rc = lt_envelope_decode(buf, len, &got);
            ASSERT_EQ(rc, LT_OK);
            if (rc) {
                fprintf(stderr, "kind %d sample %d: %s\n", k, i, lt_errmsg());
                free(buf);
                continue;
            }
            char why[512];
            bool same = sample_equal(want, got, why, sizeof why);
            ASSERT_TRUE(same);
            if (!same) fprintf(stderr, "kind %d sample %d: %s\n", k, i, why);
            ASSERT_STREQ(lt_envelope_kind(got), lt_envelope_kind(want));
            char ka[256], kb[256];
            lt_envelope_key(want, ka, sizeof ka);
            lt_envelope_key(got, kb, sizeof kb);
            ASSERT_STREQ(ka, kb);
            lt_envelope_free(got);
            free(buf);
        }
    }
}

/* Spot checks against the formulas, not against the sample builder. */
static void test_decoded_values(void) {
    sample s;
    uint8_t *buf;
    size_t len;
    Looptune__Envelope *e;
    sample_build(&s, 3, 7); /* kernel window 7 */
    ASSERT_EQ(lt_envelope_encode(&s.env, &buf, &len), LT_OK);
    ASSERT_EQ(lt_envelope_decode(buf, len, &e), LT_OK);
    ASSERT_EQ(e->version, 1);
    ASSERT_EQ(e->payload_case, LOOPTUNE__ENVELOPE__PAYLOAD_KERNEL_WINDOW);
    ASSERT_STREQ(lt_envelope_kind(e), "kernel_window");
    ASSERT_EQ(e->kernel_window->p90_ns, 12007);
    ASSERT_EQ(e->kernel_window->n_params, 3);
    ASSERT_EQ(e->kernel_window->params[2]->value, -30); /* (2+1) * (7+3), negated */
    ASSERT_STREQ(e->kernel_window->counters[1]->name, "instructions");
    ASSERT_EQ(e->kernel_window->counters[1]->value, 2 * 123456789012ll + 7);
    ASSERT_TRUE(e->kernel_window->contention);
    ASSERT_NEAR(e->kernel_window->wait_share, 0.125, 0);
    ASSERT_STREQ(e->kernel_window->candidate_id, "cand-\xc3\xbc"); /* 7 % 3 = 1: on the candidate */
    ASSERT_TRUE(e->kernel_window->on_candidate);
    ASSERT_EQ(e->kernel_window->pair, 49);
    ASSERT_EQ(e->kernel_window->steps, 39);
    ASSERT_EQ(e->kernel_window->total_ns, 1007ull * 10007ull);
    char key[64];
    lt_envelope_key(e, key, sizeof key);
    ASSERT_STREQ(key, "run-0007");
    lt_envelope_free(e);
    free(buf);

    sample_build(&s, 6, 2); /* config: key kernel|shape|host class */
    ASSERT_EQ(lt_envelope_encode(&s.env, &buf, &len), LT_OK);
    ASSERT_EQ(lt_envelope_decode(buf, len, &e), LT_OK);
    lt_envelope_key(e, key, sizeof key);
    ASSERT_STREQ(key, "matmul|f32:64x768x768|xeon-avx512-2c");
    ASSERT_NEAR(e->config->stats->gflops, 122.0, 0);
    lt_envelope_free(e);
    free(buf);
}

/* version=1, run_end{run_id="r", tokens=5}, assembled by hand from the
 * protobuf wire format: tag = field << 3 | wire type. */
static const uint8_t known[] = {0x08, 0x01,              /* 1: varint 1 */
                                0x52, 0x05,              /* 10: 5 bytes */
                                0x0a, 0x01, 'r',         /*   1: "r" */
                                0x10, 0x05};             /*   2: varint 5 */

static void test_known_bytes(void) {
    Looptune__Envelope env;
    Looptune__RunEnd re;
    lt_envelope_init(&env);
    env.time_ns = 0;
    looptune__run_end__init(&re);
    re.run_id = "r";
    re.tokens = 5;
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_RUN_END;
    env.run_end = &re;
    uint8_t buf[64];
    size_t len = 0;
    ASSERT_EQ(lt_envelope_packed_size(&env), sizeof known);
    ASSERT_EQ(lt_envelope_pack(&env, buf, sizeof buf, &len), LT_OK);
    ASSERT_EQ(len, sizeof known);
    ASSERT_TRUE(memcmp(buf, known, sizeof known) == 0);
    ASSERT_EQ(lt_envelope_pack(&env, buf, 4, &len), LT_ERANGE);

    Looptune__Envelope *e;
    ASSERT_EQ(lt_envelope_decode(known, sizeof known, &e), LT_OK);
    ASSERT_EQ(e->run_end->tokens, 5);
    char *json;
    ASSERT_EQ(lt_envelope_to_json(e, &json), LT_OK);
    ASSERT_STREQ(json, "{\"version\":1,\"run_end\":{\"run_id\":\"r\",\"tokens\":\"5\"}}");
    free(json);
    lt_envelope_free(e);

    /* a field this reader does not know (number 100, varint) is skipped */
    uint8_t more[sizeof known + 3];
    memcpy(more, known, sizeof known);
    more[sizeof known] = 0xa0; /* (100 << 3 | 0) = 800 = 0xa0 0x06 */
    more[sizeof known + 1] = 0x06;
    more[sizeof known + 2] = 0x2a;
    ASSERT_EQ(lt_envelope_decode(more, sizeof more, &e), LT_OK);
    ASSERT_EQ(e->run_end->tokens, 5);
    lt_envelope_free(e);
}

static void expect_error(const uint8_t *buf, size_t len, const char *needle) {
    Looptune__Envelope *e = (Looptune__Envelope *)1;
    int rc = lt_envelope_decode(buf, len, &e);
    ASSERT_EQ(rc, LT_EFORMAT);
    ASSERT_TRUE(e == NULL);
    bool found = strstr(lt_errmsg(), needle) != NULL;
    ASSERT_TRUE(found);
    if (!found) fprintf(stderr, "  error was '%s', expected it to say '%s'\n", lt_errmsg(), needle);
}

#define BYTES(...) ((const uint8_t[]){__VA_ARGS__}), sizeof((const uint8_t[]){__VA_ARGS__})

static void test_malformed(void) {
    expect_error(known, 0, "empty record");
    expect_error(known, sizeof known - 1,
                 "field 10: length 5 past the end (4 bytes left) at byte 3");
    expect_error(BYTES(0x08, 0x01, 0x52, 0x02, 0x0a, 0x81),
                 "run_end: field 1: truncated length at byte 5");
    expect_error(BYTES(0x0a, 0x01, 0x00), "field 'version' (1) has wire type length-delimited, "
                                          "the schema says varint at byte 0");
    expect_error(BYTES(0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01),
                 "field 1: over-long varint at byte 1");
    expect_error(BYTES(0xc7, 0x0c),
                 "field 200: wire type invalid (7), which looptune never writes");
    expect_error(BYTES(0x08, 0x01, 0xa3, 0x06), "field 100: wire type group start");
    expect_error(BYTES(0x00, 0x00), "field number 0 out of range at byte 0");
    expect_error(BYTES(0x52, 0x05, 0x0a, 0x01, 'r', 0x10, 0x05), "no schema version");
    expect_error(BYTES(0x08, 0x02, 0x52, 0x05, 0x0a, 0x01, 'r', 0x10, 0x05),
                 "schema version 2 is newer than this reader's 1");
    expect_error(BYTES(0x08, 0x01), "carries no message");
    expect_error(BYTES(0x08, 0x01, 0x5a, 0x03, 0x0a, 0x05, 0x41),
                 "kernel_window: field 1: length 5 past the end (1 bytes left) at byte 5");
    expect_error(BYTES(0x08, 0x01, 0x52, 0x03, 0x0a, 0x01, 0xff),
                 "run_end: string field 'run_id' is not valid UTF-8 at byte 6");
    expect_error(BYTES(0x08, 0x01, 0x4a, 0x04, 0x12, 0x02, 0x0a, 0x80),
                 "run_start.host: field 1: truncated length at byte 7");
    /* plain text, as a misconfigured writer might send */
    const char *text = "{\"hello\": \"world\"}";
    Looptune__Envelope *e;
    ASSERT_EQ(lt_envelope_decode(text, strlen(text), &e), LT_EFORMAT);
}

static void test_encode_refuses(void) {
    Looptune__Envelope env;
    Looptune__RunEnd re;
    uint8_t *buf = NULL;
    size_t len;
    lt_envelope_init(&env);
    ASSERT_EQ(lt_envelope_encode(&env, &buf, &len), LT_EINVAL); /* no payload */
    ASSERT_TRUE(strstr(lt_errmsg(), "no payload") != NULL);
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_RUN_END;
    ASSERT_EQ(lt_envelope_encode(&env, &buf, &len), LT_EINVAL); /* NULL payload */
    ASSERT_TRUE(strstr(lt_errmsg(), "run_end but its pointer is NULL") != NULL);
    looptune__run_end__init(&re);
    env.run_end = &re;
    env.version = 0;
    ASSERT_EQ(lt_envelope_encode(&env, &buf, &len), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "no schema version") != NULL);
    memset(&env, 0, sizeof env);
    ASSERT_EQ(lt_envelope_encode(&env, &buf, &len), LT_EINVAL);
    ASSERT_TRUE(strstr(lt_errmsg(), "not initialised") != NULL);
    ASSERT_TRUE(buf == NULL);
}

static void expect_json(const Looptune__Envelope *env, const char *want) {
    char *json = NULL;
    ASSERT_EQ(lt_envelope_to_json(env, &json), LT_OK);
    ASSERT_STREQ(json ? json : "", want);
    free(json);
}

static void test_json(void) {
    sample s;
    sample_build(&s, 8, 0); /* result 0 */
    expect_json(&s.env, "{\"version\":1,\"time_ns\":\"1700000000000000000\",\"result\":{"
                        "\"job_id\":\"run-0000\",\"worker\":\"worker-1\",\"status\":\"STATUS_OK\","
                        "\"data\":\"//79/Ps=\",\"seconds\":0.001}}");
    sample_build(&s, 2, 0); /* run end 0: shortest doubles, uint64 max as a string */
    expect_json(&s.env, "{\"version\":1,\"time_ns\":\"1700000000000000000\",\"run_end\":{"
                        "\"run_id\":\"run-0000\",\"tokens\":\"96\",\"decode_s\":0.0025,"
                        "\"tok_s\":38400,\"delivery_failures\":\"18446744073709551615\"}}");
    sample_build(&s, 5, 0); /* control: escapes, a negative int64 */
    s.env.time_ns = 0;
    expect_json(&s.env, "{\"version\":1,\"control\":{\"run_id\":\"run-0000\",\"node\":"
                        "\"blk0.attn_q\",\"kernel\":\"matvec\",\"params\":[{\"name\":\"tile_m\","
                        "\"value\":\"3\"},{\"name\":\"unroll\",\"value\":\"6\"}],\"candidate_id\":"
                        "\"cand-0 \\\"quoted\\\"\\t\\\\\"}}");
    /* non-finite doubles, bad UTF-8 and control characters in an unchecked struct */
    Looptune__Envelope env;
    Looptune__Host h;
    lt_envelope_init(&env);
    env.time_ns = 0;
    looptune__host__init(&h);
    h.cpu_model = "a\xff" "b\x01";
    h.triad_gb_s = NAN;
    h.read_gb_s = -INFINITY;
    h.peak_gflops = 1.0 / 3.0;
    env.payload_case = LOOPTUNE__ENVELOPE__PAYLOAD_HOST;
    env.host = &h;
    expect_json(&env, "{\"version\":1,\"host\":{\"cpu_model\":\"a\\ufffdb\\u0001\",\"triad_gb_s\":"
                      "\"NaN\",\"read_gb_s\":\"-Infinity\",\"peak_gflops\":0.3333333333333333}}");
    /* the same escaping on its own (bench --json's strings): a NUL inside counts */
    char *q = NULL;
    const char raw[] = "/m/we\"ird\\d\tx\n\xff\0z\xc3\xa9";
    ASSERT_EQ(lt_json_quote(raw, sizeof raw - 1, &q), LT_OK);
    ASSERT_STREQ(q ? q : "", "\"/m/we\\\"ird\\\\d\\tx\\n\\ufffd\\u0000z\xc3\xa9\"");
    free(q);
}

static uint64_t xorshift(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Random bytes and random corruptions of valid records: every outcome is a
 * decoded envelope or an LT_EFORMAT with a message, never a crash. */
static void test_corruption(void) {
    uint64_t state = 0x9e3779b97f4a7c15ull;
#define RND() xorshift(&state)
    int decoded = 0, refused = 0, quiet = 0;
    for (int iter = 0; iter < 20000; iter++) {
        uint8_t buf[512];
        size_t len;
        if (iter % 2) {
            len = RND() % 64;
            for (size_t j = 0; j < len; j++) buf[j] = (uint8_t)RND();
        } else {
            sample s;
            sample_build(&s, (int)(RND() % SAMPLE_KINDS), (int)(RND() % 9));
            if (lt_envelope_pack(&s.env, buf, sizeof buf, &len)) continue;
            int flips = 1 + (int)(RND() % 3);
            for (int f = 0; f < flips; f++) buf[RND() % len] ^= (uint8_t)(1u << (RND() % 8));
            if (RND() % 4 == 0) len = RND() % len;
        }
        Looptune__Envelope *e = NULL;
        int rc = lt_envelope_decode(buf, len, &e);
        if (rc == LT_OK) {
            decoded++;
            char *json = NULL;
            if (lt_envelope_to_json(e, &json) != LT_OK) quiet++;
            free(json);
            uint8_t *again;
            size_t alen;
            if (lt_envelope_encode(e, &again, &alen) != LT_OK) quiet++;
            else free(again);
            lt_envelope_free(e);
        } else {
            refused++;
            if (rc != LT_EFORMAT || !lt_errmsg()[0] || e) quiet++;
        }
    }
    ASSERT_EQ(quiet, 0);
    ASSERT_TRUE(refused > 1000);
    ASSERT_TRUE(decoded > 100); /* bit flips in values still decode */
    printf("corruption: %d decoded, %d refused with a message\n", decoded, refused);
}

int main(void) {
    test_round_trip_every_kind();
    test_decoded_values();
    test_known_bytes();
    test_malformed();
    test_encode_refuses();
    test_json();
    test_corruption();
    return lt_test_finish();
}

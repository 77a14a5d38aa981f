/* OpenAI request bodies: what parses into which fields (OpenAI's defaults
 * where the body is silent), every refusal naming its field with HTTP 400,
 * and the response objects and chunks read back with Jansson as OpenAI's
 * clients read them. */
#include <jansson.h>

#include "looptune/http.h"
#include "test.h"

static int parse(lt_oai_kind kind, const char *body, lt_oai_request *r, lt_oai_error *e) {
    return lt_oai_request_parse(kind, body, strlen(body), r, e);
}

static void test_completion_fields(void) {
    lt_oai_request r;
    lt_oai_error e;
    ASSERT_EQ(parse(LT_OAI_COMPLETION,
                    "{\"model\":\"m\",\"prompt\":\"Once upon\",\"max_tokens\":12,\"temperature\":0.5,"
                    "\"top_p\":0.9,\"top_k\":40,\"min_p\":0.05,\"repeat_penalty\":1.1,\"seed\":7,"
                    "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"stop\":[\"\\n\",\"The\"],"
                    "\"user\":\"u1\",\"ignore_eos\":true,\"n\":1,\"frequency_penalty\":0,\"some_future_field\":{}}",
                    &r, &e),
              0);
    ASSERT_STREQ(r.model, "m");
    ASSERT_STREQ(r.prompt, "Once upon");
    ASSERT_EQ(r.max_tokens, 12);
    ASSERT_NEAR(r.temperature, 0.5, 1e-7);
    ASSERT_NEAR(r.top_p, 0.9, 1e-7);
    ASSERT_EQ(r.top_k, 40);
    ASSERT_NEAR(r.min_p, 0.05, 1e-7);
    ASSERT_NEAR(r.repeat_penalty, 1.1, 1e-6);
    ASSERT_TRUE(r.has_seed);
    ASSERT_EQ(r.seed, 7);
    ASSERT_TRUE(r.stream);
    ASSERT_TRUE(r.include_usage);
    ASSERT_TRUE(r.ignore_eos);
    ASSERT_EQ(r.n_stop, 2);
    ASSERT_STREQ(r.stop[0], "\n");
    ASSERT_STREQ(r.stop[1], "The");
    lt_oai_request_free(&r);

    /* defaults: OpenAI's temperature and top_p, looptune's samplers off */
    ASSERT_EQ(parse(LT_OAI_COMPLETION, "{\"model\":\"m\",\"prompt\":[\"x\"],\"stop\":\"END\"}", &r, &e), 0);
    ASSERT_STREQ(r.prompt, "x");
    ASSERT_NEAR(r.temperature, 1.0, 0);
    ASSERT_NEAR(r.top_p, 1.0, 0);
    ASSERT_EQ(r.top_k, 0);
    ASSERT_NEAR(r.repeat_penalty, 1.0, 0);
    ASSERT_EQ(r.max_tokens, 0);
    ASSERT_TRUE(!r.has_seed && !r.stream);
    ASSERT_EQ(r.n_stop, 1);
    ASSERT_STREQ(r.stop[0], "END");
    lt_oai_request_free(&r);
    lt_oai_request_free(NULL);
}

static void test_chat_fields(void) {
    lt_oai_request r;
    lt_oai_error e;
    ASSERT_EQ(parse(LT_OAI_CHAT,
                    "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":\"Be terse.\"},"
                    "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hi \"},{\"type\":\"text\",\"text\":\"there\"}]}],"
                    "\"max_tokens\":5,\"max_completion_tokens\":9}",
                    &r, &e),
              0);
    ASSERT_EQ(r.n_messages, 2);
    ASSERT_STREQ(r.messages[0].role, "system");
    ASSERT_STREQ(r.messages[0].content, "Be terse.");
    ASSERT_STREQ(r.messages[1].role, "user");
    ASSERT_STREQ(r.messages[1].content, "Hi there");
    ASSERT_EQ(r.max_tokens, 9); /* the newer field wins */
    lt_oai_request_free(&r);
}

/* Each bad body: 400, the field named in param, the message mentioning it. */
static void expect_bad(lt_oai_kind kind, const char *body, const char *param, const char *in_message) {
    lt_oai_request r;
    lt_oai_error e;
    memset(&e, 0, sizeof e);
    int rc = parse(kind, body, &r, &e);
    ASSERT_EQ(rc, -1);
    if (rc != -1) {
        lt_oai_request_free(&r);
        return;
    }
    ASSERT_EQ(e.http_status, 400);
    ASSERT_STREQ(e.type, "invalid_request_error");
    ASSERT_STREQ(e.param, param);
    if (!strstr(e.message, in_message)) {
        fprintf(stderr, "body %s: message '%s' lacks '%s'\n", body, e.message, in_message);
        ASSERT_TRUE(0);
    }
    /* the error object is valid JSON with the same fields */
    char *j = lt_oai_error_json(&e);
    json_error_t je;
    json_t *o = json_loads(j, 0, &je);
    ASSERT_TRUE(o != NULL);
    if (o) {
        json_t *err = json_object_get(o, "error");
        ASSERT_STREQ(json_string_value(json_object_get(err, "message")), e.message);
        ASSERT_STREQ(json_string_value(json_object_get(err, "type")), "invalid_request_error");
        json_decref(o);
    }
    free(j);
}

static void test_refusals(void) {
    const lt_oai_kind C = LT_OAI_COMPLETION, H = LT_OAI_CHAT;
    expect_bad(C, "{\"model\":\"m\",\"prompt\":", "", "not valid JSON");
    expect_bad(C, "[1,2]", "", "JSON object");
    expect_bad(C, "{\"prompt\":\"x\"}", "model", "'model' is required");
    expect_bad(C, "{\"model\":3,\"prompt\":\"x\"}", "model", "must be a string");
    expect_bad(C, "{\"model\":\"m\"}", "prompt", "'prompt' is required");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":[\"a\",\"b\"]}", "prompt", "one prompt per request");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":[[1,2]]}", "prompt", "token ids");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":\"a\\u0000b\"}", "prompt", "NUL");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":0}", "max_tokens", "not within");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":2.5}", "max_tokens", "integer");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":\"x\",\"max_tokens\":99999999999}", "max_tokens", "not within");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":\"x\",\"temperature\":3}", "temperature", "not within");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":\"x\",\"temperature\":\"hot\"}", "temperature", "number");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":\"x\",\"top_p\":1.5}", "top_p", "not within");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":\"x\",\"top_k\":-1}", "top_k", "not within");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":\"x\",\"n\":2}", "n", "must be 1");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":\"x\",\"echo\":true}", "echo", "not supported");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":\"x\",\"logprobs\":3}", "logprobs", "not supported");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":\"x\",\"presence_penalty\":0.5}", "presence_penalty", "not supported");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":\"x\",\"stream\":\"yes\"}", "stream", "true or false");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":\"x\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "stop", "at most 4");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":\"x\",\"stop\":7}", "stop", "string");
    expect_bad(C, "{\"model\":\"m\",\"prompt\":\"x\",\"seed\":\"s\"}", "seed", "integer");
    expect_bad(C, "{\"model\":\"m\",\"model\":\"n\",\"prompt\":\"x\"}", "", "not valid JSON");
    expect_bad(H, "{\"model\":\"m\"}", "messages", "non-empty array");
    expect_bad(H, "{\"model\":\"m\",\"messages\":[]}", "messages", "non-empty array");
    expect_bad(H, "{\"model\":\"m\",\"messages\":[1]}", "messages", "must be an object");
    expect_bad(H, "{\"model\":\"m\",\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}", "messages", "'tool'");
    expect_bad(H, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}]}", "messages", "content is required");
    expect_bad(H, "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}",
               "messages", "text");
}

static json_t *load(char *s) {
    json_error_t je;
    json_t *o = s ? json_loads(s, 0, &je) : NULL;
    free(s);
    ASSERT_TRUE(o != NULL);
    return o;
}

static void test_responses(void) {
    lt_oai_request r;
    lt_oai_error e;
    ASSERT_EQ(parse(LT_OAI_CHAT, "{\"model\":\"tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r, &e), 0);
    lt_oai_usage u = {"length", 5, 3};
    json_t *o = load(lt_oai_response_json(&r, "chatcmpl-1", 1700000000, "h\xc3\xa9llo \"x\"", &u));
    if (o) {
        ASSERT_STREQ(json_string_value(json_object_get(o, "object")), "chat.completion");
        ASSERT_STREQ(json_string_value(json_object_get(o, "model")), "tiny");
        json_t *c0 = json_array_get(json_object_get(o, "choices"), 0);
        ASSERT_STREQ(json_string_value(json_object_get(json_object_get(c0, "message"), "content")),
                     "h\xc3\xa9llo \"x\"");
        ASSERT_STREQ(json_string_value(json_object_get(c0, "finish_reason")), "length");
        json_t *us = json_object_get(o, "usage");
        ASSERT_EQ(json_integer_value(json_object_get(us, "total_tokens")), 8);
        json_decref(o);
    }
    /* a piece, the final chunk, the usage chunk */
    o = load(lt_oai_chunk_json(&r, "chatcmpl-1", 1, "ab", NULL, false));
    if (o) {
        json_t *c0 = json_array_get(json_object_get(o, "choices"), 0);
        ASSERT_STREQ(json_string_value(json_object_get(json_object_get(c0, "delta"), "content")), "ab");
        ASSERT_TRUE(json_is_null(json_object_get(c0, "finish_reason")));
        json_decref(o);
    }
    o = load(lt_oai_chunk_json(&r, "chatcmpl-1", 1, NULL, &u, false));
    if (o) {
        json_t *c0 = json_array_get(json_object_get(o, "choices"), 0);
        ASSERT_EQ(json_object_size(json_object_get(c0, "delta")), 0);
        ASSERT_STREQ(json_string_value(json_object_get(c0, "finish_reason")), "length");
        json_decref(o);
    }
    o = load(lt_oai_chunk_json(&r, "chatcmpl-1", 1, NULL, &u, true));
    if (o) {
        ASSERT_EQ(json_array_size(json_object_get(o, "choices")), 0);
        ASSERT_EQ(json_integer_value(json_object_get(json_object_get(o, "usage"), "prompt_tokens")), 5);
        json_decref(o);
    }
    lt_oai_request_free(&r);
    ASSERT_EQ(parse(LT_OAI_COMPLETION, "{\"model\":\"tiny\",\"prompt\":\"p\"}", &r, &e), 0);
    o = load(lt_oai_chunk_json(&r, "cmpl-1", 1, "z", NULL, false));
    if (o) {
        ASSERT_STREQ(json_string_value(json_object_get(o, "object")), "text_completion");
        ASSERT_STREQ(json_string_value(json_object_get(json_array_get(json_object_get(o, "choices"), 0), "text")), "z");
        json_decref(o);
    }
    lt_oai_request_free(&r);
}

int main(void) {
    test_completion_fields();
    test_chat_fields();
    test_refusals();
    test_responses();
    return lt_test_finish();
}

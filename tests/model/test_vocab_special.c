/* End-of-generation tokens: the rules of llama.cpp's vocabulary loader
 * (src/llama-vocab.cpp: eos, eot/eom ids, FIM pad/repo/separator, the list
 * of end-of-turn texts, the <|end|> and </s> exceptions) applied to small
 * vocabularies built here, from arrays and from GGUF files. */
#include "looptune/model.h"
#include "test.h"

static char work_dir[1024];

static lt_vocab *from_texts(const char *const *texts, int64_t n, int32_t eos) {
    lt_vocab *v = NULL;
    ASSERT_EQ(lt_vocab_from_arrays(&v, n, texts, NULL, NULL, -1, eos), LT_OK);
    return v;
}

/* The known texts end a generation, ordinary ones and out-of-range ids do not. */
static void test_texts(void) {
    const char *t[] = {"a", "<|im_end|>", "<|im_start|>", "<|eot_id|>", "<|endoftext|>", "b",
                       "</s>", "<|file_sep|>", "<|fim_pad|>", "<|fim_prefix|>", "<end_of_turn>"};
    lt_vocab *v = from_texts(t, 11, 0);
    bool want[] = {true /* eos */, true, false, true, true, false,
                   true, true, true, false, true};
    for (int32_t i = 0; i < 11; i++) ASSERT_EQ(lt_vocab_is_eog(v, i), want[i]);
    ASSERT_TRUE(!lt_vocab_is_eog(v, -1));
    ASSERT_TRUE(!lt_vocab_is_eog(v, 11));
    ASSERT_TRUE(!lt_vocab_is_eog(NULL, 0));
    lt_vocab_free(v);
}

/* Harmony-style vocabularies: <|end|> stops only where <|return|> and
 * <|call|> are absent; </s> is ordinary where <|tool_response> exists. */
static void test_exceptions(void) {
    const char *a[] = {"x", "<|end|>", "<|return|>", "<|call|>"};
    lt_vocab *v = from_texts(a, 4, -1);
    ASSERT_TRUE(!lt_vocab_is_eog(v, 1));
    ASSERT_TRUE(lt_vocab_is_eog(v, 2) && lt_vocab_is_eog(v, 3));
    lt_vocab_free(v);
    v = from_texts(a, 3, -1); /* no <|call|>: <|end|> ends */
    ASSERT_TRUE(lt_vocab_is_eog(v, 1));
    lt_vocab_free(v);
    const char *b[] = {"x", "</s>", "<|tool_response>"};
    v = from_texts(b, 3, -1);
    ASSERT_TRUE(!lt_vocab_is_eog(v, 1) && lt_vocab_is_eog(v, 2));
    lt_vocab_free(v);
    v = from_texts(b, 2, -1);
    ASSERT_TRUE(lt_vocab_is_eog(v, 1));
    lt_vocab_free(v);
}

/* A GGUF's eot/eom/fim ids add tokens whatever their text; bad ids are errors. */
static void test_gguf_ids(void) {
    char path[1100];
    snprintf(path, sizeof path, "%s/vocab_special.gguf", work_dir);
    const char *t[] = {"<unk>", "<s>", "</s>", "stop", "halt", "go", "pad"};
    for (int round = 0; round < 2; round++) {
        lt_gguf_writer *w;
        ASSERT_EQ(lt_gguf_writer_open(&w, path), LT_OK);
        lt_gguf_writer_str(w, "general.architecture", "llama");
        lt_gguf_writer_str(w, "tokenizer.ggml.model", "llama");
        lt_gguf_writer_arr_str(w, "tokenizer.ggml.tokens", 7, t, NULL);
        lt_gguf_writer_u32(w, "tokenizer.ggml.eot_token_id", round ? 70 : 3);
        lt_gguf_writer_u32(w, "tokenizer.ggml.eom_token_id", 4);
        lt_gguf_writer_u32(w, "tokenizer.ggml.fim_pad_token_id", 6);
        ASSERT_EQ(lt_gguf_writer_close(w), LT_OK);
        lt_gguf *g;
        ASSERT_EQ(lt_gguf_open(&g, path), LT_OK);
        lt_vocab *v = NULL;
        int st = lt_vocab_load_gguf(&v, g);
        if (round == 0) {
            ASSERT_EQ(st, LT_OK);
            bool want[] = {false, false, true, true, true, false, true};
            for (int32_t i = 0; i < 7; i++) ASSERT_EQ(lt_vocab_is_eog(v, i), want[i]);
        } else {
            ASSERT_EQ(st, LT_EFORMAT);
            ASSERT_TRUE(strstr(lt_errmsg(), "eot_token_id") != NULL);
            ASSERT_TRUE(v == NULL);
        }
        lt_vocab_free(v);
        lt_gguf_close(g);
    }
}

int main(void) {
    const char *w = getenv("LT_WORK_DIR");
    snprintf(work_dir, sizeof work_dir, "%s", w && *w ? w : ".");
    test_texts();
    test_exceptions();
    test_gguf_ids();
    return lt_test_finish();
}

/* Greedy token ids of llama.cpp for a prompt, one line: the known answers
 * the real-model test (tests/reference/test_real_model.py) compares
 * looptune with. Built against a llama.cpp build tree (libllama):
 *
 *   cc -O2 -I TREE/include -I TREE/ggml/include bench/peers/llamacpp_greedy.c \
 *      -L BUILD/bin -lllama -lggml -lggml-base -o /tmp/llamacpp_greedy
 *   LD_LIBRARY_PATH=BUILD/bin /tmp/llamacpp_greedy MODEL N PROMPT
 *
 * A PROMPT of the form "chat:MESSAGE" is one user message rendered by the
 * model's chat template (llama_chat_apply_template, the assistant's turn
 * opened), its text on stderr. The prompt is tokenized as llama.cpp's own
 * tools do (special tokens added where the vocabulary asks, control tokens
 * written in the text parsed);
 * the prompt's ids go to stderr, the N generated ids (end of generation
 * not stopping it) to stdout, each with the gap between its logit and the
 * runner-up's on stderr. One thread, so the sums' order does not depend on
 * the machine's cores. */
#include <llama.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet(enum ggml_log_level level, const char *text, void *data) {
    (void)data;
    if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL N PROMPT\n", argv[0]);
        return 2;
    }
    const int n = atoi(argv[2]);
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model *model = llama_model_load_from_file(argv[1], llama_model_default_params());
    if (!model) return fprintf(stderr, "cannot load %s\n", argv[1]), 1;
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const char *text = argv[3];
    static char rendered[16384];
    if (!strncmp(text, "chat:", 5)) {
        const llama_chat_message msg = {"user", text + 5};
        const int len = llama_chat_apply_template(llama_model_chat_template(model, NULL), &msg, 1,
                                                  true, rendered, (int32_t)sizeof rendered);
        if (len < 0 || len >= (int)sizeof rendered)
            return fprintf(stderr, "cannot render the chat template\n"), 1;
        rendered[len] = 0;
        text = rendered;
        fprintf(stderr, "rendered: %s\n", text);
    }
    llama_token toks[4096];
    /* a rendered chat holds its own special tokens: none added (as llama.cpp's chat does) */
    const int n_prompt = llama_tokenize(vocab, text, (int32_t)strlen(text), toks, 4096,
                                        text != rendered, true);
    if (n_prompt <= 0) return fprintf(stderr, "cannot tokenize the prompt\n"), 1;
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_prompt + n + 8);
    cp.n_batch = (uint32_t)n_prompt;
    cp.n_threads = cp.n_threads_batch = 1;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) return fprintf(stderr, "cannot make a context\n"), 1;
    fprintf(stderr, "prompt:");
    for (int i = 0; i < n_prompt; i++) fprintf(stderr, " %d", toks[i]);
    fprintf(stderr, "\n");
    struct llama_batch b = llama_batch_get_one(toks, n_prompt);
    for (int s = 0; s < n; s++) {
        if (llama_decode(ctx, b)) return fprintf(stderr, "decode failed\n"), 1;
        const float *lg = llama_get_logits_ith(ctx, -1);
        int best = 0, second = -1;
        for (int j = 1; j < n_vocab; j++)
            if (lg[j] > lg[best]) second = best, best = j;
            else if (second < 0 || lg[j] > lg[second]) second = j;
        printf("%s%d", s ? " " : "", best);
        fprintf(stderr, "step %d: %d gap %.4f\n", s, best, lg[best] - lg[second]);
        static llama_token next;
        next = best;
        b = llama_batch_get_one(&next, 1);
    }
    printf("\n");
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

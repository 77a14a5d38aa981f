/* Which tokens end a generation. llama.cpp decides by the special ids a file
 * names and, because converters often leave them out, by token text; looptune
 * follows the same rules so a model stops where llama.cpp stops it. */
#include "model/vocab_internal.h"

#include <stdlib.h>
#include <string.h>

#define SPM_SPACE "\xe2\x96\x81" /* U+2581: SentencePiece pieces store it as ' ' */

/* Texts of tokens that end a turn or a document (llama.cpp's list). */
static const char *const EOG_TEXTS[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end" SPM_SPACE "of" SPM_SPACE "sentence\xef\xbd\x9c>", /* DeepSeek */
    "[e~[",
};
/* Where a file names no end-of-turn or end-of-message id, the first of these found. */
static const char *const EOT_TEXTS[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]",
    "<\xef\xbd\x9c" "end" SPM_SPACE "of" SPM_SPACE "sentence\xef\xbd\x9c>",
    "<end_of_utterance>",
};
static const char *const EOM_TEXTS[] = {"<|eom_id|>"};
/* Fill-in-the-middle padding, repository and file separator tokens also
 * end a generation. */
static const char *const FIM_PAD_TEXTS[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>",
                                            "[PAD]"};
static const char *const FIM_REP_TEXTS[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>",
                                            "<REPO>", "<reponame>"};
static const char *const FIM_SEP_TEXTS[] = {"<|file_sep|>"};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Id of the token with this text, or LT__NO_ID. SentencePiece pieces hold
 * ' ' where the file holds U+2581, so the text is translated first. */
static int32_t find_text(const lt_vocab *v, const char *text) {
    char buf[64];
    size_t n = 0, len = strlen(text);
    for (size_t i = 0; i < len && n < sizeof buf;) {
        if (v->kind == LT__VOCAB_SPM && strncmp(text + i, SPM_SPACE, 3) == 0) {
            buf[n++] = ' ';
            i += 3;
        } else {
            buf[n++] = text[i++];
        }
    }
    return lt__vocab_lookup(v, buf, n);
}

static void set_control(lt_vocab *v, int32_t id, bool mark_control) {
    if (mark_control) v->attr[id] |= LT__ATTR_CONTROL;
}

/* Fills *id from the first text found when it is unset. */
static void detect(lt_vocab *v, int32_t *id, const char *const *texts, size_t n,
                   bool mark_control) {
    for (size_t i = 0; i < n && *id == LT__NO_ID; i++) {
        int32_t t = find_text(v, texts[i]);
        if (t == LT__NO_ID) continue;
        *id = t;
        set_control(v, t, mark_control);
    }
}

static void mark(lt_vocab *v, int32_t id) {
    if (id >= 0 && id < v->n) v->attr[id] |= LT__ATTR_EOG;
}

static bool is_eog_text(const lt_vocab *v, const char *text, int32_t *id) {
    *id = find_text(v, text);
    return *id != LT__NO_ID && (v->attr[*id] & LT__ATTR_EOG);
}

void lt__vocab_mark_eog(lt_vocab *v, bool mark_control) {
    for (int64_t i = 0; i < v->n; i++) v->attr[i] &= (uint8_t)~LT__ATTR_EOG;
    detect(v, &v->eot, EOT_TEXTS, COUNT(EOT_TEXTS), mark_control);
    detect(v, &v->eom, EOM_TEXTS, COUNT(EOM_TEXTS), mark_control);
    detect(v, &v->fim_pad, FIM_PAD_TEXTS, COUNT(FIM_PAD_TEXTS), mark_control);
    detect(v, &v->fim_rep, FIM_REP_TEXTS, COUNT(FIM_REP_TEXTS), mark_control);
    detect(v, &v->fim_sep, FIM_SEP_TEXTS, COUNT(FIM_SEP_TEXTS), mark_control);
    mark(v, v->fim_pad);
    mark(v, v->fim_rep);
    mark(v, v->fim_sep);
    for (size_t i = 0; i < COUNT(EOG_TEXTS); i++) {
        int32_t id = find_text(v, EOG_TEXTS[i]);
        if (id == LT__NO_ID) continue;
        mark(v, id);
        set_control(v, id, mark_control);
    }
    mark(v, v->eos);
    mark(v, v->eot);
    mark(v, v->eom);

    /* Harmony-style vocabularies end a turn with <|return|> or <|call|>
     * (<|calls|> and <|flush|> in solar-open): there <|end|> only closes a
     * message and generation goes on. */
    int32_t end, id;
    bool has_return = is_eog_text(v, "<|return|>", &id);
    bool has_call = is_eog_text(v, "<|call|>", &id) || is_eog_text(v, "<|calls|>", &id);
    bool has_flush = is_eog_text(v, "<|flush|>", &id);
    if (is_eog_text(v, "<|end|>", &end) && has_call && (has_return || has_flush)) {
        v->attr[end] &= (uint8_t)~LT__ATTR_EOG;
        if (mark_control) v->attr[end] = LT__ATTR_USER_DEFINED;
    }
    /* Gemma 4 and PLaMo have their own end token; their </s> is ordinary text. */
    int32_t s;
    if (is_eog_text(v, "</s>", &s) &&
        (is_eog_text(v, "<|tool_response>", &id) || is_eog_text(v, "<|plamo:eos|>", &id))) {
        v->attr[s] &= (uint8_t)~LT__ATTR_EOG;
        if (mark_control) v->attr[s] = LT__ATTR_NORMAL;
    }
}

bool lt_vocab_is_eog(const lt_vocab *v, int32_t id) {
    return v && id >= 0 && id < v->n && (v->attr[id] & LT__ATTR_EOG);
}

typedef struct {
    size_t len;
    int32_t id;
} by_len;

/* Longest text first; equal lengths by id, so the order is fixed. */
static int longer_first(const void *pa, const void *pb) {
    const by_len *a = pa, *b = pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

int lt__vocab_index_special(lt_vocab *v) {
    free(v->special);
    v->special = NULL;
    v->n_special = 0;
    const uint8_t special = LT__ATTR_CONTROL | LT__ATTR_USER_DEFINED | LT__ATTR_UNKNOWN;
    int64_t k = 0;
    for (int64_t i = 0; i < v->n; i++) k += v->len[i] && (v->attr[i] & special);
    if (k == 0) return LT_OK;
    by_len *t = malloc((size_t)k * sizeof *t);
    v->special = malloc((size_t)k * sizeof *v->special);
    if (!t || !v->special) {
        free(t);
        return lt_error(LT_ENOMEM, "vocabulary: out of memory");
    }
    k = 0;
    for (int64_t i = 0; i < v->n; i++)
        if (v->len[i] && (v->attr[i] & special)) t[k++] = (by_len){v->len[i], (int32_t)i};
    qsort(t, (size_t)k, sizeof *t, longer_first);
    for (int64_t i = 0; i < k; i++) v->special[i] = t[i].id;
    v->n_special = k;
    free(t);
    return LT_OK;
}

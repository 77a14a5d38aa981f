/* Shape keys: what a call's tuned parameters are keyed by, in one place for
 * telemetry, control messages, the config store and the tuner. */
#include <stdio.h>
#include <string.h>

#include "looptune/kernels.h"

static const char *const regime_names[] = {
    [LT_REGIME_DECODE] = "decode",
    [LT_REGIME_PREFILL] = "prefill",
    [LT_REGIME_BATCH] = "batch",
};
_Static_assert(sizeof regime_names / sizeof regime_names[0] == LT_REGIME_COUNT, "regime names");

const char *lt_regime_name(lt_regime r) {
    return (unsigned)r < LT_REGIME_COUNT ? regime_names[r] : "decode";
}

int lt_regime_parse(const char *name, lt_regime *out) {
    for (int r = 0; r < LT_REGIME_COUNT; r++)
        if (!strcmp(name, regime_names[r])) {
            *out = (lt_regime)r;
            return LT_OK;
        }
    return lt_error(LT_ENOTFOUND, "unknown regime '%s' (decode, prefill or batch)", name);
}

lt_regime lt_regime_of(int64_t n_tokens, bool batch) {
    if (n_tokens <= 1) return LT_REGIME_DECODE;
    return batch ? LT_REGIME_BATCH : LT_REGIME_PREFILL;
}

void lt_shape_of_call(lt_kernel_id id, const lt_call *call, lt_shape *out) {
    memset(out, 0, sizeof *out);
    const lt_tensor *y = call->op[0];
    const lt_tensor *w = call->op[1] ? call->op[1] : y;
    /* a weight's rows are part of the shape; an activation's are the step's
     * tokens, which the regime stands for (so every prefill batch size has
     * the same key) */
    const bool weights = id == LT_K_MATVEC || id == LT_K_MATMUL || id == LT_K_EMBED;
    if (w) {
        out->dtype = w->dtype;
        out->layout = w->layout;
        out->cols = w->ne[0];
        out->rows = weights ? w->ne[1] : 1;
    }
    /* the KV cache's rows are positions, not tokens: count the source's */
    const lt_tensor *rows = id == LT_K_KV_STORE && call->op[1] ? call->op[1] : y;
    out->n_tokens = rows ? rows->ne[1] : 1;
    for (int i = 0; i < 3; i++) out->ia[i] = call->ia[i];
    out->regime = lt_regime_of(out->n_tokens, (call->flags & LT_CALL_BATCH) != 0);
}

/* The suffix of a weight's name in a key where its layout takes another
 * path than its dtype's plain rows (interleaved by 16). */
static const char X16_SUFFIX[] = "x16";

static const char *layout_suffix(lt_dtype t, lt_layout l) {
    return lt_params_dtype(t, l) != t ? X16_SUFFIX : "";
}

size_t lt_shape_format(const lt_shape *s, char *buf, size_t n) {
    const char *reg = lt_regime_name(s->regime), *sfx = layout_suffix(s->dtype, s->layout);
    if (s->ia[0] || s->ia[1] || s->ia[2])
        return (size_t)snprintf(buf, n, "%s%s:%lldx%lld:%s:ia=%lld,%lld,%lld",
                                lt_dtype_name(s->dtype), sfx, (long long)s->cols,
                                (long long)s->rows, reg, (long long)s->ia[0],
                                (long long)s->ia[1], (long long)s->ia[2]);
    return (size_t)snprintf(buf, n, "%s%s:%lldx%lld:%s", lt_dtype_name(s->dtype), sfx,
                            (long long)s->cols, (long long)s->rows, reg);
}

int lt_shape_parse_weight(const char *key, lt_dtype *t, lt_layout *l) {
    char name[16];
    const size_t len = key ? strcspn(key, ":") : 0;
    if (!key || len == 0 || len >= sizeof name)
        return lt_error(LT_EINVAL, "key '%s' names no weight", key ? key : "");
    memcpy(name, key, len);
    name[len] = 0;
    *l = LT_LAYOUT_PLAIN;
    if (lt_dtype_parse(name, t) == LT_OK) return LT_OK;
    const size_t sl = sizeof X16_SUFFIX - 1; /* a name with the suffix, of a dtype that takes it */
    if (len > sl && !strcmp(name + len - sl, X16_SUFFIX)) {
        name[len - sl] = 0;
        if (lt_dtype_parse(name, t) == LT_OK && *layout_suffix(*t, LT_LAYOUT_X16)) {
            *l = LT_LAYOUT_X16;
            return LT_OK;
        }
    }
    return lt_error(LT_EINVAL, "key '%s' names no weight", key);
}

size_t lt_call_key(lt_kernel_id id, const lt_call *call, char *buf, size_t n) {
    lt_shape sh;
    lt_shape_of_call(id, call, &sh);
    return lt_shape_format(&sh, buf, n);
}

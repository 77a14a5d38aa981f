/* The decoder architectures as GGUF names them (general.architecture), each
 * one's rope pairs as llama.cpp's llama_model_rope_type gives them, the
 * default context, and Llama 3's rope scaling factors (what rope_freqs.weight
 * holds). */
#include "model/model_internal.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    lt_rope_mode rope;
} arches[] = {
    [LT_ARCH_LLAMA] = {"llama", LT_ROPE_NORM},
    [LT_ARCH_QWEN2] = {"qwen2", LT_ROPE_NEOX},
};
_Static_assert(sizeof arches / sizeof arches[0] == LT_ARCH_COUNT, "one entry per lt_arch");

const char *lt_arch_name(lt_arch a) {
    return (unsigned)a < LT_ARCH_COUNT ? arches[a].name : "?";
}

int lt_arch_parse(const char *name, size_t len, lt_arch *out) {
    for (int a = 0; a < LT_ARCH_COUNT; a++) {
        if (strlen(arches[a].name) == len && memcmp(arches[a].name, name, len) == 0) {
            *out = (lt_arch)a;
            return LT_OK;
        }
    }
    return lt_error(LT_ENOTFOUND, "architecture '%.*s' is not supported (expected llama or qwen2)",
                    (int)(len > 64 ? 64 : len), name);
}

lt_rope_mode lt_arch_rope_mode(lt_arch a) {
    return (unsigned)a < LT_ARCH_COUNT ? arches[a].rope : LT_ROPE_NORM;
}

int64_t lt_llama_default_ctx(const lt_llama_config *c) {
    return c->seq_len < LT_DEFAULT_CTX_MAX ? c->seq_len : LT_DEFAULT_CTX_MAX;
}

/* Meta's Llama 3 scaling as llama.cpp's converter writes it: a pair whose
 * wavelength 2 pi / freq is shorter than original_context / high_freq_factor
 * keeps its frequency (factor 1), one longer than original_context /
 * low_freq_factor is slowed by `factor`, and the band between blends the two
 * by smooth = (original_context / wavelen - low) / (high - low):
 * 1 / ((1 - smooth) / factor + smooth). */
int lt_rope_scaling_factors(const lt_rope_scaling *s, float base, int64_t head_dim,
                            float *factors) {
    if (!(s->factor >= 1.0f) || !isfinite(s->factor) || !(s->low_freq_factor > 0.0f) ||
        !(s->high_freq_factor > s->low_freq_factor) || !isfinite(s->high_freq_factor) ||
        s->original_context <= 0)
        return lt_error(LT_EINVAL, "rope scaling: factor %g (>= 1), low_freq_factor %g (> 0), "
                        "high_freq_factor %g (> low) and original_context %lld (> 0) are not "
                        "well formed", (double)s->factor, (double)s->low_freq_factor,
                        (double)s->high_freq_factor, (long long)s->original_context);
    if (head_dim < 2 || head_dim % 2 || !(base > 1.0f))
        return lt_error(LT_EINVAL, "rope scaling: head_dim %lld or base %g", (long long)head_dim,
                        (double)base);
    const double old_ctx = (double)s->original_context;
    const double low_wavelen = old_ctx / s->low_freq_factor;
    const double high_wavelen = old_ctx / s->high_freq_factor;
    for (int64_t i = 0; i < head_dim / 2; i++) {
        /* the converter's freqs are float32 torch arithmetic */
        const float freq = 1.0f / powf(base, (float)(2 * i) / (float)head_dim);
        const double wavelen = 2.0 * 3.14159265358979323846 / (double)freq;
        double f;
        if (wavelen < high_wavelen) {
            f = 1.0;
        } else if (wavelen > low_wavelen) {
            f = s->factor;
        } else {
            const double smooth = (old_ctx / wavelen - s->low_freq_factor) /
                                  (s->high_freq_factor - s->low_freq_factor);
            f = 1.0 / ((1.0 - smooth) / s->factor + smooth);
        }
        factors[i] = (float)f;
    }
    return LT_OK;
}

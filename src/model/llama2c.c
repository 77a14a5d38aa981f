/* llama2.c legacy checkpoint reader: seven int32 header fields, then f32
 * weights in llama2.c's order. The file is mapped; projections point into
 * the mapping, norms are copied. */
#include "model/model_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER_BYTES (7 * 4)
/* llama2.c's newer export formats start with this magic ("ak42"). */
#define LLAMA2C_EXPORT_MAGIC 0x616b3432
#define LLAMA2C_RMS_EPS 1e-5f
#define LLAMA2C_ROPE_BASE 10000.0f

static int map_file(lt__model_priv *p, const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return lt_error(LT_EIO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return lt_error(LT_EIO, "%s: not a readable regular file", path);
    }
    if ((size_t)sb.st_size < HEADER_BYTES) {
        close(fd);
        return lt_error(LT_EFORMAT, "%s: truncated: %lld bytes, a llama2.c header needs %d",
                        path, (long long)sb.st_size, HEADER_BYTES);
    }
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED) return lt_error(LT_EIO, "%s: cannot map: %s", path, strerror(e));
    p->map = m;
    p->map_bytes = (size_t)sb.st_size;
    return LT_OK;
}

/* Next `n` floats of the file as a tensor-sized region. */
static float *take(const float **cur, int64_t n) {
    float *p = (float *)*cur;
    *cur += n;
    return p;
}

int lt__llama2c_load(lt_model *m, const char *path) {
    lt__model_priv *p = m->priv;
    int st = map_file(p, path);
    if (st) return st;
    int32_t h[7];
    memcpy(h, p->map, sizeof h);
    if (h[0] == LLAMA2C_EXPORT_MAGIC)
        return lt_error(LT_EUNSUPPORTED, "%s: llama2.c export version %d (magic \"ak42\") is not "
                        "supported; use the legacy checkpoint or GGUF", path, (int)h[1]);
    static const char *const field[7] = {"dim", "hidden_dim", "n_layers", "n_heads",
                                         "n_kv_heads", "vocab_size", "seq_len"};
    for (int i = 0; i < 7; i++) {
        if (h[i] == 0 || (h[i] < 0 && i != 5) || h[i] == INT32_MIN)
            return lt_error(LT_EFORMAT, "%s: no GGUF magic, and as a llama2.c checkpoint "
                            "its header field %s = %d is not positive: unknown format", path, field[i], (int)h[i]);
    }
    bool shared = h[5] > 0; /* a negative vocab_size marks a separate classifier */
    lt_llama_config *c = &m->cfg;
    c->dim = h[0];
    c->hidden_dim = h[1];
    c->n_layers = h[2];
    c->n_heads = h[3];
    c->n_kv_heads = h[4];
    c->vocab_size = shared ? h[5] : -(int64_t)h[5];
    c->seq_len = h[6];
    c->rms_eps = LLAMA2C_RMS_EPS;
    c->rope_base = LLAMA2C_ROPE_BASE;
    if ((st = lt__llama_config_check(c, path))) return st;

    /* sizes are bounded by the config check, so these products fit int64 */
    int64_t dim = c->dim, hid = c->hidden_dim, L = c->n_layers, V = c->vocab_size;
    int64_t hs = dim / c->n_heads, kv_dim = hs * c->n_kv_heads;
    int64_t floats = V * dim + L * dim /* rms_att */ + L * dim * dim /* wq */ +
                     2 * L * kv_dim * dim /* wk wv */ + L * dim * dim /* wo */ +
                     L * dim /* rms_ffn */ + 3 * L * hid * dim /* w1 w2 w3 */ + dim +
                     c->seq_len * hs /* freq_cis real + imag */ + (shared ? 0 : V * dim);
    int64_t want = HEADER_BYTES + 4 * floats;
    if ((int64_t)p->map_bytes < want)
        return lt_error(LT_EFORMAT, "%s: truncated: header (dim %lld, hidden %lld, %lld layers, "
                        "vocab %lld) implies %lld bytes, file has %zu", path, (long long)dim,
                        (long long)hid, (long long)L, (long long)V, (long long)want,
                        p->map_bytes);
    if ((int64_t)p->map_bytes > want)
        lt_log(LT_LOG_WARN, "%s: %lld bytes after the weights the header implies, ignored", path,
               (long long)p->map_bytes - want);

    m->layers = calloc((size_t)L, sizeof *m->layers);
    p->norms = malloc((size_t)(2 * L + 1) * (size_t)dim * sizeof(float));
    if (!m->layers || !p->norms) return lt_error(LT_ENOMEM, "%s: out of memory", path);

    const float *cur = (const float *)((const char *)p->map + HEADER_BYTES);
    float *emb = take(&cur, V * dim);
    lt_tensor_init(&m->tok_embd, LT_F32, dim, V, 1, 1, emb);
    float *rms_att = take(&cur, L * dim), *wq = take(&cur, L * dim * dim);
    float *wk = take(&cur, L * kv_dim * dim), *wv = take(&cur, L * kv_dim * dim);
    float *wo = take(&cur, L * dim * dim), *rms_ffn = take(&cur, L * dim);
    float *w1 = take(&cur, L * hid * dim), *w2 = take(&cur, L * dim * hid);
    float *w3 = take(&cur, L * hid * dim), *rms_final = take(&cur, dim);
    take(&cur, c->seq_len * hs); /* freq_cis_real and _imag: recomputed by the rope kernel */
    float *wcls = shared ? emb : take(&cur, V * dim);

    float *norm = p->norms;
    for (int64_t l = 0; l < L; l++) {
        lt_llama_layer *y = &m->layers[l];
        lt_tensor_init(&y->attn_norm, LT_F32, dim, 1, 1, 1,
                       lt__norm_copy(norm, rms_att + l * dim, LT_F32, dim));
        norm += dim;
        lt_tensor_init(&y->ffn_norm, LT_F32, dim, 1, 1, 1,
                       lt__norm_copy(norm, rms_ffn + l * dim, LT_F32, dim));
        norm += dim;
        lt_tensor_init(&y->wq, LT_F32, dim, dim, 1, 1, wq + l * dim * dim);
        lt_tensor_init(&y->wk, LT_F32, dim, kv_dim, 1, 1, wk + l * kv_dim * dim);
        lt_tensor_init(&y->wv, LT_F32, dim, kv_dim, 1, 1, wv + l * kv_dim * dim);
        lt_tensor_init(&y->wo, LT_F32, dim, dim, 1, 1, wo + l * dim * dim);
        lt_tensor_init(&y->w_gate, LT_F32, dim, hid, 1, 1, w1 + l * hid * dim);
        lt_tensor_init(&y->w_down, LT_F32, hid, dim, 1, 1, w2 + l * dim * hid);
        lt_tensor_init(&y->w_up, LT_F32, dim, hid, 1, 1, w3 + l * hid * dim);
    }
    lt_tensor_init(&m->output_norm, LT_F32, dim, 1, 1, 1,
                   lt__norm_copy(norm, rms_final, LT_F32, dim));
    lt_tensor_init(&m->output, LT_F32, dim, V, 1, 1, wcls);
    m->wtype = LT_F32;
    snprintf(m->format, sizeof m->format, "llama2c");
    return LT_OK;
}

"""Independent numpy reference for looptune's Llama inference, used by the end-to-end tests.

It reads GGUF files (through gguf_ref, whose names it re-exports) and llama2.c checkpoints,
dequantises f16/bf16/q8_0, and runs the Llama forward pass in float64 with a KV cache and greedy
generation. It is written from the format specs and the model math and shares no code with the C
runtime.

Architectures, as Hugging Face transformers' modelling code defines them (modeling_llama.py,
modeling_qwen2.py) and GGUF stores them:
- llama: rotary embedding of pairs (x[2i], x[2i+1]) of each head. HF rotates halves
  (rotate_half), but the GGUF converter permutes the rows of Wq and Wk so that a GGUF llama's
  pairs are adjacent (llama.cpp's LLAMA_ROPE_TYPE_NORM); Llama 3.x files add rope_freqs.weight,
  per-pair divisors of the frequency (Meta's "llama3" rope scaling, see llama3_inv_freq).
- qwen2: q, k and v projections with biases (q = x Wq^T + bq, before the rope) and HF's
  rotate_half rotation of halves (x[i], x[i + head_dim/2]) (LLAMA_ROPE_TYPE_NEOX); GGUF keeps
  the rows as HF has them.
"""

import math
import struct

import numpy as np

from gguf_ref import *  # noqa: F401,F403 -- the format layer is part of this library's interface
from gguf_ref import Cursor, FormatError, GGML_F32, GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC, GGUFFile
from gguf_ref import T_F32, T_STRING, T_U32, quantize, write_gguf

LLAMA2C_HEADER_BYTES = 7 * 4  # dim, hidden, layers, heads, kv_heads, vocab, seq_len (int32)

# ---- the model ------------------------------------------------------------------------------

ARCHS = ("llama", "qwen2")


class Config:
    def __init__(self, dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len,
                 rms_eps=1e-5, rope_base=10000.0, arch="llama"):
        self.dim, self.hidden_dim, self.n_layers = dim, hidden_dim, n_layers
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.vocab_size, self.seq_len = vocab_size, seq_len
        self.rms_eps, self.rope_base = rms_eps, rope_base
        if arch not in ARCHS:
            raise FormatError("architecture %r" % (arch,))
        self.arch = arch
        self.rope_halves = arch == "qwen2"  # rotate_half pairs (neox) instead of adjacent pairs
        if n_heads <= 0 or n_kv_heads <= 0 or dim % n_heads or n_heads % n_kv_heads:
            raise FormatError("bad head counts: dim %d, heads %d, kv heads %d" %
                              (dim, n_heads, n_kv_heads))
        self.head_dim = dim // n_heads
        if self.head_dim % 2:
            raise FormatError("odd head_dim %d" % self.head_dim)
        self.kv_dim = n_kv_heads * self.head_dim

    def copy(self):
        return Config(self.dim, self.hidden_dim, self.n_layers, self.n_heads, self.n_kv_heads,
                      self.vocab_size, self.seq_len, self.rms_eps, self.rope_base, self.arch)

    def __repr__(self):
        return ("Config(%s, dim=%d, hidden=%d, layers=%d, heads=%d, kv_heads=%d, vocab=%d, "
                "seq=%d, eps=%g, rope_base=%g)" % (self.arch, self.dim, self.hidden_dim,
                                                   self.n_layers, self.n_heads, self.n_kv_heads,
                                                   self.vocab_size, self.seq_len, self.rms_eps,
                                                   self.rope_base))


class Model:
    """Llama weights as float64 arrays, every matrix row-major [out][in].

    layers[i] has attn_norm[dim], wq[dim][dim], wk[kv_dim][dim], wv[kv_dim][dim], wo[dim][dim],
    ffn_norm[dim], w_gate[hidden][dim], w_down[dim][hidden], w_up[hidden][dim], and optionally
    the biases bq[dim], bk[kv_dim], bv[kv_dim]. rope_freqs[head_dim/2] (or None) divides each
    pair's rope frequency."""

    def __init__(self, cfg, tok_emb, layers, out_norm, w_out, rope_freqs=None):
        self.cfg, self.tok_emb, self.layers = cfg, tok_emb, layers
        self.out_norm, self.w_out = out_norm, w_out
        self.rope_freqs = rope_freqs
        self._check()

    def _check(self):
        c = self.cfg
        want = {"attn_norm": (c.dim,), "wq": (c.dim, c.dim), "wk": (c.kv_dim, c.dim),
                "wv": (c.kv_dim, c.dim), "wo": (c.dim, c.dim), "ffn_norm": (c.dim,),
                "w_gate": (c.hidden_dim, c.dim), "w_down": (c.dim, c.hidden_dim),
                "w_up": (c.hidden_dim, c.dim)}
        if self.tok_emb.shape != (c.vocab_size, c.dim):
            raise FormatError("embedding shape %s" % (self.tok_emb.shape,))
        if self.w_out.shape != (c.vocab_size, c.dim) or self.out_norm.shape != (c.dim,):
            raise FormatError("output shape %s" % (self.w_out.shape,))
        if len(self.layers) != c.n_layers:
            raise FormatError("%d layers, config says %d" % (len(self.layers), c.n_layers))
        if self.rope_freqs is not None and self.rope_freqs.shape != (c.head_dim // 2,):
            raise FormatError("rope_freqs shape %s" % (self.rope_freqs.shape,))
        bias = {"bq": (c.dim,), "bk": (c.kv_dim,), "bv": (c.kv_dim,)}
        for i, layer in enumerate(self.layers):
            for k, shape in want.items():
                if layer[k].shape != shape:
                    raise FormatError("layer %d %s shape %s, want %s" %
                                      (i, k, layer[k].shape, shape))
            for k, shape in bias.items():
                if k in layer and layer[k].shape != shape:
                    raise FormatError("layer %d %s shape %s, want %s" %
                                      (i, k, layer[k].shape, shape))

    def copy(self):
        """A copy whose config and per-layer dicts can be changed; arrays are shared."""
        return Model(self.cfg.copy(), self.tok_emb, [dict(w) for w in self.layers],
                     self.out_norm, self.w_out, self.rope_freqs)

    def astype(self, dtype):
        """A copy computing in another float type (float32 to estimate rounding effects)."""
        conv = [{k: v.astype(dtype) for k, v in layer.items()} for layer in self.layers]
        return Model(self.cfg, self.tok_emb.astype(dtype), conv, self.out_norm.astype(dtype),
                     self.w_out.astype(dtype),
                     None if self.rope_freqs is None else self.rope_freqs.astype(dtype))


def random_model(rng, dim, hidden, layers, heads, kv_heads, vocab, seq, base=10000.0,
                 arch="llama", rope_freqs=None):
    """A model with random weights (numpy Generator rng), for tests; qwen2 gets biases."""
    cfg = Config(dim, hidden, layers, heads, kv_heads, vocab, seq, rms_eps=1e-5,
                 rope_base=base, arch=arch)

    def w(rows, cols):
        return rng.standard_normal((rows, cols)) / math.sqrt(cols)

    layers_ = [dict(attn_norm=1 + 0.2 * rng.standard_normal(dim), wq=w(dim, dim),
                    wk=w(cfg.kv_dim, dim), wv=w(cfg.kv_dim, dim), wo=w(dim, dim),
                    ffn_norm=1 + 0.2 * rng.standard_normal(dim), w_gate=w(hidden, dim),
                    w_down=w(dim, hidden), w_up=w(hidden, dim)) for _ in range(layers)]
    if arch == "qwen2":
        for layer in layers_:
            layer.update(bq=0.5 * rng.standard_normal(dim), bk=0.5 * rng.standard_normal(cfg.kv_dim),
                         bv=0.5 * rng.standard_normal(cfg.kv_dim))
    emb = rng.standard_normal((vocab, dim))
    return Model(cfg, emb, layers_, 1 + 0.2 * rng.standard_normal(dim), emb, rope_freqs)


def llama3_inv_freq(base, head_dim, factor, low_freq_factor, high_freq_factor, original_context):
    """Meta's "llama3" rope scaling as transformers' _compute_llama3_parameters defines it:
    the inverse frequencies [head_dim/2] after scaling. Long wavelengths (beyond
    original_context / low_freq_factor) are slowed by `factor`, short ones (below
    original_context / high_freq_factor) kept, and the band between interpolated."""
    inv_freq = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    low_wavelen = original_context / low_freq_factor
    high_wavelen = original_context / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = np.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
    smooth = (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return np.where(medium, smoothed, scaled)


_GGUF_LAYER_NAMES = {"attn_norm": "attn_norm", "wq": "attn_q", "wk": "attn_k", "wv": "attn_v",
                     "wo": "attn_output", "ffn_norm": "ffn_norm", "w_gate": "ffn_gate",
                     "w_down": "ffn_down", "w_up": "ffn_up"}
_GGUF_BIAS_NAMES = {"bq": "attn_q", "bk": "attn_k", "bv": "attn_v"}


def gguf_layer_tensor_name(i, key):
    if key in _GGUF_BIAS_NAMES:
        return "blk.%d.%s.bias" % (i, _GGUF_BIAS_NAMES[key])
    return "blk.%d.%s.weight" % (i, _GGUF_LAYER_NAMES[key])


def load_gguf(path_or_file):
    """Model from a GGUF file (path or GGUFFile) with general.architecture llama or qwen2:
    metadata under the architecture's prefix, biases and rope_freqs.weight where present."""
    g = path_or_file if isinstance(path_or_file, GGUFFile) else GGUFFile(path_or_file)
    arch = g.get("general.architecture", "llama")
    if arch not in ARCHS:
        raise FormatError("%s: architecture %s" % (g.path, arch))
    emb = g.tensor("token_embd.weight")
    dim = g.get_int(arch + ".embedding_length")
    n_heads = g.get_int(arch + ".attention.head_count")
    cfg = Config(dim=dim,
                 hidden_dim=g.get_int(arch + ".feed_forward_length"),
                 n_layers=g.get_int(arch + ".block_count"),
                 n_heads=n_heads,
                 n_kv_heads=g.get_int(arch + ".attention.head_count_kv", n_heads),
                 vocab_size=emb.shape[0],
                 seq_len=g.get_int(arch + ".context_length"),
                 rms_eps=g.get_float(arch + ".attention.layer_norm_rms_epsilon", 1e-5),
                 rope_base=g.get_float(arch + ".rope.freq_base", 10000.0),
                 arch=arch)
    rope_dims = g.get_int(arch + ".rope.dimension_count", cfg.head_dim)
    if rope_dims != cfg.head_dim:
        raise FormatError("%s: partial rope (%d of %d) not supported" %
                          (g.path, rope_dims, cfg.head_dim))
    layers = []
    for i in range(cfg.n_layers):
        layer = {k: g.tensor(gguf_layer_tensor_name(i, k)) for k in _GGUF_LAYER_NAMES}
        for k in _GGUF_BIAS_NAMES:
            if gguf_layer_tensor_name(i, k) in g.by_name:
                layer[k] = g.tensor(gguf_layer_tensor_name(i, k))
        layers.append(layer)
    out_norm = g.tensor("output_norm.weight")
    w_out = g.tensor("output.weight") if "output.weight" in g.by_name else emb
    freqs = g.tensor("rope_freqs.weight") if "rope_freqs.weight" in g.by_name else None
    return Model(cfg, emb, layers, out_norm, w_out, freqs)


def read_llama2c_header(buf):
    if len(buf) < LLAMA2C_HEADER_BYTES:
        raise FormatError("llama2.c header truncated (%d bytes)" % len(buf))
    return struct.unpack_from("<7i", buf, 0)


def llama2c_layout(header):
    """[(name, shape)] of the float32 arrays after the header, in file order, and the
    config. Names starting with '_' are skipped (freq_cis)."""
    dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len = header
    shared = vocab > 0
    vocab = abs(vocab)
    cfg = Config(dim, hidden, n_layers, n_heads, n_kv, vocab, seq_len)
    L, hd, kvd = n_layers, cfg.head_dim, cfg.kv_dim
    layout = [("tok_emb", (vocab, dim)), ("attn_norm", (L, dim)), ("wq", (L, dim, dim)),
              ("wk", (L, kvd, dim)), ("wv", (L, kvd, dim)), ("wo", (L, dim, dim)),
              ("ffn_norm", (L, dim)), ("w_gate", (L, hidden, dim)), ("w_down", (L, dim, hidden)),
              ("w_up", (L, hidden, dim)), ("out_norm", (dim,)),
              ("_freq_real", (seq_len * hd // 2,)), ("_freq_imag", (seq_len * hd // 2,))]
    if not shared:
        layout.append(("w_out", (vocab, dim)))
    return layout, cfg


def load_llama2c(path):
    """Model from a llama2.c legacy checkpoint (header of 7 int32, then float32 arrays)."""
    with open(path, "rb") as f:
        buf = f.read()
    header = read_llama2c_header(buf)
    if min(header[:5]) <= 0 or header[5] == 0 or header[6] <= 0:
        raise FormatError("%s: bad llama2.c header %s" % (path, header))
    layout, cfg = llama2c_layout(header)
    need = LLAMA2C_HEADER_BYTES + 4 * sum(int(np.prod(s)) for _, s in layout)
    if len(buf) != need:
        raise FormatError("%s: %d bytes, llama2.c header implies %d" % (path, len(buf), need))
    arrays, pos = {}, LLAMA2C_HEADER_BYTES
    for name, shape in layout:
        n = int(np.prod(shape))
        arrays[name] = np.frombuffer(buf, "<f4", n, pos).astype(np.float64).reshape(shape)
        pos += 4 * n
    keys = ("attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w_gate", "w_down", "w_up")
    layers = [{k: arrays[k][i] for k in keys} for i in range(cfg.n_layers)]
    return Model(cfg, arrays["tok_emb"], layers, arrays["out_norm"],
                 arrays.get("w_out", arrays["tok_emb"]))


def read_llama2c_tokenizer(path, vocab_size):
    """llama2.c tokenizer.bin: int32 max_token_length, then per token float32 score, int32
    length, bytes. Returns (pieces as bytes, scores)."""
    with open(path, "rb") as f:
        buf = f.read()
    c = Cursor(buf, path)
    c.unpack("<i", "max token length")
    pieces, scores = [], []
    for i in range(vocab_size):
        scores.append(c.unpack("<f", "score %d" % i))
        n = c.unpack("<i", "length %d" % i)
        c.need(n, "piece %d" % i)
        pieces.append(bytes(buf[c.pos:c.pos + n]))
        c.pos += n
    return pieces, np.array(scores, dtype=np.float32)


def load_model(path):
    with open(path, "rb") as f:
        magic = f.read(4)
    return load_gguf(path) if magic == GGUF_MAGIC else load_llama2c(path)


def model_to_gguf(model, path, ggml_type=GGML_F32, version=3, alignment=GGUF_DEFAULT_ALIGNMENT,
                  extra_kvs=(), tie_output=True):
    """Writes model as a GGUF file of its architecture: projections and embedding as ggml_type,
    norms, biases and rope_freqs f32."""
    kvs, tensors = model_gguf_parts(model, ggml_type, extra_kvs, tie_output)
    write_gguf(path, kvs, tensors, version=version, alignment=alignment)


def model_gguf_parts(model, ggml_type=GGML_F32, extra_kvs=(), tie_output=True):
    """(kvs, tensors) of model_to_gguf, for write_gguf: lists a test may edit first."""
    c = model.cfg
    a = c.arch
    kvs = [("general.architecture", T_STRING, a),
           ("general.name", T_STRING, "reference export"),
           (a + ".context_length", T_U32, c.seq_len),
           (a + ".embedding_length", T_U32, c.dim),
           (a + ".feed_forward_length", T_U32, c.hidden_dim),
           (a + ".block_count", T_U32, c.n_layers),
           (a + ".attention.head_count", T_U32, c.n_heads),
           (a + ".attention.head_count_kv", T_U32, c.n_kv_heads),
           (a + ".rope.dimension_count", T_U32, c.head_dim),
           (a + ".rope.freq_base", T_F32, c.rope_base),
           (a + ".attention.layer_norm_rms_epsilon", T_F32, c.rms_eps)]
    kvs += list(extra_kvs)

    def ten(name, arr, gt):
        return (name, gt, tuple(reversed(arr.shape)), quantize(gt, arr))

    tensors = [ten("token_embd.weight", model.tok_emb, ggml_type)]
    if model.rope_freqs is not None:
        tensors.append(ten("rope_freqs.weight", model.rope_freqs, GGML_F32))
    for i, layer in enumerate(model.layers):
        for k in _GGUF_LAYER_NAMES:
            gt = GGML_F32 if k.endswith("norm") else ggml_type
            tensors.append(ten(gguf_layer_tensor_name(i, k), layer[k], gt))
        for k in _GGUF_BIAS_NAMES:  # 1-D tensors: f32, as the GGUF converter keeps them
            if k in layer:
                tensors.append(ten(gguf_layer_tensor_name(i, k), layer[k], GGML_F32))
    tensors.append(ten("output_norm.weight", model.out_norm, GGML_F32))
    if not tie_output or model.w_out is not model.tok_emb:
        tensors.append(ten("output.weight", model.w_out, ggml_type))
    return kvs, tensors


# ---- the forward pass -----------------------------------------------------------------------

def rmsnorm(x, w, eps):
    """x / sqrt(mean(x^2) + eps) * w, row-wise."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_angles(positions, head_dim, base, freq_factors=None):
    """[n][head_dim/2] angles pos * base^(-2i/head_dim) / freq_factors[i]."""
    i = np.arange(head_dim // 2, dtype=np.float64)
    inv_freq = base ** (-2.0 * i / head_dim)
    if freq_factors is not None:
        inv_freq = inv_freq / np.asarray(freq_factors, dtype=np.float64)
    return np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]


def rope(x, positions, head_dim, base, halves=False, freq_factors=None):
    """Rotates pair i of every head of every row by angle i: x is [n][heads*head_dim], row t at
    positions[t]. The pair is (x[2i], x[2i+1]) (GGUF llama), or with halves (x[i], x[i+hd/2])
    as transformers' rotate_half: x*cos + rotate_half(x)*sin with cos, sin repeated over both
    halves and rotate_half(x) = (-x2, x1). Returns a new array."""
    n = x.shape[0]
    ang = rope_angles(positions, head_dim, base, freq_factors)   # [n][hd/2]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    if halves:
        h = x.reshape(n, -1, head_dim)
        cos2 = np.concatenate([cos, cos], axis=-1)
        sin2 = np.concatenate([sin, sin], axis=-1)
        x1, x2 = h[..., :head_dim // 2], h[..., head_dim // 2:]
        rotated = np.concatenate([-x2, x1], axis=-1)
        return (h * cos2 + rotated * sin2).reshape(x.shape)
    h = x.reshape(n, -1, head_dim // 2, 2)
    a, b = h[..., 0], h[..., 1]
    out = np.empty_like(h)
    out[..., 0] = a * cos - b * sin
    out[..., 1] = a * sin + b * cos
    return out.reshape(x.shape)


def silu(x):
    return x / (1.0 + np.exp(-x))


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


class KVCache:
    def __init__(self, cfg, dtype=np.float64):
        self.k = np.zeros((cfg.n_layers, cfg.seq_len, cfg.kv_dim), dtype=dtype)
        self.v = np.zeros((cfg.n_layers, cfg.seq_len, cfg.kv_dim), dtype=dtype)
        self.pos = 0  # tokens already in the cache


def forward(model, tokens, cache):
    """Feeds tokens (at positions cache.pos, cache.pos+1, ...) through the model in one batch.
    Returns logits [len(tokens)][vocab] and advances the cache."""
    c = model.cfg
    n = len(tokens)
    p0 = cache.pos
    if n == 0 or p0 + n > c.seq_len:
        raise ValueError("positions %d..%d outside context %d" % (p0, p0 + n - 1, c.seq_len))
    tokens = np.asarray(tokens, dtype=np.int64)
    if tokens.min() < 0 or tokens.max() >= c.vocab_size:
        raise ValueError("token id outside vocabulary")
    positions = np.arange(p0, p0 + n)
    hd, group = c.head_dim, c.n_heads // c.n_kv_heads
    end = p0 + n
    # causal mask: query at position p sees keys 0..p
    mask = np.arange(end)[None, :] > positions[:, None]            # [n][end]
    scale = 1.0 / math.sqrt(hd)

    x = model.tok_emb[tokens].copy()                                # [n][dim]
    for li, w in enumerate(model.layers):
        # attention block
        xb = rmsnorm(x, w["attn_norm"], c.rms_eps)
        q = xb @ w["wq"].T + w.get("bq", 0.0)
        k = xb @ w["wk"].T + w.get("bk", 0.0)
        v = xb @ w["wv"].T + w.get("bv", 0.0)
        q = rope(q, positions, hd, c.rope_base, c.rope_halves, model.rope_freqs)
        k = rope(k, positions, hd, c.rope_base, c.rope_halves, model.rope_freqs)
        cache.k[li, p0:end] = k
        cache.v[li, p0:end] = v
        keys = cache.k[li, :end].reshape(end, c.n_kv_heads, hd)
        vals = cache.v[li, :end].reshape(end, c.n_kv_heads, hd)
        qh = q.reshape(n, c.n_heads, hd)
        att = np.empty((n, c.n_heads, hd), dtype=x.dtype)
        for h in range(c.n_heads):
            kvh = h // group
            s = (qh[:, h, :] @ keys[:, kvh, :].T) * scale          # [n][end]
            s = np.where(mask, -np.inf, s)
            att[:, h, :] = softmax(s) @ vals[:, kvh, :]
        x = x + att.reshape(n, c.dim) @ w["wo"].T
        # feed-forward block
        xb = rmsnorm(x, w["ffn_norm"], c.rms_eps)
        x = x + (silu(xb @ w["w_gate"].T) * (xb @ w["w_up"].T)) @ w["w_down"].T
    cache.pos = end
    x = rmsnorm(x, model.out_norm, c.rms_eps)
    return x @ model.w_out.T


def logits_for(model, tokens, batch=None, dtype=np.float64):
    """Logits row for every token of `tokens` fed in order from position 0, in batches of at
    most `batch` tokens (None: all at once)."""
    cache = KVCache(model.cfg, dtype)
    batch = batch or len(tokens)
    rows = [forward(model, tokens[i:i + batch], cache) for i in range(0, len(tokens), batch)]
    return np.concatenate(rows, axis=0)


def greedy(model, prompt, n, prefill_batch=None, dtype=np.float64):
    """Greedy generation as looptune's `run --temp 0` does it: returns (generated ids [n],
    logits rows [len(prompt) + n - 1][vocab]). Ties go to the lowest id."""
    cache = KVCache(model.cfg, dtype)
    batch = prefill_batch or len(prompt)
    rows = [forward(model, prompt[i:i + batch], cache) for i in range(0, len(prompt), batch)]
    last = rows[-1][-1]
    out = []
    for step in range(n):
        tok = int(np.argmax(last))
        out.append(tok)
        if step + 1 < n:
            last = forward(model, [tok], cache)[0]
            rows.append(last[None, :])
    return out, np.concatenate(rows, axis=0)


def top2_gap(row):
    """Difference between the largest and second-largest logit of a row."""
    part = np.partition(row, -2)
    return float(part[-1] - part[-2])

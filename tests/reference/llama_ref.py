"""Independent numpy reference for looptune's Llama inference, used by the end-to-end tests.

It has its own readers for GGUF (v2/v3) and llama2.c checkpoints, dequantises f16/bf16/q8_0,
and runs the Llama forward pass in float64 with a KV cache. It is written from the format specs
and the model math, and shares no code with the C runtime. A small GGUF writer is included so the
tests can hand looptune files that looptune's own writer did not produce, and so the reader can be
checked by round trip.
"""

import math
import struct

import numpy as np

# ---- GGUF constants -------------------------------------------------------------------------

GGUF_MAGIC = b"GGUF"
GGUF_DEFAULT_ALIGNMENT = 32

# Metadata value types.
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STRING, T_ARRAY, T_U64, T_I64, T_F64 = \
    range(13)
_SCALAR_FMT = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i",
               T_F32: "<f", T_BOOL: "<B", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}
_SCALAR_NP = {T_U8: "<u1", T_I8: "<i1", T_U16: "<u2", T_I16: "<i2", T_U32: "<u4", T_I32: "<i4",
              T_F32: "<f4", T_BOOL: "<u1", T_U64: "<u8", T_I64: "<i8", T_F64: "<f8"}
_INT_TYPES = (T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_U64, T_I64)

# ggml tensor types this reference understands.
GGML_F32, GGML_F16, GGML_Q8_0, GGML_BF16 = 0, 1, 8, 30
QK8_0 = 32
Q8_0_BLOCK_BYTES = 2 + QK8_0
GGML_TYPE_NAMES = {GGML_F32: "f32", GGML_F16: "f16", GGML_Q8_0: "q8_0", GGML_BF16: "bf16"}
GGML_TYPE_BY_NAME = {v: k for k, v in GGML_TYPE_NAMES.items()}

LLAMA2C_HEADER_BYTES = 7 * 4


class FormatError(Exception):
    """A model file this reference cannot accept."""


def ggml_nbytes(ggml_type, ne):
    """Bytes of a tensor of shape ne (ne[0] innermost) stored as ggml_type."""
    n = 1
    for d in ne:
        n *= d
    if ggml_type == GGML_F32:
        return 4 * n
    if ggml_type in (GGML_F16, GGML_BF16):
        return 2 * n
    if ggml_type == GGML_Q8_0:
        if ne[0] % QK8_0:
            raise FormatError("q8_0 row length %d is not a multiple of %d" % (ne[0], QK8_0))
        return n // QK8_0 * Q8_0_BLOCK_BYTES
    raise FormatError("unknown ggml type %d" % ggml_type)


# ---- dequantisation -------------------------------------------------------------------------

def f16_to_f64(raw):
    """IEEE half bytes (little-endian) -> float64 array."""
    return np.frombuffer(raw, dtype="<f2").astype(np.float64)


def bf16_to_f64(raw):
    """bfloat16 bytes -> float64: a bf16 is the top half of a float32."""
    hi = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
    return hi.view(np.float32).astype(np.float64)


_Q8_0_DTYPE = np.dtype([("d", "<f2"), ("qs", "i1", (QK8_0,))])


def q8_0_to_f64(raw):
    """q8_0 blocks (f16 scale d, 32 int8 quants) -> float64 values d * q."""
    blocks = np.frombuffer(raw, dtype=_Q8_0_DTYPE)
    d = blocks["d"].astype(np.float64)
    return (d[:, None] * blocks["qs"].astype(np.float64)).reshape(-1)


def dequantize(ggml_type, raw):
    if ggml_type == GGML_F32:
        return np.frombuffer(raw, dtype="<f4").astype(np.float64)
    if ggml_type == GGML_F16:
        return f16_to_f64(raw)
    if ggml_type == GGML_BF16:
        return bf16_to_f64(raw)
    if ggml_type == GGML_Q8_0:
        return q8_0_to_f64(raw)
    raise FormatError("unknown ggml type %d" % ggml_type)


# ---- quantisation (for writing test files) --------------------------------------------------

def f32_to_bf16_bits(x):
    """float32 -> bf16 bit patterns, round to nearest even (NaN stays NaN)."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    rounded = np.where(nan, (u >> 16) | 0x40, rounded)
    return rounded.astype(np.uint16)


def quantize(ggml_type, x):
    """float array (row-major, last axis innermost) -> raw bytes of ggml_type."""
    x = np.asarray(x, dtype=np.float32).reshape(-1)
    if ggml_type == GGML_F32:
        return x.astype("<f4").tobytes()
    if ggml_type == GGML_F16:
        return x.astype("<f2").tobytes()
    if ggml_type == GGML_BF16:
        return f32_to_bf16_bits(x).astype("<u2").tobytes()
    if ggml_type == GGML_Q8_0:
        if x.size % QK8_0:
            raise ValueError("q8_0 needs a multiple of %d values" % QK8_0)
        b = x.reshape(-1, QK8_0).astype(np.float64)
        amax = np.abs(b).max(axis=1)
        d = amax / 127.0
        inv = np.divide(1.0, d, out=np.zeros_like(d), where=d > 0)
        blocks = np.zeros(b.shape[0], dtype=_Q8_0_DTYPE)
        blocks["d"] = d.astype("<f2")
        blocks["qs"] = np.clip(np.rint(b * inv[:, None]), -127, 127).astype(np.int8)
        return blocks.tobytes()
    raise ValueError("unknown ggml type %d" % ggml_type)


# ---- GGUF reader ----------------------------------------------------------------------------

class GGUFField:
    """One metadata key/value; pos is the file offset of the key's length prefix and
    value_pos the offset of the value (after its type tag)."""

    def __init__(self, key, vtype, value, pos, value_pos, elem_type=None):
        self.key, self.type, self.value = key, vtype, value
        self.pos, self.value_pos, self.elem_type = pos, value_pos, elem_type


class GGUFTensorInfo:
    """One tensor info record, with the file offsets of each of its fields so tests can patch
    them: name_pos (start of the name bytes), n_dims_pos, ne_pos[i], type_pos, offset_pos.
    data_pos is the absolute file offset of the data."""

    def __init__(self):
        self.name = None
        self.n_dims = 0
        self.ne = ()
        self.ggml_type = 0
        self.offset = 0
        self.name_pos = self.n_dims_pos = self.type_pos = self.offset_pos = 0
        self.ne_pos = []
        self.data_pos = 0
        self.nbytes = 0


class _Cursor:
    def __init__(self, buf, what):
        self.buf, self.pos, self.what = buf, 0, what

    def need(self, n, item):
        if n < 0 or self.pos + n > len(self.buf):
            raise FormatError("%s: truncated: %s at offset %d needs %d bytes, %d left" %
                              (self.what, item, self.pos, n, len(self.buf) - self.pos))

    def unpack(self, fmt, item):
        n = struct.calcsize(fmt)
        self.need(n, item)
        v = struct.unpack_from(fmt, self.buf, self.pos)[0]
        self.pos += n
        return v

    def string(self, item):
        n = self.unpack("<Q", item + " length")
        self.need(n, item)
        s = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return s


class GGUFFile:
    """A parsed and strictly validated GGUF file.

    Attributes: version, alignment, data_start, fields (dict key -> GGUFField, in file order),
    tensors (list of GGUFTensorInfo in file order), buf (the file bytes)."""

    def __init__(self, path=None, data=None):
        if data is None:
            with open(path, "rb") as f:
                data = f.read()
        self.path = path or "<bytes>"
        self.buf = data
        self._parse()

    def _read_value(self, c, vtype, item, depth=0):
        if vtype in _SCALAR_FMT:
            v = c.unpack(_SCALAR_FMT[vtype], item)
            if vtype == T_BOOL:
                if v > 1:
                    raise FormatError("%s: %s: bool value %d" % (self.path, item, v))
                v = bool(v)
            return v, None
        if vtype == T_STRING:
            return c.string(item).decode("utf-8", errors="surrogateescape"), None
        if vtype == T_ARRAY:
            if depth > 8:
                raise FormatError("%s: %s: arrays nested too deeply" % (self.path, item))
            et = c.unpack("<I", item + " element type")
            n = c.unpack("<Q", item + " count")
            if et in _SCALAR_NP:
                size = np.dtype(_SCALAR_NP[et]).itemsize
                if n > len(c.buf):
                    raise FormatError("%s: %s: array count %d past end of file" %
                                      (self.path, item, n))
                c.need(n * size, item)
                arr = np.frombuffer(c.buf, dtype=_SCALAR_NP[et], count=n, offset=c.pos).copy()
                c.pos += n * size
                if et == T_BOOL:
                    arr = arr.astype(bool)
                return arr, et
            if et in (T_STRING, T_ARRAY):
                if n > len(c.buf):  # every element takes at least one byte
                    raise FormatError("%s: %s: array count %d past end of file" %
                                      (self.path, item, n))
                return [self._read_value(c, et, item, depth + 1)[0] for _ in range(n)], et
            raise FormatError("%s: %s: unknown array element type %d" % (self.path, item, et))
        raise FormatError("%s: %s: unknown value type %d" % (self.path, item, vtype))

    def _parse(self):
        c = _Cursor(self.buf, self.path)
        magic = bytes(self.buf[:4])
        if len(self.buf) < 4 or magic != GGUF_MAGIC:
            raise FormatError("%s: bad magic %r" % (self.path, magic))
        c.pos = 4
        self.version = c.unpack("<I", "version")
        if self.version not in (2, 3):
            raise FormatError("%s: unsupported version %d" % (self.path, self.version))
        n_tensors = c.unpack("<Q", "tensor count")
        n_kv = c.unpack("<Q", "metadata count")
        if n_tensors > len(self.buf) or n_kv > len(self.buf):
            raise FormatError("%s: absurd counts (%d tensors, %d keys)" %
                              (self.path, n_tensors, n_kv))
        self.fields = {}
        for i in range(n_kv):
            pos = c.pos
            key = c.string("key %d" % i).decode("utf-8")
            if key in self.fields:
                raise FormatError("%s: duplicate key %s" % (self.path, key))
            vtype = c.unpack("<I", "type of " + key)
            value_pos = c.pos
            value, et = self._read_value(c, vtype, key)
            self.fields[key] = GGUFField(key, vtype, value, pos, value_pos, et)
        self.alignment = GGUF_DEFAULT_ALIGNMENT
        if "general.alignment" in self.fields:
            f = self.fields["general.alignment"]
            if f.type != T_U32 or f.value == 0 or f.value & (f.value - 1):
                raise FormatError("%s: bad general.alignment" % self.path)
            self.alignment = f.value
        self.tensors = []
        names = set()
        for i in range(n_tensors):
            t = GGUFTensorInfo()
            t.name_pos = c.pos + 8
            t.name = c.string("tensor %d name" % i).decode("utf-8")
            if t.name in names:
                raise FormatError("%s: duplicate tensor %s" % (self.path, t.name))
            names.add(t.name)
            t.n_dims_pos = c.pos
            t.n_dims = c.unpack("<I", t.name + " n_dims")
            if not 1 <= t.n_dims <= 4:
                raise FormatError("%s: tensor %s: %d dims" % (self.path, t.name, t.n_dims))
            ne = []
            for d in range(t.n_dims):
                t.ne_pos.append(c.pos)
                ne.append(c.unpack("<Q", t.name + " ne"))
            t.ne = tuple(ne)
            t.type_pos = c.pos
            t.ggml_type = c.unpack("<I", t.name + " type")
            t.offset_pos = c.pos
            t.offset = c.unpack("<Q", t.name + " offset")
            self.tensors.append(t)
        self.data_start = -(-c.pos // self.alignment) * self.alignment
        spans = []
        for t in self.tensors:
            if t.ggml_type not in GGML_TYPE_NAMES:
                raise FormatError("%s: tensor %s: unsupported type %d" %
                                  (self.path, t.name, t.ggml_type))
            if any(d <= 0 or d > 1 << 40 for d in t.ne):
                raise FormatError("%s: tensor %s: bad dims %s" % (self.path, t.name, t.ne))
            if t.offset % self.alignment:
                raise FormatError("%s: tensor %s: offset %d not aligned" %
                                  (self.path, t.name, t.offset))
            t.nbytes = ggml_nbytes(t.ggml_type, t.ne)
            t.data_pos = self.data_start + t.offset
            if t.data_pos + t.nbytes > len(self.buf):
                raise FormatError("%s: tensor %s: offset %d past end of file" %
                                  (self.path, t.name, t.offset))
            spans.append((t.offset, t.offset + t.nbytes, t.name))
        spans.sort()
        for a, b in zip(spans, spans[1:]):
            if b[0] < a[1]:
                raise FormatError("%s: tensors %s and %s overlap" % (self.path, a[2], b[2]))
        self.by_name = {t.name: t for t in self.tensors}

    # metadata helpers
    def get(self, key, default=None):
        f = self.fields.get(key)
        return default if f is None else f.value

    def get_int(self, key, default=None):
        f = self.fields.get(key)
        if f is None:
            return default
        if f.type not in _INT_TYPES:
            raise FormatError("%s: key %s is not an integer" % (self.path, key))
        return int(f.value)

    def get_float(self, key, default=None):
        f = self.fields.get(key)
        if f is None:
            return default
        if f.type not in (T_F32, T_F64) + _INT_TYPES:
            raise FormatError("%s: key %s is not a number" % (self.path, key))
        return float(f.value)

    def raw(self, name):
        t = self.by_name[name]
        return bytes(self.buf[t.data_pos:t.data_pos + t.nbytes])

    def tensor(self, name):
        """Dequantised float64 array with numpy shape = reversed ne (row-major, ne[0] last)."""
        t = self.by_name.get(name)
        if t is None:
            raise FormatError("%s: missing tensor %s" % (self.path, name))
        return dequantize(t.ggml_type, self.raw(name)).reshape(tuple(reversed(t.ne)))


# ---- GGUF writer ----------------------------------------------------------------------------

def _pack_string(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _pack_value(vtype, value, elem_type=None):
    if vtype in (T_F32, T_F64):
        return struct.pack(_SCALAR_FMT[vtype], float(value))
    if vtype in _SCALAR_FMT:
        return struct.pack(_SCALAR_FMT[vtype], int(value))
    if vtype == T_STRING:
        return _pack_string(value)
    if vtype == T_ARRAY:
        out = struct.pack("<IQ", elem_type, len(value))
        if elem_type in _SCALAR_NP:
            return out + np.asarray(value).astype(_SCALAR_NP[elem_type]).tobytes()
        if elem_type == T_STRING:
            return out + b"".join(_pack_string(s) for s in value)
        if elem_type == T_ARRAY:  # value: list of (elem_type, list)
            return out + b"".join(_pack_value(T_ARRAY, v, et) for et, v in value)
    raise ValueError("cannot pack type %d" % vtype)


def write_gguf(path, kvs, tensors, version=3, alignment=GGUF_DEFAULT_ALIGNMENT):
    """Writes a GGUF file.

    kvs: list of (key, type, value) or (key, T_ARRAY, value, elem_type).
    tensors: list of (name, ggml_type, ne, raw_bytes) with ne innermost first.
    general.alignment is added when alignment is not the default."""
    kvs = list(kvs)
    if alignment != GGUF_DEFAULT_ALIGNMENT:
        kvs.append(("general.alignment", T_U32, alignment))
    head = bytearray(GGUF_MAGIC + struct.pack("<IQQ", version, len(tensors), len(kvs)))
    for kv in kvs:
        head += _pack_string(kv[0]) + struct.pack("<I", kv[1])
        head += _pack_value(kv[1], kv[2], kv[3] if len(kv) > 3 else None)
    offset = 0
    offsets = []
    for name, gt, ne, raw in tensors:
        if len(raw) != ggml_nbytes(gt, ne):
            raise ValueError("tensor %s: %d bytes for shape %s" % (name, len(raw), ne))
        offsets.append(offset)
        head += _pack_string(name) + struct.pack("<I", len(ne))
        head += b"".join(struct.pack("<Q", d) for d in ne)
        head += struct.pack("<IQ", gt, offset)
        offset += -(-len(raw) // alignment) * alignment
    head += b"\0" * (-len(head) % alignment)
    body = bytearray()
    for (name, gt, ne, raw), off in zip(tensors, offsets):
        body += b"\0" * (off - len(body))
        body += raw
    with open(path, "wb") as f:
        f.write(bytes(head) + bytes(body))


# ---- the model ------------------------------------------------------------------------------

class Config:
    def __init__(self, dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len,
                 rms_eps=1e-5, rope_base=10000.0):
        self.dim, self.hidden_dim, self.n_layers = dim, hidden_dim, n_layers
        self.n_heads, self.n_kv_heads = n_heads, n_kv_heads
        self.vocab_size, self.seq_len = vocab_size, seq_len
        self.rms_eps, self.rope_base = rms_eps, rope_base
        if n_heads <= 0 or n_kv_heads <= 0 or dim % n_heads or n_heads % n_kv_heads:
            raise FormatError("bad head counts: dim %d, heads %d, kv heads %d" %
                              (dim, n_heads, n_kv_heads))
        self.head_dim = dim // n_heads
        if self.head_dim % 2:
            raise FormatError("odd head_dim %d" % self.head_dim)
        self.kv_dim = n_kv_heads * self.head_dim

    def copy(self):
        return Config(self.dim, self.hidden_dim, self.n_layers, self.n_heads, self.n_kv_heads,
                      self.vocab_size, self.seq_len, self.rms_eps, self.rope_base)

    def __repr__(self):
        return ("Config(dim=%d, hidden=%d, layers=%d, heads=%d, kv_heads=%d, vocab=%d, seq=%d, "
                "eps=%g, rope_base=%g)" % (self.dim, self.hidden_dim, self.n_layers, self.n_heads,
                                           self.n_kv_heads, self.vocab_size, self.seq_len,
                                           self.rms_eps, self.rope_base))


class Model:
    """Llama weights as float64 arrays, every matrix row-major [out][in].

    layers[i] has attn_norm[dim], wq[dim][dim], wk[kv_dim][dim], wv[kv_dim][dim], wo[dim][dim],
    ffn_norm[dim], w_gate[hidden][dim], w_down[dim][hidden], w_up[hidden][dim]."""

    def __init__(self, cfg, tok_emb, layers, out_norm, w_out):
        self.cfg, self.tok_emb, self.layers = cfg, tok_emb, layers
        self.out_norm, self.w_out = out_norm, w_out
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
        for i, layer in enumerate(self.layers):
            for k, shape in want.items():
                if layer[k].shape != shape:
                    raise FormatError("layer %d %s shape %s, want %s" %
                                      (i, k, layer[k].shape, shape))

    def copy(self):
        """A copy whose config and per-layer dicts can be changed; arrays are shared."""
        return Model(self.cfg.copy(), self.tok_emb, [dict(w) for w in self.layers],
                     self.out_norm, self.w_out)

    def astype(self, dtype):
        """A copy computing in another float type (float32 to estimate rounding effects)."""
        conv = [{k: v.astype(dtype) for k, v in layer.items()} for layer in self.layers]
        return Model(self.cfg, self.tok_emb.astype(dtype), conv, self.out_norm.astype(dtype),
                     self.w_out.astype(dtype))


def random_model(rng, dim, hidden, layers, heads, kv_heads, vocab, seq, base=10000.0):
    """A model with random weights (numpy Generator rng), for tests."""
    cfg = Config(dim, hidden, layers, heads, kv_heads, vocab, seq, rms_eps=1e-5,
                 rope_base=base)

    def w(rows, cols):
        return rng.standard_normal((rows, cols)) / math.sqrt(cols)

    layers_ = [dict(attn_norm=1 + 0.2 * rng.standard_normal(dim), wq=w(dim, dim),
                    wk=w(cfg.kv_dim, dim), wv=w(cfg.kv_dim, dim), wo=w(dim, dim),
                    ffn_norm=1 + 0.2 * rng.standard_normal(dim), w_gate=w(hidden, dim),
                    w_down=w(dim, hidden), w_up=w(hidden, dim)) for _ in range(layers)]
    emb = rng.standard_normal((vocab, dim))
    return Model(cfg, emb, layers_, 1 + 0.2 * rng.standard_normal(dim), emb)


_GGUF_LAYER_NAMES = {"attn_norm": "attn_norm", "wq": "attn_q", "wk": "attn_k", "wv": "attn_v",
                     "wo": "attn_output", "ffn_norm": "ffn_norm", "w_gate": "ffn_gate",
                     "w_down": "ffn_down", "w_up": "ffn_up"}


def gguf_layer_tensor_name(i, key):
    return "blk.%d.%s.weight" % (i, _GGUF_LAYER_NAMES[key])


def load_gguf(path_or_file):
    """Model from a GGUF file (path or GGUFFile) with general.architecture = llama."""
    g = path_or_file if isinstance(path_or_file, GGUFFile) else GGUFFile(path_or_file)
    arch = g.get("general.architecture", "llama")
    if arch != "llama":
        raise FormatError("%s: architecture %s" % (g.path, arch))
    emb = g.tensor("token_embd.weight")
    dim = g.get_int("llama.embedding_length")
    n_heads = g.get_int("llama.attention.head_count")
    cfg = Config(dim=dim,
                 hidden_dim=g.get_int("llama.feed_forward_length"),
                 n_layers=g.get_int("llama.block_count"),
                 n_heads=n_heads,
                 n_kv_heads=g.get_int("llama.attention.head_count_kv", n_heads),
                 vocab_size=emb.shape[0],
                 seq_len=g.get_int("llama.context_length"),
                 rms_eps=g.get_float("llama.attention.layer_norm_rms_epsilon", 1e-5),
                 rope_base=g.get_float("llama.rope.freq_base", 10000.0))
    rope_dims = g.get_int("llama.rope.dimension_count", cfg.head_dim)
    if rope_dims != cfg.head_dim:
        raise FormatError("%s: partial rope (%d of %d) not supported" %
                          (g.path, rope_dims, cfg.head_dim))
    layers = []
    for i in range(cfg.n_layers):
        layers.append({k: g.tensor(gguf_layer_tensor_name(i, k)) for k in _GGUF_LAYER_NAMES})
    out_norm = g.tensor("output_norm.weight")
    w_out = g.tensor("output.weight") if "output.weight" in g.by_name else emb
    return Model(cfg, emb, layers, out_norm, w_out)


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
    c = _Cursor(buf, path)
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
    """Writes model as a GGUF llama file: projections and embedding as ggml_type, norms f32."""
    c = model.cfg
    kvs = [("general.architecture", T_STRING, "llama"),
           ("general.name", T_STRING, "reference export"),
           ("llama.context_length", T_U32, c.seq_len),
           ("llama.embedding_length", T_U32, c.dim),
           ("llama.feed_forward_length", T_U32, c.hidden_dim),
           ("llama.block_count", T_U32, c.n_layers),
           ("llama.attention.head_count", T_U32, c.n_heads),
           ("llama.attention.head_count_kv", T_U32, c.n_kv_heads),
           ("llama.rope.dimension_count", T_U32, c.head_dim),
           ("llama.rope.freq_base", T_F32, c.rope_base),
           ("llama.attention.layer_norm_rms_epsilon", T_F32, c.rms_eps)]
    kvs += list(extra_kvs)

    def ten(name, arr, gt):
        return (name, gt, tuple(reversed(arr.shape)), quantize(gt, arr))

    tensors = [ten("token_embd.weight", model.tok_emb, ggml_type)]
    for i, layer in enumerate(model.layers):
        for k in _GGUF_LAYER_NAMES:
            gt = GGML_F32 if k.endswith("norm") else ggml_type
            tensors.append(ten(gguf_layer_tensor_name(i, k), layer[k], gt))
    tensors.append(ten("output_norm.weight", model.out_norm, GGML_F32))
    if not tie_output or model.w_out is not model.tok_emb:
        tensors.append(ten("output.weight", model.w_out, ggml_type))
    write_gguf(path, kvs, tensors, version=version, alignment=alignment)


# ---- the forward pass -----------------------------------------------------------------------

def rmsnorm(x, w, eps):
    """x / sqrt(mean(x^2) + eps) * w, row-wise."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_angles(positions, head_dim, base):
    """[n][head_dim/2] angles pos * base^(-2i/head_dim)."""
    i = np.arange(head_dim // 2, dtype=np.float64)
    inv_freq = base ** (-2.0 * i / head_dim)
    return np.asarray(positions, dtype=np.float64)[:, None] * inv_freq[None, :]


def rope(x, positions, head_dim, base):
    """Rotates pairs (x[2i], x[2i+1]) of every head of every row: x is [n][heads*head_dim],
    row t at positions[t]. Returns a new array."""
    n = x.shape[0]
    ang = rope_angles(positions, head_dim, base)           # [n][hd/2]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
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
        q = xb @ w["wq"].T
        k = xb @ w["wk"].T
        v = xb @ w["wv"].T
        q = rope(q, positions, hd, c.rope_base)
        k = rope(k, positions, hd, c.rope_base)
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

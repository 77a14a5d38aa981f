"""GGUF (v2/v3) for the numpy reference: a strict reader that records where every field lives
in the file (so tests can damage files precisely), a writer, and f16/bf16/q8_0 conversion (the
other quantisation types are dequantised by the PyPI gguf package). Written from the GGUF
specification; shares no code with the C runtime."""

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


class FormatError(Exception):
    """A model file this reference cannot accept."""


# The other quantisation types (q4_0 .. q6_k): read through the PyPI gguf package's
# dequantiser (gguf-py, an implementation independent of looptune's).
GGML_QUANT_NAMES = {2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 10: "q2_k", 11: "q3_k",
                    12: "q4_k", 13: "q5_k", 14: "q6_k"}
GGML_TYPE_NAMES.update(GGML_QUANT_NAMES)
GGML_TYPE_BY_NAME.update({v: k for k, v in GGML_QUANT_NAMES.items()})


def _gguf_py():
    try:
        import gguf.quants  # noqa: F401
        import gguf
    except ImportError:
        raise FormatError("reading q4_0 .. q6_k needs the gguf package (scripts/deps.sh)")
    return gguf


def ggml_nbytes(ggml_type, ne):
    """Bytes of a tensor of shape ne (ne[0] innermost) stored as ggml_type."""
    n = 1
    for d in ne:
        n *= d
    if ggml_type in GGML_QUANT_NAMES:
        block, size = _gguf_py().GGML_QUANT_SIZES[_gguf_py().GGMLQuantizationType(ggml_type)]
        if ne[0] % block:
            raise FormatError("%s row length %d is not a multiple of %d" %
                              (GGML_QUANT_NAMES[ggml_type], ne[0], block))
        return n // block * size
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
    if ggml_type in GGML_QUANT_NAMES:
        g = _gguf_py()
        blocks = np.frombuffer(raw, dtype=np.uint8)
        return g.quants.dequantize(blocks, g.GGMLQuantizationType(ggml_type)).astype(
            np.float64).reshape(-1)
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


class Cursor:
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
        c = Cursor(self.buf, self.path)
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

    # metadata lookups
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

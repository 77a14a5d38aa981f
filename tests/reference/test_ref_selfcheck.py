"""Checks the numpy reference itself against independent facts before the other tests trust it:
known bit patterns for f16/bf16/q8_0, a GGUF file assembled byte by byte from the spec, writer
and reader round trips, rope against complex multiplication and against the rope tables stored
in stories260K.bin, the forward pass against a second, deliberately naive implementation,
batched against token-by-token evaluation, causality, grouped-query attention against the
equivalent multi-head model, qwen2's biases and rotation of halves and Llama 3's rope factors
(the naive pass, and qwen2 = llama with converter-permuted rows), and float32 against float64
arithmetic (the size of error the tolerance must absorb). Needs no looptune binary."""

import math
import os
import struct
import sys

import numpy as np

import llama_ref as R
import lt_harness as H


def naive_logits(model, tokens):
    """A second forward pass written differently: one token at a time, python loops over
    heads and positions, rope by complex multiplication, scores via log-sum-exp."""
    c = model.cfg
    hd = c.head_dim
    group = c.n_heads // c.n_kv_heads
    keys = [[] for _ in range(c.n_layers)]
    vals = [[] for _ in range(c.n_layers)]
    out = []

    def norm(x, w):
        return w * x / math.sqrt(float(np.dot(x, x)) / len(x) + c.rms_eps)

    # the two elements of pair i of every head: adjacent (llama) or half a head apart (qwen2)
    i = np.arange(hd // 2)
    first = (i if c.rope_halves else 2 * i)
    second = first + (hd // 2 if c.rope_halves else 1)
    inv = c.rope_base ** (-2.0 * i / hd)
    if model.rope_freqs is not None:
        inv = inv / model.rope_freqs

    def rot(vec, pos):
        r = vec.copy()
        for h in range(len(vec) // hd):
            a, b = h * hd + first, h * hd + second
            z = (vec[a] + 1j * vec[b]) * np.exp(1j * pos * inv)
            r[a], r[b] = z.real, z.imag
        return r

    def proj(w, name, xb):
        return w["w" + name].dot(xb) + (w["b" + name] if "b" + name in w else 0.0)

    for pos, tok in enumerate(tokens):
        x = model.tok_emb[tok].copy()
        for li, w in enumerate(model.layers):
            xb = norm(x, w["attn_norm"])
            q = rot(proj(w, "q", xb), pos)
            keys[li].append(rot(proj(w, "k", xb), pos))
            vals[li].append(proj(w, "v", xb))
            heads = []
            for h in range(c.n_heads):
                g = h // group
                qh = q[h * hd:(h + 1) * hd]
                s = np.array([qh.dot(k[g * hd:(g + 1) * hd]) for k in keys[li]]) / math.sqrt(hd)
                lse = s.max() + math.log(np.sum(np.exp(s - s.max())))
                p = np.exp(s - lse)
                heads.append(sum(pj * v[g * hd:(g + 1) * hd] for pj, v in zip(p, vals[li])))
            x = x + w["wo"].dot(np.concatenate(heads))
            xb = norm(x, w["ffn_norm"])
            a = w["w_gate"].dot(xb)
            x = x + w["w_down"].dot(a * (1 / (1 + np.exp(-a))) * w["w_up"].dot(xb))
        out.append(model.w_out.dot(norm(x, model.out_norm)))
    return np.array(out)


def rel_err(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def check_dequant(ck):
    f16 = {0x3C00: 1.0, 0xC000: -2.0, 0x7BFF: 65504.0, 0x0001: 2.0 ** -24, 0x0400: 2.0 ** -14,
           0x3555: 0.333251953125, 0x8000: -0.0}
    got = R.f16_to_f64(struct.pack("<%dH" % len(f16), *f16))
    ck.check(list(got) == list(f16.values()), "f16 bit patterns decode", str(got.tolist()))
    bf16 = {0x3F80: 1.0, 0xC040: -3.0, 0x4049: 3.140625, 0x0001: 2.0 ** -133,
            0x7F7F: 3.3895313892515355e38}
    got = R.bf16_to_f64(struct.pack("<%dH" % len(bf16), *bf16))
    ck.check(list(got) == list(bf16.values()), "bf16 bit patterns decode", str(got.tolist()))
    # rounding to nearest even on the bf16 boundary
    x = np.array([1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, 1 + 2.0 ** -8 + 2.0 ** -20, -2.0],
                 dtype=np.float32)
    bits = list(R.f32_to_bf16_bits(x))
    ck.check(bits == [0x3F80, 0x3F82, 0x3F81, 0xC000], "bf16 rounding ties to even",
             str([hex(b) for b in bits]))
    qs = list(range(-127, 121, 8)) + [127]
    block = struct.pack("<H", 0x3800) + struct.pack("<32b", *qs)  # d = 0.5
    got = R.q8_0_to_f64(block + struct.pack("<H", 0xB400) + bytes(32 * [2]))  # d = -0.25
    want = [0.5 * q for q in qs] + [-0.5] * 32
    ck.check(list(got) == want, "q8_0 blocks decode as d * q")
    ck.check(len(block) == R.Q8_0_BLOCK_BYTES, "q8_0 block is 34 bytes")
    rng = np.random.default_rng(3)
    v = rng.standard_normal(256).astype(np.float32)
    back = R.dequantize(R.GGML_Q8_0, R.quantize(R.GGML_Q8_0, v))
    amax = np.abs(v.reshape(-1, 32)).max(axis=1).repeat(32)
    ck.check(bool(np.all(np.abs(back - v) <= amax / 127 * 0.57 + 1e-7)),
             "q8_0 quantise/dequantise error within half a step (+ f16 rounding of d)")


def check_gguf_by_hand(ck):
    """A GGUF assembled field by field from the spec, not by the reference's writer."""
    def s(text):
        return struct.pack("<Q", len(text)) + text

    hdr = b"GGUF" + struct.pack("<IQQ", 3, 2, 3)
    hdr += s(b"general.architecture") + struct.pack("<I", 8) + s(b"llama")
    hdr += s(b"x.arr") + struct.pack("<IIQ", 9, 5, 3) + struct.pack("<3i", -1, 0, 7)
    hdr += s(b"x.f64") + struct.pack("<Id", 12, 0.125)
    hdr += s(b"a") + struct.pack("<IQQIQ", 2, 4, 2, 0, 0)      # f32, ne {4, 2}
    hdr += s(b"bb") + struct.pack("<IQIQ", 1, 3, 1, 32)        # f16, ne {3}
    pad = (-len(hdr)) % 32
    # tensor a fills bytes 0..31 of the data section, so bb's offset 32 is the next aligned one
    data = struct.pack("<8f", *range(8)) + struct.pack("<3H", 0x3C00, 0, 0xC000)
    raw = hdr + bytes(pad) + data
    g = R.GGUFFile(data=raw)
    a = g.tensor("a")
    ck.check(a.shape == (2, 4) and a[1, 0] == 4.0, "hand-built GGUF: ne[0] is the innermost dim",
             str(a.tolist()))
    ck.check(list(g.tensor("bb")) == [1.0, 0.0, -2.0], "hand-built GGUF: offsets from aligned "
             "data start", str(g.tensor("bb")))
    ck.check(g.get("general.architecture") == "llama" and list(g.get("x.arr")) == [-1, 0, 7]
             and g.get("x.f64") == 0.125, "hand-built GGUF: metadata values")
    bad = [("truncated", raw[:len(raw) - 1]), ("bad magic", b"GGUG" + raw[4:]),
           ("version 1", raw[:4] + struct.pack("<I", 1) + raw[8:])]
    for name, blob in bad:
        try:
            R.GGUFFile(data=blob)
            ck.check(False, "reader rejects " + name)
        except R.FormatError as e:
            ck.check(True, "reader rejects " + name, str(e))


def check_gguf_round_trip(ck, wd):
    rng = np.random.default_rng(7)
    kvs = [("k.u8", R.T_U8, 255), ("k.i8", R.T_I8, -128), ("k.u16", R.T_U16, 65535),
           ("k.i16", R.T_I16, -32768), ("k.u32", R.T_U32, 2 ** 32 - 1),
           ("k.i32", R.T_I32, -2 ** 31), ("k.f32", R.T_F32, 1.5), ("k.bool", R.T_BOOL, 1),
           ("k.str", R.T_STRING, "\u2581hello"), ("k.u64", R.T_U64, 2 ** 64 - 1),
           ("k.i64", R.T_I64, -2 ** 63), ("k.f64", R.T_F64, -0.1),
           ("k.arr_s", R.T_ARRAY, ["x", "", "yz"], R.T_STRING),
           ("k.arr_f", R.T_ARRAY, [1.0, 2.0], R.T_F64),
           ("k.arr_a", R.T_ARRAY, [(R.T_U8, [1]), (R.T_STRING, ["q"])], R.T_ARRAY)]
    tensors = []
    data = {}
    for gt in (R.GGML_F32, R.GGML_F16, R.GGML_BF16, R.GGML_Q8_0):
        x = rng.standard_normal((3, 64)).astype(np.float32)
        name = "t." + R.GGML_TYPE_NAMES[gt]
        tensors.append((name, gt, (64, 3), R.quantize(gt, x)))
        data[name] = (gt, x)
    for version, align in ((2, 32), (3, 32), (3, 64), (3, 256)):
        path = os.path.join(wd, "rt_v%d_a%d.gguf" % (version, align))
        R.write_gguf(path, kvs, tensors, version=version, alignment=align)
        g = R.GGUFFile(path)
        ok = g.version == version and g.alignment == align and g.data_start % align == 0
        for kv in kvs:
            v = g.get(kv[0])
            if kv[1] == R.T_ARRAY and kv[3] == R.T_ARRAY:
                ok &= v == [[1], ["q"]] or (list(v[0]) == [1] and v[1] == ["q"])
            elif kv[1] == R.T_ARRAY:
                ok &= list(v) == list(kv[2])
            else:
                ok &= v == kv[2] or (kv[1] == R.T_F32 and abs(v - kv[2]) < 1e-7)
        for name, gt, ne, raw in tensors:
            ok &= g.raw(name) == raw and g.by_name[name].offset % align == 0
        ck.check(bool(ok), "GGUF round trip v%d alignment %d" % (version, align))
    g = R.GGUFFile(os.path.join(wd, "rt_v3_a32.gguf"))
    exact = np.array_equal(g.tensor("t.f32"), data["t.f32"][1].astype(np.float64))
    f16 = np.array_equal(g.tensor("t.f16"), data["t.f16"][1].astype(np.float16)
                         .astype(np.float64))
    ck.check(exact and f16, "GGUF tensors read back as written (f32 exact, f16 = numpy half)")


def check_rope(ck, data_dir):
    rng = np.random.default_rng(5)
    hd, heads = 16, 3
    x = rng.standard_normal((7, heads * hd))
    pos = np.array([0, 1, 2, 5, 63, 100, 511])
    got = R.rope(x, pos, hd, 10000.0)
    z = (x[:, 0::2] + 1j * x[:, 1::2]).reshape(7, heads, hd // 2)
    theta = 10000.0 ** (-np.arange(0, hd, 2) / hd)
    z = z * np.exp(1j * pos[:, None, None] * theta[None, None, :])
    want = np.empty_like(x)
    want[:, 0::2] = z.real.reshape(7, -1)
    want[:, 1::2] = z.imag.reshape(7, -1)
    ck.check(np.allclose(got, want, rtol=0, atol=1e-12), "rope equals complex multiplication",
             "max diff %.3g" % np.max(np.abs(got - want)))
    ck.check(np.allclose(R.rope(x, np.zeros(7), hd, 1e4), x, rtol=0, atol=0),
             "rope at position 0 is the identity")
    other = R.rope(x, pos, hd, 500000.0)
    ck.check(not np.allclose(other[1:], got[1:]), "rope base changes the rotation")
    path = os.path.join(data_dir, "stories260K.bin") if data_dir else ""
    if path and os.path.exists(path):
        buf = open(path, "rb").read()
        layout, cfg = R.llama2c_layout(R.read_llama2c_header(buf))
        off = R.LLAMA2C_HEADER_BYTES
        tables = {}
        for name, shape in layout:
            n = int(np.prod(shape))
            tables[name] = np.frombuffer(buf, "<f4", n, off)
            off += 4 * n
        ang = R.rope_angles(np.arange(cfg.seq_len), cfg.head_dim, 10000.0)
        err = max(np.max(np.abs(np.cos(ang).ravel() - tables["_freq_real"])),
                  np.max(np.abs(np.sin(ang).ravel() - tables["_freq_imag"])))
        # the tables were computed in float32 (angles up to 511 rad): a few ulps of 511
        ck.check(err < 1e-4, "rope angles equal the freq_cis tables stored in stories260K.bin",
                 "max diff %.3g" % err)


def check_forward(ck, model, name, tokens):
    fast = R.logits_for(model, tokens)
    slow = naive_logits(model, tokens)
    ck.check(rel_err(fast, slow) < 1e-12, name + ": forward equals the naive implementation",
             "relative error %.3g" % rel_err(fast, slow))
    for b in (1, 3):
        bat = R.logits_for(model, tokens, batch=b)
        ck.check(rel_err(bat, fast) < 1e-12, name + ": batches of %d equal one batch" % b,
                 "relative error %.3g" % rel_err(bat, fast))
    changed = list(tokens)
    changed[-3] = (changed[-3] + 1) % model.cfg.vocab_size
    other = R.logits_for(model, changed)
    ck.check(np.array_equal(other[:-3], fast[:-3]) and not np.allclose(other[-3:], fast[-3:]),
             name + ": causal (a later token changes only later rows)")


def check_archs(ck, rng):
    """qwen2 (biases, rotate_half pairs) and Llama 3 factors: the forward pass equals the naive
    one; a qwen2 model equals the llama model whose q and k rows (and biases) are permuted per
    head as the GGUF converter permutes llama's, (x[i], x[i+hd/2]) -> (x[2i], x[2i+1]): the
    two rotations are one rotation of reordered pairs; the biases and the factors each change
    the logits; transformers' llama3 scaling keeps the fastest pairs and slows the slowest by
    the factor, monotonically between."""
    toks = list(rng.integers(0, 97, 9))
    q2 = R.random_model(rng, 64, 96, 2, 4, 2, 97, 32, base=10000.0, arch="qwen2",
                        rope_freqs=rng.uniform(1.0, 16.0, 8))
    check_forward(ck, q2, "random qwen2 model with rope factors", toks)
    hd = q2.cfg.head_dim
    order = np.ravel(np.column_stack([np.arange(hd // 2), np.arange(hd // 2) + hd // 2]))
    ll = q2.copy()
    ll.cfg.arch, ll.cfg.rope_halves = "llama", False
    for w in ll.layers:
        for k in ("wq", "wk", "bq", "bk"):
            shape = w[k].shape
            w[k] = w[k].reshape(-1, hd, *shape[1:])[:, order].reshape(shape)
    a, b = R.logits_for(q2, toks), R.logits_for(ll, toks)
    ck.check(rel_err(a, b) < 1e-12, "qwen2 rotation = llama rotation of converter-permuted rows",
             "rel err %.3g" % rel_err(a, b))
    nob = q2.copy()
    for w in nob.layers:
        for k in ("bq", "bk", "bv"):
            del w[k]
    nof = R.Model(q2.cfg, q2.tok_emb, q2.layers, q2.out_norm, q2.w_out, None)
    ck.check(rel_err(R.logits_for(nob, toks), a) > 1e-3 and rel_err(R.logits_for(nof, toks), a)
             > 1e-3, "the biases and the rope factors each change the logits")
    inv = 1.0 / 500000.0 ** (np.arange(0, 64, 2) / 64)
    got = R.llama3_inv_freq(500000.0, 64, 32.0, 1.0, 4.0, 8192)
    f = inv / got
    ck.check(f[0] == 1.0 and abs(f[-1] - 32.0) < 1e-12 and bool(np.all(np.diff(f) >= 0)) and
             1.0 < f[len(f) // 2 + 3] <= 32.0,
             "llama3 scaling: factor 1 for the fastest pairs, 32 for the slowest, monotone",
             str(np.round(f, 3)))


def check_gqa(ck, rng):
    gqa = R.random_model(rng, 48, 64, 2, 6, 2, 40, 32)
    group = 3
    mha_layers = []
    for w in gqa.layers:
        w2 = dict(w)
        hd = gqa.cfg.head_dim
        for k in ("wk", "wv"):
            heads = w[k].reshape(gqa.cfg.n_kv_heads, hd, -1)
            w2[k] = np.repeat(heads, group, axis=0).reshape(-1, w[k].shape[1])
        mha_layers.append(w2)
    cfg = R.Config(48, 64, 2, 6, 6, 40, 32)
    mha = R.Model(cfg, gqa.tok_emb, mha_layers, gqa.out_norm, gqa.w_out)
    toks = list(rng.integers(0, 40, 12))
    d = rel_err(R.logits_for(gqa, toks), R.logits_for(mha, toks))
    ck.check(d < 1e-12, "grouped-query attention equals MHA with repeated kv heads",
             "relative error %.3g" % d)


def check_precision(ck, model, name, tokens):
    """float32 arithmetic against float64: the error the logits tolerance has to absorb."""
    f64 = R.logits_for(model, tokens)
    f32 = R.logits_for(model.astype(np.float32), tokens, dtype=np.float32)
    ok, ratio, row, err = H.compare_logits(f64, f32, "f32")
    ck.check(ok and ratio < 0.1, name + ": float32 reference within a tenth of the tolerance",
             "worst error/bound %.3g (abs %.3g)" % (ratio, err))


# Plausible implementation bugs, each written as a change of the model that makes the correct
# forward pass compute what the buggy one would.
def _bug_gqa_modulo(m):  # query head h reads kv head h % kv_heads instead of h // group
    c = m.cfg
    group, hd = c.n_heads // c.n_kv_heads, c.head_dim
    perm = [kv + c.n_kv_heads * r for kv in range(c.n_kv_heads) for r in range(group)]
    for w in m.layers:
        w["wq"] = w["wq"].reshape(c.n_heads, hd, -1)[perm].reshape(c.dim, -1)
        w["wo"] = w["wo"].reshape(c.dim, c.n_heads, hd)[:, perm].reshape(c.dim, -1)


def _bug_neox_rope(m):  # rotates (x[i], x[i + hd/2]) instead of (x[2i], x[2i+1])
    hd = m.cfg.head_dim
    order = np.ravel(np.column_stack([np.arange(hd // 2), np.arange(hd // 2) + hd // 2]))
    for w in m.layers:
        for k in ("wq", "wk"):
            w[k] = w[k].reshape(-1, hd, w[k].shape[1])[:, order].reshape(w[k].shape)


def _bug_swap_gate_up(m):
    for w in m.layers:
        w["w_gate"], w["w_up"] = w["w_up"], w["w_gate"]


def _bug_attention_scale(m):  # 1/sqrt(dim) instead of 1/sqrt(head_dim)
    for w in m.layers:
        w["wq"] = w["wq"] * math.sqrt(m.cfg.head_dim / m.cfg.dim)


def _bug_eps(m):
    m.cfg.rms_eps *= 10


def _bug_eps_small(m):
    m.cfg.rms_eps = 1e-6


def _bug_rope_base(m):
    m.cfg.rope_base *= 1.01


def _bug_final_norm(m):  # final norm weight ignored
    m.out_norm = np.ones_like(m.out_norm)


BUGS = [("kv head h % kv_heads", _bug_gqa_modulo), ("rope on halves", _bug_neox_rope),
        ("gate and up swapped", _bug_swap_gate_up), ("attention scale 1/sqrt(dim)",
                                                     _bug_attention_scale),
        ("rms eps x10", _bug_eps), ("rms eps 1e-6", _bug_eps_small),
        ("rope base +1%", _bug_rope_base),
        ("final norm weight ignored", _bug_final_norm)]


def check_tolerance_catches_bugs(ck, model, tokens):
    """The logits tolerance is tight enough to see each plausible bug on the trained model."""
    ref = R.logits_for(model, tokens)
    for name, bug in BUGS:
        m = model.copy()
        bug(m)
        ok, ratio, row, err = H.compare_logits(ref, R.logits_for(m, tokens), "f32")
        ck.check(not ok, "stories260K: tolerance detects bug '%s'" % name,
                 "worst error/bound %.3g" % ratio)


def check_llama2c_gguf(ck, wd, model):
    path = os.path.join(wd, "s260k_f32.gguf")
    R.model_to_gguf(model, path, R.GGML_F32)
    g = R.load_gguf(path)
    toks = [1, 403, 407, 300, 13]
    same = all(np.array_equal(a[k], b[k]) for a, b in zip(g.layers, model.layers) for k in a)
    same &= np.array_equal(g.tok_emb, model.tok_emb) and np.array_equal(g.w_out, model.w_out)
    # identical weights; logits may differ in the last bits only because BLAS picks kernels by
    # memory alignment
    d = rel_err(R.logits_for(g, toks), R.logits_for(model, toks))
    ck.check(same and d < 1e-9, "stories260K: llama2.c and GGUF f32 routes give the same "
             "weights and logits", "relative error %.3g" % d)
    path = os.path.join(wd, "s260k_f16.gguf")
    R.model_to_gguf(model, path, R.GGML_F16, tie_output=False)
    g = R.load_gguf(path)
    want = model.layers[2]["w_down"].astype(np.float16).astype(np.float64)
    ck.check(np.array_equal(g.layers[2]["w_down"], want) and
             np.array_equal(g.layers[2]["ffn_norm"], model.layers[2]["ffn_norm"]),
             "stories260K: GGUF f16 weights are the halves, norms stay f32")


def main():
    ck = H.Checks("test_ref_selfcheck")
    wd = H.work_dir("selfcheck")
    data_dir = os.environ.get("LT_DATA_DIR", "")
    rng = np.random.default_rng(1234)
    check_dequant(ck)
    check_gguf_by_hand(ck)
    check_gguf_round_trip(ck, wd)
    check_rope(ck, data_dir)
    check_gqa(ck, rng)
    check_archs(ck, rng)
    small = R.random_model(rng, 64, 96, 2, 4, 2, 97, 32, base=500000.0)
    check_forward(ck, small, "random GQA model", list(rng.integers(0, 97, 11)))
    check_precision(ck, small, "random GQA model", list(rng.integers(0, 97, 25)))
    path = os.path.join(data_dir, "stories260K.bin")
    if ck.check(os.path.exists(path), "stories260K.bin present", path):
        model = R.load_llama2c(path)
        check_forward(ck, model, "stories260K", [1, 403, 407, 300, 13, 290, 291, 450])
        check_precision(ck, model, "stories260K", R.greedy(model, [1], 60)[0])
        ids_a, rows_a = R.greedy(model, [1, 403, 407, 283], 40)
        ids_b, rows_b = R.greedy(model, [1, 403, 407, 283], 40, prefill_batch=1)
        ck.check(ids_a == ids_b and rel_err(rows_a, rows_b) < 1e-12,
                 "stories260K: greedy with batched and token-by-token prefill agree")
        check_llama2c_gguf(ck, wd, model)
        check_tolerance_catches_bugs(ck, model, R.greedy(model, [1, 37, 250], 30)[0])
    return ck.finish()


if __name__ == "__main__":
    sys.exit(main())

"""Quantised model files: `looptune quantize` and `looptune model-gen --dtype` for every type
and for llama.cpp's mixes q4_k_m, q5_k_m, q3_k_m.

- Each tensor's type follows llama.cpp's rules (llama_tensor_get_type in src/llama-quant.cpp,
  written out again here: output q6_k, or q8_0 when 256 does not divide its rows; attn_v and
  ffn_down of the layers use_more_bits picks q6_k in q4_k_m / q5_k_m; q3_k_m's first two attn_v
  q5_k, the others q4_k, ffn_down q5_k in the first sixteenth and q4_k after, attn_output q4_k;
  the fallbacks q4_k -> q5_0, q5_k -> q5_1, q3_k/q2_k -> q4_0, q6_k -> q8_0 where 256 does not
  divide a width); norms stay f32.
- Where llama.cpp's libllama is found (LT_LLAMA_LIB, else the peers' build), its
  llama_model_quantize makes the same file from the same f32 model (params.pure for a single
  type): every tensor's type and bytes and general.file_type must be equal.
- model-gen --dtype T writes the bytes `looptune quantize --type T` makes of model-gen's f32
  model of the same seed, every metadata pair is copied, the progress has a line per tensor,
  the file does not depend on --threads, and bad input gets a one-line error and a non-zero
  exit.
"""

import ctypes
import os
import struct
import sys

import numpy as np

import lt_harness as H

try:
    import gguf
except ImportError:
    sys.stderr.write("the gguf package is missing (scripts/deps.sh installs it)\n")
    sys.exit(2)

# (name, dim, hidden, layers, heads, kv_heads): 256 divides every width of the first; the second
# takes the fallbacks (dim 96).
SHAPES = [("gqa_d256", 256, 768, 8, 8, 2), ("gqa_d96", 96, 288, 8, 4, 2)]
VOCAB = 512
MIXES = {"q4_k_m": (15, "q4_k"), "q5_k_m": (17, "q5_k"), "q3_k_m": (12, "q3_k")}
# llama.cpp's file type of a single type (a K-quant alone: its _S mix, made with pure = true)
SINGLE = {"q4_0": 2, "q4_1": 3, "q5_0": 8, "q5_1": 9, "q8_0": 7, "q2_k": 10, "q3_k": 11,
          "q4_k": 14, "q5_k": 16, "q6_k": 18}
BLOCK = {"q4_0": 32, "q4_1": 32, "q5_0": 32, "q5_1": 32, "q8_0": 32, "q2_k": 256, "q3_k": 256,
         "q4_k": 256, "q5_k": 256, "q6_k": 256, "f16": 1, "f32": 1}
FALLBACK = {"q2_k": "q4_0", "q3_k": "q4_0", "q4_k": "q5_0", "q5_k": "q5_1", "q6_k": "q8_0"}
LLAMA_LIB_DEFAULT = "/opt/peers/llamacpp-native/bin/libllama.so"


def use_more_bits(i, n):
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def fallback(t, ne0):
    if ne0 % BLOCK[t] == 0:
        return t
    alt = FALLBACK.get(t, "f16")
    return alt if ne0 % BLOCK[alt] == 0 else "f16"


def expected_types(names_ne0, target):
    """llama.cpp's type per tensor (in file order) for a Llama model quantised to target."""
    n_v = sum("attn_v.weight" in n for n, _, _ in names_ne0)
    n_d = sum("ffn_down" in n for n, _, _ in names_ne0)
    has_out = any(n == "output.weight" for n, _, _ in names_ne0)
    iv = idn = 0
    out = {}
    for name, ne0, ndim in names_ne0:
        if ndim < 2 or not name.endswith("weight") or "_norm.weight" in name:
            out[name] = "f32"
            continue
        if target not in MIXES:
            out[name] = fallback(target, ne0)
            continue
        base = MIXES[target][1]
        t = base
        if name == "output.weight" or (not has_out and name == "token_embd.weight"):
            t = "q8_0" if ne0 % 256 else "q6_k"
        elif "attn_v.weight" in name:
            if target == "q3_k_m":
                t = "q5_k" if iv < 2 else "q4_k"
            elif use_more_bits(iv, n_v):
                t = "q6_k"
            iv += 1
        elif "ffn_down" in name:
            if target == "q3_k_m":
                t = "q5_k" if idn < n_d // 16 else "q4_k"
            elif use_more_bits(idn, n_d):
                t = "q6_k"
            idn += 1
        elif "attn_output.weight" in name and target == "q3_k_m":
            t = "q4_k"
        out[name] = fallback(t, ne0)
    return out


def type_name(t):
    return t.tensor_type.name.lower()


def tensors(path):
    r = gguf.GGUFReader(path)
    return r, [(t.name, t) for t in r.tensors]


def field_value(r, key):
    f = r.fields[key]
    return [bytes(p) for p in f.parts[f.data[0]:]] if f.data else []


class Llama:
    """llama_model_quantize from llama.cpp's libllama, or None."""

    def __init__(self):
        self.path = os.environ.get("LT_LLAMA_LIB", LLAMA_LIB_DEFAULT)
        try:
            self.lib = ctypes.CDLL(self.path)
        except OSError:
            self.lib = None
            return

        # llama_model_quantize_params is returned by value; a larger buffer holds it whatever
        # its exact size, and only its first fields are set: nthread (int32 at 0), ftype (at 4),
        # pure (the bool at 19).
        class Params(ctypes.Structure):
            _fields_ = [("raw", ctypes.c_uint8 * 1024)]

        self.Params = Params
        self.lib.llama_model_quantize_default_params.restype = Params
        self.lib.llama_model_quantize.argtypes = [ctypes.c_char_p, ctypes.c_char_p,
                                                  ctypes.c_void_p]
        self.lib.llama_model_quantize.restype = ctypes.c_uint32

    def quantize(self, src, dst, ftype, pure):
        p = self.lib.llama_model_quantize_default_params()
        raw = bytearray(bytes(p.raw))
        struct.pack_into("<ii", raw, 0, 1, ftype)
        raw[19] = 1 if pure else 0
        buf = (ctypes.c_uint8 * len(raw)).from_buffer(raw)
        # llama.cpp logs every tensor on stderr: keep it out of the test's output
        saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        try:
            rc = self.lib.llama_model_quantize(src.encode(), dst.encode(), ctypes.addressof(buf))
        finally:
            os.dup2(saved, 2)
            os.close(devnull)
            os.close(saved)
        return rc


def check_types(ck, label, path, want):
    _, ts = tensors(path)
    wrong = [(n, type_name(t), want[n]) for n, t in ts if type_name(t) != want[n]]
    ck.check(not wrong, label + " tensor types follow llama.cpp's rules",
             "%d wrong, e.g. %s" % (len(wrong), wrong[:3]) if wrong else "%d tensors" % len(ts))


def same_tensors(ck, label, a, b):
    _, ta = tensors(a)
    _, tb = tensors(b)
    db = dict(tb)
    diff = [n for n, t in ta if n not in db or type_name(t) != type_name(db[n]) or not
            np.array_equal(np.asarray(t.data).view(np.uint8), np.asarray(db[n].data).view(np.uint8))]
    ck.check(len(ta) == len(tb) and not diff, label, "%d of %d tensors differ: %s" %
             (len(diff), len(ta), diff[:3]) if diff else "%d tensors, types and bytes" % len(ta))


def run_shape(ck, shape, llama):
    name, dim, hidden, layers, heads, kv = shape
    wd = H.work_dir("quant_models")
    f32 = os.path.join(wd, "%s_f32.gguf" % name)
    sh = dict(dim=dim, hidden=hidden, layers=layers, heads=heads, kv_heads=kv, vocab=VOCAB, seq=64)
    ok, msg = H.model_gen(f32, "f32", seed=7, shape=sh)
    if not ck.check(ok, "%s model-gen f32" % name, msg):
        return
    r_in, t_in = tensors(f32)
    layout = [(n, int(t.shape[0]), len(t.shape)) for n, t in t_in]
    for target in list(MIXES) + list(SINGLE):
        label = "%s/%s" % (name, target)
        ours = os.path.join(wd, "%s_%s.gguf" % (name, target))
        p = H.run_cli(["quantize", f32, ours, "--type", target])
        if not ck.check(p.returncode == 0, label + " looptune quantize", H.describe_failure(p)
                        if p.returncode else ""):
            continue
        lines = [ln for ln in p.stderr.splitlines() if ln.startswith("[")]
        ck.check(len(lines) == len(t_in), label + " one progress line per tensor",
                 "%d lines for %d tensors" % (len(lines), len(t_in)))
        want = expected_types(layout, target)
        check_types(ck, label, ours, want)
        r_out, _ = tensors(ours)
        ft = MIXES[target][0] if target in MIXES else SINGLE[target]
        got_ft = int(r_out.fields["general.file_type"].parts[-1][0])
        ck.check(got_ft == ft, label + " general.file_type", "%d, llama.cpp's %d" % (got_ft, ft))
        lost = [k for k in r_in.fields if not k.startswith("GGUF.") and k != "general.file_type"
                and (k not in r_out.fields or field_value(r_in, k) != field_value(r_out, k))]
        ck.check(not lost, label + " metadata copied", "differs: %s" % lost[:3] if lost else "")
        if llama.lib is not None:
            theirs = os.path.join(wd, "%s_%s_llamacpp.gguf" % (name, target))
            rc = llama.quantize(f32, theirs, ft, target not in MIXES)
            if ck.check(rc == 0, label + " llama.cpp quantizes the f32 model", "rc %d" % rc):
                same_tensors(ck, label + " = llama.cpp's llama_model_quantize", ours, theirs)
                r_lc, _ = tensors(theirs)
                ck.check(int(r_lc.fields["general.file_type"].parts[-1][0]) == got_ft,
                         label + " file type = llama.cpp's")
        if target in MIXES or dim % BLOCK[target] == 0:
            gen = os.path.join(wd, "%s_%s_gen.gguf" % (name, target))
            ok, msg = H.model_gen(gen, target, seed=7, shape=sh)
            if ck.check(ok, label + " model-gen", msg):
                same_tensors(ck, label + " model-gen = quantize of model-gen f32", gen, ours)


def bad_input(ck):
    wd = H.work_dir("quant_models")
    f32 = os.path.join(wd, "gqa_d256_f32.gguf")
    q4k = os.path.join(wd, "gqa_d256_q4_k.gguf")
    out = os.path.join(wd, "bad_out.gguf")
    cases = [
        ("unknown type", [f32, out, "--type", "q7_k"], "unknown type 'q7_k'"),
        ("no type", [f32, out], "--type"),
        ("missing input", [os.path.join(wd, "nope.gguf"), out, "--type", "q4_0"], "nope.gguf"),
        ("output is the input", [f32, f32, "--type", "q4_0"], "another file"),
        ("output is the input by another path",
         [f32, os.path.join(wd, ".", os.path.basename(f32)), "--type", "q4_0"], "another file"),
        ("requantize", [q4k, out, "--type", "q4_0"], "is q4_k"),
        ("one file", [f32, "--type", "q4_0"], "IN.gguf OUT.gguf"),
        ("not gguf", [os.path.join(H.env_path("LT_DATA_DIR"), "stories260K.bin"), out, "--type",
                      "q4_0"], "stories260K.bin"),
    ]
    for label, args, want in cases:
        if os.path.exists(out):
            os.remove(out)
        p = H.run_cli(["quantize"] + args)
        err = p.stderr.strip().splitlines()
        ok = p.returncode not in (0, -999) and p.returncode > 0 and len(err) == 1 and \
            want in err[0] and not os.path.exists(out)
        ck.check(ok, "quantize " + label + ": one-line error", "exit %d, stderr %r" %
                 (p.returncode, err))
    # a weight that is not finite: named, and no output file
    nan_in = os.path.join(wd, "nan_f32.gguf")
    w = gguf.GGUFWriter(nan_in, "llama")
    x = np.ones((4, 64), dtype=np.float32)
    x[2, 5] = np.nan
    w.add_tensor("blk.0.attn_q.weight", x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    if os.path.exists(out):
        os.remove(out)
    p = H.run_cli(["quantize", nan_in, out, "--type", "q4_0", "-q"])
    err = p.stderr.strip().splitlines()
    ck.check(p.returncode == 1 and len(err) == 1 and "row 2 holds NaN at column 5" in err[0] and
             not os.path.exists(out), "quantize NaN weight: one-line error",
             "exit %d, stderr %r" % (p.returncode, err))
    # the file does not depend on the thread count
    outs = []
    for n in ("1", "3"):
        o = os.path.join(wd, "threads_%s.gguf" % n)
        p = H.run_cli(["quantize", f32, o, "--type", "q4_k_m", "--threads", n, "-q"])
        outs.append(open(o, "rb").read() if p.returncode == 0 else b"")
    ck.check(outs[0] and outs[0] == outs[1], "quantize --threads 1 and 3: the same file")
    p = H.run_cli(["quantize", f32, out, "--type", "q4_0", "--threads", "0"])
    ck.check(p.returncode == 1 and "bad --threads '0'" in p.stderr, "quantize --threads 0: error")
    # dequantising is allowed from any type
    p = H.run_cli(["quantize", q4k, out, "--type", "f32", "-q"])
    ck.check(p.returncode == 0, "quantize q4_k -> f32 (dequantise)", H.describe_failure(p)
             if p.returncode else "")


def main():
    ck = H.Checks("test_quant_models")
    llama = Llama()
    if llama.lib is None:
        ck.note("%s not found: files not compared with llama.cpp's llama_model_quantize (set "
                "LT_LLAMA_LIB)" % llama.path)
    for shape in SHAPES:
        run_shape(ck, shape, llama)
    bad_input(ck)
    return ck.finish()


if __name__ == "__main__":
    sys.exit(main())

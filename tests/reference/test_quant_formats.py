"""The GGUF quantisation types against the PyPI `gguf` package (gguf-py) and, where the
machine has it, llama.cpp's own ggml library:

- dequantisation: random blocks of every type (finite half-precision scales, every other
  byte random) in a GGUF written by gguf-py; `looptune quantize --type f32` must give, bit for
  bit, gguf.quants.dequantize of the same bytes;
- quantisation: random f32 weights quantised by `looptune quantize --type T`; the legacy
  types must equal gguf.quants.quantize byte for byte; every type's error (RMSE of gguf-py's
  dequantisation against the weights, relative to their RMS) must stay within its bound, and
  every type's blocks must equal those of ggml's quantize_row_*_ref (llama.cpp's
  libggml-base, via ctypes) when that library is found (LT_GGML_LIB, else the peers' build);
  without it that comparison is skipped with a note.
"""

import ctypes
import os
import sys

import numpy as np

import lt_harness as H

try:
    import gguf
    from gguf import GGMLQuantizationType as QT
except ImportError:
    sys.stderr.write("the gguf package is missing (scripts/deps.sh installs it)\n")
    sys.exit(2)

TYPES = {"q4_0": QT.Q4_0, "q4_1": QT.Q4_1, "q5_0": QT.Q5_0, "q5_1": QT.Q5_1, "q8_0": QT.Q8_0,
         "q2_k": QT.Q2_K, "q3_k": QT.Q3_K, "q4_k": QT.Q4_K, "q5_k": QT.Q5_K, "q6_k": QT.Q6_K}
LEGACY = ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0"]

# Byte offsets of the half-precision fields in each block (d, and m / dmin): set to random
# finite halves so that the test blocks hold no NaN or infinity.
HALF_FIELDS = {"q4_0": [0], "q4_1": [0, 2], "q5_0": [0], "q5_1": [0, 2], "q8_0": [0],
               "q2_k": [80, 82], "q3_k": [108], "q4_k": [0, 2], "q5_k": [0, 2], "q6_k": [208]}

# Bound on RMSE / RMS(x) for Gaussian weights, per type. Measured (this test, 64 rows of 1024;
# looptune's quantiser and ggml's reference quantiser give the same blocks): q4_0 0.0857,
# q4_1 0.0778, q5_0 0.0426, q5_1 0.0378, q8_0 0.00533, q2_k 0.297, q3_k 0.151, q4_k 0.0713,
# q5_k 0.0361, q6_k 0.0176. The bounds are 15% above: a wrong scale search or level packing
# moves the error further.
RMSE_BOUND = {"q4_0": 0.0986, "q4_1": 0.0895, "q5_0": 0.0490, "q5_1": 0.0435, "q8_0": 0.00613,
              "q2_k": 0.342, "q3_k": 0.174, "q4_k": 0.0820, "q5_k": 0.0415, "q6_k": 0.0202}

ROWS, COLS = 64, 1024
GGML_LIB_DEFAULT = "/opt/peers/llamacpp-native/bin/libggml-base.so"


def random_blocks(rng, name, n_blocks):
    bs, ts = gguf.GGML_QUANT_SIZES[TYPES[name]]
    raw = rng.integers(0, 256, size=(n_blocks, ts), dtype=np.uint8)
    for off in HALF_FIELDS[name]:
        h = (rng.standard_normal(n_blocks) * 0.05).astype(np.float16)
        raw[:, off:off + 2] = h.view(np.uint8).reshape(n_blocks, 2)
    return raw, bs


def write_gguf(path, tensors):
    """tensors: list of (name, array, raw_dtype or None)."""
    w = gguf.GGUFWriter(path, "llama")
    for name, arr, qt in tensors:
        if qt is None:
            w.add_tensor(name, arr)
        else:
            w.add_tensor(name, arr, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def read_tensors(path):
    r = gguf.GGUFReader(path)
    return {t.name: t for t in r.tensors}


def quantize(ck, src, dst, typ):
    p = H.run_cli(["quantize", src, dst, "--type", typ, "--quiet"])
    return ck.check(p.returncode == 0, "looptune quantize --type %s" % typ,
                    "" if p.returncode == 0 else H.describe_failure(p))


def test_dequantize(ck, wd, rng):
    tensors, expect = [], {}
    for name in TYPES:
        raw, bs = random_blocks(rng, name, 8 * 4)  # 4 rows of 8 blocks
        raw = raw.reshape(4, -1)
        tname = "blk.0.%s.weight" % name
        tensors.append((tname, raw, TYPES[name]))
        expect[tname] = gguf.quants.dequantize(raw, TYPES[name]).astype(np.float32)
    src, dst = os.path.join(wd, "blocks.gguf"), os.path.join(wd, "blocks_f32.gguf")
    write_gguf(src, tensors)
    if not quantize(ck, src, dst, "f32"):
        return
    got = read_tensors(dst)
    for tname, want in expect.items():
        g = np.asarray(got[tname].data, dtype=np.float32).reshape(want.shape)
        diff = int(np.count_nonzero(g.view(np.uint32) != want.view(np.uint32)))
        ck.check(diff == 0, "dequantise %s bit for bit" % tname.split(".")[2],
                 "%d of %d values differ" % (diff, want.size))


class Ggml:
    """quantize_row_<type>_ref from llama.cpp's libggml-base, or None."""

    def __init__(self):
        path = os.environ.get("LT_GGML_LIB", GGML_LIB_DEFAULT)
        try:
            self.lib = ctypes.CDLL(path)
        except OSError:
            self.lib = None
        self.path = path

    def quantize(self, name, x):
        f = getattr(self.lib, "quantize_row_%s_ref" % name.replace("_k", "_K"))
        f.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        bs, ts = gguf.GGML_QUANT_SIZES[TYPES[name]]
        out = np.zeros(x.size // bs * ts, dtype=np.uint8)
        xc = np.ascontiguousarray(x, dtype=np.float32)
        f(xc.ctypes.data, out.ctypes.data, xc.size)
        return out.reshape(x.shape[0], -1)


def rel_rmse(xq, x):
    return float(np.sqrt(np.mean((xq.astype(np.float64) - x) ** 2)) / np.sqrt(np.mean(x ** 2)))


def test_quantize(ck, wd, rng):
    x = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    src = os.path.join(wd, "weights_f32.gguf")
    write_gguf(src, [("blk.0.w.weight", x, None)])
    ggml = Ggml()
    if ggml.lib is None:
        ck.note("%s not found: K-quants not compared with ggml's quantiser (set LT_GGML_LIB)" %
                ggml.path)
    for name, qt in TYPES.items():
        dst = os.path.join(wd, "weights_%s.gguf" % name)
        if not quantize(ck, src, dst, name):
            continue
        t = read_tensors(dst)["blk.0.w.weight"]
        ok_type = ck.check(int(t.tensor_type) == int(qt), "%s: tensor type" % name,
                           "ggml type %d" % int(t.tensor_type))
        if not ok_type:
            continue
        ours = np.asarray(t.data, dtype=np.uint8).reshape(ROWS, -1)
        err = rel_rmse(gguf.quants.dequantize(ours, qt), x)
        detail = "RMSE %.4g x RMS, bound %.4g" % (err, RMSE_BOUND[name])
        if ggml.lib is not None:
            ref = ggml.quantize(name, x)
            same = np.mean(np.all(ours.reshape(-1, gguf.GGML_QUANT_SIZES[qt][1]) ==
                                  ref.reshape(-1, gguf.GGML_QUANT_SIZES[qt][1]), axis=1))
            ck.check(same == 1.0, "%s: blocks equal ggml's quantize_row_%s_ref" % (name, name),
                     "%.1f%% identical; ggml's RMSE %.4g x RMS" % (
                         100 * same, rel_rmse(gguf.quants.dequantize(ref, qt), x)))
        ck.check(err <= RMSE_BOUND[name], "%s: round-trip error" % name, detail)
        if name in LEGACY:
            want = gguf.quants.quantize(x, qt)
            diff = int(np.count_nonzero(np.any(ours.reshape(want.shape) != want, axis=1)))
            ck.check(diff == 0, "%s: bytes equal gguf.quants.quantize" % name,
                     "%d of %d rows differ" % (diff, ROWS))


def test_edge_rows(ck, wd):
    """Rows of zeros, of one value, and with one outlier: finite and close after the round
    trip (every level search must survive a flat group)."""
    x = np.zeros((4, 512), dtype=np.float32)
    x[1, :] = 0.75
    x[2, 3] = 40.0
    x[3, :] = np.linspace(-1, 1, 512, dtype=np.float32)
    src = os.path.join(wd, "edge_f32.gguf")
    write_gguf(src, [("blk.0.e.weight", x, None)])
    for name, qt in TYPES.items():
        dst = os.path.join(wd, "edge_%s.gguf" % name)
        if not quantize(ck, src, dst, name):
            continue
        t = read_tensors(dst)["blk.0.e.weight"]
        y = gguf.quants.dequantize(np.asarray(t.data, dtype=np.uint8).reshape(4, -1), qt)
        ok = np.all(np.isfinite(y)) and np.all(y[0] == 0) and abs(y[2, 3] - 40) < 40 * 0.1
        ck.check(bool(ok), "%s: zero, flat and outlier rows" % name,
                 "row maxima %s" % np.abs(y).max(axis=1))


def main():
    ck = H.Checks("test_quant_formats")
    wd = H.work_dir("quant_formats")
    rng = np.random.default_rng(2024)
    test_dequantize(ck, wd, rng)
    test_quantize(ck, wd, rng)
    test_edge_rows(ck, wd)
    return ck.finish()


if __name__ == "__main__":
    sys.exit(main())

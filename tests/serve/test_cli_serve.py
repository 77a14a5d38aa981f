"""`looptune serve`'s command line without a broker: --help, and a one-line
error with exit code 1 for each bad flag, a missing or unreadable model,
two models of one name."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dist"))
import dist_harness as h  # noqa: E402


def serve(*args):
    p = subprocess.run([h.binary(), "serve", *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def main():
    code, out, err = serve("--help")
    h.check(code == 0 and "usage: looptune serve -m MODEL" in out and "--max-batch N" in out
            and "--instance-id ID" in out and "--topic-prefix P" in out, f"--help: {code} {out}")
    model = os.path.join(os.environ["LT_DATA_DIR"], "stories260K.bin")
    cases = [
        ((), "no model: give -m MODEL"),
        (("-m", model, "--max-batch", "0"), "bad --max-batch '0': expected 1..256 sequences"),
        (("-m", model, "--max-batch", "x"), "bad --max-batch 'x'"),
        (("-m", model, "--ctx", "-5"), "bad --ctx '-5'"),
        (("-m", model, "--threads", "999"), "bad --threads '999': expected 1..256"),
        (("-m", model, "--instance-id", ""), "bad --instance-id ''"),
        (("-m", model, "--frobnicate"), "frobnicate"),
        (("-m", model, "extra"), "unexpected argument 'extra'"),
        (("-m", model, "-X", "nonsense"), "nonsense"),
        (("-m", "=x.gguf"), "bad -m '=x.gguf': expected FILE or NAME=FILE"),
        (("-m", f"a={model}", "-m", f"a={model}"), "two models named 'a'"),
        (("-m", "/nonexistent/model.gguf"), "/nonexistent/model.gguf"),
        (("-m", model, "--ctx", "100000"), "--ctx 100000 exceeds the context length 512"),
    ]
    for args, want in cases:
        code, out, err = serve(*args)
        lines = err.strip().splitlines()
        h.check(code == 1, f"{args}: exit {code}, want 1 ({err})")
        h.check(len(lines) == 1 and lines[0].startswith("looptune serve: ") and want in lines[0],
                f"{args}: stderr {err!r}, want one line with {want!r}")
    h.say("ok")


if __name__ == "__main__":
    main()

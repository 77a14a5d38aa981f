"""`looptune serve`'s command line without a broker: --help, and a one-line
error with exit code 1 for each bad flag, a missing or unreadable model,
two models of one name, KV caches over --kv-memory, bad telemetry and
tuning flags; --kv-memory with one of
--max-batch and --ctx (or neither) derives the other."""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dist"))
import dist_harness as h  # noqa: E402


def serve(*args):
    p = subprocess.run([h.binary(), "serve", *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def derived(*args):
    """The --max-batch and --ctx a worker says --kv-memory left it (it is stopped then)."""
    p = subprocess.Popen([h.binary(), "serve", *args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            line = p.stderr.readline()
            if not line:
                break
            m = re.search(r"--kv-memory \d+ MB: --max-batch (\d+) --ctx (\d+)", line)
            if m:
                return int(m[1]), int(m[2])
        h.fail(f"{args}: no --kv-memory line")
    finally:
        p.terminate()
        p.wait(timeout=30)


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
        (("-m", model, "--kv-memory", "0"), "bad --kv-memory '0': expected a positive number"),
        # stories260K: 5 layers, kv_dim 32: 1280 bytes per slot and token
        (("-m", model, "--max-batch", "8", "--ctx", "512", "--kv-memory", "1"),
         "--kv-memory 1 MB cannot hold the KV caches of model stories260K: 5 layers x 8 slots x "
         "512 ctx x 32 kv_dim x 2 x 4 bytes = 5.0 MB"),
        (("-m", model, "--ctx", "512", "--kv-memory", "0.5"), "bad --kv-memory '0.5'"),
        # the telemetry and tuning flags: run's parser, serve's own checks
        (("-m", model, "--tune", "sometimes"), "bad --tune 'sometimes': expected off or online"),
        (("-m", model, "--telemetry", "disk"), "bad --telemetry 'disk'"),
        (("-m", model, "--tune", "online", "--telemetry", "off"),
         "--tune online needs --telemetry kafka"),
        (("-m", model, "--explore-share", "0.9"), "bad --explore-share '0.9'"),
        (("-m", model, "--telemetry-window-tokens", "0"), "bad --telemetry-window-tokens '0'"),
        (("-m", model, "--config-store", ""), "bad --config-store ''"),
    ]
    for args, want in cases:
        code, out, err = serve(*args)
        lines = err.strip().splitlines()
        h.check(code == 1, f"{args}: exit {code}, want 1 ({err})")
        h.check(len(lines) == 1 and lines[0].startswith("looptune serve: ") and want in lines[0],
                f"{args}: stderr {err!r}, want one line with {want!r}")
    # one given: the other is the largest that fits 1 MB (1048576 / 1280 = 819 slot-tokens)
    for args, want in [(("--ctx", "512"), (1, 512)), (("--max-batch", "8"), (8, 102)),
                       ((), (4, 204))]:
        got = derived("-m", model, "--kv-memory", "1", *args)
        h.check(got == want, f"--kv-memory 1 {args}: --max-batch, --ctx {got}, want {want}")
    h.check(derived("-m", model, "--kv-memory", "1000", "--max-batch", "2") == (2, 512),
            "--kv-memory 1000 --max-batch 2: the context is the model's at most")
    h.say("ok")


if __name__ == "__main__":
    main()

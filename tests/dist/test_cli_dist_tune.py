#!/usr/bin/env python3
"""Bad input to `looptune submit tune` and to the tune options of `looptune
worker`: each gives exactly one line on stderr naming the problem and exit
status 1, before any broker is contacted (the address given is never
listened on); the helps name the new options."""
import os
import subprocess

import dist_harness as h

NOWHERE = "127.0.0.1:9"  # never contacted: every case fails before connecting


def one_line_error(args, *want, cmd="submit tune"):
    p = subprocess.run([h.binary(), *args], capture_output=True, text=True, timeout=30)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    h.check(p.returncode == 1, f"{args}: exit {p.returncode}, expected 1 ({p.stderr!r})")
    h.check(len(lines) == 1, f"{args}: expected one line on stderr, got:\n{p.stderr}")
    h.check(lines[0].startswith(f"looptune {cmd}: "), f"{args}: {lines[0]}")
    for w in want:
        h.check(w in lines[0], f"{args}: '{w}' not in: {lines[0]}")
    return lines[0]


def main():
    wdir = h.work_dir()
    model = os.path.join(wdir, "m.gguf")
    with open(model, "wb") as f:
        f.write(b"not looked at: every case fails first")
    store = ["--config-store", os.path.join(wdir, "c.tsv")]
    base = ["submit", "tune", "--brokers", NOWHERE, *store]
    one_line_error(base, "no model: give -m MODEL")
    one_line_error(base + ["-m", os.path.join(wdir, "absent.gguf")], "absent.gguf",
                   "No such file")
    one_line_error(base + ["-m", model, "--budget", "0"], "bad --budget '0'")
    one_line_error(base + ["-m", model, "--threads", "0"], "bad --threads '0'")
    one_line_error(base + ["-m", model, "--regime", "both-ways"], "bad --regime 'both-ways'")
    one_line_error(base + ["-m", model, "--strategy", "guess"], "guess")
    one_line_error(base + ["-m", model, "--host-class", "a b"], "bad --host-class 'a b'")
    one_line_error(base + ["-m", model, "--resume"], "--resume needs --job-id")
    one_line_error(base + ["-m", model, "--worker-timeout", "0"], "bad --worker-timeout")
    one_line_error(["submit", "tune", "-m", model, *store], "no broker")
    one_line_error(base + ["-m", model, "extra"], "unexpected argument 'extra'")
    one_line_error(["submit", "frobnicate"], "unknown job kind 'frobnicate'",
                   "matmul, noop, tune", cmd="submit")

    w = ["worker", "--brokers", NOWHERE]
    one_line_error(w + ["--models-dir", wdir], "are for tune tasks: give --kinds tune",
                   cmd="worker")
    one_line_error(w + ["--kinds", "tune", "--host-class", ""], "bad --host-class ''",
                   cmd="worker")
    one_line_error(w + ["--kinds", "tuna"], "unknown task kind 'tuna'", "tune", cmd="worker")

    p = subprocess.run([h.binary(), "submit", "tune", "--help"], capture_output=True, text=True)
    h.check(p.returncode == 0 and "--remote-model" in p.stdout and "--host-class" in p.stdout
            and "--config-store" in p.stdout, f"submit tune --help:\n{p.stdout}")
    p = subprocess.run([h.binary(), "submit", "--help"], capture_output=True, text=True)
    h.check(p.returncode == 0 and "looptune submit tune -m MODEL" in p.stdout,
            f"submit --help:\n{p.stdout}")
    p = subprocess.run([h.binary(), "worker", "--help"], capture_output=True, text=True)
    h.check(p.returncode == 0 and "--models-dir" in p.stdout and "tune" in p.stdout,
            f"worker --help:\n{p.stdout}")
    h.say("passed")


if __name__ == "__main__":
    main()

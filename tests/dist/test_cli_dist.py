#!/usr/bin/env python3
"""Bad input to `looptune submit` and `looptune worker`: .npy files numpy
writes that looptune does not take (float64, int32, Fortran order, 3-D,
big-endian, truncated, not .npy at all, shapes that do not multiply) and bad
flags each give exactly one line on stderr naming the problem and exit
status 1, before any broker is contacted (the address given is never
listened on). numpy's own files of the right kind are read: a 0-task job is
never started, so that case is left to the broker tests."""
import os
import subprocess
import sys

import numpy as np

import dist_harness as h

NOWHERE = "127.0.0.1:9"  # never contacted: every case fails before connecting


def one_line_error(args, *want, cmd="submit matmul"):
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
    path = lambda n: os.path.join(wdir, n)
    good = np.ones((4, 3), np.float32)
    np.save(path("good.npy"), good)
    np.save(path("b.npy"), np.ones((3, 5), np.float32))
    np.save(path("f64.npy"), good.astype(np.float64))
    np.save(path("i32.npy"), good.astype(np.int32))
    np.save(path("fortran.npy"), np.asfortranarray(np.ones((4, 3), np.float32)))
    np.save(path("cube.npy"), np.ones((2, 2, 2), np.float32))
    np.save(path("big.npy"), good.astype(">f4"))
    np.save(path("wide.npy"), np.ones((7, 5), np.float32))
    with open(path("good.npy"), "rb") as f:
        raw = f.read()
    with open(path("cut.npy"), "wb") as f:
        f.write(raw[:-7])
    with open(path("text.npy"), "w") as f:
        f.write("a,b,c\n1,2,3\n")

    base = ["submit", "matmul", "--brokers", NOWHERE, "--out", path("c.npy")]
    with_b = lambda a: base + ["--a", path(a), "--b", path("b.npy")]
    one_line_error(with_b("f64.npy"), "f64.npy", "dtype '<f8'", "'<f4'")
    one_line_error(with_b("i32.npy"), "dtype '<i4'")
    one_line_error(with_b("fortran.npy"), "Fortran order")
    one_line_error(with_b("big.npy"), "dtype '>f4'")
    one_line_error(with_b("cube.npy"), "3-dimensional")
    one_line_error(with_b("cut.npy"), "truncated", "needs 48 data bytes, the file has 41")
    one_line_error(with_b("text.npy"), "not a .npy file")
    one_line_error(with_b("absent.npy"), "absent.npy", "cannot open")
    one_line_error(base + ["--a", path("good.npy"), "--b", path("wide.npy")],
                   "A's columns must equal B's rows")

    one_line_error(base + ["--m", "8", "--n", "8", "--k", "8", "--block", "0x4"], "bad --block '0x4'")
    one_line_error(base + ["--m", "8", "--n", "8", "--k", "8", "--block", "64"], "bad --block")
    one_line_error(base + ["--m", "8", "--n", "8", "--k", "8", "--block", "4x4x4x4"],
                   "bad --block '4x4x4x4'", "ROWSxCOLSxK")
    one_line_error(base + ["--m", "8", "--n", "8", "--k", "8", "--block", "4x4x0"],
                   "bad --block '4x4x0'")
    one_line_error(base + ["--m", "8", "--n", "8", "--k", "8", "--dtype", "q4_0"],
                   "bad --dtype 'q4_0'", "f32, f16, bf16 or q8_0")
    one_line_error(base + ["--m", "8", "--n", "8", "--k", "40", "--dtype", "q8_0"],
                   "--dtype q8_0 needs K a multiple of 32", "K is 40")
    one_line_error(base + ["--m", "8", "--n", "8", "--k", "64", "--dtype", "q8_0", "--block",
                           "8x8x48"], "k-split of --block a multiple of 32, not 48")
    one_line_error(base + ["--m", "8", "--n", "8", "--k", "8", "--panel-by", "diagonal"],
                   "bad --panel-by 'diagonal': expected rows or cols")
    one_line_error(base + ["--m", "8", "--n", "8", "--k", "8", "--panel-by", "rows",
                           "--no-panel-reuse"], "--panel-by and --no-panel-reuse contradict")
    one_line_error(base + ["--m", "8", "--n", "8"], "--m, --n and --k go together")
    one_line_error(base + ["--m", "0", "--n", "8", "--k", "8"], "bad --m '0'")
    one_line_error(base + ["--a", path("good.npy"), "--m", "4", "--n", "4", "--k", "4"],
                   "not both")
    one_line_error(base, "no operands")
    one_line_error(["submit", "matmul", "--brokers", NOWHERE, "--m", "4", "--n", "4", "--k", "4"],
                   "no --out")
    one_line_error(["submit", "matmul", "--m", "4", "--n", "4", "--k", "4", "--out",
                    path("c.npy")], "no broker")
    one_line_error(base + ["--m", "8", "--n", "8", "--k", "8", "--chunk-kb", "5000"],
                   "bad --chunk-kb '5000'")
    one_line_error(base + ["--m", "8", "--n", "8", "--k", "8", "--worker-timeout", "-1"],
                   "bad --worker-timeout")
    one_line_error(base + ["--m", "8", "--n", "8", "--k", "8", "--test-corrupt", "x:1"],
                   "bad --test-corrupt")
    one_line_error(base + ["--frobnicate"], "unknown option '--frobnicate'")
    one_line_error(base + ["--m", "8", "--n", "8", "--k", "8", "-X", "linger.mss=5"],
                   "kafka property 'linger.mss'")
    one_line_error(["submit", "frobnicate"], "unknown job kind 'frobnicate'", cmd="submit")

    one_line_error(["worker"], "no broker", cmd="worker")
    one_line_error(["worker", "--brokers", NOWHERE, "--kinds", "matmul,nosuch"],
                   "unknown task kind 'nosuch'", cmd="worker")
    one_line_error(["worker", "--brokers", NOWHERE, "--threads", "0"], "bad --threads '0'",
                   cmd="worker")
    one_line_error(["worker", "--brokers", NOWHERE, "--session-timeout-ms", "10"],
                   "bad --session-timeout-ms", cmd="worker")
    one_line_error(["worker", "--brokers", NOWHERE, "--panel-cache-mb", "0"],
                   "bad --panel-cache-mb '0'", cmd="worker")
    one_line_error(["worker", "--brokers", NOWHERE, "--batch", "0"], "bad --batch '0'",
                   cmd="worker")
    one_line_error(["worker", "--brokers", NOWHERE, "--batch-ms", "x"], "bad --batch-ms 'x'",
                   cmd="worker")
    one_line_error(["worker", "--brokers", NOWHERE, "--test-commit-delay-ms", "-1"],
                   "bad --test-commit-delay-ms '-1'", cmd="worker")
    one_line_error(["worker", "--brokers", NOWHERE, "extra"], "unexpected argument 'extra'",
                   cmd="worker")
    one_line_error(["jobs"], "no broker", cmd="jobs")
    one_line_error(["jobs", "--brokers", NOWHERE, "--alive-s", "x"], "bad --alive-s 'x'", cmd="jobs")
    for args in (["jobs", "--help"], ["worker", "--help"], ["submit", "--help"], ["submit", "matmul", "--help"]):
        p = subprocess.run([h.binary(), *args], capture_output=True, text=True, timeout=30)
        h.check(p.returncode == 0 and "usage: looptune" in p.stdout, f"{args}: {p}")
    h.say("passed")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Runs llamacpp_decode.py over models x threads x llama.cpp configurations.

A configuration is a Python interpreter (a virtual environment holding one
llama-cpp-python build, e.g. its OpenMP or its pthread build) plus optional
llamacpp_decode.py arguments (e.g. --no-extra-bufts). Each cell runs in a
fresh process, so builds never share a process. The whole matrix is repeated
--rounds times, cells interleaved by model and threads with the
configurations side by side, so that the noise of a shared machine spreads
over all of them; the table pools every run of a cell (rounds x runs) into
min / median / max. Every process's result is appended as one JSON line.

    python3 run_llamacpp.py \\
        --config "openmp=/opt/peers/venv-omp/bin/python" \\
        --config "pthread=/opt/peers/venv-noomp/bin/python" \\
        --config "openmp-plain=/opt/peers/venv-omp/bin/python --no-extra-bufts" \\
        --only openmp-plain=q8_0 \\
        --model stories15M-q8_0=/tmp/m/stories15M-q8_0.gguf --threads 1 2 \\
        --runs 5 --rounds 2 --jsonl results.jsonl
    python3 run_llamacpp.py --table results.jsonl
"""
import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def cpu_jiffies():
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    total = sum(v[:8])  # guest time is already inside user
    return total - v[3] - v[4], total


def cpu_busy(window):
    """Fraction of all CPUs busy over `window` seconds."""
    b0, t0 = cpu_jiffies()
    time.sleep(window)
    b1, t1 = cpu_jiffies()
    return (b1 - b0) / max(t1 - t0, 1)


def wait_quiet(max_busy, timeout):
    """Waits until other processes leave the CPUs mostly idle (a shared
    machine: spinning threads collapse when a core is taken), at most
    `timeout` seconds. Returns the last busy fraction seen."""
    deadline = time.monotonic() + timeout
    while True:
        b = cpu_busy(2.0)
        if b <= max_busy or time.monotonic() >= deadline:
            return b


class OthersMeter:
    """CPU time that other processes used while one child ran, in cores:
    all busy CPU time over the interval minus the child's own user+system
    time, divided by the wall time. 0 = the machine was ours; 1 = another
    process held a whole core on average."""

    def __enter__(self):
        self.hz = os.sysconf("SC_CLK_TCK")
        self.j0 = cpu_jiffies()[0]
        self.r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.w0 = time.monotonic()
        return self

    def __exit__(self, *exc):
        j1 = cpu_jiffies()[0]
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.monotonic() - self.w0
        own = (r1.ru_utime - self.r0.ru_utime) + (r1.ru_stime - self.r0.ru_stime)
        self.cores = max(0.0, ((j1 - self.j0) / self.hz - own) / max(wall, 1e-9))
        return False


def pairs(items, what):
    out = []
    for it in items or []:
        name, sep, value = it.partition("=")
        if not sep or not name or not value:
            sys.exit("%s must be NAME=VALUE: %r" % (what, it))
        out.append((name, value))
    return out


def run(a):
    configs = [(n, shlex.split(v)) for n, v in pairs(a.config, "--config")]
    models = pairs(a.model, "--model")
    gens = dict(pairs(a.gen_for, "--gen-for"))
    only = dict(pairs(a.only, "--only"))
    for rnd in range(a.rounds):
        for label, path in models:
            for t in a.threads:
                for cname, argv in configs:
                    if cname in only and only[cname] not in label:
                        continue
                    n_gen = int(gens.get(label, a.gen))
                    cmd = [argv[0], os.path.join(HERE, "llamacpp_decode.py"), path,
                           "--threads", str(t), "--prompt", str(a.prompt), "--gen", str(n_gen),
                           "--runs", str(a.runs)] + argv[1:]
                    busy = wait_quiet(a.max_busy, a.wait) if a.max_busy < 1 else None
                    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
                    try:
                        with OthersMeter() as meter:
                            p = subprocess.run(cmd, capture_output=True, text=True,
                                               timeout=a.cell_timeout)
                    except subprocess.TimeoutExpired:
                        # A taken core can slow a spinning build 100-fold; give
                        # up on this cell for this round rather than stall.
                        print("round %d %-14s %-18s t=%d  timed out after %.0f s" %
                              (rnd, cname, label, t, a.cell_timeout), file=sys.stderr, flush=True)
                        continue
                    if p.returncode != 0:
                        print(p.stderr[-3000:], file=sys.stderr)
                        sys.exit("failed (exit %d): %s %s t=%d" % (p.returncode, cname, label, t))
                    r = json.loads(p.stdout.strip().splitlines()[-1])
                    r.update(config=cname, label=label, round=rnd, busy_before=busy,
                             others_cores=meter.cores)
                    with open(a.jsonl, "a") as f:
                        f.write(json.dumps(r) + "\n")
                    m = r["tok_s"]
                    print("round %d %-15s %-16s t=%d  %8.2f %8.2f %8.2f tok/s  others %.2f cores"
                          % (rnd, cname, label, t, m["min"], m["median"], m["max"], meter.cores),
                          file=sys.stderr, flush=True)


def weight_bytes_per_token(path):
    """Bytes of weights one decoded token reads: every tensor once, except
    the token embedding, of which only one row is read."""
    import gguf  # only needed for this column
    total = 0
    for t in gguf.GGUFReader(path).tensors:
        n = int(t.n_bytes)
        if t.name == "token_embd.weight":
            n //= int(t.shape[-1]) if len(t.shape) > 1 else 1
        total += n
    return total


def table(path, max_others, weights_dir):
    cells = {}
    dropped = 0
    for line in open(path):
        if not line.strip():
            continue
        r = json.loads(line)
        if max_others is not None and (r.get("others_cores") is None
                                       or r["others_cores"] > max_others):
            dropped += 1
            continue
        key = (r["label"], r["threads"], r["config"])
        c = cells.setdefault(key, {"r": r, "runs": [], "others": []})
        c["runs"] += r["runs_tok_s"]
        if r.get("others_cores") is not None:
            c["others"].append(r["others_cores"])
    order = {}
    for line in open(path):
        if line.strip():
            order.setdefault(json.loads(line)["label"], len(order))
    cells = dict(sorted(cells.items(), key=lambda kv: (order[kv[0][0]], kv[0][1], kv[0][2])))
    bpt = {}
    if weights_dir:
        for (label, _, _), c in cells.items():
            if label not in bpt:
                bpt[label] = weight_bytes_per_token(os.path.join(weights_dir, c["r"]["model"]))
    print("| model | file MB | threads | config | tok/s min | median | max | runs | "
          "prompt+gen | others' CPU (cores) |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---|---|")
    for (label, t, cname), c in cells.items():
        r, xs = c["r"], c["runs"]
        others = ("%.2f-%.2f" % (min(c["others"]), max(c["others"])) if c["others"] else "-")
        print("| %s | %.1f | %d | %s | %.1f | %.1f | %.1f | %d | %d+%d | %s |" % (
            label, r["model_bytes"] / 1e6, t, cname, min(xs), statistics.median(xs), max(xs),
            len(xs), r["prompt_tokens"], r["gen_tokens"], others))
    best = {}
    for (label, t, cname), c in cells.items():
        med = statistics.median(c["runs"])
        if (label, t) not in best or med > best[(label, t)][1]:
            best[(label, t)] = (cname, med, min(c["runs"]), max(c["runs"]))
    if max_others is not None:
        print()
        print("(%d processes left out: other processes used more than %.2f cores meanwhile)"
              % (dropped, max_others))
    print()
    print("| model | threads | best config (by median) | tok/s median | min | max |"
          + (" weights MB/token | GB/s at median |" if bpt else ""))
    print("|---|---:|---|---:|---:|---:|" + ("---:|---:|" if bpt else ""))
    for (label, t), (cname, med, lo, hi) in best.items():
        extra = ""
        if bpt:
            extra = " %.1f | %.1f |" % (bpt[label] / 1e6, bpt[label] * med / 1e9)
        print("| %s | %d | %s | %.1f | %.1f | %.1f |%s" % (label, t, cname, med, lo, hi, extra))


def main():
    ap = argparse.ArgumentParser(description="llama.cpp decode-speed matrix")
    ap.add_argument("--config", action="append", help="NAME=PYTHON [ARGS...]")
    ap.add_argument("--only", action="append",
                    help="NAME=SUBSTR: run config NAME only on models whose label has SUBSTR")
    ap.add_argument("--model", action="append", help="LABEL=PATH.gguf")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--prompt", type=int, default=16)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--gen-for", action="append", help="LABEL=N: generated tokens for one model")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per process")
    ap.add_argument("--rounds", type=int, default=1, help="repeats of the whole matrix")
    ap.add_argument("--max-busy", type=float, default=0.25,
                    help="before each cell wait until the CPUs are at most this busy (1 = never)")
    ap.add_argument("--wait", type=float, default=300, help="longest such wait, seconds")
    ap.add_argument("--cell-timeout", type=float, default=300,
                    help="seconds before one cell's process is abandoned")
    ap.add_argument("--jsonl", help="append results here")
    ap.add_argument("--table", help="render a Markdown table from this JSONL file and exit")
    ap.add_argument("--weights-dir",
                    help="with --table: folder of the GGUF files, adds weight GB/s (needs gguf)")
    ap.add_argument("--max-others", type=float,
                    help="with --table: leave out processes during which others used more cores")
    a = ap.parse_args()
    if a.table:
        table(a.table, a.max_others, a.weights_dir)
        return 0
    if not (a.config and a.model and a.jsonl):
        ap.error("--config, --model and --jsonl are required to run")
    run(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""looptune tune end to end on a stories15M-shaped q8_0 model: the tuner writes a config
store, a later `looptune run` warm-starts from it (and says how many configurations it
applied, and the thread counts of decode and prefill it took), `tune --regime batch` stores
the batch regime's keys and a warm-started `bench --seqs` runs on them, and tuned, hand-set or
corrupt stores never change the greedy tokens as long as they
keep matvec's activation mode (act_int16 / act_int8 select how q8_0 activations are quantised,
which changes the arithmetic and may flip a near tie; every other parameter leaves the logits
bit for bit as they are)."""

import os
import re
import subprocess
import sys

BIN = os.environ.get("LT_BIN", "build/looptune")
WORK = os.path.join(os.environ.get("LT_WORK_DIR", "/tmp"), "tune_e2e")
failures = 0


def check(ok, name, detail=""):
    global failures
    print(("ok   " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
    if not ok:
        failures += 1


def cli(*args, timeout=600):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout)


def greedy(model, store=None):
    args = ["run", "-m", model, "-p", "Once upon a time", "-n", "24", "--temp", "0",
            "--print-ids", "--ignore-eos", "-t", "2"]
    args += ["--config-store", store] if store else ["--no-warm-start"]
    p = cli(*args)
    m = re.search(r"warm start: (\d+) configurations", p.stderr)
    return p, (int(m.group(1)) if m else None)


def read_store(path):
    with open(path) as f:
        lines = f.read().splitlines()
    return lines[0], [l.split("\t") for l in lines[1:] if l and not l.startswith("#")]


# matvec's default activation mode (int8; int16 is the fallback when int8 is off)
DEFAULT_ACT = {"act_int16": "1", "act_int8": "1"}


def default_act(entries):
    """The entries with every matvec's activation mode set to the default."""
    out = []
    for e in entries:
        if e[0] == "matvec":
            kv = [p.split("=") for p in e[3].split(",")]
            e = e[:3] + [",".join("%s=%s" % (k, DEFAULT_ACT.get(k, v)) for k, v in kv)] + e[4:]
        out.append(e)
    return out


def main():
    os.makedirs(WORK, exist_ok=True)
    model = os.path.join(WORK, "s15-q8_0.gguf")
    store = os.path.join(WORK, "configs.tsv")
    if os.path.exists(store):
        os.remove(store)
    p = cli("model-gen", "--preset", "stories15M", "--dtype", "q8_0", "-o", model)
    check(p.returncode == 0, "model-gen", p.stderr)

    p = cli("tune", "-m", model, "--budget", "3", "--regime", "both", "--config-store", store,
            "--seed", "7", "-t", "2")
    check(p.returncode == 0, "tune exits 0", p.stderr[-500:])
    check("speedup" in p.stdout and "matvec" in p.stdout and "matmul" in p.stdout,
          "tune prints the table with decode and prefill kernels", p.stdout)
    check("written to " + store in p.stderr, "tune says where it wrote", p.stderr[-300:])
    magic, entries = read_store(store)
    check(magic == "# looptune configs v1", "store magic line", magic)
    check(len(entries) >= 10 and all(len(e) == 7 for e in entries), "store entries",
          repr(entries[:3]))
    hosts = {e[2] for e in entries}
    kernels = {e[0] for e in entries}
    check(len(hosts) == 1, "one host class", repr(hosts))
    check({"matvec", "matmul", "looped"} <= kernels, "kernels, prefill and executor tuned",
          repr(kernels))
    check(any(e[1].endswith(":prefill") for e in entries) and
          any(e[1].endswith(":decode") for e in entries), "regimes keyed apart", "")
    threads = {e[1].rsplit(":", 1)[1]: e[3] for e in entries if e[0] == "threads"}
    check(set(threads) == {"decode", "prefill"} and
          all(re.fullmatch(r"threads=[01]", v) for v in threads.values()) and
          all(":t2:" in e[1] for e in entries if e[0] == "threads"),
          "thread count tuned per regime", repr(threads))

    base, n0 = greedy(model)
    check(base.returncode == 0 and n0 is None, "untuned run", base.stderr[-300:])
    tuned, n1 = greedy(model, store)
    check(tuned.returncode == 0, "warm-started run", tuned.stderr[-300:])
    check(n1 is not None and n1 >= 8, "run says how many configurations it applied",
          tuned.stderr[:300])
    # the tuned store with the default activation mode: the same tokens
    pinned = os.path.join(WORK, "pinned.tsv")
    with open(pinned, "w") as f:
        f.write(magic + "\n")
        for e in default_act(entries):
            f.write("\t".join(e) + "\n")
    tuned, n1p = greedy(model, pinned)
    check(tuned.returncode == 0 and n1p == n1, "warm-started run, default activation mode",
          tuned.stderr[-300:])
    check(tuned.stdout == base.stdout, "tuned tokens equal untuned", tuned.stdout + base.stdout)

    # far-from-default but valid parameters everywhere: still the same tokens
    hand = os.path.join(WORK, "hand.tsv")
    with open(hand, "w") as f:
        f.write(magic + "\n")
        for e in entries:
            if e[0] == "matvec":
                e = e[:3] + ["rows_per_task=4,unroll=8,k_block=256,prefetch=0,"
                             "act_int16=1,act_int8=1"] + e[4:]
            elif e[0] == "matmul":
                e = e[:3] + ["n_block=12,m_block=32,k_block=64"] + e[4:]
            elif e[0] == "looped":
                e = e[:3] + ["tiles_per_thread=1,prefetch_kb=0,sync=1,min_task_kb=16"] + e[4:]
            elif e[0] == "threads":  # one thread of the two for decode and prefill
                e = e[:3] + ["threads=1"] + e[4:]
            f.write("\t".join(e) + "\n")
        # corrupt lines: skipped with a message, the rest still applies
        f.write("matvec\tq8_0:288x288:decode\t%s\trows_per_task=5,unroll=1,k_block=0,prefetch=0,"
                "act_int16=1,act_int8=1"
                "\t1\t1\t1\n" % entries[0][2])
        f.write("garbage line\n")
    h, n2 = greedy(model, hand)
    check(h.returncode == 0, "hand-set store run", h.stderr[-300:])
    check(h.stdout == base.stdout, "hand-set parameters give the same tokens", h.stdout)
    check(n2 == n1, "every valid hand-set entry applied", "%r vs %r" % (n2, n1))
    check(h.stderr.count("bad config line skipped") == 2, "corrupt lines reported",
          h.stderr[:500])
    check("2 (decode 1, prefill 1) threads" in h.stderr, "stored thread counts in force",
          h.stderr[-400:])

    # a thread count the pool does not have: refused at warm start, the rest applies
    over = os.path.join(WORK, "over.tsv")
    with open(over, "w") as f:
        f.write(magic + "\n")
        for e in entries:
            if e[0] == "threads":
                e = e[:3] + ["threads=3"] + e[4:]
            f.write("\t".join(e) + "\n")
    o, n3 = greedy(model, over)
    check(o.returncode == 0 and o.stdout == base.stdout, "run with an impossible thread count",
          o.stderr[-300:])
    check(o.stderr.count("threads=3 skipped") == 2 and "(2 refused)" in o.stderr and
          "2 threads," in o.stderr, "impossible thread counts refused", o.stderr[-600:])

    # the batch regime: tune --regime batch stores batch keys alone, with values in their spaces
    # (tok_chunk_kb among its declared values), and a warm-started bench --seqs runs on them
    bstore = os.path.join(WORK, "batch.tsv")
    if os.path.exists(bstore):
        os.remove(bstore)
    p = cli("tune", "-m", model, "--budget", "2", "--regime", "batch", "--seqs", "2",
            "--config-store", bstore, "--seed", "7", "-t", "2")
    check(p.returncode == 0, "tune --regime batch exits 0", p.stderr[-500:])
    _, bentries = read_store(bstore) if p.returncode == 0 else ("", [])
    check(len(bentries) >= 8 and all(e[1].endswith(":batch") or ":batch:ia=" in e[1]
                                     for e in bentries),
          "tune --regime batch stores batch keys alone", repr([e[1] for e in bentries]))
    chunks = {"32", "64", "128", "256", "512", "1024", "2048"}
    mv = [dict(kv.split("=") for kv in e[3].split(",")) for e in bentries if e[0] == "matvec"]
    check(mv and all(m.get("tok_chunk_kb") in chunks and m.get("rows_per_task") in
                     {"4", "8", "16", "32", "64", "128", "256"} for m in mv),
          "batch matvec values lie in the space", repr(mv[:2]))
    bthreads = [e for e in bentries if e[0] == "threads"]
    check(len(bthreads) == 1 and bthreads[0][1].endswith(":t2:batch") and
          re.fullmatch(r"threads=[01]", bthreads[0][3]), "the batch thread count tuned",
          repr(bthreads))
    b = cli("bench", "-m", model, "--seqs", "2", "-t", "2", "-n", "4", "-r", "1",
            "--membw-mib", "16", "--config-store", bstore)
    m = re.search(r"warm start: (\d+) configurations", b.stderr)
    check(b.returncode == 0 and m is not None and int(m.group(1)) == len(bentries),
          "bench --seqs warm-starts from every batch entry", b.stderr[-400:])
    if bthreads:
        want = 2 if bthreads[0][3] == "threads=0" else 1
        b = cli("bench", "-m", model, "--seqs", "2", "-t", "2", "-n", "4", "-r", "1",
                "--membw-mib", "16", "--json", "--config-store", bstore)
        check(b.returncode == 0 and ('"step_threads":%d' % want) in b.stdout,
              "bench --seqs runs on the stored batch thread count", b.stdout + b.stderr[-300:])

    # errors: one line, exit != 0
    for args, what in [(["--budget", "0"], "budget < 1"), (["--strategy", "annealing"], "strategy"),
                       (["--regime", "train"], "regime"), (["--bogus"], "unknown flag"),
                       (["--regime", "batch", "--seqs", "1"], "--seqs 1")]:
        p = cli("tune", "-m", model, "--config-store", store, *args)
        check(p.returncode != 0 and p.stderr.count("\n") == 1, "tune refuses " + what, p.stderr)
    p = cli("tune", "-m", os.path.join(WORK, "missing.gguf"), "--config-store", store)
    check(p.returncode != 0 and "missing.gguf" in p.stderr, "tune: missing model", p.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""The CLI's reporting, end to end: `bench --json` (single executor, --prefill and
--compare-executors) gives consistent figures (achieved GB/s = tokens/s x bytes per token; bandwidth fraction =
achieved / read-only per run, so its median lies within the ranges) and valid JSON whatever the
model's path holds, `run` prints a summary whose GB/s equals weights per token x decode
tokens/s, --param sets a kernel parameter, `tune` reports progress without a terminal,
--version names the version, commit and ISA paths, --help works on every command, and bad flags
give one line and a non-zero exit."""

import json
import os
import platform
import re
import shutil
import subprocess
import sys

BIN = os.environ["LT_BIN"]
DATA = os.environ["LT_DATA_DIR"]
MODEL = os.path.join(DATA, "stories260K.bin")
WORK = os.path.join(os.environ.get("LT_WORK_DIR", "/tmp"), "cli_e2e_%d" % os.getpid())

passed = failed = 0


def check(ok, name, detail=""):
    global passed, failed
    print("%s %s%s" % ("PASS" if ok else "FAIL", name, (": " + str(detail)) if detail and not ok else ""))
    if ok:
        passed += 1
    else:
        failed += 1


def run(args, timeout=300):
    return subprocess.run([BIN] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout)


def near(a, b, rel=1e-3):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def stat_ok(s):
    return s["min"] <= s["median"] <= s["max"] and s["min"] > 0


# bench --json, one executor
p = run(["bench", "-m", MODEL, "-t", "2", "-n", "16", "-r", "3", "--membw-mib", "16", "--json"])
check(p.returncode == 0, "bench --json exits 0", p.stderr)
j = json.loads(p.stdout) if p.returncode == 0 else {}
for key in ("tok_s", "gb_s", "read_gb_s", "triad_gb_s", "bw_fraction", "sync_share"):
    check(key in j and all(k in j[key] for k in ("min", "median", "max")), "bench json has " + key)
if j:
    check(all(stat_ok(j[k]) for k in ("tok_s", "gb_s", "read_gb_s", "triad_gb_s", "bw_fraction")),
          "every statistic is ordered min <= median <= max and positive")
    for k in ("min", "median", "max"):
        check(near(j["gb_s"][k], j["tok_s"][k] * j["bytes_per_token"] / 1e9),
              "gb_s.%s = tok_s x bytes_per_token" % k)
    check(j["executor"] == "looped", "default executor is looped")
    check(0 <= j["sync_share"]["median"] < 1, "sync share is a fraction")
    st = j.get("step_ms", {})
    # 48 steps: p99 is the slowest, no faster than the mean step of the fastest run
    check(0 < st.get("p50", 0) <= st.get("p99", 0) and
          st["p99"] >= 1e3 / j["tok_s"]["max"] * (1 - 1e-4),
          "step_ms: 0 < p50 <= p99, and p99 no faster than the fastest run's mean step", str(st))

# bench --prefill: one P-token prompt per run, its own figures, and its refusals
p = run(["bench", "-m", MODEL, "-t", "2", "--prefill", "24", "-r", "3", "--json"])
check(p.returncode == 0, "bench --prefill --json exits 0", p.stderr)
j = json.loads(p.stdout) if p.returncode == 0 else {}
if j:
    check(j.get("prefill_tokens") == 24 and j.get("runs") == 3, "bench --prefill names its prompt")
    check("prefill_tok_s" in j and stat_ok(j["prefill_tok_s"]),
          "prefill tokens/s ordered min <= median <= max and positive", str(j.get("prefill_tok_s")))
    check("tok_s" not in j and "read_gb_s" not in j, "bench --prefill reports no decode figures")
for args, what in ((["--prefill", "24", "-s", "2"], "with --seqs"),
                   (["--prefill", "100000"], "beyond the context")):
    p = run(["bench", "-m", MODEL, "-r", "1"] + args)
    check(p.returncode != 0 and len(p.stderr.strip().splitlines()) == 1
          and "--prefill" in p.stderr, "bench --prefill %s is one line of error" % what, p.stderr)

# bench --compare-executors
p = run(["bench", "-m", MODEL, "-t", "2", "-n", "16", "-r", "3", "--membw-mib", "16", "--json",
         "--compare-executors"])
check(p.returncode == 0, "bench --compare-executors exits 0", p.stderr)
j = json.loads(p.stdout) if p.returncode == 0 else {}
if j:
    check("dispatch" in j and "looped" in j, "both executors reported")
    d, l = j["dispatch"]["tok_s"], j["looped"]["tok_s"]
    r = j["speedup_looped_over_dispatch"]
    check(stat_ok(r) and r["min"] <= l["max"] / d["min"] + 1e-9 and r["max"] >= l["min"] / d["max"] - 1e-9,
          "speed-up lies within the ratios of the ranges")
    check(j["dispatch"]["sync_points_per_token"]["median"] > 0,
          "dispatch synchronises at barriers every token")

# bench --json with a model path holding a quote, a backslash and a control character: still
# JSON, and the path reads back as it was given
odd_dir = os.path.join(WORK, 'we"ird\\dir\ttab')
os.makedirs(odd_dir, exist_ok=True)
odd_model = os.path.join(odd_dir, "m.bin")
shutil.copyfile(MODEL, odd_model)
for extra in ([], ["--compare-executors"]):
    p = run(["bench", "-m", odd_model, "-t", "2", "-n", "4", "-r", "1", "--membw-mib", "16",
             "--json"] + extra)
    try:
        j = json.loads(p.stdout)
        check(p.returncode == 0 and j["model"] == odd_model,
              "bench --json %s: a path with \" \\ and a tab parses back" % " ".join(extra),
              j["model"])
    except (ValueError, KeyError) as e:
        check(False, "bench --json %s: a path with \" \\ and a tab parses" % " ".join(extra),
              "%s: %r" % (e, p.stdout[:200]))

# tune with stderr to a file (no terminal): one progress line per tuned kernel, shape and space,
# in the order of the result table, each with that row's trials
store = os.path.join(WORK, "configs.tsv")
err_path = os.path.join(WORK, "tune.err")
with open(err_path, "w") as err_file:
    p = subprocess.run([BIN, "tune", "-m", MODEL, "--budget", "2", "--config-store", store],
                       stdout=subprocess.PIPE, stderr=err_file, text=True, timeout=300)
with open(err_path) as f:
    progress = [ln for ln in f.read().splitlines() if ln.startswith("tune: ") and " trial" in ln]
rows = [ln.split() for ln in p.stdout.splitlines()[1:] if ln.strip()]
want = ["tune: %s %s: %s trial%s," % (r[0], r[1], r[5], "" if r[5] == "1" else "s") for r in rows]
check(p.returncode == 0 and len(rows) >= 3, "tune --budget 2 exits 0 with a table", p.stdout)
check(len(progress) == len(rows) and all(ln.startswith(w) for ln, w in zip(progress, want)),
      "tune without a terminal: a progress line per table row", "%s vs %s" % (progress, want))

# a q8_0 model's keys name the layout its weights run in: resident rows interleave (their
# integer dots read q4_0's parameters, keys "q8_0x16:..."), mapped ones stay plain ("q8_0:...")
q8 = os.path.join(WORK, "keys-q8_0.gguf")
p = subprocess.run([BIN, "model-gen", "--dim", "64", "--hidden", "192", "--layers", "1",
                    "--heads", "4", "--vocab", "512", "--dtype", "q8_0", "-o", q8],
                   capture_output=True, text=True, timeout=120)
check(p.returncode == 0, "model-gen q8_0", p.stderr)
for mmap, want_x16 in ((False, True), (True, False)):
    ks = os.path.join(WORK, "keys-%s.tsv" % ("mmap" if mmap else "resident"))
    if os.path.exists(ks):
        os.remove(ks)
    p = subprocess.run([BIN, "tune", "-m", q8, "--budget", "1", "-t", "1", "--config-store", ks] +
                       (["--mmap"] if mmap else []), capture_output=True, text=True, timeout=300)
    with open(ks) as f:
        mv = [ln.split("\t")[1] for ln in f if ln.startswith("matvec\t")]
    x16 = [k for k in mv if k.startswith("q8_0x16:")]
    plain = [k for k in mv if k.startswith("q8_0:")]
    check(p.returncode == 0 and mv and (len(x16) == len(mv) if want_x16 else len(plain) == len(mv)),
          "tune%s: the q8_0 matvec keys are %s" % (" --mmap" if mmap else "",
                                                  "q8_0x16" if want_x16 else "q8_0"), mv)

# run summary consistency
p = run(["run", "-m", MODEL, "--prompt-ids", "1,403", "-n", "20", "--temp", "0", "--print-ids"])
check(p.returncode == 0, "run exits 0", p.stderr)
lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
try:
    dec = [ln for ln in lines if ln.strip().startswith("decode")][0]
    w = [ln for ln in lines if ln.strip().startswith("weights")][0]
    tps = float(dec.split("(")[1].split()[0])
    mb = float(w.split()[1])
    gbs = float(w.split(",")[1].split()[0])
    check(near(gbs, mb * tps / 1e3, 0.05), "summary GB/s = MB per token x tokens/s", (mb, tps, gbs))
    check(len(p.stdout.split()) == 20, "20 ids printed")
    # the evaluations are part of decode: their time is at most decode's, so
    # their rate at least decode's
    ev = [ln for ln in lines if ln.strip().startswith("eval")][0]
    dec_ms = float(dec.split(" in ")[1].split()[0])
    ev_ms = float(ev.split()[1])
    ev_tps = float(ev.split("(")[1].split()[0])
    check(0 < ev_ms <= dec_ms, "eval time within decode time", (ev_ms, dec_ms))
    # ms are printed to 0.1: allow that rounding in the rate they imply
    check(ev_tps >= tps and near(ev_tps, 19 / (ev_ms / 1e3), 0.06 / ev_ms + 0.002),
          "eval tokens/s", (ev_tps, tps))
except (IndexError, ValueError) as e:
    check(False, "summary lines parse", e)

# run --tune online that starts no trial says why: 39 decode steps close one window of 32, and a
# first trial waits for 3; with the telemetry drained once a minute, none of 249 steps' 7 windows
# reaches the in-process optimizer before the decode ends
# (or, when the decode is over within the optimizer's first poll, before even the run's start
# has reached it: the same reason, said with what the optimizer had)
for n, extra, tag, whys in ((40, [], "too few telemetry windows",
                             ["its 39 decode steps closed 1 telemetry window and a first trial "
                              "waits for 3"]),
                            (250, ["--telemetry-drain-ms", "60000"], "run too short",
                             ["(249 steps, 7 telemetry windows) and ended before 3 of its windows "
                              "had reached the optimizer (0 had)",
                              "before the optimizer had the run's start"])):
    p = run(["run", "-m", MODEL, "--prompt-ids", "1,403", "-n", n, "--temp", "0", "--print-ids",
             "--tune", "online"] + extra)
    line = [ln for ln in p.stderr.splitlines() if "online tuning: " in ln]
    check(p.returncode == 0 and len(line) == 1 and "0 trials (%s)," % tag in line[0],
          "run -n %d --tune online: the summary line names the reason: %s" % (n, tag), p.stderr)
    check("no trial started: " in p.stderr and any(why in p.stderr for why in whys),
          "run -n %d --tune online: the reason's figures" % n, p.stderr)

# --param: a valid value runs; parameters that do not change the arithmetic keep the tokens
p1 = run(["run", "-m", MODEL, "--prompt-ids", "1,403", "-n", "12", "--temp", "0", "--print-ids",
          "--no-warm-start", "--param", "matvec.unroll=4", "--param", "matvec.rows_per_task=8"])
p0 = run(["run", "-m", MODEL, "--prompt-ids", "1,403", "-n", "12", "--temp", "0", "--print-ids",
          "--no-warm-start"])
check(p1.returncode == 0 and p0.returncode == 0 and p1.stdout == p0.stdout and
      len(p1.stdout.split()) == 12, "run --param matvec.unroll=4: same tokens", p1.stderr)
# a regime's thread count: decode on one thread of two, prefill on both; the same tokens
p2 = run(["run", "-m", MODEL, "--prompt-ids", "1,403", "-n", "12", "--temp", "0", "--print-ids",
          "--no-warm-start", "-t", "2", "--param", "threads.decode=1"])
check(p2.returncode == 0 and p2.stdout == p0.stdout and
      "2 (decode 1, prefill 2) threads" in p2.stderr, "run --param threads.decode=1", p2.stderr)
# the batch regime's thread count: bench --seqs runs its steps on it, a decode bench does not
for seqs, want in ((2, 1), (1, 2)):
    p5 = run(["bench", "-m", MODEL, "-t", "2", "-n", "4", "-r", "1", "--membw-mib", "16", "--json",
              "--no-warm-start", "--seqs", seqs, "--param", "threads.batch=1"])
    j5 = json.loads(p5.stdout) if p5.returncode == 0 else {}
    check(j5.get("step_threads") == want, "bench --seqs %d --param threads.batch=1: steps on %d "
          "thread(s)" % (seqs, want), p5.stderr + p5.stdout)
# the looped executor's parameters, and the programs without the fusion pass: the same tokens
p3 = run(["run", "-m", MODEL, "--prompt-ids", "1,403", "-n", "12", "--temp", "0", "--print-ids",
          "--no-warm-start", "-t", "2", "--param", "looped.tiles_per_thread=1", "--param",
          "looped.min_task_kb=0", "--param", "looped.sync=1"])
check(p3.returncode == 0 and p3.stdout == p0.stdout, "run --param looped.*: same tokens", p3.stderr)
p4 = run(["run", "-m", MODEL, "--prompt-ids", "1,403", "-n", "12", "--temp", "0", "--print-ids",
          "--no-warm-start", "-t", "2", "--no-fuse-pass"])
check(p4.returncode == 0 and p4.stdout == p0.stdout, "run --no-fuse-pass: same tokens", p4.stderr)

# --help everywhere, errors on bad flags
for cmd in ("run", "bench", "model-gen"):
    p = run([cmd, "--help"])
    check(p.returncode == 0 and "usage: looptune " + cmd in p.stdout, cmd + " --help")
    p = run([cmd, "--no-such-flag"])
    check(p.returncode != 0 and p.returncode > 0 and len(p.stderr.strip().splitlines()) == 1
          and "unknown option" in p.stderr, cmd + " rejects an unknown flag in one line", p.stderr)
p = run(["--help"])
check(p.returncode == 0 and "commands:" in p.stdout, "looptune --help")
# --version and version: the version of CMakeLists.txt's project(), a commit of this repository,
# the ISA paths of the architecture
SRC = os.path.dirname(os.path.dirname(os.path.abspath(DATA)))
p, p2 = run(["--version"]), run(["version"])
check(p.returncode == 0 and p2.returncode == 0 and p.stdout == p2.stdout, "--version = version")
m = re.match(r"looptune (\S+) \(commit (\S+)\)\nISA paths: ([a-z0-9,+ ]+) \(", p.stdout)
with open(os.path.join(SRC, "CMakeLists.txt")) as f:
    want = re.search(r"project\(looptune VERSION (\S+)", f.read())
isas = "portable, avx2, avx2+avxvnni, avx512" if platform.machine() in ("x86_64", "AMD64") else "portable"
check(m is not None and want is not None and m.group(1) == want.group(1),
      "--version: the project's version", p.stdout)
check(m is not None and m.group(3) == isas, "--version: the ISA paths " + isas, p.stdout)
if m:
    # git describe: [TAG-N-g]HASH[-dirty]
    commit = re.sub(r"-dirty$", "", m.group(2)).split("-g")[-1]
    g = subprocess.run(["git", "-C", SRC, "cat-file", "-e", commit + "^{commit}"],
                       capture_output=True) if shutil.which("git") else None
    in_git = g is not None and subprocess.run(["git", "-C", SRC, "rev-parse"],
                                              capture_output=True).returncode == 0
    check((g is not None and g.returncode == 0) if in_git else commit == "unknown",
          "--version: a commit of this repository", m.group(2))
p = run(["frobnicate"])
check(p.returncode != 0 and "unknown command" in p.stderr, "unknown command")
for args, word in ((["bench", "-m", MODEL, "--executor", "nope"], "executor"),
                   (["run", "-m", MODEL, "--prompt-ids", "1", "--executor", "nope"], "executor"),
                   (["bench", "-m", MODEL, "-t", "0"], "threads"),
                   (["run", "-m", MODEL, "--prompt-ids", "1", "--isa", "sse9"], "ISA"),
                   (["run", "-m", MODEL, "--prompt-ids", "1", "--top-p", "1.5"], "top-p"),
                   (["run", "-m", MODEL, "--prompt-ids", "1", "--ctx", "100000"], "context"),
                   (["run", "-m", MODEL, "--prompt-ids", "1", "--param", "matvec.act_int8=2"],
                    "act_int8"),
                   (["run", "-m", MODEL, "--prompt-ids", "1", "--param", "matvec"],
                    "KERNEL.NAME=VALUE"),
                   (["bench", "-m", MODEL, "--param", "matvec.nope=1"], "nope"),
                   (["bench", "-m", MODEL, "--param", "conv3d.unroll=1"], "conv3d"),
                   (["bench", "-m", MODEL, "--param", "matvec.unroll=x"], "not a number"),
                   (["run", "-m", MODEL, "--prompt-ids", "1", "-t", "2", "--param",
                     "threads.decode=3"], "expected 1..2"),
                   (["bench", "-m", MODEL, "--param", "threads.both=1"], "threads.prefill"),
                   (["bench", "-m", MODEL, "--param", "threads.decode=-1"], "0..64"),
                   (["bench", "-m", MODEL, "--param", "looped.nope=1"], "nope"),
                   (["run", "-m", MODEL, "--prompt-ids", "1", "--param",
                     "looped.tiles_per_thread=3"], "tiles_per_thread")):
    p = run(args)
    check(p.returncode > 0 and word in p.stderr and len(p.stderr.strip().splitlines()) == 1,
          "%s: one-line error naming %s" % (" ".join(args[:1] + args[3:]), word), p.stderr)

shutil.rmtree(WORK, ignore_errors=True)
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed or not passed else 0)

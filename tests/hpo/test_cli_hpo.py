"""looptune hpo end to end, with small Python scripts as objectives: a quadratic of known
optimum (the best found close to it, its value the least any trial logged, also when
maximising), trials that crash, hang past --trial-timeout (their processes killed), die of a
signal or print no metric (each failed with its reason, the study completes), intermediate
values with the ASHA and median pruners stopping some trials, the built-in Branin objective
(its best checked by recomputing Branin here), --best-out parsed; malformed space files and
flags give one line of error and a non-zero exit."""

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from hpo_cli import BIN, PY, check, finish, work_dir, run

WORK = work_dir("hpo_cli")

def write(name, text):
    path = os.path.join(WORK, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def summary(stderr):
    """(complete, pruned, failed) from the final summary line."""
    m = re.search(r"(\d+) trials \((\d+) complete, (\d+) pruned, (\d+) failed\)", stderr)
    return tuple(int(g) for g in m.groups()) if m else None


os.makedirs(WORK, exist_ok=True)
SPACE = write("quad.json", json.dumps({
    "x": {"type": "float", "low": -2, "high": 2},
    "y": {"type": "float", "low": -3, "high": 3},
}))
LOG = os.path.join(WORK, "quad.log")
QUAD = write("quad.py", """import sys
x, y, sign = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
v = sign * ((x - 0.3) ** 2 + (y + 1) ** 2)
with open(sys.argv[4], "a") as f:
    f.write("%r\\n" % v)
print("training...")
print("value=%r" % v)
""")

# ---- the quadratic: GP with 2 in parallel, minimising -------------------------------
best_out = os.path.join(WORK, "best.json")
r = run(["--space", SPACE, "--budget", 24, "--parallel", 2, "--seed", 3, "--best-out", best_out,
         "--", PY, QUAD, "{x}", "{y}", 1, LOG])
check(r.returncode == 0, "quadratic gp: exit 0", r.stderr[-800:])
try:
    out = json.loads(r.stdout)
    with open(best_out) as f:
        written = json.load(f)
except (ValueError, OSError) as e:
    out = written = None
    check(False, "quadratic gp: best JSON parses", e)
if out:
    check(set(out) == {"value", "params"} and set(out["params"]) == {"x", "y"},
          "best JSON has value and params", out)
    check(written == out, "--best-out holds what stdout printed", (written, out))
    p = out["params"]
    check(abs(p["x"] - 0.3) < 0.1 and abs(p["y"] + 1) < 0.1 and out["value"] < 0.01,
          "gp finds the quadratic's optimum (0.3, -1) within 0.1 in 24 trials", out)
    logged = [float(v) for v in open(LOG).read().split()]
    check(len(logged) == 24, "24 trials ran the script", len(logged))
    check(out["value"] == min(logged), "best value is the least any trial logged",
          (out["value"], min(logged)))
    check(abs(out["value"] - ((p["x"] - 0.3) ** 2 + (p["y"] + 1) ** 2)) < 1e-12,
          "best value is the quadratic at the best params")
check(summary(r.stderr) == (24, 24, 0, 0), "summary: 24 complete", summary(r.stderr))
check(len(re.findall(r"^quad: trial \d+ value ", r.stderr, re.M)) == 24,
      "one progress line per trial")
etas = re.findall(r"^quad: trial \d+ .* \| eta (unknown|[0-9.]+ s)$", r.stderr, re.M)
check(len(etas) == 24, "every progress line ends with an ETA", r.stderr[-300:])
check(etas and etas[-1] == "0.0 s" and all(e == "unknown" or float(e[:-2]) >= 0 for e in etas),
      "the ETA parses as seconds, 0 at the last trial", etas[-3:])

# ---- TPE, maximising the negated quadratic ----------------------------------------------
os.remove(LOG)
r = run(["--space", SPACE, "--sampler", "tpe", "--direction", "maximize", "--budget", 40,
         "--parallel", 3, "-q", "--", PY, QUAD, "{x}", "{y}", -1, LOG])
check(r.returncode == 0, "quadratic tpe maximize: exit 0", r.stderr[-800:])
try:
    out = json.loads(r.stdout)
    logged = [float(v) for v in open(LOG).read().split()]
    check(out["value"] == max(logged) and out["value"] > -0.1,
          "tpe maximising: best is the largest logged, above -0.1", (out["value"], max(logged)))
except (ValueError, OSError, KeyError) as e:
    check(False, "tpe maximise output", e)

# ---- failures: crash, hang, signal, no metric ----------------------------------------------
PIDS = os.path.join(WORK, "hang.pids")
BAD = write("bad.py", """import os, subprocess, sys, time
trial = int(os.environ["LT_HPO_TRIAL"])
x = float(sys.argv[1])
mode = ["ok", "crash", "hang", "nometric", "signal"][trial] if trial < 5 else "ok"
if mode == "crash":
    sys.exit(3)
if mode == "hang":
    p = subprocess.Popen(["sleep", "60"])
    with open(sys.argv[2], "w") as f:
        f.write("%d %d\\n" % (os.getpid(), p.pid))
    time.sleep(60)
if mode == "nometric":
    print("all done, but no value line")
    sys.exit(0)
if mode == "signal":
    os.kill(os.getpid(), 9)
print("value=%r" % (x * x))
""")
t0 = time.time()
r = run(["--space", SPACE, "--sampler", "random", "--budget", 8, "--parallel", 3,
         "--trial-timeout", 1.5, "--", PY, BAD, "{x}", PIDS])
elapsed = time.time() - t0
check(r.returncode == 0, "failing trials: the study completes, exit 0", r.stderr[-800:])
check(summary(r.stderr) == (8, 4, 0, 4), "4 of 8 trials failed", summary(r.stderr))
for trial, why in [(1, "failed: exit status 3"), (2, "failed: timed out"),
                   (3, "failed: no metric"), (4, "failed: killed by signal 9")]:
    check(re.search(r"trial %d %s" % (trial, re.escape(why)), r.stderr) is not None,
          "trial %d %s" % (trial, why), r.stderr[-1500:])
check(elapsed < 20, "the hanging trial did not hold the study (%.1f s)" % elapsed)
try:
    pids = [int(v) for v in open(PIDS).read().split()]
    time.sleep(0.2)
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
            with open("/proc/%d/stat" % pid) as f:
                if f.read().split(")")[-1].split()[0] != "Z":
                    alive.append(pid)
        except (ProcessLookupError, FileNotFoundError):
            pass
    check(not alive, "the timed-out trial's processes (its child too) were killed", alive)
except OSError as e:
    check(False, "the hanging trial wrote its pids", e)
try:
    out = json.loads(r.stdout)
    check(abs(out["value"] - out["params"]["x"] ** 2) < 1e-12, "best of the good trials printed")
except (ValueError, KeyError) as e:
    check(False, "failing study: best JSON", e)

# every trial failing: no best, non-zero exit
r = run(["--space", SPACE, "--budget", 3, "--", PY, "-c", "import sys; sys.exit(1)"])
check(r.returncode != 0 and "no trial completed" in r.stderr and r.stdout == "",
      "all trials failing: non-zero exit, no best", r.stderr[-400:])
r = run(["--space", SPACE, "--budget", 2, "--", os.path.join(WORK, "no-such-program")])
check(r.returncode != 0 and "exit status 127" in r.stderr and "cannot run" in r.stderr,
      "a program that cannot run: status 127 with the reason", r.stderr[-400:])

# a chatty script: megabytes of log lines, an overlong line, then its metric without a newline
CHATTY = write("chatty.py", """import sys
x = float(sys.argv[1])
for i in range(40000):
    print("epoch %d: loss is going down nicely, value=%d is not the metric" % (i, i))
print("x" * 100000)
sys.stdout.write("value=%r" % (x * x))
""")
r = run(["--space", SPACE, "--budget", 3, "--parallel", 2, "-q", "--",
         PY, CHATTY, "{x}"])
try:
    out = json.loads(r.stdout)
    check(r.returncode == 0 and abs(out["value"] - out["params"]["x"] ** 2) < 1e-12
          and summary(r.stderr) == (3, 3, 0, 0), "chatty trials: their metric read after the logs")
except (ValueError, KeyError) as e:
    check(False, "chatty trials", (e, r.stderr[-400:]))

# ---- SIGINT: the study stops, its running trials' processes are killed ---------------------
HANG = write("hang.py", """import os, subprocess, sys, time
p = subprocess.Popen(["sleep", "60"])
with open(sys.argv[1], "a") as f:
    f.write("%d %d\\n" % (os.getpid(), p.pid))
time.sleep(60)
""")
HPIDS = os.path.join(WORK, "int.pids")
proc = subprocess.Popen([BIN, "hpo", "--no-broker", "--space", SPACE, "--parallel", "2",
                         "--budget", "5", "--",
                         PY, HANG, HPIDS], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
deadline = time.time() + 10
while time.time() < deadline and (not os.path.exists(HPIDS) or
                                   len(open(HPIDS).read().split()) < 4):
    time.sleep(0.05)
proc.send_signal(signal.SIGINT)
try:
    out, err = proc.communicate(timeout=10)
except subprocess.TimeoutExpired:
    proc.kill()
    out, err = proc.communicate()
time.sleep(0.2)
left = []
for pid in ([int(v) for v in open(HPIDS).read().split()] if os.path.exists(HPIDS) else []):
    try:
        with open("/proc/%d/stat" % pid) as f:
            if f.read().split(")")[-1].split()[0] != "Z":
                left.append(pid)
    except FileNotFoundError:
        pass
check(proc.returncode not in (0, None) and "interrupted by signal 2" in err and out == "",
      "SIGINT: non-zero exit, said, no best", (proc.returncode, err[-300:]))
check(os.path.exists(HPIDS) and not left, "SIGINT: both running trials' processes killed", left)

# ---- pruning: learning curves, the worse ones stopped ----------------------------------------
CURVE = write("curve.py", """import sys, time
x = float(sys.argv[1])
final = (x - 0.5) ** 2
for step in range(1, 10):
    print("step=%d value=%r" % (step, final + 1.0 / step), flush=True)
    time.sleep(0.04)
with open(sys.argv[2], "a") as f:
    f.write("finished\\n")
print("value=%r" % final)
""")
FINISHED = os.path.join(WORK, "curve.log")
SPACE1 = write("one.json", json.dumps({"x": {"type": "float", "low": -3, "high": 3}}))
for pruner, extra in [("asha", ["--min-resource", 1, "--eta", 3]), ("median", [])]:
    r = run(["--space", SPACE1, "--sampler", "random", "--budget", 20, "--parallel", 2,
             "--pruner", pruner] + extra + ["--", PY, CURVE, "{x}", FINISHED])
    s = summary(r.stderr)
    check(r.returncode == 0 and s is not None and s[2] > 0 and s[1] > 0 and s[3] == 0,
          "%s prunes some trials, completes others, fails none" % pruner, (s, r.stderr[-600:]))
    pruned_lines = re.findall(r"trial \d+ pruned at ", r.stderr)
    check(s is not None and len(pruned_lines) == s[2], "%s: each pruned trial said so" % pruner)
    finished = open(FINISHED).read().split() if os.path.exists(FINISHED) else []
    check(s is not None and len(finished) == s[1],
          "%s: pruned trials were killed before their end (%d scripts finished, %s complete)"
          % (pruner, len(finished), s and s[1]))
    if os.path.exists(FINISHED):
        os.remove(FINISHED)

# ---- the built-in objective -----------------------------------------------------------------
r = run(["--objective", "branin", "--budget", 40, "--parallel", 3, "-q"])
check(r.returncode == 0, "--objective branin: exit 0", r.stderr[-400:])
try:
    out = json.loads(r.stdout)
    x1, x2 = out["params"]["x1"], out["params"]["x2"]
    b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
    f = (x2 - b * x1 * x1 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10
    check(abs(f - out["value"]) < 1e-9, "branin's best value is Branin at its params", (f, out))
    check(0.397887 - 1e-6 <= out["value"] < 0.397887 + 0.05,
          "branin: gp within 0.05 of the minimum in 40 trials, 3 at a time", out["value"])
except (ValueError, KeyError) as e:
    check(False, "branin output", e)

def refused(args, want, name):
    r = run(args)
    lines = r.stderr.strip().split("\n")
    ok = (r.returncode != 0 and len(lines) == 1 and lines[0].startswith("looptune hpo: ")
          and want in lines[0] and r.stdout == "")
    check(ok, "refused: " + name, (r.returncode, r.stderr))


# ---- mlp-digits: an MLP trained on the digits, validation accuracy maximised -------------
r = run(["--objective", "mlp-digits", "--budget", 12, "--pruner", "asha", "--sampler", "tpe",
         "--parallel", 2])
try:
    out = json.loads(r.stdout)
    s = summary(r.stderr)
    check(r.returncode == 0 and out["value"] > 0.9 and set(out["params"]) ==
          {"lr", "hidden", "layers", "dropout", "opt", "activation"},
          "mlp-digits: best validation accuracy above 0.9 in 12 trials", out)
    check(s is not None and s[2] > 0 and s[1] + s[2] == 12, "mlp-digits: ASHA pruned some epochs", s)
    m = re.search(r"its test accuracy ([0-9.]+)", r.stderr)
    check(m is not None and float(m.group(1)) > 0.85, "mlp-digits: the best's test accuracy said")
except (ValueError, KeyError) as e:
    check(False, "mlp-digits output", (e, r.stderr[-600:]))
MLPSPACE = write("mlp.json", json.dumps({
    "lr": {"type": "float", "low": 1e-3, "high": 1e-2, "log": True},
    "epochs": {"type": "int", "low": 2, "high": 4},
    "opt": {"type": "categorical", "choices": ["adam", "rmsprop"]}}))
r = run(["--objective", "mlp-digits", "--space", MLPSPACE, "--budget", 2])
check(r.returncode != 0 and "'rmsprop' is not one of sgd, momentum, adam" in r.stderr,
      "mlp-digits: a space with a choice it cannot take is refused", r.stderr[-300:])
refused(["--objective", "mlp-digits", "--data", os.path.join(WORK, "none.csv.gz")],
        "--data: ", "mlp-digits without its data")

# ---- malformed spaces and flags: one line, non-zero exit ----------------------------------
bad_spaces = [
    ("not json", "{\"x\": ", "bad.json:1:"),
    ("unknown type", json.dumps({"x": {"type": "double", "low": 0, "high": 1}}),
     "bad.json:x: unknown type 'double'"),
    ("low >= high", json.dumps({"x": {"type": "float", "low": 2, "high": 1}}),
     "bad.json:x: \"low\" (2) must be below \"high\" (1)"),
    ("log with low 0", json.dumps({"x": {"type": "float", "low": 0, "high": 1, "log": True}}),
     "bad.json:x: \"log\" needs \"low\" > 0"),
    ("empty choices", json.dumps({"o": {"type": "categorical", "choices": []}}),
     "bad.json:o: \"choices\" is empty"),
    ("when unknown", json.dumps({"x": {"type": "int", "low": 0, "high": 3, "when": {"z": [1]}}}),
     "bad.json:x: \"when\" names unknown parameter 'z'"),
    ("not an object", "[]", "bad.json: the space must be a JSON object"),
]
for name, text, want in bad_spaces:
    path = write("bad.json", text)
    refused(["--space", path, "--", PY, QUAD, "{x}"], want, "space " + name)
refused(["--space", os.path.join(WORK, "missing.json"), "--", "true"], "missing.json: cannot open",
        "missing space file")
cmdline = ["--", PY, QUAD, "{x}", "{y}", 1, LOG]
refused(["--space", SPACE, "--budget", 0] + cmdline, "bad --budget '0'", "--budget 0")
refused(["--space", SPACE, "--sampler", "bayes"] + cmdline, "unknown sampler 'bayes'", "--sampler")
refused(["--space", SPACE, "--pruner", "hyperband"] + cmdline, "unknown pruner", "--pruner")
refused(["--space", SPACE, "--parallel", 0] + cmdline, "bad --parallel '0'", "--parallel 0")
refused(["--space", SPACE, "--direction", "up"] + cmdline, "bad --direction 'up'", "--direction")
refused(["--space", SPACE, "--trial-timeout", -1] + cmdline, "bad --trial-timeout", "--trial-timeout")
refused(["--space", SPACE, "--eta", 1] + cmdline, "bad --eta", "--eta 1")
refused(["--space", SPACE, "--frobnicate"] + cmdline, "unknown option '--frobnicate'", "unknown option")
refused(["--space", SPACE, "--budget"], "needs a value", "missing value")
refused(["--space", SPACE], "no objective", "no command")
refused(["--space", SPACE, "--objective", "branin"] + cmdline, "not both", "objective and command")
refused(["--objective", "rosenbrock"], "unknown --objective 'rosenbrock'", "unknown objective")
refused(["--space", SPACE, "--objective", "branin"], "needs parameter 'x1'", "objective space")
refused(["--", PY, QUAD], "no search space", "no --space")
refused(["--space", SPACE, "--", PY, QUAD, "{x}", "{nope}"], "{nope} names no parameter",
        "unknown placeholder")
refused(["--space", SPACE, PY, QUAD], "put the command after --", "command without --")
refused(["--objective", "branin", "--pruner", "asha"], "intermediate values", "pruner, builtin")
r = run(["--objective", "branin", "--budget", 2, "-q", "--best-out",
         os.path.join(WORK, "no", "dir.json")])
check(r.returncode != 0 and r.stderr.strip().split("\n")[-1].startswith(
    "looptune hpo: cannot write --best-out"), "unwritable --best-out: non-zero exit", r.stderr)
# ---- literal braces: {{ and }} ---------------------------------------------------------
ARGS = os.path.join(WORK, "args.log")
ECHO = write("echo.py", """import json, sys
with open(sys.argv[1], "a") as f:
    f.write(json.dumps(sys.argv[2:]) + "\\n")
print("value=%r" % json.loads(sys.argv[2])["x"])
""")
r = run(["--space", SPACE, "--budget", 3, "--sampler", "random", "-q", "--", PY, ECHO, ARGS,
         '{{"x": {x}, "y": {y}}}', "{{x}}", "}}{{", "{{{x}}}", "a{b", "}"])
check(r.returncode == 0, "braces: exit 0", r.stderr[-800:])
with open(ARGS) as f:
    seen = [json.loads(l) for l in f]
check(len(seen) == 3, "braces: three trials ran", seen)
ok = True
for a in seen:
    d = json.loads(a[0])  # {{...}} around placeholders: a JSON object of the values
    ok &= (a[1] == "{x}" and a[2] == "}{" and a[3] == "{%r}" % d["x"] and a[4] == "a{b"
           and a[5] == "}" and set(d) == {"x", "y"})
check(ok, "braces: {{ and }} are literal braces, {NAME} inside them a value", seen)
check(r.returncode == 0 and json.loads(r.stdout)["value"] ==
      json.loads(r.stdout)["params"]["x"], "braces: the JSON argument carried the trial's x",
      r.stdout)
refused(["--space", SPACE, "--", PY, QUAD, "{{x}", "{nope}}"], "{nope} names no parameter",
        "an escaped brace before a placeholder")

r = run(["--help"])
check(r.returncode == 0 and "usage: looptune hpo" in r.stdout and "--trial-timeout" in r.stdout,
      "--help")

shutil.rmtree(WORK, ignore_errors=True)
finish()

#!/usr/bin/env python3
"""looptune hpo without --brokers: by default the trials are tasks of kind hpo
on an embedded broker, with --parallel workers in the looptune process.
One at a time, a study of a built-in objective goes trial for trial as it does
straight in the process (--no-broker: the same values, the same best), every
trial once, --embedded the same as the default; a command study with two
workers finishes with each trial run once and --best-out the least value the
command logged; mlp-digits' test accuracy reported as in threads; --embedded
and --no-broker refuse --brokers, --resume and each other."""
import json
import math
import os
import re
import shutil
import sys

import hpo_cli
from hpo_cli import PY, check, finish, work_dir

WORK = work_dir("hpo_embedded")


def run(args, timeout=180):
    return hpo_cli.run(args, timeout, broker=True)


def trials(stderr, name="branin"):
    """[(trial, value text)] of the progress lines, in order."""
    return re.findall(r"^%s: trial (\d+) value (\S+) in " % name, stderr, re.M)


def branin(x1, x2):
    b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1 * x1 + c * x1 - 6) ** 2 + 10 * (1 - t) * math.cos(x1) + 10


def read_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return str(e)


os.makedirs(WORK, exist_ok=True)

# ---- Branin one at a time: the default path against --no-broker ---------------------------
study = ["--objective", "branin", "--budget", 8, "--seed", 3, "--parallel", 1]
best_out = os.path.join(WORK, "best.json")
a = run(study + ["--no-broker"])
b = run(study + ["--best-out", best_out])
check(a.returncode == 0 and b.returncode == 0, "both studies end with 0", b.stderr[-600:])
check("results applied" in b.stderr and "results applied" not in a.stderr,
      "the default runs on the embedded broker, --no-broker does not", (a.stderr[-300:],
                                                                         b.stderr[-300:]))
ta, tb = trials(a.stderr), trials(b.stderr)
check(len(ta) == 8 and ta == tb, "the default study's trials are --no-broker's", (ta, tb))
check(sorted(int(t) for t, _ in tb) == list(range(8)), "every trial once", tb)
check("8 results applied, 0 duplicates dropped" in b.stderr, "8 results applied",
      b.stderr[-400:])
try:
    ja, jb = json.loads(a.stdout), json.loads(b.stdout)
    check(ja == jb, "the same best trial", (a.stdout, b.stdout))
    check(read_json(best_out) == jb, "--best-out holds the best trial", read_json(best_out))
    p = jb["params"]
    check(abs(branin(p["x1"], p["x2"]) - jb["value"]) <= 1e-9 * max(1, abs(jb["value"])),
          "the best value is Branin at its parameters", jb)
    least = min(float(v) for _, v in tb)  # progress lines print 6 digits
    check(abs(jb["value"] - least) <= 1e-5 * abs(least), "the best is the least trial value",
          (jb, tb))
except ValueError as e:
    check(False, "the best trial's JSON", (e, a.stdout, b.stdout))
e = run(study + ["--embedded"])
check(e.returncode == 0 and trials(e.stderr) == tb and e.stdout == b.stdout,
      "--embedded is the default", e.stderr[-400:])

# ---- a command, two workers on the embedded broker -------------------------------------------
SPACE = os.path.join(WORK, "quad.json")
with open(SPACE, "w") as f:
    json.dump({"x": {"type": "float", "low": -2, "high": 2},
               "y": {"type": "float", "low": -3, "high": 3}}, f)
LOG = os.path.join(WORK, "quad.log")
QUAD = os.path.join(WORK, "quad.py")
with open(QUAD, "w") as f:
    f.write("""import os, sys
x, y = float(sys.argv[1]), float(sys.argv[2])
v = (x - 0.3) ** 2 + (y + 1) ** 2
with open(sys.argv[3], "a") as f:
    f.write("%s %r %r %r\\n" % (os.environ["LT_HPO_TRIAL"], x, y, v))
print("value=%r" % v)
""")
best_out = os.path.join(WORK, "quad-best.json")
r = run(["--space", SPACE, "--sampler", "tpe", "--budget", 10, "--parallel", 2, "--seed", 5,
         "--best-out", best_out, "--", PY, QUAD, "{x}", "{y}", LOG])
check(r.returncode == 0, "command, 2 workers: exit 0", r.stderr[-800:])
try:
    with open(LOG) as f:
        runs = [l.split() for l in f]
except OSError:
    runs = []
check(sorted(int(t[0]) for t in runs) == list(range(10)), "command: each trial ran once",
      [t[0] for t in runs])
check("10 results applied, 0 duplicates dropped" in r.stderr, "command: 10 results applied",
      r.stderr[-400:])
least = min(runs, key=lambda t: float(t[3])) if runs else None
got = read_json(best_out)
check(least is not None and isinstance(got, dict) and got.get("value") == float(least[3]) and
      got["params"] == {"x": float(least[1]), "y": float(least[2])},
      "command: --best-out is the least value the command logged, at its parameters",
      (got, least))

# ---- mlp-digits: the best trial's test accuracy comes back in its answer -------------------
mlp = ["--objective", "mlp-digits", "--budget", 2, "--seed", 1, "--parallel", 1]
a, b = run(mlp + ["--no-broker"]), run(mlp)
ta = re.search(r"best value (\S+) at trial (\d+) \(its test accuracy ([0-9.]+)\)", a.stderr)
tb = re.search(r"best value (\S+) at trial (\d+) \(its test accuracy ([0-9.]+)\)", b.stderr)
check(ta is not None and tb is not None and ta.groups() == tb.groups(),
      "mlp-digits: the same best and test accuracy as in threads",
      (a.stderr[-200:], b.stderr[-200:]))

# ---- refusals ------------------------------------------------------------------------------
for extra, want, name in [
        (["--embedded", "--brokers", "127.0.0.1:1"], "--embedded is instead of --brokers",
         "--embedded with --brokers"),
        (["--embedded", "--resume", "--study", "s"], "no --resume", "--embedded with --resume"),
        (["--no-broker", "--brokers", "127.0.0.1:1"], "--no-broker is instead of",
         "--no-broker with --brokers"),
        (["--no-broker", "--embedded"], "--no-broker is instead of", "--no-broker with --embedded"),
        (["--resume", "--study", "s"], "--resume and --watch need --brokers",
         "--resume without --brokers")]:
    r = run(study + extra, timeout=30)
    check(r.returncode != 0 and want in r.stderr and len(r.stderr.strip().splitlines()) == 1,
          name + " is refused", r.stderr[-300:])

shutil.rmtree(WORK, ignore_errors=True)
finish()

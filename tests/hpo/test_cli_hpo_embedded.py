#!/usr/bin/env python3
"""looptune hpo --embedded: the trials as tasks of kind hpo on the embedded
broker, with --parallel workers in the looptune process. One at a time, a
study of a built-in objective goes trial for trial as it does in threads
(the same values, the same best), every trial once, mlp-digits' test
accuracy reported as in threads; --embedded refuses
--brokers and --resume."""
import json
import os
import re
import subprocess
import sys

BIN = os.environ["LT_BIN"]
passed = failed = 0


def check(ok, name, detail=""):
    global passed, failed
    print("%s %s%s" % ("PASS" if ok else "FAIL", name,
                       (": " + str(detail)) if detail and not ok else ""))
    if ok:
        passed += 1
    else:
        failed += 1


def run(args, timeout=180):
    return subprocess.run([BIN, "hpo"] + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout)


def trials(stderr):
    """[(trial, value text)] of the progress lines, in order."""
    return re.findall(r"^branin: trial (\d+) value (\S+) in ", stderr, re.M)


study = ["--objective", "branin", "--budget", 8, "--seed", 3, "--parallel", 1]
a = run(study)
b = run(study + ["--embedded"])
check(a.returncode == 0 and b.returncode == 0, "both studies end with 0", b.stderr[-600:])
ta, tb = trials(a.stderr), trials(b.stderr)
check(len(ta) == 8 and ta == tb, "the embedded study's trials are the threads' ones", (ta, tb))
check(sorted(int(t) for t, _ in tb) == list(range(8)), "every trial once", tb)
check("8 results applied, 0 duplicates dropped" in b.stderr, "8 results applied",
      b.stderr[-400:])
try:
    check(json.loads(a.stdout) == json.loads(b.stdout), "the same best trial",
          (a.stdout, b.stdout))
except ValueError as e:
    check(False, "the best trial's JSON", (e, a.stdout, b.stdout))

# mlp-digits: the best trial's test accuracy comes back in its answer
mlp = ["--objective", "mlp-digits", "--budget", 2, "--seed", 1, "--parallel", 1]
a, b = run(mlp), run(mlp + ["--embedded"])
ta = re.search(r"best value (\S+) at trial (\d+) \(its test accuracy ([0-9.]+)\)", a.stderr)
tb = re.search(r"best value (\S+) at trial (\d+) \(its test accuracy ([0-9.]+)\)", b.stderr)
check(ta is not None and tb is not None and ta.groups() == tb.groups(),
      "mlp-digits: the same best and test accuracy as in threads",
      (a.stderr[-200:], b.stderr[-200:]))

r = run(study + ["--embedded", "--brokers", "127.0.0.1:1"], timeout=30)
check(r.returncode != 0 and "--embedded is instead of --brokers" in r.stderr,
      "--embedded with --brokers is refused", r.stderr[-300:])
r = run(study + ["--embedded", "--resume", "--study", "s"], timeout=30)
check(r.returncode != 0 and "no --resume" in r.stderr, "--embedded with --resume is refused",
      r.stderr[-300:])

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)

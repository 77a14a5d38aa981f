#!/usr/bin/env python3
"""looptune hpo --objective mlp-digits for a fixed seed and budget: the best
configuration found reaches 97% validation accuracy, its test accuracy is
reported and plausible, and it beats the default configuration (one 64-unit
ReLU layer, Adam, lr 1e-3, no dropout, 20 epochs) trained in the same run.
One trial at a time, so the study is the same on every run."""
import json
import os
import re

import hpo_cli
from hpo_cli import check, finish, work_dir

WORK = work_dir("hpo_digits")
SEED, BUDGET = 1, 30

def run(args, timeout=240):
    return hpo_cli.run(args, timeout)


def test_accuracy(stderr):
    m = re.search(r"its test accuracy ([0-9.]+)", stderr)
    return float(m.group(1)) if m else None


os.makedirs(WORK, exist_ok=True)

# The default configuration: a space of one parameter, opt, with the one
# choice adam (its default); every other parameter keeps its default.
default_space = os.path.join(WORK, "default.json")
with open(default_space, "w") as f:
    json.dump({"opt": {"type": "categorical", "choices": ["adam"]}}, f)
r = run(["--objective", "mlp-digits", "--space", default_space, "--budget", 1, "-q"])
default_val = default_test = None
try:
    default_val = json.loads(r.stdout)["value"]
    default_test = test_accuracy(r.stderr)
except (ValueError, KeyError) as e:
    print("default configuration: %s: %s" % (e, r.stderr[-400:]))
check(r.returncode == 0 and default_val is not None and 0.8 < default_val < 1,
      "the default configuration trains", (default_val, r.stderr[-300:]))

r = run(["--objective", "mlp-digits", "--budget", BUDGET, "--seed", SEED, "--sampler", "gp"])
best_val = best_test = None
try:
    best = json.loads(r.stdout)
    best_val = best["value"]
    best_test = test_accuracy(r.stderr)
except (ValueError, KeyError) as e:
    print("study: %s: %s" % (e, r.stderr[-400:]))
print("validation accuracy: default %s (test %s), best of %d trials (seed %d) %s (test %s)"
      % (default_val, default_test, BUDGET, SEED, best_val, best_test))
check(r.returncode == 0 and best_val is not None and best_val >= 0.97,
      "the best configuration reaches 97% validation accuracy", best_val)
check(best_test is not None and 0.93 <= best_test <= 1,
      "its test accuracy is reported and plausible", best_test)
check(best_val is not None and default_val is not None and best_val > default_val,
      "the best configuration beats the default", (best_val, default_val))

finish()

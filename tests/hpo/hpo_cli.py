"""What the `looptune hpo` command-line tests share: the binary, a work folder per test, one
line per check and the tally, and running the command."""

import os
import subprocess
import sys

BIN = os.environ["LT_BIN"]
PY = sys.executable
_tally = {"passed": 0, "failed": 0}


def work_dir(tag):
    """This test's folder under LT_WORK_DIR (not created)."""
    return os.path.join(os.environ.get("LT_WORK_DIR", "/tmp"), "%s_%d" % (tag, os.getpid()))


def check(ok, name, detail=""):
    print("%s %s%s" % ("PASS" if ok else "FAIL", name,
                       (": " + str(detail)) if detail and not ok else ""))
    _tally["passed" if ok else "failed"] += 1


def run(args, timeout=120, broker=False):
    """`looptune hpo ARGS`; without broker, --no-broker: straight in the process (the default,
    the embedded broker, costs seconds a study; test_cli_hpo_embedded covers it)."""
    cmd = [BIN, "hpo"] + ([] if broker else ["--no-broker"]) + [str(a) for a in args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def finish():
    """Prints the tally and exits: 1 if a check failed."""
    print("%d passed, %d failed" % (_tally["passed"], _tally["failed"]))
    sys.exit(1 if _tally["failed"] else 0)

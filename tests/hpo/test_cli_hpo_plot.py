"""looptune hpo --plot FILE.svg, parsed as XML with xml.etree: Branin (20 trials,
minimised) and a command that fails for some configurations and is maximised, over a space
with a log float and a categorical. The best-so-far panel has one circle per complete trial
and one polyline vertex per trial from the first complete one; the polyline's y never moves
away from the best (down the page while minimising, up while maximising) and ends at the
best trial's circle; each parameter's panel has a circle per complete trial; an unwritable
--plot path is one line of error."""

import json
import os
import sys
import xml.etree.ElementTree as ET

from hpo_cli import check, finish, work_dir, run

WORK = work_dir("hpo_plot")
SVG = "{http://www.w3.org/2000/svg}"

def plot_of(path):
    root = ET.parse(path).getroot()
    best = [e for e in root.iter(SVG + "polyline") if e.get("class") == "best"]
    trials = [e for e in root.iter(SVG + "circle") if e.get("class") == "trial"]
    params = {}
    for e in root.iter(SVG + "circle"):
        if e.get("class") == "param":
            params.setdefault(e.get("data-param"), []).append(e)
    pts = [tuple(map(float, p.split(","))) for p in best[0].get("points").split()] if best else []
    return root, best, trials, params, pts


def checks(tag, path, n_trials, n_complete, names, maximize, best_value):
    try:
        root, best, trials, params, pts = plot_of(path)
    except (ET.ParseError, OSError) as e:
        check(False, f"{tag}: the SVG parses", e)
        return
    check(root.tag == SVG + "svg", f"{tag}: an svg root", root.tag)
    check(len(best) == 1, f"{tag}: one best-so-far polyline", len(best))
    check(len(trials) == n_complete, f"{tag}: a circle per complete trial",
          (len(trials), n_complete))
    check(sorted(params) == sorted(names), f"{tag}: a panel per parameter", sorted(params))
    check(all(len(v) == n_complete for v in params.values()),
          f"{tag}: a point per complete trial in each parameter's panel",
          {k: len(v) for k, v in params.items()})
    # from the first complete trial on (all 20 of Branin's)
    want = n_trials if n_complete == n_trials else range(n_complete, n_trials + 1)
    check(len(pts) == want if isinstance(want, int) else len(pts) in want,
          f"{tag}: a vertex per trial", len(pts))
    xs = [p[0] for p in pts]
    ys = [p[1] for p in pts]
    check(xs == sorted(xs), f"{tag}: vertices in trial order")
    steps = [b - a for a, b in zip(ys, ys[1:])]
    mono = all(d <= 1e-9 for d in steps) if maximize else all(d >= -1e-9 for d in steps)
    check(mono, f"{tag}: the best so far is monotone", ys)
    titled = [c for c in trials if c.find(SVG + "title").text.endswith(": %.9g" % best_value)]
    check(titled and abs(float(titled[0].get("cy")) - ys[-1]) < 0.01,
          f"{tag}: the curve ends at the best trial", (best_value, ys[-1]))


os.makedirs(WORK, exist_ok=True)

# Branin, minimised
svg = os.path.join(WORK, "branin.svg")
r = run(["--objective", "branin", "--sampler", "tpe", "--budget", 20, "--plot", svg, "-q"])
check(r.returncode == 0, "branin: exit 0", r.stderr[-500:])
if r.returncode == 0:
    checks("branin", svg, 20, 20, ["x1", "x2"], False, json.loads(r.stdout)["value"])

# a command, maximised, failing for lr > 0.05
space = os.path.join(WORK, "space.json")
with open(space, "w") as f:
    json.dump({"lr": {"type": "float", "low": 1e-4, "high": 1, "log": True},
               "opt": {"type": "categorical", "choices": ["sgd", "adam"]}}, f)
script = os.path.join(WORK, "obj.py")
with open(script, "w") as f:
    f.write("""import math, sys
lr, opt = float(sys.argv[1]), sys.argv[2]
if lr > 0.05:
    sys.exit(3)
print("value=%r" % (-(math.log10(lr) + 2.5) ** 2 + (0.5 if opt == "adam" else 0)))
""")
svg2 = os.path.join(WORK, "cmd.svg")
r = run(["--space", space, "--sampler", "random", "--budget", 16, "--direction", "maximize",
         "--plot", svg2, "-q", "--", sys.executable, script, "{lr}", "{opt}"])
check(r.returncode == 0, "command: exit 0", r.stderr[-500:])
if r.returncode == 0:
    import re
    m = re.search(r"(\d+) trials \((\d+) complete, (\d+) pruned, (\d+) failed\)", r.stderr)
    n_complete, n_failed = int(m.group(2)), int(m.group(4))
    check(n_failed > 0, "command: some trials failed", n_failed)
    checks("command", svg2, 16, n_complete, ["lr", "opt"], True, json.loads(r.stdout)["value"])

# an unwritable path
r = run(["--objective", "branin", "--budget", 3, "--plot", "/nonexistent/dir/p.svg", "-q"])
lines = [l for l in r.stderr.splitlines() if l.startswith("looptune hpo:")]
check(r.returncode != 0 and len(lines) == 1 and "--plot" in lines[0],
      "an unwritable --plot: one line of error", r.stderr)

finish()

#!/usr/bin/env python3
"""looptune hpo's samplers against Optuna's on the same objectives.

Branin (50 evaluations) and Hartmann-6 (100), over --seeds seeds:
  looptune gp, looptune tpe, looptune random (`looptune hpo --objective
  NAME --sampler S --seed K`, its trials read from the per-trial lines),
  Optuna's TPESampler, its GPSampler (when torch is installed: Optuna's GP
  needs it; otherwise said and left out) and its RandomSampler.
Optuna evaluates the same formulas, written here in Python; every looptune
trial's configuration is evaluated here too and must match the value the C
objective gave (to 1e-9), so both sides optimise one function.
Reported: the median and quartiles of the simple regret after the budget
(best value - known optimum), and of the trials taken to reach regret 1e-3
(Branin) / 1e-2 (Hartmann-6) (runs that never reach it count as budget + 1;
the number that did is given). Random search reaches neither within the budget,
so its own figure is computed beyond it: the share p of 10^7 uniform points
within the target regret makes its trials to the target geometric, median
ln 2 / p (p at most 3 / 10^7 where no point was).

mlp-digits (50 trials, looptune's GP and TPE): the validation error of the
best configuration against the default configuration's (the first trial of
a study whose space pins every parameter at its default, trained the same
way), and the wall time of the 50 trials with --parallel 1 and 2 threads.

Optuna is installed with pip in this script's setup when missing (never by
the tests).

    bench/hpo_vs_optuna.py --looptune build/looptune [--seeds 20] [--out results.json]
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

BRANIN_OPT = 0.397887357729739
HARTMANN_OPT = -3.32236801141551


# The objectives take a point as {name: value}, a value a float or a numpy array of many
# points' coordinates (random search's odds below), and return the same kind.
def branin(p):
    x1, x2 = p["x1"], p["x2"]
    b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
    return (x2 - b * x1 * x1 + c * x1 - 6) ** 2 + 10 * (1 - t) * np.cos(x1) + 10


ALPHA = [1.0, 1.2, 3.0, 3.2]
A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8],
     [17, 8, 0.05, 10, 0.1, 14]]
P = [[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
     [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]]


def hartmann6(p):
    x = [p[f"x{j + 1}"] for j in range(6)]
    f = 0.0
    for i in range(4):
        e = sum(A[i][j] * (x[j] - P[i][j] * 1e-4) ** 2 for j in range(6))
        f = f - ALPHA[i] * np.exp(-e)
    return f


PROBLEMS = {
    "branin": dict(f=branin, opt=BRANIN_OPT, budget=50, target=1e-3,
                   space={"x1": (-5.0, 10.0), "x2": (0.0, 15.0)}),
    "hartmann6": dict(f=hartmann6, opt=HARTMANN_OPT, budget=100, target=1e-2,
                      space={f"x{j + 1}": (0.0, 1.0) for j in range(6)}),
}

TRIAL_RE = re.compile(r": trial (\d+) value (\S+) in ")
TEST_RE = re.compile(r"its test accuracy ([0-9.]+)\)")


def test_acc(stderr):
    m = TEST_RE.search(stderr)
    return float(m.group(1)) if m else float("nan")


def setup_optuna():
    try:
        import optuna  # noqa: F401
    except ImportError:
        print("installing optuna with pip (bench setup)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "optuna"], check=True)
    import optuna
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def looptune_run(lt, name, sampler, seed, budget, extra=("--no-broker",)):
    """The trials' values in order and their configurations, from looptune hpo (by default
    with --no-broker: the same trials as on the embedded broker, without its start-up)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as best:
        p = subprocess.run([lt, "hpo", "--objective", name, "--sampler", sampler, "--seed",
                            str(seed), "--budget", str(budget), *extra],
                           capture_output=True, text=True, timeout=3600)
    if p.returncode != 0:
        sys.exit(f"looptune hpo {name} {sampler} seed {seed}: {p.stderr[-800:]}")
    values = {}
    for m in TRIAL_RE.finditer(p.stderr):
        values[int(m.group(1))] = float(m.group(2))
    return [values[t] for t in sorted(values)], json.loads(p.stdout), p.stderr


def check_same_objective(lt, name):
    """looptune's C objective and the Python one here agree on its best configurations."""
    prob = PROBLEMS[name]
    for seed in (1, 2, 3):
        _, best, _ = looptune_run(lt, name, "random", seed, 20)
        ours = prob["f"](best["params"])
        if abs(ours - best["value"]) > 1e-9 * max(1.0, abs(ours)):
            sys.exit(f"{name}: looptune's value {best['value']} and the Python formula's {ours} "
                     f"differ at {best['params']}")


def optuna_run(optuna, name, kind, seed, budget):
    prob = PROBLEMS[name]
    if kind == "tpe":
        sampler = optuna.samplers.TPESampler(seed=seed)
    elif kind == "gp":
        sampler = optuna.samplers.GPSampler(seed=seed)  # needs torch: main() checks
    else:
        sampler = optuna.samplers.RandomSampler(seed=seed)
    study = optuna.create_study(sampler=sampler, direction="minimize")

    def obj(trial):
        return float(prob["f"]({k: trial.suggest_float(k, lo, hi)
                                for k, (lo, hi) in prob["space"].items()}))

    study.optimize(obj, n_trials=budget)
    return [t.value for t in study.trials]


def figures(runs, prob):
    """Simple regret after the budget, trials to the target (budget + 1 if never)."""
    regrets, reach = [], []
    for vals in runs:
        best, hit = math.inf, None
        for i, v in enumerate(vals):
            best = min(best, v)
            if hit is None and best - prob["opt"] <= prob["target"]:
                hit = i + 1
        regrets.append(best - prob["opt"])
        reach.append(hit if hit is not None else prob["budget"] + 1)
    return regrets, reach


def random_odds(prob, n=10_000_000, seed=7):
    """How often a uniform point of the space reaches the target regret: (hits, points)."""
    rng, hits = np.random.default_rng(seed), 0
    for _ in range(n // 1_000_000):
        pts = {k: rng.uniform(lo, hi, 1_000_000) for k, (lo, hi) in prob["space"].items()}
        hits += int(np.count_nonzero(prob["f"](pts) - prob["opt"] <= prob["target"]))
    return hits, n


def quart(xs):
    q = statistics.quantiles(xs, n=4, method="inclusive") if len(xs) > 1 else [xs[0]] * 3
    return q[0], statistics.median(xs), q[2]


def fmt(x):
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def mlp(lt, seeds, samplers=("gp", "tpe")):
    rows = []
    for seed in seeds:
        for sampler in samplers:
            t0 = time.time()
            _, best, err = looptune_run(lt, "mlp-digits", sampler, seed, 50)
            rows.append(dict(sampler=sampler, seed=seed, val_error=1 - best["value"],
                             test_acc=test_acc(err), params=best["params"],
                             seconds=time.time() - t0))
            print(f"mlp-digits: looptune {sampler} seed {seed} done", file=sys.stderr, flush=True)
    return rows


def mlp_eval(lt, params, d):
    """The C mlp-digits objective at one configuration, through the looptune CLI: a space
    that pins every parameter (floats in a range of width 1e-9 above the value; hidden and
    layers are read as integers by truncation), one trial. Returns the validation accuracy
    and the test accuracy."""
    pinned = {}
    for k, v in params.items():
        if isinstance(v, str):
            pinned[k] = {"type": "categorical", "choices": [v]}
        else:
            pinned[k] = {"type": "float", "low": float(v), "high": float(v) + 1e-9}
    space = os.path.join(d, "pinned.json")
    with open(space, "w") as f:
        json.dump(pinned, f)
    p = subprocess.run([lt, "hpo", "--no-broker", "--objective", "mlp-digits", "--space", space,
                        "--budget", "1", "-q"], capture_output=True, text=True, timeout=600)
    if p.returncode != 0:
        sys.exit(f"mlp-digits at {params}: {p.stderr[-500:]}")
    return json.loads(p.stdout)["value"], test_acc(p.stderr)


def optuna_mlp(optuna, lt, seed, budget=50):
    """Optuna's TPE over mlp-digits' space, each trial the C objective (mlp_eval)."""
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed),
                                direction="maximize")
    tests = {}
    with tempfile.TemporaryDirectory() as d:
        def obj(trial):
            v, tests[trial.number] = mlp_eval(lt, {
                "lr": trial.suggest_float("lr", 1e-4, 0.3, log=True),
                "hidden": trial.suggest_int("hidden", 16, 128, log=True),
                "layers": trial.suggest_int("layers", 1, 3),
                "dropout": trial.suggest_float("dropout", 0.0, 0.5),
                "opt": trial.suggest_categorical("opt", ["sgd", "momentum", "adam"]),
                "activation": trial.suggest_categorical("activation", ["relu", "tanh"])}, d)
            return v
        study.optimize(obj, n_trials=budget)
    return 1 - study.best_value, study.best_params, tests[study.best_trial.number]


def mlp_default(lt):
    """The default configuration's validation error: the mlp-digits objective of a space
    of one parameter, opt, with one choice, adam (the default): the others keep their
    defaults. One trial."""
    with tempfile.TemporaryDirectory() as d:
        space = os.path.join(d, "space.json")
        with open(space, "w") as f:
            json.dump({"opt": {"type": "categorical", "choices": ["adam"]}}, f)
        p = subprocess.run([lt, "hpo", "--no-broker", "--objective", "mlp-digits", "--space",
                            space, "--budget", "1"], capture_output=True, text=True,
                           timeout=3600)
        if p.returncode != 0:
            return None, p.stderr.strip().splitlines()[-1]
        return 1 - json.loads(p.stdout)["value"], None


def mlp_wall(lt, parallel, seed=1, embedded=False):
    """Wall time of 50 mlp-digits trials in one process: parallel threads (--no-broker), or
    with embedded parallel workers on the embedded broker (the default). Random search: its
    proposals do not depend on which trials have finished, so 1 and 2 at a time train the
    same 50 configurations."""
    t0 = time.time()
    looptune_run(lt, "mlp-digits", "random", seed, 50,
                 ("--parallel", str(parallel)) + (() if embedded else ("--no-broker",)))
    return time.time() - t0


def mlp_workers(lt, n_workers, brokers=None, seed=1):
    """Wall time of 50 mlp-digits trials over Kafka on n_workers `looptune worker`s
    (--parallel n_workers; random search, as mlp_wall), the test broker started here when
    brokers is None."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    run_dir = tempfile.mkdtemp(prefix="hpo-bench-broker-")
    started = brokers is None
    if started:
        p = subprocess.run([os.path.join(root, "scripts", "kafka", "broker.sh"), "start", "--dir",
                            run_dir], capture_output=True, text=True, timeout=900)
        m = re.search(r"BOOTSTRAP=(\S+)", p.stdout + p.stderr)
        if p.returncode != 0 or not m:
            sys.exit(f"the test broker did not start: {p.stderr[-500:]}")
        brokers = m.group(1)
    prefix = f"hpobench{os.getpid()}-{n_workers}."
    workers = [subprocess.Popen([lt, "worker", "--brokers", brokers, "--topic-prefix", prefix,
                                 "--instance-id", f"bench-w{i}", "--kinds", "hpo"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
               for i in range(n_workers)]
    try:
        # the topics made and the group settled: a one-trial study first
        warm = [lt, "hpo", "--objective", "branin", "--budget", "1", "-q", "--brokers", brokers,
                "--topic-prefix", prefix, "--study", "warm"]
        subprocess.run(warm, capture_output=True, timeout=300, check=True)
        time.sleep(8)
        t0 = time.time()
        p = subprocess.run([lt, "hpo", "--objective", "mlp-digits", "--sampler", "random", "--seed",
                            str(seed), "--budget", "50", "--parallel", str(n_workers), "-q",
                            "--brokers", brokers, "--topic-prefix", prefix, "--study", "mlp"],
                           capture_output=True, text=True, timeout=3600)
        dt = time.time() - t0
        if p.returncode != 0:
            sys.exit(f"mlp-digits on {n_workers} workers: {p.stderr[-500:]}")
        return dt, 1 - json.loads(p.stdout)["value"]
    finally:
        for w in workers:
            w.terminate()
            w.wait()
        if started:
            subprocess.run([os.path.join(root, "scripts", "kafka", "broker.sh"), "stop", "--dir",
                            run_dir], capture_output=True, timeout=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--looptune", required=True)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--mlp-seeds", type=int, default=3)
    ap.add_argument("--out", default=None)
    ap.add_argument("--skip-mlp", action="store_true")
    ap.add_argument("--only-mlp", action="store_true")
    ap.add_argument("--only-wall", action="store_true", help="the mlp-digits wall times alone")
    ap.add_argument("--skip-workers", action="store_true",
                    help="no wall time over a real broker (scripts/kafka/broker.sh)")
    ap.add_argument("--problems", default="branin,hartmann6")
    ap.add_argument("--mlp-methods", default=None,
                    help="mlp-digits' samplers, a subset of 'gp,tpe,optuna tpe' (default: all)")
    ap.add_argument("--skip-walls", action="store_true", help="no mlp-digits wall times")
    ap.add_argument("--methods", default=None,
                    help="comma-separated subset, e.g. 'looptune gp,optuna tpe' (default: all)")
    ap.add_argument("--brokers", default=None,
                    help="a Kafka broker for the workers' wall time (default: start the test one)")
    a = ap.parse_args()
    lt = os.path.abspath(a.looptune)
    optuna = setup_optuna()
    try:
        import torch  # noqa: F401
        optuna.samplers.GPSampler(seed=0)
        have_torch = True
    except Exception as e:  # torch missing or unusable: never a failure of the bench
        have_torch = False
        print(f"Optuna's GPSampler left out: it needs torch ({type(e).__name__}: {e})",
              file=sys.stderr)
    seeds = list(range(1, a.seeds + 1))
    results = {"seeds": a.seeds, "problems": {}}
    chosen = {k: PROBLEMS[k] for k in a.problems.split(",") if k}
    for name, prob in ({} if a.only_mlp or a.only_wall else chosen).items():
        check_same_objective(lt, name)
        methods = {}
        wanted = set(a.methods.split(",")) if a.methods else None
        for s in ("gp", "tpe", "random"):
            if wanted is not None and f"looptune {s}" not in wanted:
                continue
            t0 = time.time()
            methods[f"looptune {s}"] = [looptune_run(lt, name, s, k, prob["budget"])[0]
                                        for k in seeds]
            print(f"{name}: looptune {s} done in {time.time() - t0:.0f} s", file=sys.stderr,
                  flush=True)
        kinds = ["tpe", "random"] + (["gp"] if have_torch else [])
        for s in kinds:
            if wanted is not None and f"optuna {s}" not in wanted:
                continue
            t0 = time.time()
            methods[f"optuna {s}"] = [optuna_run(optuna, name, s, k, prob["budget"])
                                      for k in seeds]
            print(f"{name}: optuna {s} done in {time.time() - t0:.0f} s", file=sys.stderr,
                  flush=True)
        table = {}
        print(f"\n{name}: {prob['budget']} evaluations, {a.seeds} seeds; simple regret and "
              f"trials to regret {prob['target']:g} (q1 / median / q3)")
        print("| sampler | regret q1 | median | q3 | trials to target q1 | median | q3 | "
              "reached |")
        print("|---|---|---|---|---|---|---|---|")
        for m, runs in methods.items():
            regrets, reach = figures(runs, prob)
            r, t = quart(regrets), quart(reach)
            n_hit = sum(x <= prob["budget"] for x in reach)
            table[m] = dict(regret=r, trials=t, reached=n_hit)
            print(f"| {m} | {fmt(r[0])} | {fmt(r[1])} | {fmt(r[2])} | {fmt(t[0])} | "
                  f"{fmt(t[1])} | {fmt(t[2])} | {n_hit}/{a.seeds} |")
        # random search's trials to the target beyond the budget: geometric, median
        # ln 2 / p for p the share of the space within the target (an upper bound on p,
        # 3 / points, where no point of the sample was)
        hits, n = random_odds(prob)
        p_hit = hits / n if hits else 3 / n
        rand_median = math.log(2) / p_hit
        print(f"random search past the budget: {hits} of {n} uniform points within regret "
              f"{prob['target']:g}, so its median trials to the target is "
              f"{'' if hits else 'above '}{rand_median:.3g} (half: {rand_median / 2:.3g})")
        table["random odds"] = dict(hits=hits, points=n, median_trials=rand_median)
        results["problems"][name] = table
    def walls():
        w = dict(wall_1=mlp_wall(lt, 1), wall_2=mlp_wall(lt, 2),
                 embedded_1=mlp_wall(lt, 1, embedded=True),
                 embedded_2=mlp_wall(lt, 2, embedded=True))
        if not a.skip_workers:
            w["workers_1"], w["workers_2"] = mlp_workers(lt, 1, a.brokers), mlp_workers(lt, 2,
                                                                                        a.brokers)
        return w

    if a.only_wall:
        results["wall"] = walls()
    elif not a.skip_mlp:
        mlp_methods = (a.mlp_methods or "gp,tpe,optuna tpe").split(",")
        derr, why = mlp_default(lt)
        rows = mlp(lt, list(range(1, a.mlp_seeds + 1)),
                   [m for m in mlp_methods if m in ("gp", "tpe")])
        for k in range(1, a.mlp_seeds + 1) if "optuna tpe" in mlp_methods else ():
            err, params, tacc = optuna_mlp(optuna, lt, k)
            rows.append(dict(sampler="optuna tpe", seed=k, val_error=err, params=params,
                             test_acc=tacc))
            print(f"mlp-digits: optuna tpe seed {k} done", file=sys.stderr, flush=True)
        results["mlp"] = dict(default_val_error=derr, default_why=why, rows=rows)
        if not a.skip_walls:
            results["mlp"].update(walls())
        print(f"\nmlp-digits: 50 trials, {a.mlp_seeds} seeds; validation error of the best")
        print("| sampler | q1 | median | q3 | test accuracy of the best, median | "
              "default config |")
        print("|---|---|---|---|---|---|")
        for s in mlp_methods:
            e = quart([r["val_error"] for r in rows if r["sampler"] == s])
            ta = statistics.median([r["test_acc"] for r in rows if r["sampler"] == s])
            d = f"{derr:.4f}" if derr is not None else f"n/a ({why})"
            label = s if s.startswith("optuna") else "looptune " + s
            print(f"| {label} | {e[0]:.4f} | {e[1]:.4f} | {e[2]:.4f} | {ta:.4f} | {d} |")
    if "wall" in results or "wall_1" in results.get("mlp", {}):
        m = results.get("wall") or results["mlp"]
        w1, w2, e1, e2 = m["wall_1"], m["wall_2"], m["embedded_1"], m["embedded_2"]
        print("\nmlp-digits: wall time of 50 trials (random search, seed 1: the same 50 "
              "configurations each time)")
        print("| where | 1 at a time | 2 at a time | ratio |")
        print("|---|---|---|---|")
        print(f"| threads of one process (--no-broker --parallel) | {w1:.1f} s | {w2:.1f} s | "
              f"{w1 / w2:.2f}x |")
        print(f"| embedded broker, in-process workers (the default) | {e1:.1f} s | {e2:.1f} s | "
              f"{e1 / e2:.2f}x |")
        if "workers_1" in m:
            k1, k2 = m["workers_1"], m["workers_2"]
            print(f"| looptune workers over Kafka (1, 2 workers) | {k1[0]:.1f} s | {k2[0]:.1f} s "
                  f"| {k1[0] / k2[0]:.2f}x |")
            print(f"(best validation error: workers {k1[1]:.4f} / {k2[1]:.4f})")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""`looptune hpo --brokers` on the real broker: the trials of a study run as
tasks of kind hpo on `looptune worker` processes, the study kept in the
compacted topic <prefix>trials.

The objective is a Python script that appends "start T" and "end T" lines
(T: its LT_HPO_TRIAL) to a log file around a short sleep and prints
value=(x-0.3)^2+(y+0.2)^2.

1. Two workers, 12 trials, 2 in flight, and `looptune hpo --watch` started
   before from another process: every trial has one final record on the
   topic (keys study/0..11, each state complete), the script ran once per
   trial (one end line each), no configuration was proposed twice, the
   driver applied 12 results; --watch printed a line per trial and the
   study's end, with the same best as the driver.
2. A worker killed with SIGKILL while its trial runs: the trial runs again
   on the other worker (two start lines for it), the study completes with
   every trial complete.
3. The driver killed with SIGKILL mid-study and resumed with --resume: the
   study ends with exactly its budget of trials, each with one final record
   and one end line in the log (none lost, none run twice); the resumed
   driver says so; the same --study run again without --resume and a
   larger budget goes on from there. --resume of a study not on the topic
   fails.
4. The built-in mlp-digits objective on the workers, one trial at a time:
   the same best trial, value and configuration as the same study in one
   process (the workers train from the seeds a process would).
5. A trial whose worker is killed twice (SIGKILL while the trial runs, the
   worker restarted each time, so the task is delivered again): run twice,
   then failed at its third delivery with a reason naming its worker dying
   twice; the study completes with the other trials.
6. Pruning over Kafka (--pruner median): a script printing 8 intermediate
   values; the workers report each as it comes, the driver's pruner stops
   some trials: those are pruned on the topic with fewer than 8 steps and
   their script never reached its end, the complete ones have all 8."""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dist"))
import dist_harness as h  # noqa: E402

SCRIPT = """import os, sys, time
t = os.environ["LT_HPO_TRIAL"]
log = sys.argv[1]
with open(log, "a") as f:
    f.write(f"start {t} {os.getppid()}\\n")
time.sleep(float(sys.argv[4]))
x, y = float(sys.argv[2]), float(sys.argv[3])
with open(log, "a") as f:
    f.write(f"end {t}\\n")
print(f"value={(x - 0.3) ** 2 + (y + 0.2) ** 2}")
"""

SPACE = {"x": {"type": "float", "low": -1, "high": 1},
         "y": {"type": "float", "low": -1, "high": 1}}


def hpo(servers, prefix, study, log, script, space, *extra, sleep="0.2"):
    return [h.binary(), "hpo", "--brokers", servers, "--topic-prefix", prefix, "--study", study,
            "--space", space, "--sampler", "random", *extra, "--", sys.executable, script, log,
            "{x}", "{y}", sleep]


def trial_records(servers, prefix, study):
    """The latest record of each trial of study on <prefix>trials, and the count of records."""
    latest, n = {}, 0
    for _, _, k, v in h.records(servers, prefix + "trials", committed_only=False):
        if k and k.startswith(study.encode() + b"/") and v:
            n += 1
            latest[int(k.split(b"/")[1])] = json.loads(v)
    return latest, n


def log_lines(path, what):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [int(l.split()[1]) for l in f if l.startswith(what + " ")]


def check_study(servers, prefix, study, log, budget):
    latest, _ = trial_records(servers, prefix, study)
    h.check(sorted(latest) == list(range(budget)), f"{study}: trial records {sorted(latest)}")
    states = {t: r["state"] for t, r in latest.items()}
    h.check(all(s == "complete" for s in states.values()), f"{study}: states {states}")
    ends = log_lines(log, "end")
    h.check(sorted(ends) == list(range(budget)), f"{study}: the script's end lines {sorted(ends)}")
    configs = [tuple(r["values"]) for r in latest.values()]
    h.check(len(set(configs)) == budget, f"{study}: a configuration proposed twice")
    return latest


def main():
    servers = h.bootstrap()
    wdir = h.work_dir()
    prefix = h.unique_prefix("hpo")
    script = os.path.join(wdir, "objective.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    space = os.path.join(wdir, "space.json")
    with open(space, "w") as f:
        json.dump(SPACE, f)
    workers = [h.Worker(servers, prefix, f"w{i}", wdir, ("--kinds", "hpo")) for i in (1, 2)]
    for w in workers:
        w.start()
    try:
        # the topics, and the group settled, before the studies
        p = subprocess.run(hpo(servers, prefix, "warm", os.path.join(wdir, "warm.log"), script,
                               space, "--budget", "1", sleep="0"),
                           capture_output=True, text=True, timeout=120)
        h.check(p.returncode == 0, f"warm-up study: {p.stderr}")
        h.wait_assigned(workers)

        # 1. two workers, --watch from another process
        log = os.path.join(wdir, "one.log")
        watch = subprocess.Popen([h.binary(), "hpo", "--watch", "one", "--brokers", servers,
                                  "--topic-prefix", prefix, "--watch-timeout", "120"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(1)
        p = subprocess.run(hpo(servers, prefix, "one", log, script, space, "--budget", "12",
                               "--parallel", "2"), capture_output=True, text=True, timeout=300)
        h.check(p.returncode == 0, f"study one: {p.stderr}")
        h.check("12 results applied" in p.stderr, f"study one: {p.stderr}")
        best = json.loads(p.stdout)
        latest = check_study(servers, prefix, "one", log, 12)
        h.check(len(log_lines(log, "start")) == 12, "study one: a trial ran twice")
        wout, werr = watch.communicate(timeout=120)
        lines = [l for l in wout.splitlines() if l.startswith("trial ")]
        h.check(len(lines) == 12, f"--watch printed {len(lines)} trial lines:\n{wout}\n{werr}")
        h.check(f"study one done: 12 trials, best {best['value']:.9g}" in wout,
                f"--watch's end: {wout}")
        h.say(f"1: 12 trials on two workers, best {best['value']:.4g}; --watch followed them")

        # 2. a worker killed mid-trial
        log = os.path.join(wdir, "two.log")
        drv = subprocess.Popen(hpo(servers, prefix, "two", log, script, space, "--budget", "6",
                                   "--parallel", "2", sleep="1.5"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        victim = None
        while time.time() < deadline and victim is None:
            time.sleep(0.05)
            with open(log) if os.path.exists(log) else open(os.devnull) as f:
                lines = f.read().splitlines()
            ended = {l.split()[1] for l in lines if l.startswith("end ")}
            running = [l.split() for l in lines if l.startswith("start ")]
            running = [int(r[2]) for r in running if r[1] not in ended and int(r[1]) >= 2]
            victim = next((w for w in workers if w.proc.pid in running), None)
        h.check(victim is not None, "study two: no trial started")
        victim.kill9()
        out, err = drv.communicate(timeout=240)
        h.check(drv.returncode == 0, f"study two: {err}")
        latest = check_study(servers, prefix, "two", log, 6)
        starts = log_lines(log, "start")
        rerun = sorted({t for t in starts if starts.count(t) > 1})
        h.check(rerun, f"study two: no trial ran again after the kill: {starts}")
        h.say(f"2: worker {victim.wid} killed mid-trial; trial(s) {rerun} ran again, the study "
              "completed")
        victim.start()
        h.wait_assigned(workers)

        # 3. the driver killed and resumed
        log = os.path.join(wdir, "three.log")
        drv = subprocess.Popen(hpo(servers, prefix, "three", log, script, space, "--budget", "10",
                                   "--parallel", "2", sleep="0.5"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 60
        while time.time() < deadline and len(log_lines(log, "end")) < 3:
            time.sleep(0.05)
        drv.send_signal(signal.SIGKILL)
        drv.wait()
        before = len(log_lines(log, "end"))
        p = subprocess.run(hpo(servers, prefix, "three", log, script, space, "--budget", "10",
                               "--parallel", "2", "--resume", sleep="0.5"),
                           capture_output=True, text=True, timeout=300)
        h.check(p.returncode == 0, f"study three resumed: {p.stderr}")
        h.check("three: resumed from" in p.stderr, f"study three: {p.stderr}")
        latest = check_study(servers, prefix, "three", log, 10)
        starts = log_lines(log, "start")
        h.check(sorted(starts) == list(range(10)), f"study three: start lines {sorted(starts)}")
        h.say(f"3: driver killed after {before} trials had ended; resumed, 10 trials, each run "
              "once")
        # the same --study again, without --resume, a larger budget: it goes on
        p = subprocess.run(hpo(servers, prefix, "three", log, script, space, "--budget", "13",
                               "--parallel", "2", sleep="0"),
                           capture_output=True, text=True, timeout=300)
        h.check(p.returncode == 0 and "three: resumed from" in p.stderr and
                "3 results applied, 0 duplicates dropped" in p.stderr,
                f"study three again: {p.stderr}")
        check_study(servers, prefix, "three", log, 13)
        h.say("3: the same --study run again went on to 13 trials, the first 10 not run again")

        p = subprocess.run(hpo(servers, prefix, "nosuch", log, script, space, "--resume"),
                           capture_output=True, text=True, timeout=120)
        h.check(p.returncode == 1 and "no study nosuch" in p.stderr, f"--resume: {p.stderr}")

        # 4. mlp-digits on the workers against one process
        args = ["hpo", "--objective", "mlp-digits", "--sampler", "tpe", "--budget", "3", "-q"]
        p = subprocess.run([h.binary(), *args, "--brokers", servers, "--topic-prefix", prefix,
                            "--study", "mlp"], capture_output=True, text=True, timeout=300)
        h.check(p.returncode == 0, f"mlp-digits over Kafka: {p.stderr}")
        q = subprocess.run([h.binary(), *args], capture_output=True, text=True, timeout=300)
        h.check(q.returncode == 0, f"mlp-digits in one process: {q.stderr}")
        h.check(json.loads(p.stdout) == json.loads(q.stdout),
                f"mlp-digits: workers {p.stdout} against one process {q.stdout}")
        h.say(f"4: mlp-digits on the workers: {p.stdout.strip()}, as in one process")

        # 5. a trial whose worker dies twice
        log = os.path.join(wdir, "five.log")
        drv = subprocess.Popen(hpo(servers, prefix, "five", log, script, space, "--budget", "3",
                                   sleep="4"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for kill in (1, 2):
            deadline, victim = time.time() + 90, None
            while time.time() < deadline and victim is None:
                time.sleep(0.05)
                with open(log) if os.path.exists(log) else open(os.devnull) as f:
                    runs = [l.split() for l in f if l.startswith("start 1 ")]
                if len(runs) == kill:
                    # its heartbeat must have named the trial before the kill
                    time.sleep(1.5)
                    victim = next((w for w in workers if w.proc.pid == int(runs[-1][2])), None)
            h.check(victim is not None, f"study five: trial 1's run {kill} was not seen")
            victim.kill9()
            victim.start()
        out, err = drv.communicate(timeout=300)
        h.check(drv.returncode == 0, f"study five: {err}")
        latest, _ = trial_records(servers, prefix, "five")
        h.check(sorted(latest) == [0, 1, 2], f"study five: trials {sorted(latest)}")
        h.check(latest[1]["state"] == "failed" and "died twice" in latest[1]["reason"],
                f"study five: trial 1 {latest[1]}\n{err}")
        h.check(latest[0]["state"] == latest[2]["state"] == "complete", f"study five: {latest}")
        h.say(f"5: trial 1 failed: {latest[1]['reason']}")

        # 6. pruning over Kafka
        steps = os.path.join(wdir, "steps.py")
        with open(steps, "w") as f:
            f.write("""import os, sys, time
x, log = float(sys.argv[1]), sys.argv[2]
for s in range(1, 9):
    print(f"step={s} value={(x - 0.3) ** 2 + 1.0 / s}", flush=True)
    time.sleep(0.15)
with open(log, "a") as f:
    f.write(f"end {os.environ['LT_HPO_TRIAL']}\\n")
print(f"value={(x - 0.3) ** 2}")
""")
        log = os.path.join(wdir, "six.log")
        p = subprocess.run([h.binary(), "hpo", "--brokers", servers, "--topic-prefix", prefix,
                            "--study", "six", "--space", space, "--sampler", "random", "--budget",
                            "12", "--parallel", "2", "--pruner", "median", "--", sys.executable,
                            steps, "{x}", log], capture_output=True, text=True, timeout=300)
        h.check(p.returncode == 0, f"study six: {p.stderr}")
        latest, _ = trial_records(servers, prefix, "six")
        h.check(sorted(latest) == list(range(12)), f"study six: trials {sorted(latest)}")
        pruned = [t for t, r in latest.items() if r["state"] == "pruned"]
        done = [t for t, r in latest.items() if r["state"] == "complete"]
        h.check(pruned and len(pruned) + len(done) == 12, f"study six: {latest}")
        h.check(all(len(latest[t]["steps"]) < 8 for t in pruned), f"study six: pruned {latest}")
        h.check(all(len(latest[t]["steps"]) == 8 for t in done), f"study six: complete {latest}")
        ends = set(log_lines(log, "end"))
        h.check(ends == set(done), f"study six: ends {sorted(ends)}, complete {sorted(done)}")
        h.say(f"6: median pruning over Kafka: {len(pruned)} of 12 trials pruned, stopped early")
    finally:
        for w in workers:
            w.stop()
    h.say("ok")


if __name__ == "__main__":
    main()

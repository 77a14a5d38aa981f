"""`looptune serve` without --brokers: it starts the embedded broker, says
where on stderr, and serves there (at-least-once). A greedy request
produced to that address streams the ids `looptune run --temp 0` gives; so
it does with --tune online (the tuning run on an embedded broker of its own,
with an optimizer in the process)."""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serve_client as sc  # noqa: E402
import dist_harness as h  # noqa: E402


def main():
    wdir = h.work_dir()
    model = sc.make_model(wdir)
    serve_one(model, wdir, [])
    # online tuning on the embedded broker: the worker's run has its own, and an optimizer
    # in the process; the stream is the same, and the worker says what tuning did
    log = serve_one(model, wdir, ["--tune", "online", "--max-batch", "2"])
    h.check("online tuning of the batched steps: " in log, f"no tuning summary:\n{log[-2000:]}")
    h.say("ok")


def serve_one(model, wdir, extra):
    log = os.path.join(wdir, "serve-embedded.log")
    with open(log, "w") as f:
        proc = subprocess.Popen([h.binary(), "serve", "-m", model, "--topic-prefix", "emb.",
                                 *extra], stdout=f, stderr=subprocess.STDOUT)
    try:
        deadline, bootstrap = time.time() + 30, None
        while bootstrap is None and time.time() < deadline:
            time.sleep(0.1)
            m = re.search(r"serving on the embedded in-memory broker at (\S+) \(at-least-once",
                          open(log).read())
            bootstrap = m[1] if m else None
        h.check(bootstrap, f"no embedded broker address on stderr:\n{open(log).read()}")
        client = sc.Client(bootstrap, "emb.")
        client.request("e1", prompt="Once upon a time", max_tokens=12, temp=0.0)
        client.wait(["e1"], timeout_s=60)
        s = client.streams["e1"]
        ref, _ = sc.run_reference(model, "Once upon a time", 12, "--temp", "0")
        want = ref[:-1] if len(ref) < 12 else ref
        h.check(s.complete() and s.ids() == want, f"e1: {s.ids()} != looptune run's {want}")
        client.close()
    finally:
        proc.terminate()
        code = proc.wait(30)
    h.check(code == 0, f"serve exited with {code}:\n{open(log).read()[-2000:]}")
    return open(log).read()


if __name__ == "__main__":
    main()

"""Bounded admission and cancels while fetching is paused, on the real broker.

One worker with 2 slots and a queue of 1 is given ten requests at once: a
long one and nine short greedy ones. It must never hold more than 3 (its
summary says how many it held at most and that it paused fetching), and
serve all of them: each short stream equals `looptune run --temp 0`. While
it is full (fetching paused), the long request, in a slot, and the last
short one, not read yet, are cancelled: the long one stops early, the last
ends "cancelled" with no token (its cancel came through the follower before
the request was read)."""
import re
import time

import serve_client as sc
from serve_client import check, say
import dist_harness as h

SHORT = 20


def main():
    servers = h.bootstrap()
    prefix = h.unique_prefix("serveadm")
    wdir = h.work_dir()
    model = sc.make_model(wdir, seed=3)
    srv = sc.Server(model, servers, prefix, "adm", wdir,
                    ["--max-batch", "2", "--queue", "1", "--ctx", "256", "--partitions", "1",
                     "--test-step-delay-ms", "5"]).start()
    client = sc.Client(servers, prefix)
    try:
        run(client, srv, model)
    finally:
        code = srv.stop()
        client.close()
    check(code == 0, f"serve exited with {code}")
    log = srv.text()
    m = re.search(r"fetching paused (\d+) times, at most (\d+) requests held", log)
    check(m, f"no admission figures in the summary:\n{log[-2000:]}")
    paused, held = int(m[1]), int(m[2])
    check(paused >= 1, "fetching never paused with 10 requests for 3 places")
    check(held <= 3, f"{held} requests held at once: more than 2 slots + a queue of 1")
    say(f"ok: fetching paused {paused} times, at most {held} requests held")


def run(client, srv, model):
    sc.wait_holding([srv])
    client.request("warm-up", prompt="Hi", max_tokens=1)
    client.wait(["warm-up"], timeout_s=60)
    client.request("long", prompt="A long one", max_tokens=240, ignore_eos=True)
    shorts = [f"s{i}" for i in range(9)]
    for i, rid in enumerate(shorts):
        client.request(rid, prompt=f"Short story {i}", max_tokens=SHORT, temp=0.0)
    t0 = time.time()
    while not client.streams["long"].tokens and time.time() - t0 < 60:
        client.poll(0.1)
    check(client.streams["long"].tokens, "the long request streamed nothing in 60 s")
    client.cancel("long")
    client.cancel(shorts[-1])
    client.wait(["long"] + shorts, timeout_s=120)

    long = client.streams["long"]
    check(long.final.finish_reason == "cancelled" and len(long.tokens) < 240,
          f"long: {long.final.finish_reason} after {len(long.tokens)} tokens")
    last = client.streams[shorts[-1]]
    check(last.final.finish_reason == "cancelled" and not last.tokens,
          f"{shorts[-1]}: {last.final.finish_reason} after {len(last.tokens)} tokens (its cancel "
          "should have been seen before the request was read)")
    for i, rid in enumerate(shorts[:-1]):
        s = client.streams[rid]
        check(s.complete(), f"{rid}: indices missing")
        ref, _ = sc.run_reference(model, f"Short story {i}", SHORT, "--temp", "0")
        want = ref[:-1] if len(ref) < SHORT else ref
        check(s.ids() == want, f"{rid}: {s.ids()} != looptune run's {want}")
    say(f"long cancelled after {len(long.tokens)} tokens; 8 short streams equal looptune run's")


if __name__ == "__main__":
    main()

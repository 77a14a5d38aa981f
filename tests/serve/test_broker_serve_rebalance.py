"""Partitions revoked mid-stream, on the real broker.

One worker serves ten long requests (greedy and seeded sampling); once a
reader has seen 20 committed tokens, a second worker joins the group, and
cooperative-sticky assignment moves some partitions to it. The first worker
aborts the transaction in flight and drops the sequences of the partitions
it lost (its log says how many); the second serves them again from their
first token. After de-duplication every stream has each index once and
equals `looptune run`, and the moved requests' final records come from the
worker that joined."""
import re
import time

import serve_client as sc
from serve_client import check, say
import dist_harness as h

N = 200
REQS = 10


def main():
    servers = h.bootstrap()
    prefix = h.unique_prefix("servereb")
    wdir = h.work_dir()
    model = sc.make_model(wdir, seed=5)
    common = ["--max-batch", "10", "--queue", "2", "--ctx", "256", "--test-step-delay-ms", "15"]
    a = sc.Server(model, servers, prefix, "ra", wdir, common).start()
    b = sc.Server(model, servers, prefix, "rb", wdir, common)
    client = sc.Client(servers, prefix)
    try:
        run(client, a, b, model)
    finally:
        for s in (a, b):
            if s.proc:
                s.stop()
        client.close()
    say("ok")


def run(client, a, b, model):
    sc.wait_holding([a])
    client.request("warm-up", prompt="Hi", max_tokens=1)
    client.wait(["warm-up"], timeout_s=60)
    reqs = {}
    for i in range(REQS):
        prompt = f"Tale {i} begins"
        if i % 2:
            reqs[f"r{i}"] = (prompt, dict(temp=1.0, seed=7 * i), ["--temp", "1", "--top-p", "1",
                                                                  "--seed", str(7 * i)])
        else:
            reqs[f"r{i}"] = (prompt, dict(temp=0.0), ["--temp", "0"])
    for rid, (prompt, smp, _) in reqs.items():
        client.request(rid, prompt=prompt, max_tokens=N, ignore_eos=True, **smp)
    t0 = time.time()
    while not any(len(client.streams[r].tokens) >= 20 for r in reqs) and time.time() - t0 < 60:
        client.poll(0.1)
    check(any(len(client.streams[r].tokens) >= 20 for r in reqs), "nothing streamed in 60 s")
    b.start()
    client.wait(list(reqs), timeout_s=150)
    client.poll(1.0)

    moved = 0
    for rid, (prompt, _, flags) in reqs.items():
        s = client.streams[rid]
        check(s.complete() and s.final.index == N and s.final.finish_reason == "length",
              f"{rid}: {len(s.tokens)} distinct indices, final {s.final.finish_reason} at "
              f"{s.final.index}")
        ids, out = sc.run_reference(model, prompt, N, "--ignore-eos", *flags)
        check(s.ids() == ids, f"{rid}: stream differs from looptune run")
        text = b"".join(s.tokens[i][1] for i in range(N))
        check(text == out[len(prompt):-1], f"{rid}: text differs from looptune run")
        if s.workers == {"ra", "rb"}:
            moved += 1
            check(s.final.worker == "rb", f"{rid}: moved, but its final is from {s.final.worker}")
    dropped = sum(int(x) for x in re.findall(r"revoked: (\d+) requests dropped", a.text()))
    check(moved >= 1, "no request moved to the joining worker")
    check(dropped >= moved, f"ra dropped {dropped} requests, {moved} moved mid-stream")
    say(f"{moved} requests moved mid-stream ({dropped} dropped by ra), "
        f"{client.duplicates} duplicate tokens dropped; every stream equals looptune run's")


if __name__ == "__main__":
    main()

"""A serve worker killed with SIGKILL mid-stream on the real broker.

Two workers share the serve group. Six long requests (greedy and seeded
sampling, 200 tokens, ends of generation ignored) are produced; once a
reader has seen 20 committed tokens of a request, the worker that streamed
them is killed with SIGKILL inside its next transaction (its records
produced, not committed: a test delay holds the commit back). The other takes its partitions and serves the
requests again from their first token. After de-duplication by (request,
index), every stream has each index 0..199 exactly once and equals
`looptune run`'s token ids and text for the same prompt and settings;
tokens of the killed worker's requests were read twice (it had committed
some), their final records come from the surviving worker, and the
records of the transaction the kill left open are in the log but never
read committed."""
import time

import serve_client as sc
from serve_client import check, say
import dist_harness as h

N = 200


def main():
    servers = h.bootstrap()
    prefix = h.unique_prefix("servekill")
    wdir = h.work_dir()
    model = sc.make_model(wdir)
    # each commit sleeps 150 ms between producing its records and committing them,
    # so the kill lands inside a transaction whose records the broker holds
    common = ["--max-batch", "4", "--ctx", "256", "--transaction-timeout-ms", "4000",
              "--test-step-delay-ms", "8", "--test-commit-delay-ms", "150"]
    a = sc.Server(model, servers, prefix, "wa", wdir, common).start()
    b = sc.Server(model, servers, prefix, "wb", wdir, common).start()
    client = sc.Client(servers, prefix)
    try:
        run(client, a, b, model)
    finally:
        for s in (a, b):
            s.stop()
        client.close()
    say("ok")


def run(client, a, b, model):
    sc.wait_holding([a, b])
    # set the transactions up (both workers' first commits) before the figures count
    for i in range(6):
        client.request(f"warm-{i}", prompt="Hi", max_tokens=1)
    client.wait([f"warm-{i}" for i in range(6)], timeout_s=60)

    reqs = {}
    for i in range(6):
        rid = f"r{i}"
        if i % 2 == 0:
            reqs[rid] = (f"Story number {i}", dict(temp=0.0), ["--temp", "0"])
        else:
            reqs[rid] = (f"Story number {i}", dict(temp=0.9, top_p=0.95, seed=100 + i),
                         ["--temp", "0.9", "--top-p", "0.95", "--seed", str(100 + i),
                          "--repeat-penalty", "1"])
    for rid, (prompt, smp, _) in reqs.items():
        client.request(rid, prompt=prompt, max_tokens=N, ignore_eos=True, **smp)

    # kill the worker of the first stream seen 20 tokens in
    victim = None
    deadline = time.time() + 60
    while victim is None and time.time() < deadline:
        client.poll(0.1)
        for rid in reqs:
            s = client.streams[rid]
            if len(s.tokens) >= 20 and s.final is None:
                victim = s.workers.copy()
                break
    check(victim and len(victim) == 1, f"no stream 20 tokens in within 60 s ({victim})")
    vid = victim.pop()
    killed, survivor = (a, b) if vid == a.wid else (b, a)
    # at its next commit's sleep: records produced, transaction open
    marks = killed.text().count("committing in")
    deadline = time.time() + 30
    while killed.text().count("committing in") == marks and time.time() < deadline:
        time.sleep(0.005)
    check(killed.text().count("committing in") > marks, f"{killed.wid} made no commit in 30 s")
    before = {rid: len(client.streams[rid].tokens) for rid in reqs}
    killed.kill9()
    say(f"killed {killed.wid} inside a transaction, with tokens read {before}")

    client.wait(list(reqs), timeout_s=120)
    client.poll(1.0)
    rerun = 0
    for rid, (prompt, _, flags) in reqs.items():
        s = client.streams[rid]
        check(s.complete() and s.final.index == N,
              f"{rid}: {len(s.tokens)} distinct indices, final at {s.final.index}")
        check(s.final.finish_reason == "length", f"{rid}: finish {s.final.finish_reason}")
        ids, out = sc.run_reference(model, prompt, N, "--ignore-eos", *flags)
        check(s.ids() == ids, f"{rid}: stream differs from looptune run:\n  {s.ids()}\n  {ids}")
        text = b"".join(s.tokens[i][1] for i in range(N))
        check(text == out[len(prompt):-1], f"{rid}: text differs from looptune run")
        if killed.wid in s.workers:
            rerun += 1
            check(s.final.worker == survivor.wid,
                  f"{rid}: final from {s.final.worker}, not the survivor {survivor.wid}")
            check(s.seen > N, f"{rid}: {s.seen} tokens read for {N}: nothing was served twice")
    check(rerun >= 1, "no request of the killed worker was served again")
    # the killed worker's open transaction: its records are in the log, never read committed
    topic = client.prefix + "completions"
    servers = client.servers
    pb = h.proto()

    def from_killed(committed_only):
        n = 0
        for _, _, _, v in h.records(servers, topic, committed_only=committed_only):
            env = pb.Envelope()
            env.ParseFromString(v)
            n += env.completion.worker == killed.wid
        return n
    seen, stored = from_killed(True), from_killed(False)
    check(stored > seen, f"{killed.wid}: {stored} records in the log, {seen} committed: the kill "
          "fell outside a transaction")
    check(client.duplicates > 0, "no duplicate read: the kill fell outside every stream")
    say(f"{rerun} requests served again by {survivor.wid}; {client.duplicates} duplicate tokens "
        f"dropped; {stored - seen} records of the killed worker's open transaction never read "
        f"committed; every stream equals looptune run's")


if __name__ == "__main__":
    main()

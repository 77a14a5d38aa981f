#!/usr/bin/env python3
"""What the HTTP gateway adds to a stream: time to first token and time per
token through `looptune gateway` (the official openai client, streamed)
against the same worker read directly on Kafka (a confluent-kafka client
producing the Request and reading the completions topic read_committed),
side by side in one run.

One `looptune serve` worker (--max-batch 1) and one gateway on the given
broker. Each round runs one request each way, the order alternating, every
request --tokens tokens long (greedy, ends of generation ignored), one at a
time. Per way: time to the first token (from the request sent to the first
token's text read) and the time per token after it ((last - first) /
(tokens - 1)), min / median / max over rounds; then the gateway's medians
minus the direct ones (the issue's goal: <= 2 ms added to the first token,
<= 0.5 ms per token).

    scripts/kafka/broker.sh start    # prints BOOTSTRAP=127.0.0.1:PORT
    bench/gateway_overhead.py --looptune build/looptune --brokers 127.0.0.1:PORT \\
        -m stories15M-q8_0.gguf --tokens 64 --rounds 20
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "serve"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "dist"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "http"))


def direct(client, tokens, i):
    rid = f"d{i}-{uuid.uuid4().hex[:6]}"
    t0 = time.perf_counter()
    client.request(rid, prompt=f"Once upon a time {i}", max_tokens=tokens, ignore_eos=True)
    first = None
    s = client.streams[rid]
    while s.final is None:
        client.poll(0.001)
        if first is None and s.tokens:
            first = time.perf_counter()
    last = time.perf_counter()
    return first - t0, (last - first) / max(1, len(s.tokens) - 1), len(s.tokens)


def gateway(oai, model, tokens, i):
    t0 = time.perf_counter()
    first = last = None
    n = 0
    for ch in oai.completions.create(model=model, prompt=f"Once upon a time {i}", max_tokens=tokens,
                                     temperature=0, stream=True, extra_body={"ignore_eos": True},
                                     stream_options={"include_usage": True}):
        now = time.perf_counter()
        if ch.choices and ch.choices[0].text:
            if first is None:
                first = now
            last = now
        if ch.usage:
            n = ch.usage.completion_tokens
    return first - t0, (last - first) / max(1, n - 1), n


def stats(xs):
    return f"{min(xs) * 1e3:8.2f} {statistics.median(xs) * 1e3:8.2f} {max(xs) * 1e3:8.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--looptune", default="build/looptune")
    ap.add_argument("--brokers", required=True)
    ap.add_argument("-m", "--model", required=True)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    os.environ["LT_BIN"] = os.path.abspath(args.looptune)
    os.environ.setdefault("LT_PROTO_DIR", os.path.join(HERE, "..", "proto"))
    import openai
    import serve_client as sc
    from test_broker_gateway import Gateway
    wdir = tempfile.mkdtemp(prefix="lt-gwbench-")
    prefix = f"gwbench-{uuid.uuid4().hex[:8]}."
    name = os.path.splitext(os.path.basename(args.model))[0]
    srv = sc.Server(args.model, args.brokers, prefix, "gwb", wdir,
                    ["--max-batch", "1", "--threads", str(args.threads), "--partitions", "1"]).start()
    client = sc.Client(args.brokers, prefix)
    # the same fetch wait as the gateway's follower (50 ms), not librdkafka's 500: a
    # read_committed fetch may wait that long for the last stable offset to move
    from confluent_kafka import Consumer
    client.consumer.close()
    client.consumer = Consumer({"bootstrap.servers": args.brokers, "group.id": f"gwbench-{uuid.uuid4()}",
                                "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                "isolation.level": "read_committed", "fetch.wait.max.ms": 50})
    gw = None
    try:
        sc.wait_holding([srv])
        gw = Gateway(args.brokers, prefix, wdir, "bench", ["--partitions", "1"])
        oai = openai.OpenAI(base_url=f"http://127.0.0.1:{gw.port}/v1", api_key="none", max_retries=0)
        # warm both paths: transactions, connections
        direct(client, 4, -1)
        gateway(oai, name, 4, -1)
        res = {"direct": [], "gateway": []}
        for r in range(args.rounds):
            order = ["direct", "gateway"] if r % 2 == 0 else ["gateway", "direct"]
            for way in order:
                res[way].append(direct(client, args.tokens, r) if way == "direct"
                                else gateway(oai, name, args.tokens, r))
    finally:
        if gw:
            gw.stop()
        srv.stop()
        client.close()
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "?")
    print(f"# {cpu}, {os.cpu_count()} CPUs; {args.model}, {args.tokens} tokens, {args.rounds} rounds, "
          f"interleaved; ms, min / median / max")
    print(f"{'way':10s} {'first token':>26s}   {'per token':>26s}")
    for way, rows in res.items():
        print(f"{way:10s} {stats([x[0] for x in rows])}   {stats([x[1] for x in rows])}")
    d_ttft = statistics.median(x[0] for x in res["gateway"]) - statistics.median(x[0] for x in res["direct"])
    d_tok = statistics.median(x[1] for x in res["gateway"]) - statistics.median(x[1] for x in res["direct"])
    print(f"gateway adds: {d_ttft * 1e3:.2f} ms to the first token, {d_tok * 1e3:.3f} ms per token (medians)")
    bad = [x for x in res["gateway"] + res["direct"] if x[2] != args.tokens]
    if bad:
        sys.exit(f"{len(bad)} requests did not give {args.tokens} tokens")


if __name__ == "__main__":
    main()

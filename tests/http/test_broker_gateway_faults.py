"""A client's stream through `looptune gateway` survives a killed worker and a
restarted broker: it completes, no token repeated or missing, its text equal
to `looptune run`'s.

1. kill -9: two `looptune serve` workers on the fixture broker; a streamed
   greedy completion (the openai client) lasting seconds (a sleep per
   decode step); once the worker serving it has committed some tokens (read
   from the completions topic), it is killed with SIGKILL. The other worker
   takes its partitions after the session timeout and serves the request
   again from the start; the client's stream goes on where it was and ends
   with the same text as `looptune run --temp 0`. The completions topic shows
   both workers' records for the request: it was served twice, and the
   gateway kept each token once.
2. broker restart: a broker of its own (scripts/kafka/broker.sh in a work
   directory; the fixture broker is not touched), one worker whose group
   session outlasts the outage, a streamed completion during which the
   broker is killed and started again on its port and data: the stream
   completes with `looptune run`'s text."""
import threading
import time

import serve_client as sc
from serve_client import check, say
import dist_harness as h
from test_broker_gateway import Gateway, ref_text

N = 120
PROMPT = "Once upon a time"


def stream_in_thread(port, result):
    import openai
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none",
                           max_retries=0, timeout=300)

    def run():
        try:
            parts = []
            for ch in client.completions.create(model="serve-model", prompt=PROMPT, max_tokens=N,
                                                temperature=0, stream=True):
                if ch.choices:
                    parts.append(ch.choices[0].text)
                    result["id"] = ch.id
                    result.setdefault("first_at", time.time())
                    result["finish"] = ch.choices[0].finish_reason or result.get("finish")
            result["text"] = "".join(parts)
        except Exception as e:  # noqa: BLE001  (reported by the test)
            result["error"] = repr(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def wait_for_id(result, t, timeout_s=60):
    deadline = time.time() + timeout_s
    while "id" not in result and time.time() < deadline and t.is_alive():
        time.sleep(0.05)
    check("id" in result, f"no first chunk in {timeout_s} s: {result}")
    return result["id"]


def kill_mid_stream(model, want):
    servers = h.bootstrap()
    prefix = h.unique_prefix("gwkill")
    wdir = h.work_dir()
    args = ["--max-batch", "2", "--ctx", "256", "--threads", "1", "--test-step-delay-ms", "30"]
    workers = {w: sc.Server(model, servers, prefix, w, wdir, args).start() for w in ("k1", "k2")}
    g = None
    kc = sc.Client(servers, prefix)
    try:
        sc.wait_holding(list(workers.values()))
        g = Gateway(servers, prefix, wdir, "kill")
        result = {}
        t = stream_in_thread(g.port, result)
        rid = wait_for_id(result, t)
        # the serving worker, once it has committed a few tokens
        deadline = time.time() + 60
        while time.time() < deadline:
            kc.poll(0.2)
            s = kc.streams.get(rid)
            if s and len(s.tokens) >= 10:
                break
        s = kc.streams.get(rid)
        check(s and s.workers and s.final is None, f"{rid}: not streaming from one worker: {s and s.workers}")
        victim = next(iter(s.workers))
        n_before = len(s.tokens)
        workers[victim].kill9()
        say(f"killed {victim} after {n_before} tokens of {N}")
        t.join(180)
        check(not t.is_alive(), "the client's stream did not end within 180 s of the kill")
        check("error" not in result, f"the client's stream failed: {result.get('error')}")
        check(result["text"] == want, f"after the kill: {result['text']!r}\n  looptune run: {want!r}")
        kc.wait([rid], timeout_s=30)
        s = kc.streams[rid]
        check(len(s.workers) == 2 and s.final.worker != victim,
              f"{rid}: served by {s.workers}, final from {s.final.worker}")
        check(s.seen > len(s.tokens), f"{rid}: {s.seen} tokens read for {len(s.tokens)}: no replay seen")
        say(f"stream complete after the kill: {N} tokens, {s.seen - len(s.tokens)} replayed tokens "
            f"dropped by the gateway, text equal to looptune run's")
    finally:
        if g:
            g.stop()
        for w in workers.values():
            if w.proc.poll() is None:
                w.stop()
        kc.close()


def broker_restart(model, want):
    wdir = h.work_dir()
    b = h.Broker(wdir, "broker-gw").start().ready()
    prefix = h.unique_prefix("gwrestart")
    w = sc.Server(model, b.servers, prefix, "r1", wdir,
                  ["--max-batch", "2", "--ctx", "256", "--threads", "1", "--test-step-delay-ms", "40",
                   "--session-timeout-ms", "120000", "-X", "heartbeat.interval.ms=1000"]).start()
    g = None
    try:
        sc.wait_holding([w])
        g = Gateway(b.servers, prefix, wdir, "restart")
        result = {}
        t = stream_in_thread(g.port, result)
        wait_for_id(result, t)
        time.sleep(0.5)
        took = b.sh("restart")
        say(f"broker restarted in {took:.1f} s mid-stream")
        t.join(240)
        check(not t.is_alive(), "the client's stream did not end within 240 s of the restart")
        check("error" not in result, f"the client's stream failed: {result.get('error')}")
        check(result["text"] == want, f"after the restart: {result['text']!r}\n  looptune run: {want!r}")
        check(w.proc.poll() is None, f"the worker died in the outage:\n{w.text()[-2000:]}")
        say("stream complete across the broker's restart, text equal to looptune run's")
    finally:
        if g:
            g.stop()
        if w.proc.poll() is None:
            w.stop()
        b.stop()


def main():
    wdir = h.work_dir()
    model = sc.make_model(wdir)
    _, want = ref_text(model, PROMPT, N, "--temp", "0")
    kill_mid_stream(model, want)
    broker_restart(model, want)
    say("ok")


if __name__ == "__main__":
    main()

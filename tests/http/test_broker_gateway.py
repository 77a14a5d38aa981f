"""`looptune gateway` on the real broker, driven by the official `openai`
Python client, against `looptune run`.

One `looptune serve` worker and two gateways (one with an API key and a
model list, one with neither and --max-inflight 1). Through the first:
  - completions, greedy, whole and streamed: the text equals `looptune run
    --temp 0` on the same prompt (decoded as Python decodes the same bytes),
    and the streamed chunks join to the same text;
  - a seeded sampled completion equals `looptune run` with the same settings;
  - chat completions, whole and streamed, agree with each other, with usage;
  - /v1/models lists the model; /health answers; /metrics parses with
    prometheus_client's text parser, and its counters match what was sent;
  - errors: a wrong key (401), an unknown model (404, refused at the
    gateway), max_tokens 0 (400), a prompt longer than the context (413, the
    worker's refusal), malformed JSON and an unknown route (raw HTTP: 400 and
    404 with OpenAI's error object);
  - a client that disconnects mid-stream: its request's final record on the
    completions topic is "cancelled".
Through the second: an unknown model goes to the worker, whose refusal
comes back as 404; a second request while one is in flight is refused with
429 and Retry-After."""
import http.client
import json
import os
import re
import socket
import subprocess
import time

import serve_client as sc
from serve_client import check, say
import dist_harness as h

CTX = 256
KEY = "sk-test-looptune"


class Gateway:
    def __init__(self, servers, prefix, wdir, name, extra=()):
        self.log = os.path.join(wdir, f"gateway-{name}.log")
        f = open(self.log, "w")
        self.proc = subprocess.Popen([h.binary(), "gateway", "--brokers", servers, "--topic-prefix",
                                      prefix, "--http", "127.0.0.1:0", *extra],
                                     stdout=f, stderr=subprocess.STDOUT)
        f.close()
        deadline = time.time() + 60
        self.port = None
        while time.time() < deadline and self.port is None:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.text())
            if m:
                self.port = int(m.group(1))
            elif self.proc.poll() is not None:
                break
            time.sleep(0.1)
        check(self.port, f"gateway {name} did not start:\n{self.text()}")

    def text(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def stop(self):
        self.proc.terminate()
        try:
            return self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def raw(self, method, path, body=None, headers=None):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, dict(r.getheaders()), data


def ref_text(model, prompt, n, *flags):
    ids, out = sc.run_reference(model, prompt, n, *flags)
    check(out.startswith(prompt.encode()) and out.endswith(b"\n"), f"run's output: {out!r}")
    body = out[len(prompt):-1]
    # run prints an end-of-generation token it stopped at; the service does not
    return ids, body.decode("utf-8", errors="replace")


def main():
    import openai
    servers = h.bootstrap()
    prefix = h.unique_prefix("gw")
    wdir = h.work_dir()
    model = sc.make_model(wdir)
    srv = sc.Server(model, servers, prefix, "gw1", wdir,
                    ["--max-batch", "4", "--ctx", str(CTX), "--threads", "1",
                     "--test-step-delay-ms", "2"]).start()
    g1 = g2 = None
    try:
        sc.wait_holding([srv])
        g1 = Gateway(servers, prefix, wdir, "keyed", ["--api-key", KEY, "--model", "serve-model"])
        g2 = Gateway(servers, prefix, wdir, "open", ["--max-inflight", "1"])
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{g1.port}/v1", api_key=KEY,
                               max_retries=0, timeout=120)
        completions(client, model)
        chat(client)
        errors(client, g1, g2, openai)
        disconnect(g1, servers, prefix)
        busy(g2)
        metrics(g1)
    finally:
        codes = [g.stop() for g in (g1, g2) if g]
        code = srv.stop()
    check(all(c == 0 for c in codes), f"gateways exited with {codes}")
    check(code == 0, f"serve exited with {code}:\n{srv.text()[-3000:]}")
    say("ok")


def completions(client, model):
    # a first one: the worker's transactions set up
    client.completions.create(model="serve-model", prompt="Hi", max_tokens=1, temperature=0)
    for prompt, n in [("Once upon a time", 40), ("The little dog ran", 25)]:
        ids, want = ref_text(model, prompt, n, "--temp", "0")
        r = client.completions.create(model="serve-model", prompt=prompt, max_tokens=n,
                                      temperature=0)
        got = r.choices[0].text
        check(got.rstrip("\ufffd") == want.rstrip("\ufffd") or got == want,
              f"{prompt!r}: gateway {got!r}\n  looptune run {want!r}")
        check(r.choices[0].finish_reason in ("stop", "length"), f"finish {r.choices[0].finish_reason}")
        check(r.usage.completion_tokens == (n if r.choices[0].finish_reason == "length" else len(ids) - 1),
              f"usage {r.usage} for {len(ids)} tokens of run")
        check(r.usage.prompt_tokens > 0, f"usage {r.usage}")
        parts, finish, usage = [], None, None
        for ch in client.completions.create(model="serve-model", prompt=prompt, max_tokens=n,
                                            temperature=0, stream=True,
                                            stream_options={"include_usage": True}):
            if ch.choices:
                parts.append(ch.choices[0].text)
                finish = ch.choices[0].finish_reason or finish
            if ch.usage:
                usage = ch.usage
        check("".join(parts) == got, f"{prompt!r}: streamed {''.join(parts)!r}\n  whole {got!r}")
        check(len(parts) > 2, f"{prompt!r}: {len(parts)} chunks: not streamed")
        check(finish == r.choices[0].finish_reason and usage and
              usage.completion_tokens == r.usage.completion_tokens, f"stream end {finish}, {usage}")
        say(f"{prompt!r}: {r.usage.completion_tokens} tokens equal looptune run's, whole and in "
            f"{len(parts)} chunks")
    ids, want = ref_text(model, "Once upon a time", 30, "--temp", "0.8", "--top-p", "0.9",
                         "--top-k", "40", "--seed", "42")
    r = client.completions.create(model="serve-model", prompt="Once upon a time", max_tokens=30,
                                  temperature=0.8, top_p=0.9, seed=42, extra_body={"top_k": 40})
    check(r.choices[0].text == want, f"seeded: gateway {r.choices[0].text!r}\n  run {want!r}")
    say("seeded sampling equals looptune run's")


def chat(client):
    msgs = [{"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Tell me a story."}]
    r = client.chat.completions.create(model="serve-model", messages=msgs, max_tokens=20,
                                       temperature=0)
    whole = r.choices[0].message.content
    check(r.choices[0].message.role == "assistant", f"role {r.choices[0].message.role}")
    check(r.usage.prompt_tokens > 5 and r.usage.completion_tokens > 0, f"usage {r.usage}")
    parts = [c.choices[0].delta.content or "" for c in client.chat.completions.create(
        model="serve-model", messages=msgs, max_tokens=20, temperature=0, stream=True) if c.choices]
    check("".join(parts) == whole, f"chat: streamed {''.join(parts)!r}, whole {whole!r}")
    say(f"chat: {r.usage.completion_tokens} tokens, whole and streamed alike")


def errors(client, g1, g2, openai):
    bad = openai.OpenAI(base_url=f"http://127.0.0.1:{g1.port}/v1", api_key="wrong", max_retries=0)
    try:
        bad.completions.create(model="serve-model", prompt="x", max_tokens=1)
        check(False, "a wrong key was let in")
    except openai.AuthenticationError as e:
        check(e.status_code == 401, f"wrong key: {e.status_code}")
    for kwargs, want, err in [
            (dict(model="no-such-model", prompt="x"), 404, openai.NotFoundError),
            (dict(model="serve-model", prompt="x", max_tokens=0), 400, openai.BadRequestError),
            (dict(model="serve-model", prompt="word " * (CTX + 50), max_tokens=4), 413, openai.APIStatusError)]:
        try:
            client.completions.create(**kwargs)
            check(False, f"{kwargs}: no error")
        except err as e:
            check(e.status_code == want, f"{str(kwargs)[:60]}: HTTP {e.status_code}, want {want}: {e}")
            body = e.body if isinstance(e.body, dict) else {}
            check(body.get("message"), f"{want}: no OpenAI error object: {e.body!r}")
            say(f"HTTP {want}: {body.get('message')}")
    status, _, data = g1.raw("POST", "/v1/completions", body=b"{\"model\": ",
                             headers={"Authorization": f"Bearer {KEY}",
                                      "Content-Type": "application/json"})
    check(status == 400 and "not valid JSON" in json.loads(data)["error"]["message"],
          f"malformed JSON: {status} {data!r}")
    status, _, data = g1.raw("GET", "/v1/nothing", headers={"Authorization": f"Bearer {KEY}"})
    check(status == 404 and json.loads(data)["error"]["message"], f"unknown route: {status} {data!r}")
    status, _, data = g1.raw("DELETE", "/health")
    check(status == 405, f"DELETE /health: {status}")
    status, _, data = g1.raw("GET", "/health")
    check(status == 200 and json.loads(data)["status"] == "ok", f"/health: {status} {data!r}")
    models = [m.id for m in client.models.list()]
    check(models == ["serve-model"], f"/v1/models: {models}")
    # no model list: the worker refuses the name, the gateway says 404
    open_client = openai.OpenAI(base_url=f"http://127.0.0.1:{g2.port}/v1", api_key="none",
                                max_retries=0)
    try:
        open_client.completions.create(model="no-such-model", prompt="x", max_tokens=2)
        check(False, "the worker served an unknown model")
    except openai.NotFoundError as e:
        check("no-such-model" in str(e), f"worker's 404: {e}")
        say(f"HTTP 404 from the worker: {e.body.get('message') if isinstance(e.body, dict) else e}")


def sse_request(port, body):
    """A raw streaming request on a socket: returns it and the first data line."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              + f"Authorization: Bearer {KEY}\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
    buf = b""
    while b"data: " not in buf or b"\n\n" not in buf.split(b"data: ", 1)[1]:
        chunk = s.recv(4096)
        check(chunk, f"the stream closed before its first event: {buf!r}")
        buf += chunk
    line = buf.split(b"data: ", 1)[1].split(b"\n\n", 1)[0]
    return s, json.loads(line)


def disconnect(g1, servers, prefix):
    s, first = sse_request(g1.port, {"model": "serve-model", "prompt": "A long story",
                                     "max_tokens": CTX - 16, "temperature": 0, "stream": True})
    rid = first["id"]
    s.close()
    kc = sc.Client(servers, prefix)
    try:
        kc.wait([rid], timeout_s=60)
        f = kc.streams[rid].final
        check(f.finish_reason == "cancelled" and f.completion_tokens < CTX - 16,
              f"disconnected client: final {f.finish_reason} after {f.completion_tokens} tokens")
        say(f"a client gone after its first chunk: cancelled after {f.completion_tokens} tokens")
    finally:
        kc.close()


def busy(g2):
    s, _ = sse_request(g2.port, {"model": "serve-model", "prompt": "A long story",
                                 "max_tokens": CTX - 16, "temperature": 0, "stream": True})
    try:
        status, headers, data = g2.raw("POST", "/v1/completions",
                                       body=json.dumps({"model": "serve-model", "prompt": "x"}),
                                       headers={"Content-Type": "application/json"})
        check(status == 429 and headers.get("Retry-After") == "1",
              f"second request past --max-inflight 1: {status} {headers} {data!r}")
        say("past --max-inflight: 429 with Retry-After")
    finally:
        s.close()


def metrics(g1):
    from prometheus_client.parser import text_string_to_metric_families
    status, headers, data = g1.raw("GET", "/metrics")
    check(status == 200 and headers.get("Content-Type", "").startswith("text/plain"),
          f"/metrics: {status} {headers}")
    fams = {f.name: f for f in text_string_to_metric_families(data.decode())}
    req = {(s.labels["endpoint"], s.labels["status"]): s.value
           for s in fams["looptune_http_requests"].samples if s.name.endswith("_total")}
    # 1 warm-up + 2 prompts x (whole + streamed) + seeded = 6 completions; 1 disconnected
    check(req.get(("completions", "200"), 0) == 7, f"completions answered 200: {req}")
    check(req.get(("chat", "200"), 0) == 2, f"chat answered 200: {req}")
    check(req.get(("completions", "404"), 0) == 1 and req.get(("completions", "400"), 0) == 2
          and req.get(("completions", "413"), 0) == 1, f"errors counted: {req}")
    ttft = [s for s in fams["looptune_time_to_first_token_seconds"].samples if s.name.endswith("_count")]
    check(ttft and ttft[0].value >= 8, f"time to first token observed {ttft}")
    toks = [s.value for s in fams["looptune_completion_tokens"].samples]
    check(toks and toks[0] > 100, f"completion tokens {toks}")
    say(f"/metrics parsed: {len(fams)} families, requests {req}")


if __name__ == "__main__":
    main()

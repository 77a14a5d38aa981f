"""`looptune serve --http` alone: gateway, worker and the embedded broker in
one process, the one-command way to try the service, driven by the openai
client: a greedy completion equals `looptune run --temp 0`, whole and
streamed; a chat completion answers; /v1/models lists the model under its
name; SIGTERM ends it with exit code 0. Then the command lines' errors: a
one-line message and exit code 1 for each bad flag of `gateway` and of
`serve --http`."""
import os
import re
import signal
import subprocess
import time

import serve_client as sc
from serve_client import check, say
import dist_harness as h
from test_broker_gateway import ref_text


def one_process(model):
    log = os.path.join(h.work_dir(), "serve-http.log")
    f = open(log, "w")
    p = subprocess.Popen([h.binary(), "serve", "-m", model, "--http", "127.0.0.1:0", "--max-batch", "2"],
                         stdout=f, stderr=subprocess.STDOUT)
    f.close()
    try:
        port, deadline = None, time.time() + 60
        while port is None and time.time() < deadline and p.poll() is None:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", open(log).read())
            port = int(m[1]) if m else None
            time.sleep(0.1)
        check(port, f"serve --http did not start:\n{open(log).read()}")
        import openai
        c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_retries=0, timeout=120)
        check([m.id for m in c.models.list()] == ["serve-model"], "models")
        _, want = ref_text(model, "Once upon a time", 24, "--temp", "0")
        got = c.completions.create(model="serve-model", prompt="Once upon a time", max_tokens=24,
                                   temperature=0).choices[0].text
        check(got == want, f"serve --http: {got!r}\n  looptune run: {want!r}")
        streamed = "".join(ch.choices[0].text for ch in c.completions.create(
            model="serve-model", prompt="Once upon a time", max_tokens=24, temperature=0, stream=True)
            if ch.choices)
        check(streamed == want, f"streamed: {streamed!r}")
        # greedy: a sampled first token (a seed drawn by the gateway) may end it at once
        r = c.chat.completions.create(model="serve-model", max_tokens=8, temperature=0,
                                      messages=[{"role": "user", "content": "Hello"}])
        check(r.choices[0].message.role == "assistant" and r.usage.completion_tokens > 0, f"chat: {r}")
        say(f"serve --http on the embedded broker: {len(want)} characters equal to looptune run's")
    finally:
        p.send_signal(signal.SIGTERM)
        code = p.wait(60)
    check(code == 0, f"serve --http exited {code}:\n{open(log).read()[-2000:]}")


def cli_errors(model):
    cases = [
        (["gateway"], "no broker"),
        (["gateway", "--brokers", "127.0.0.1:9", "--http", "nope"], "bad --http 'nope'"),
        (["gateway", "--brokers", "127.0.0.1:9", "--timeout", "0"], "bad --timeout '0'"),
        (["gateway", "--brokers", "127.0.0.1:9", "--max-inflight", "x"], "bad --max-inflight 'x'"),
        (["gateway", "--brokers", "127.0.0.1:9", "--api-key", ""], "bad --api-key ''"),
        (["gateway", "--brokers", "127.0.0.1:9", "--api-key-file", "/nonexistent/key"], "/nonexistent/key"),
        (["gateway", "--brokers", "127.0.0.1:9", "--model", ""], "bad --model ''"),
        (["gateway", "--brokers", "127.0.0.1:9", "extra"], "unexpected argument 'extra'"),
        (["gateway", "--brokers", "127.0.0.1:9", "--bogus"], "--bogus"),
        (["serve", "-m", model, "--api-key", "k"], "give --http HOST:PORT too"),
        (["serve", "-m", model, "--http", "127.0.0.1"], "bad --http '127.0.0.1'"),
        (["serve", "-m", model, "--http", "999.1.1.1:80"], "not an IPv4 address"),
    ]
    for args, want in cases:
        p = subprocess.run([h.binary(), *args], capture_output=True, text=True, timeout=60)
        lines = [x for x in p.stderr.splitlines() if not x.startswith("looptune: warning") and
                 not x.startswith("looptune: info") and "embedded" not in x]
        check(p.returncode == 1 and len(lines) == 1 and want in lines[0],
              f"{args}: exit {p.returncode}, stderr {p.stderr!r}, want one line with {want!r}")
    p = subprocess.run([h.binary(), "gateway", "--help"], capture_output=True, text=True, timeout=30)
    check(p.returncode == 0 and "--api-key-file" in p.stdout and "/v1/completions" in p.stdout,
          f"gateway --help: {p.returncode} {p.stdout[:200]!r}")
    say(f"{len(cases)} bad command lines refused with one line each")


def main():
    model = sc.make_model(h.work_dir())
    one_process(model)
    cli_errors(model)
    say("ok")


if __name__ == "__main__":
    main()

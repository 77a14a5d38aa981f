"""`looptune serve` on the real broker, against `looptune run`.

One worker (4 KV slots for each of its two models) serves requests
produced at once: one for the second model (equal to `looptune run` on
that model), two greedy ones
whose token ids and text must equal `looptune run --temp 0` on the same
prompt, a greedy one whose prompt of some 160 tokens is prefilled in three
chunks between the others' decode steps (equal to run's one batch too), a sampled one (temperature, top-p, top-k, repetition penalty, seed)
that must equal `looptune run` with the same settings and seed; a long one
cancelled once its first tokens are read (final record "cancelled", far
fewer tokens than asked); one whose deadline has passed ("deadline", no
token), one whose deadline falls mid-generation ("deadline", some tokens);
one with a stop text taken from the greedy reference (ends "stop" at the
token that completes it), a chat request (equal to `looptune run` on its
chatml rendering); one naming a model the worker does not serve and one whose prompt is longer
than the context (final records "error" with the reason). Every stream read
with read_committed has indices 0..n-1 once and a final record whose usage
counts them. The worker leaves on SIGTERM with exit code 0."""
import time

import serve_client as sc
from serve_client import check, say
import dist_harness as h

CTX = 512
CHAT = [("system", "Be brief."), ("user", "Tell me a story.")]
CHAT_TEXT = ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nTell me a story."
             "<|im_end|>\n<|im_start|>assistant\n")  # chatml: the model has no template
LONG_PROMPT = " ".join(["the little dog ran to the park and"] * 20)  # about 160 tokens


def main():
    servers = h.bootstrap()
    prefix = h.unique_prefix("serve")
    wdir = h.work_dir()
    model = sc.make_model(wdir)
    other = sc.make_model(wdir, seed=9, name="other.gguf")
    # a short sleep per step, so the long requests last seconds
    srv = sc.Server(model, servers, prefix, "s1", wdir,
                    ["-m", f"second={other}", "--max-batch", "4", "--ctx", str(CTX), "--threads", "1",
                     "--test-step-delay-ms", "4"]).start()
    client = sc.Client(servers, prefix)
    try:
        run(client, srv, model, other)
    finally:
        code = srv.stop()
        client.close()
    check(code == 0, f"serve exited with {code}:\n{srv.text()[-3000:]}")
    log = srv.text()
    check("serve: " in log and " completed " in log, f"no summary line:\n{log[-2000:]}")
    say("ok")


def run(client, srv, model, other):
    sc.wait_holding([srv])
    # a first request, so the transactions are set up before the figures count
    client.request("warm-up", prompt="Hi", max_tokens=1)
    client.wait(["warm-up"], timeout_s=60)
    sampled = dict(temp=0.8, top_p=0.9, top_k=40, repeat_penalty=1.1, seed=42)
    # a stop text: two printable bytes of the greedy reference, first found 10 bytes in or more
    g1_ids, g1_out = sc.run_reference(model, "Once upon a time", 40, "--temp", "0")
    gen = g1_out[len("Once upon a time"):-1]
    stop = next((gen[i:i + 2].decode() for i in range(10, len(gen) - 1)
                 if all(0x41 <= c <= 0x7a for c in gen[i:i + 2]) and gen.find(gen[i:i + 2]) == i),
                None)
    check(stop, f"no stop text to take from {gen!r}")
    client.request("st1", prompt="Once upon a time", max_tokens=40, temp=0.0, stop=[stop])
    client.request("c1", messages=CHAT, max_tokens=15, temp=0.0)
    client.request("m2", prompt="Once upon a time", max_tokens=20, temp=0.0, model="second")
    client.request("g1", prompt="Once upon a time", max_tokens=40, temp=0.0)
    client.request("g2", prompt="The little dog ran", max_tokens=25)  # no sampling: greedy
    client.request("g3", prompt=LONG_PROMPT, max_tokens=20, temp=0.0)  # prefilled in 3 chunks
    client.request("s1", prompt="Once upon a time", max_tokens=30, **sampled)
    client.request("long", prompt="A long story", max_tokens=CTX - 8, ignore_eos=True)
    client.request("late", prompt="Too late", max_tokens=10, deadline_ns=time.time_ns() - 10**9)
    client.request("short-deadline", prompt="Soon over", max_tokens=CTX - 8, ignore_eos=True,
                   deadline_ns=time.time_ns() + 1_000_000_000)
    client.request("unknown", prompt="Hello", model="no-such-model")
    client.request("too-long", ids=[1] + [300] * (CTX + 10))

    # cancel the long one once its first tokens are committed
    t0 = time.time()
    while time.time() - t0 < 60:
        client.poll(0.2)
        if client.streams["long"].tokens:
            break
    check(client.streams["long"].tokens, "the long request streamed nothing in 60 s")
    n_at_cancel, t_cancel = len(client.streams["long"].tokens), time.time()
    client.cancel("long")
    rids = ["g1", "g2", "g3", "s1", "st1", "c1", "m2", "long", "late", "short-deadline", "unknown", "too-long"]
    client.wait(["long"], timeout_s=60)
    say(f"long: {n_at_cancel} tokens read when the cancel was sent, "
        f"{len(client.streams['long'].tokens)} in all, final read "
        f"{time.time() - t_cancel:.2f} s after the cancel")
    client.wait(rids, timeout_s=120)
    client.poll(1.0)  # anything committed after a final (nothing should be)

    for rid in rids:
        s = client.streams[rid]
        check(s.complete() and len(s.tokens) == s.final.index,  # one serving: nothing past it
              f"{rid}: indices {sorted(s.tokens)[:5]}... do not run 0..{s.final.index - 1}")
        check(s.final.completion_tokens == len(s.tokens),
              f"{rid}: usage says {s.final.completion_tokens} tokens, {len(s.tokens)} read")
        name = {"unknown": "", "m2": "second"}.get(rid, "serve-model")
        check(s.final.worker == "s1" and s.final.model == name,
              f"{rid}: final from worker {s.final.worker!r}, model {s.final.model!r}")
    check(client.duplicates == 0, f"{client.duplicates} duplicate tokens from one live worker")

    # greedy and seeded sampling against looptune run
    for rid, prompt, n, flags in [("g1", "Once upon a time", 40, ["--temp", "0"]),
                                  ("g2", "The little dog ran", 25, ["--temp", "0"]),
                                  ("g3", LONG_PROMPT, 20, ["--temp", "0"]),
                                  ("m2", "Once upon a time", 20, ["--temp", "0"]),
                                  ("s1", "Once upon a time", 30,
                                   ["--temp", "0.8", "--top-p", "0.9", "--top-k", "40",
                                    "--repeat-penalty", "1.1", "--seed", "42"])]:
        ref_ids, ref_out = sc.run_reference(other if rid == "m2" else model, prompt, n, *flags)
        s = client.streams[rid]
        got = s.ids()
        if len(ref_ids) < n:  # run stopped at an end-of-generation token, which it prints
            want, reason = ref_ids[:-1], "stop"
        else:
            want, reason = ref_ids, "length"
        check(got == want, f"{rid}: serve gave {got}\n  looptune run gave {want}")
        check(s.final.finish_reason == reason, f"{rid}: finish {s.final.finish_reason}, want {reason}")
        text = b"".join(s.tokens[i][1] for i in range(len(s.tokens)))
        check(ref_out.startswith(prompt.encode()) and ref_out.endswith(b"\n"),
              f"{rid}: run's output is not the prompt's echo and the text: {ref_out!r}")
        check(text == ref_out[len(prompt):-1],
              f"{rid}: text {text!r}\n  looptune run: {ref_out[len(prompt):-1]!r}")
        check(s.final.prompt_tokens > (100 if rid == "g3" else 0), f"{rid}: prompt usage "
              f"{s.final.prompt_tokens}")
        say(f"{rid}: {len(got)} tokens equal looptune run's ({reason})")

    st = client.streams["st1"]
    text = b"".join(st.tokens[i][1] for i in range(len(st.tokens)))
    last = st.tokens[len(st.tokens) - 1][1] if st.tokens else b""
    check(st.final.finish_reason == "stop" and stop.encode() in text
          and stop.encode() not in text[:len(text) - len(last)] and st.ids() == g1_ids[:len(st.ids())],
          f"st1: stop {stop!r}: {st.final.finish_reason} after {text!r}")
    ref, _ = sc.run_reference(model, CHAT_TEXT, 15, "--temp", "0")
    c1 = client.streams["c1"]
    check(c1.ids() == (ref[:-1] if len(ref) < 15 else ref),
          f"c1: chat stream {c1.ids()} != looptune run's on the rendered conversation {ref}")
    say(f"st1 stopped at {stop!r} after {len(st.tokens)} tokens; the chat request equals run's "
        "on its chatml rendering")

    check(client.streams["m2"].ids() != client.streams["g1"].ids()[:20],
          "the second model gave the first model's stream: the request's model was not used")
    long = client.streams["long"]
    check(long.final.finish_reason == "cancelled" and len(long.tokens) < CTX - 8,
          f"long: finish {long.final.finish_reason} after {len(long.tokens)} tokens")
    late = client.streams["late"]
    check(late.final.finish_reason == "deadline" and not late.tokens,
          f"late: finish {late.final.finish_reason} with {len(late.tokens)} tokens")
    sd = client.streams["short-deadline"]
    check(sd.final.finish_reason == "deadline" and 0 < len(sd.tokens) < CTX - 8,
          f"short-deadline: finish {sd.final.finish_reason} after {len(sd.tokens)} tokens")
    unk = client.streams["unknown"].final
    check(unk.finish_reason == "error" and "unknown model 'no-such-model'" in unk.error
          and "serve-model, second" in unk.error, f"unknown: {unk.finish_reason}: {unk.error}")
    tl = client.streams["too-long"].final
    check(tl.finish_reason == "error" and "longer than the context" in tl.error
          and tl.prompt_tokens == CTX + 11, f"too-long: {tl.finish_reason}: {tl.error}")
    say(f"cancelled after {len(long.tokens)} tokens, deadline after {len(sd.tokens)}; "
        f"errors: {unk.error!r}, {tl.error!r}")


if __name__ == "__main__":
    main()

"""looptune chat end to end, and run's prompt file. Two user turns piped into a greedy chat
on a random-weight model with the Llama 2 vocabulary: each turn's prefilled text is what the
real Jinja template (rendered by jinja2) gives, the first the whole conversation, the second
only what follows the first reply; and every token of the second reply is the greedy choice of
a `looptune run` fed every token the cache holds (turn 1, reply 1, turn 2, reply 2 so far), so
the cache continued is the conversation. (Within 1e-3 of the largest logit, whose spread is
about 1: the model has f32 weights, so prefill batches and one-token decode steps differ in float
rounding alone, while a random model's flat logits could still let an exact replay take the
other of two near-equal tokens; a cache one position off moves them by 0.01-0.1.)
EOF and /exit end with status 0; bad flags give one-line errors. A reply, and a run, end at an
end-of-generation token, which is neither printed nor fed again. run -f FILE gives what -p
gives with the file's text; -p with -f, a missing file and an empty file are errors."""

import json
import os

import numpy as np
import shutil
import subprocess
import sys

BIN = os.environ["LT_BIN"]
DATA = os.environ["LT_DATA_DIR"]
WORK = os.path.join(os.environ.get("LT_WORK_DIR", "/tmp"), "chat_e2e_%d" % os.getpid())
JINJA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "reference", "chat_jinja.py")

passed = failed = 0


def check(ok, name, detail=""):
    global passed, failed
    print("%s %s%s" % ("PASS" if ok else "FAIL", name,
                       (": " + str(detail)) if detail and not ok else ""))
    if ok:
        passed += 1
    else:
        failed += 1


def run(args, stdin=None, timeout=300):
    return subprocess.run([BIN] + [str(a) for a in args], input=stdin, capture_output=True,
                          text=True, timeout=timeout)


# Meta's Llama 2 chat template and OpenHermes' ChatML, as published
LLAMA2 = ("{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set "
          "system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
          "{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if "
          "(message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation"
          " roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
          "loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + "
          "system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = "
          "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + "
          "'[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ "
          "' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}")
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
          "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|im_start|>assistant\\n' }}{% endif %}")


def jinja(template, messages):
    req = {"template": template, "messages": messages, "bos_token": "<s>", "eos_token": "</s>",
           "add_generation_prompt": True}
    p = subprocess.run([sys.executable, JINJA], input=json.dumps(req).encode(),
                       capture_output=True, timeout=60)
    if p.returncode == 4:
        return None
    return p.stdout.decode("utf-8")


def turns(stderr):
    """The (text, ids) of every turn --verbose-prompt reported."""
    out, text = [], None
    for ln in stderr.splitlines():
        if ln.startswith("prompt: "):
            text = json.loads(ln[len("prompt: "):])
        elif ln.startswith("prompt ids: "):
            out.append((text, [int(x) for x in ln[len("prompt ids: "):].split(",")]))
    return out


os.makedirs(WORK, exist_ok=True)
MODEL = os.path.join(WORK, "m.gguf")
p = run(["model-gen", "--preset", "stories15M", "--dtype", "f32", "--seed", "7", "--vocab-file",
         os.path.join(DATA, "llama2-tokenizer.bin"), "-o", MODEL])
check(p.returncode == 0, "model-gen with the Llama 2 vocabulary", p.stderr)

N = 8
SYSTEM, U1, U2 = "Be brief.", "Hello there", "How are you?"
have_jinja = jinja(CHATML, [{"role": "user", "content": "x"}]) is not None
if not have_jinja:
    print("skipped: the template texts against jinja2: the jinja2 package is not installed "
          "(scripts/deps.sh installs it)")
for name, template in (("llama2", LLAMA2), ("chatml", CHATML)):
    base = ["chat", "-m", MODEL, "--chat-template", name, "--system", SYSTEM, "--temp", "0",
            "-n", N, "--verbose-prompt", "--no-warm-start"]
    p = run(base + ["--print-ids"], stdin="%s\n%s\n" % (U1, U2))
    check(p.returncode == 0, name + ": two piped turns, then EOF: status 0", p.stderr)
    replies = [[int(x) for x in ln.split()] for ln in p.stdout.splitlines() if ln.strip()]
    t = turns(p.stderr)
    check(len(replies) == 2 and len(t) == 2, name + ": two replies, two prefills",
          (p.stdout, p.stderr))
    if len(replies) != 2 or len(t) != 2:
        continue
    (text1, ids1), (text2, ids2) = t
    r1, r2 = replies
    check(ids1[0] == 1 and ids1.count(1) == 1, name + ": turn 1 starts with BOS, once", ids1)
    if have_jinja:
        sysu = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": U1}]
        want1 = jinja(template, sysu)
        if want1.startswith("<s>"):
            want1 = want1[3:]  # the vocabulary adds BOS: the template's own gives way (llama.cpp)
        check(text1 == want1, name + ": turn 1 is the template's whole conversation",
              "%r vs %r" % (text1, want1))
        full = jinja(template, sysu + [{"role": "assistant", "content": "R-E-P-L-Y"},
                                       {"role": "user", "content": U2}])
        want2 = full[full.index("R-E-P-L-Y") + len("R-E-P-L-Y"):]
        check(text2 == want2, name + ": turn 2 prefills only what follows the reply",
              "%r vs %r" % (text2, want2))
    # reply 1 hit -n (a random model rarely ends a turn): its last token opens turn 2's prefill
    check(len(r1) == N and ids2[0] == r1[-1] and 1 not in ids2[:1],
          name + ": reply 1's last token is fed at the start of turn 2", (r1, ids2))
    # the cache: turn 1, reply 1 but its last token, turn 2; a fresh run fed it and reply 2
    # (teacher forcing) takes every token of reply 2 as its greedy choice
    cache = ids1 + r1[:-1] + ids2
    dump = os.path.join(WORK, "logits.bin")
    q = run(["run", "-m", MODEL, "--prompt-ids", ",".join(map(str, cache + r2[:-1])), "-n", 1,
             "--temp", "0", "--print-ids", "--no-warm-start", "--dump-logits", dump])
    ok = q.returncode == 0
    gaps = []
    if ok:
        logits = np.fromfile(dump, dtype=np.float32).reshape(-1, 32000)
        for j, tok in enumerate(r2):
            row = logits[len(cache) - 1 + j]
            gaps.append(float(row.max() - row[tok]))
    check(ok and len(gaps) == N and max(gaps) <= 1e-3,
          name + ": every token of reply 2 is the greedy choice over what the cache holds",
          (gaps, q.stderr[-300:]))

# the model's own template (tokenizer.chat_template, written by the gguf package's
# gguf_new_metadata): recognised without --chat-template; one of a style looptune does not
# render is a one-line error that names it and asks for --chat-template
def with_template(template, out):
    p = subprocess.run([sys.executable, "-m", "gguf.scripts.gguf_new_metadata", "--force",
                        "--chat-template", template, MODEL, out], capture_output=True, text=True)
    return p.returncode == 0


if subprocess.run([sys.executable, "-c", "import gguf"], capture_output=True).returncode:
    print("skipped: models with their own chat template: the gguf package is not installed")
else:
    own = os.path.join(WORK, "own.gguf")
    check(with_template(LLAMA2, own), "a model with Llama 2's template")
    p = run(["chat", "-m", own, "--temp", "0", "-n", 2, "--verbose-prompt", "--no-warm-start"],
            stdin=U1 + "\n")
    t = turns(p.stderr)
    check(p.returncode == 0 and len(t) == 1 and t[0][0] == "[INST] %s [/INST]" % U1,
          "the model's template is taken for llama2", p.stderr)
    gemma = ("{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\\n' + "
             "message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}")
    check(with_template(gemma, own), "a model with Gemma's template")
    p = run(["chat", "-m", own, "--no-warm-start"], stdin="hi\n")
    check(p.returncode == 1 and "'gemma'" in p.stderr and "--chat-template NAME" in p.stderr and
          len(p.stderr.strip().splitlines()) == 1, "a template looptune does not render: one line",
          p.stderr)
    p = run(["chat", "-m", own, "--chat-template", "chatml", "-n", 2, "--no-warm-start"],
            stdin="hi\n")
    check(p.returncode == 0, "--chat-template overrides the model's", p.stderr)

# /exit ends the chat; the text path prints a line per reply
p = run(["chat", "-m", MODEL, "--chat-template", "chatml", "--temp", "0", "-n", "4",
         "--no-warm-start"], stdin="hi\n/exit\nnever read\n")
check(p.returncode == 0 and len(p.stdout.splitlines()) == 1, "/exit ends after one reply",
      (p.returncode, p.stdout, p.stderr))
# a model without a template: llama.cpp's default, chatml
p = run(["chat", "-m", MODEL, "--temp", "0", "-n", 2, "--verbose-prompt", "--no-warm-start"],
        stdin="hi\n")
t = turns(p.stderr)
check(p.returncode == 0 and len(t) == 1 and
      t[0][0] == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
      "no template: chatml", p.stderr)
# empty input: nothing to answer, status 0; no "> " prompt without a terminal
p = run(["chat", "-m", MODEL, "--no-warm-start"], stdin="")
check(p.returncode == 0 and p.stdout == "", "EOF at once: status 0, no output",
      (p.stdout, p.stderr))
# a sampled chat with every sampler flag, seeded: the same twice
args = ["chat", "-m", MODEL, "--chat-template", "zephyr", "-n", "6", "--temp", "0.9", "--top-k",
        "40", "--top-p", "0.95", "--min-p", "0.05", "--repeat-penalty", "1.1", "--repeat-last-n",
        "-1", "--seed", "5", "--print-ids", "--no-warm-start"]
a, b = run(args, stdin="one\ntwo\n"), run(args, stdin="one\ntwo\n")
check(a.returncode == 0 and a.stdout == b.stdout and len(a.stdout.splitlines()) == 2,
      "a seeded sampled chat repeats", (a.stdout, b.stdout, a.stderr))
p = run(["chat", "--help"])
check(p.returncode == 0 and "--chat-template" in p.stdout and "--top-k" in p.stdout and
      "mistral-v7" in p.stdout, "chat --help")

for args, word in ((["chat"], "no model"),
                   (["chat", "-m", MODEL, "--chat-template", "nonsense"], "chatml, llama2"),
                   (["chat", "-m", MODEL, "--chat-template", "{{ messages }}"],
                    "--chat-template NAME"),
                   (["chat", "-m", MODEL, "--top-k", "x"], "top-k"),
                   (["chat", "-m", MODEL, "--min-p", "2"], "min-p"),
                   (["chat", "-m", MODEL, "--repeat-penalty", "-1"], "repeat-penalty"),
                   (["chat", "-m", MODEL, "--repeat-last-n", "-5"], "repeat-last-n"),
                   (["chat", "-m", MODEL, "--temp", "hot"], "temp"),
                   (["chat", "-m", MODEL, "-n", "0"], "-n"),
                   (["chat", "-m", MODEL, "--ctx", "100000"], "context"),
                   (["chat", "-m", MODEL, "--bogus"], "bogus"),
                   (["chat", "-m", os.path.join(WORK, "missing.gguf")], "missing.gguf"),
                   (["chat", "-m", os.path.join(DATA, "stories260K.bin")], "tokenizer")):
    p = run(args, stdin="hi\n")
    check(p.returncode > 0 and word in p.stderr and len(p.stderr.strip().splitlines()) == 1,
          "%s: one-line error naming %s" % (" ".join(args[2:]) or "chat", word), p.stderr)
# a conversation longer than the context ends with one line and a non-zero status
p = run(["chat", "-m", MODEL, "--ctx", "40", "--temp", "0", "-n", "4", "--no-warm-start"],
        stdin="hello\n" * 20)
check(p.returncode == 1 and "context" in p.stderr and len(p.stderr.strip().splitlines()) == 1,
      "a conversation past the context: one line", p.stderr)

# the end of generation. A repetition penalty below 1 multiplies the positive logits of the
# tokens in its window (here the prompt's last few) by 1/R: with R = 0.001 the window's token of
# largest positive logit is the greedy choice. Prompts are picked, from the model's own logits,
# whose choice so is EOS (id 2): then run stops there, and chat ends the reply there, prints no
# text for it, and the next turn starts with the template's end of turn, not a pending token.
EOS, R = 2, 0.001


def last_logits(ids):
    dump = os.path.join(WORK, "last.bin")
    q = run(["run", "-m", MODEL, "--prompt-ids", ",".join(map(str, ids)), "-n", 1, "--temp", "0",
             "--ignore-eos", "--print-ids", "--no-warm-start", "--dump-logits", dump])
    return np.fromfile(dump, dtype=np.float32).reshape(-1, 32000)[-1] if q.returncode == 0 else None


def penalised_choice(row, window):
    row = row.astype(np.float64).copy()
    for t in set(window):
        row[t] = row[t] / R if row[t] > 0 else row[t] * R
    return int(row.argmax())


found = None
for x in range(300, 340):
    row = last_logits([1, x, EOS])
    if row is not None and penalised_choice(row, [EOS]) == EOS:
        found = x
        break
if found is None:
    print("skipped: run's end of generation: no prompt found whose penalised choice is EOS")
else:
    pen = ["--temp", "0", "--repeat-penalty", R, "--repeat-last-n", 1, "--print-ids",
           "--no-warm-start"]
    a = run(["run", "-m", MODEL, "--prompt-ids", "1,%d,%d" % (found, EOS), "-n", 6] + pen)
    b = run(["run", "-m", MODEL, "--prompt-ids", "1,%d,%d" % (found, EOS), "-n", 6, "--ignore-eos"]
            + pen)
    check(a.returncode == 0 and a.stdout.split() == [str(EOS)],
          "run stops after an end-of-generation token", (a.stdout, a.stderr[-200:]))
    check(b.returncode == 0 and len(b.stdout.split()) == 6 and b.stdout.split()[0] == str(EOS),
          "run --ignore-eos goes on past it", b.stdout)

K = 6  # the window: "</s>" and " [/INST]" at the end of a llama2 turn
chat_eog = None
for word in ["</s>"] + ["%s </s>" % w for w in ("a", "b", "c", "yes", "no", "ok", "why", "hi",
                                                 "go", "up", "so", "it", "me", "we", "do", "be")]:
    p = run(["chat", "-m", MODEL, "--chat-template", "llama2", "--temp", "0", "-n", 1,
             "--verbose-prompt", "--print-ids", "--no-warm-start"], stdin=word + "\n")
    t = turns(p.stderr)
    if p.returncode or len(t) != 1 or EOS not in t[0][1][-K:]:
        continue
    row = last_logits(t[0][1])
    if row is not None and penalised_choice(row, t[0][1][-K:]) == EOS:
        chat_eog = word
        break
if chat_eog is None:
    print("skipped: chat's end of generation: no message found whose penalised choice is EOS")
else:
    args = ["chat", "-m", MODEL, "--chat-template", "llama2", "--temp", "0", "-n", 4,
            "--repeat-penalty", R, "--repeat-last-n", K, "--verbose-prompt", "--no-warm-start"]
    pi = run(args + ["--print-ids"], stdin="%s\nnext\n" % chat_eog)
    pt = run(args, stdin="%s\nnext\n" % chat_eog)
    t = turns(pi.stderr)
    lines = pi.stdout.splitlines()
    check(pi.returncode == 0 and lines[:1] == [str(EOS)],
          "chat: a reply ends at an end-of-generation token", (pi.stdout, pi.stderr[-300:]))
    check(pt.returncode == 0 and pt.stdout.splitlines()[:1] == [""],
          "chat: the end of generation is not printed", pt.stdout)
    if have_jinja and len(t) == 2:
        full = jinja(LLAMA2, [{"role": "user", "content": chat_eog},
                              {"role": "assistant", "content": "R-E-P-L-Y"},
                              {"role": "user", "content": "next"}])
        check(t[1][0] == full[full.index("R-E-P-L-Y") + len("R-E-P-L-Y"):],
              "chat: after an end of generation the next turn opens with the template's end "
              "of turn", t[1][0])
    check(len(t) == 2 and t[1][1][0] != EOS and t[1][1][1] == EOS,
          "chat: the end of generation is not fed again as a pending token", t)

# run -f FILE
prompt = "Once upon a time, in a small town,"
path = os.path.join(WORK, "prompt.txt")
with open(path, "w") as f:
    f.write(prompt + "\n")  # one trailing newline dropped, as llama.cpp does
gen = ["-n", "12", "--temp", "0", "--print-ids", "--no-warm-start"]
pp = run(["run", "-m", MODEL, "-p", prompt] + gen)
pf = run(["run", "-m", MODEL, "-f", path] + gen)
check(pp.returncode == 0 and pf.returncode == 0 and pp.stdout == pf.stdout and pp.stdout.strip(),
      "run -f FILE = run -p with the file's text", (pp.stdout, pf.stdout, pf.stderr))
empty = os.path.join(WORK, "empty.txt")
open(empty, "w").close()
for args, word in ((["-f", path, "-p", prompt], "-p, -f"),
                   (["-f", os.path.join(WORK, "nope.txt")], "nope.txt"),
                   (["-f", empty], "empty"),
                   (["-p", "x", "--top-k", "-1"], "top-k")):
    p = run(["run", "-m", MODEL] + args + gen)
    check(p.returncode > 0 and word in p.stderr and len(p.stderr.strip().splitlines()) == 1,
          "run %s: one-line error naming %s" % (" ".join(args), word), p.stderr)

shutil.rmtree(WORK, ignore_errors=True)
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed or not passed else 0)

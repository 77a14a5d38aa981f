"""A small client of `looptune serve` for the tests: produces Requests and
Cancels on <prefix>requests (confluent_kafka, the wire schema compiled from
proto/looptune.proto), reads <prefix>completions with
isolation.level=read_committed, keeps each (request id, token index) once
and the first final record of each request, and reassembles the streams.
Also the pieces the serve tests share: `looptune serve` processes and
`looptune run` references."""
import os
import re
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "dist"))
import dist_harness as h  # noqa: E402  (broker address, schema, fail/check/say)

fail, check, say = h.fail, h.check, h.say


def make_model(wdir, seed=1, name="serve-model.gguf"):
    """A random-weight model of the stories260K shape with a synthetic vocabulary (GGUF)."""
    path = os.path.join(wdir, name)
    p = subprocess.run([h.binary(), "model-gen", "--preset", "stories260K", "--dtype", "f32",
                        "--seed", str(seed), "-o", path], capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0, f"looptune model-gen failed: {p.stderr}")
    return path


class Stream:
    """One request's completion as a reader sees it after de-duplication."""

    def __init__(self):
        self.tokens = {}   # index -> (token, piece bytes)
        self.final = None  # the first final Completion read
        self.records = 0   # token records read (duplicates included)
        self.seen = 0      # tokens read (duplicates included)
        self.workers = set()
        self.arrived = {}  # index -> time.time() when the token was first read

    def length(self):
        """The completion's token count: the final record's index (a serving that went
        further before it died, then a cancel or deadline that came sooner the second time,
        can leave tokens past it), else the tokens read so far."""
        return self.final.index if self.final is not None else len(self.tokens)

    def ids(self):
        return [self.tokens[i][0] for i in range(self.length())]

    def complete(self):
        """Whether indices 0..n-1 are all here (n: the final's count)."""
        return self.final is not None and all(i in self.tokens for i in range(self.final.index))

    def text(self):
        return b"".join(self.tokens[i][1] for i in range(self.length())).decode(
            "utf-8", errors="replace")


class Client:
    def __init__(self, servers, prefix):
        from confluent_kafka import Consumer, Producer, TopicPartition
        self.pb = h.proto()
        self.prefix = prefix
        self.producer = Producer({"bootstrap.servers": servers, "linger.ms": 0})
        self.consumer = Consumer({"bootstrap.servers": servers,
                                  "group.id": f"serve-client-{uuid.uuid4()}",
                                  "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest",
                                  "isolation.level": "read_committed"})
        self.servers = servers
        self.streams = {}
        self.duplicates = 0
        self.finals = 0
        self._tp = TopicPartition
        self._assigned = False

    def _envelope(self):
        env = self.pb.Envelope()
        env.version = 1
        env.time_ns = time.time_ns()
        return env

    def request(self, rid, prompt=None, ids=None, messages=None, max_tokens=0, temp=None,
                top_p=0.0, top_k=0, min_p=0.0, repeat_penalty=0.0, repeat_last_n=0, seed=0,
                model="", deadline_ns=0, stop=(), ignore_eos=False):
        env = self._envelope()
        r = env.request
        r.request_id = rid
        r.model = model
        if prompt is not None:
            r.prompt = prompt
        if ids is not None:
            r.prompt_ids.extend(ids)
        for role, content in messages or ():
            m = r.messages.add()
            m.role, m.content = role, content
        if temp is not None:
            s = r.sampling
            s.temperature, s.top_p, s.top_k, s.min_p = temp, top_p, top_k, min_p
            s.repeat_penalty, s.repeat_last_n, s.seed = repeat_penalty, repeat_last_n, seed
        r.max_tokens = max_tokens
        r.deadline_ns = deadline_ns
        r.stop.extend(stop)
        r.ignore_eos = ignore_eos
        self._send(rid, env)
        self.streams.setdefault(rid, Stream())

    def cancel(self, rid):
        env = self._envelope()
        env.cancel.request_id = rid
        self._send(rid, env)

    def _send(self, key, env):
        self.producer.produce(self.prefix + "requests", key=key.encode(),
                              value=env.SerializeToString())
        self.producer.flush(10)

    def _assign(self):
        topic = self.prefix + "completions"
        deadline = time.time() + 30
        while True:
            md = self.consumer.list_topics(topic, timeout=10)
            t = md.topics.get(topic)
            if t is not None and t.error is None and t.partitions:
                break
            if time.time() > deadline:
                fail(f"topic {topic} never appeared")
            time.sleep(0.2)
        self.consumer.assign([self._tp(topic, p, 0) for p in t.partitions])
        self._assigned = True

    def poll(self, timeout_s=0.2):
        """Reads what has been committed; returns the records read."""
        if not self._assigned:
            self._assign()
        n = 0
        end = time.time() + timeout_s
        while True:
            m = self.consumer.poll(max(0.0, min(0.1, end - time.time())))
            if m is None:
                if time.time() >= end:
                    return n
                continue
            if m.error():
                continue
            n += 1
            env = self.pb.Envelope()
            env.ParseFromString(m.value())
            check(env.WhichOneof("payload") == "completion",
                  f"a {env.WhichOneof('payload')} on the completions topic")
            c = env.completion
            check(m.key().decode() == c.request_id, "completion key is not its request id")
            s = self.streams.setdefault(c.request_id, Stream())
            s.workers.add(c.worker)
            if c.finish_reason:
                self.finals += 1
                if s.final is None:
                    s.final = c
                continue
            check(len(c.tokens) == len(c.pieces), "tokens and pieces differ in count")
            s.records += 1
            for k, (tok, piece) in enumerate(zip(c.tokens, c.pieces)):
                i = c.index + k
                s.seen += 1
                if i in s.tokens:
                    self.duplicates += 1
                    check(s.tokens[i] == (tok, piece),
                          f"{c.request_id}: token {i} read twice with different values: "
                          f"{s.tokens[i]} then {(tok, piece)}")
                else:
                    s.tokens[i] = (tok, piece)
                    s.arrived[i] = time.time()

    def wait(self, rids, timeout_s=120):
        """Polls until every request of rids has its final record."""
        deadline = time.time() + timeout_s
        while time.time() < deadline:
            self.poll(0.3)
            if all(self.streams.get(r) and self.streams[r].final for r in rids):
                return
        missing = [r for r in rids if not (self.streams.get(r) and self.streams[r].final)]
        fail(f"no final record for {missing} in {timeout_s} s")

    def close(self):
        self.consumer.close()


class Server(h.Process):
    """A `looptune serve` process."""

    def __init__(self, model, servers, prefix, wid, wdir, extra=()):
        super().__init__([h.binary(), "serve", "-m", model, "--brokers", servers,
                          "--topic-prefix", prefix, "--instance-id", wid, *extra],
                         os.path.join(wdir, f"serve-{wid}.log"))
        self.wid = wid


def check_streams(client, sent, refs):
    """Every stream sent (request id: key of refs) complete at its length and equal to
    refs[key], token for token."""
    for rid, key in sent.items():
        s = client.streams[rid]
        check(s.complete() and s.final.finish_reason == "length",
              f"{rid}: incomplete or ended {s.final.finish_reason if s.final else None}")
        check(s.ids() == refs[key], f"{rid} ({key!r}) differs from looptune run:\n"
              f"  serve {s.ids()[:40]}\n  run   {refs[key][:40]}")


def applied_changes(log):
    """What a worker's tuning summaries list as changed: {key: {param: (old, new)}} (the
    lines "  matvec q8_0:128x512:batch: rows_per_task 4 -> 128 unroll 1 -> 2")."""
    out = {}
    for line in log.splitlines():
        m = re.match(r"  (\w+) (\S+):((?: \w+ -?\d+ -> -?\d+)+)$", line)
        if m:
            out.setdefault(m.group(2), {}).update(
                {n: (a, b) for n, a, b in re.findall(r" (\w+) (-?\d+) -> (-?\d+)", m.group(3))})
    return out


def kept_configs(optimizer_log):
    """Every configuration the optimizer kept, by key: {key: [{param: value}, ...]} (the lines
    "optimizer: run 46d136ef matvec q8_0:128x512:batch: kept rows_per_task=128,...: ..."),
    and each key's incumbent from its closing table (the row "matvec q8_0:128x512:batch
    exploring 1.000x 1 rows_per_task=4,..."): an aborted trial sends a worker back to it."""
    out = {}
    for key, params in re.findall(r"optimizer: run \w+ \w+ (\S+): kept (\S+): ", optimizer_log):
        out.setdefault(key, []).append(dict(kv.split("=") for kv in params.split(",")))
    for key, params in re.findall(r"(?m)^\w+ +(\S+) +\w+ +[0-9.]+x +\d+ +(\S+=\S+)$",
                                  optimizer_log):
        out.setdefault(key, []).append(dict(kv.split("=") for kv in params.split(",")))
    return out


class Optimizer(h.Process):
    """A `looptune optimizer` process on the serve tests' topics."""

    def __init__(self, servers, prefix, wdir, seed):
        super().__init__([h.binary(), "optimizer", "--brokers", servers, "--topic-prefix", prefix,
                          "--group", prefix + "opt", "--seed", str(seed)],
                         os.path.join(wdir, prefix + "optimizer.log"))


def wait_holding(servers_, timeout_s=60):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if all(s.holding() > 0 for s in servers_):
            return
        time.sleep(0.1)
    fail(f"serve group did not settle: {[(s.wid, s.holding()) for s in servers_]}; logs:\n"
         + "\n".join(s.text()[-2000:] for s in servers_))


def run_reference(model, prompt, n, *sampling):
    """`looptune run` on the same model and prompt: (token ids, stdout bytes)."""
    base = [h.binary(), "run", "-m", model, "-p", prompt, "-n", str(n), "--no-warm-start",
            *sampling]
    p = subprocess.run(base + ["--print-ids"], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"looptune run failed: {p.stderr}")
    ids = [int(x) for x in p.stdout.split()]
    p = subprocess.run(base, capture_output=True, timeout=120)
    check(p.returncode == 0, f"looptune run failed: {p.stderr}")
    return ids, p.stdout

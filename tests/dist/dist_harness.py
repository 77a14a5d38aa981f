"""Shared pieces of the distributed-job tests on the real broker: the broker's
address, the wire schema compiled from proto/looptune.proto (grpc_tools, no
protoc binary), worker processes, `looptune submit` runs and the figures they
print, a reader and a writer of raw records (confluent-kafka), and an
independent CRC32C (bitwise, Castagnoli polynomial) to check chunks with."""
import importlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

NAME = os.path.basename(sys.argv[0]).removesuffix(".py")


def fail(msg):
    print(f"{NAME}: FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def say(msg):
    print(f"{NAME}: {msg}", flush=True)


def bootstrap():
    b = os.environ.get("LT_KAFKA_BOOTSTRAP")
    if b:
        return b
    path = os.environ.get("LT_KAFKA_BOOTSTRAP_FILE")
    if path and os.path.exists(path):
        with open(path) as f:
            return f.readline().strip()
    fail("no Kafka broker: set LT_KAFKA_BOOTSTRAP or run under ctest")


def binary():
    b = os.environ.get("LT_BIN")
    check(b and os.path.exists(b), "LT_BIN must name the looptune binary (ctest sets it)")
    return b


def work_dir():
    base = os.environ.get("LT_WORK_DIR") or tempfile.gettempdir()
    os.makedirs(base, exist_ok=True)
    return tempfile.mkdtemp(prefix=f"{NAME}-", dir=base)


def unique_prefix(tag):
    return f"t{tag}-{os.getpid()}-{int(time.time() * 1000) % 10**8}."


_pb2 = None


def proto():
    """looptune_pb2, compiled once from LT_PROTO_DIR."""
    global _pb2
    if _pb2:
        return _pb2
    try:
        from grpc_tools import protoc
        import grpc_tools
    except ImportError:
        fail("grpcio-tools is missing (scripts/deps.sh installs it)")
    proto_dir = os.environ.get("LT_PROTO_DIR")
    check(proto_dir, "LT_PROTO_DIR must be set (ctest sets it)")
    out = tempfile.mkdtemp(prefix="lt-pb2-")
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    rc = protoc.main(["protoc", f"-I{proto_dir}", f"-I{include}", f"--python_out={out}",
                      os.path.join(proto_dir, "looptune.proto")])
    check(rc == 0, f"protoc could not compile looptune.proto (exit {rc})")
    sys.path.insert(0, out)
    _pb2 = importlib.import_module("looptune_pb2")
    return _pb2


def crc32c(data):
    """CRC32C, reflected polynomial 0x82F63B78, bitwise: slow and plainly right."""
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


class Process:
    """A looptune process (args: its command line); stdout and stderr go to
    the log file, a marker line before each start."""

    def __init__(self, args, log):
        self.args = list(args)
        self.log = log
        self.proc = None
        self.starts = 0

    def start(self):
        self.starts += 1
        f = open(self.log, "a")
        f.write(f"---- start {self.starts}\n")
        f.flush()
        self.proc = subprocess.Popen(self.args, stdout=f, stderr=subprocess.STDOUT)
        f.close()
        return self

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self, timeout=30):
        """SIGTERM; the process finishes its work in hand and leaves. Returns its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def holding(self):
        """Partitions this run of the process holds, from its log (-1: no assignment yet)."""
        run = self.text().split(f"---- start {self.starts}\n")[-1]
        held = re.findall(r"\((\d+) held now\)", run)
        return int(held[-1]) if held else -1

    def text(self):
        with open(self.log) as f:
            return f.read()


class Worker(Process):
    """A `looptune worker` process."""

    def __init__(self, servers, prefix, wid, wdir, extra=()):
        super().__init__([binary(), "worker", "--brokers", servers, "--topic-prefix", prefix,
                          "--instance-id", wid, *extra], os.path.join(wdir, f"worker-{wid}.log"))
        self.wid = wid


def wait_assigned(workers, timeout_s=60):
    """Until every worker holds some partitions (the group has settled)."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if all(w.holding() > 0 for w in workers):
            return
        time.sleep(0.1)
    fail(f"the workers' group did not settle in {timeout_s} s: "
         f"{[(w.wid, w.holding()) for w in workers]}")


JOB_RE = re.compile(
    r"job (?P<job>\S+): (?P<tasks>\d+) tasks, (?P<applied>\d+) applied, (?P<duplicates>\d+) "
    r"duplicates dropped, (?P<retries>\d+) retries, (?P<failed>\d+) failed results, "
    r"(?P<dead>\d+) dead, (?P<chunks>\d+) chunks sent, (?P<rejected>\d+) records rejected, "
    r"(?P<workers>\d+) workers seen, (?P<seconds>[0-9.]+) s")
BYTES_RE = re.compile(r"bytes over Kafka: .*\((?P<bytes_sent>\d+), (?:(?P<bytes_plain>\d+), )?"
                      r"(?P<bytes_received>\d+) bytes\)")
PANELS_RE = re.compile(r"panels: by (?P<panel_by>rows|cols), (?P<panels_sent>\d+) sent, "
                       r"(?P<panel_refs>\d+) referenced, (?P<need_panel>\d+) NEED_PANEL answers, "
                       r"(?P<panel_resends>\d+) tasks sent again")
VERIFY_RE = re.compile(r"verify: max \|C - C_local\| = (?P<diff>\S+), (?P<differ>\d+) of "
                       r"(?P<total>\d+) elements differ")


def submit_args(servers, prefix, *args):
    return [binary(), "submit", "matmul", "--brokers", servers, "--topic-prefix", prefix,
            "--worker-timeout", "60", *args]


def parse_job(out):
    m = JOB_RE.search(out)
    check(m, f"no job summary in the output:\n{out}")
    d = {k: (v if k == "job" else float(v) if k == "seconds" else int(v))
         for k, v in m.groupdict().items()}
    m = BYTES_RE.search(out)
    if m:
        d.update({k: int(v) for k, v in m.groupdict().items() if v is not None})
    p = PANELS_RE.search(out)
    if p:
        d.update({k: v if k == "panel_by" else int(v) for k, v in p.groupdict().items()})
    v = VERIFY_RE.search(out)
    if v:
        d["verify_diff"] = float(v["diff"])
        d["verify_differ"] = int(v["differ"])
    return d


def submit(servers, prefix, *args, timeout=300):
    """Runs `looptune submit matmul`; returns (exit code, figures or None, stdout, stderr)."""
    p = subprocess.run(submit_args(servers, prefix, *args), capture_output=True, text=True,
                       timeout=timeout)
    figures = parse_job(p.stdout) if JOB_RE.search(p.stdout) else None
    return p.returncode, figures, p.stdout, p.stderr


def jobs(servers, prefix, *extra):
    """`looptune jobs`: {job: {kind, state, tasks, done, extra, failed, dead, attempts}}, and
    the count of workers alive."""
    p = subprocess.run([binary(), "jobs", "--brokers", servers, "--topic-prefix", prefix, *extra],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"looptune jobs failed ({p.returncode}): {p.stderr}")
    lines = p.stdout.splitlines()
    check(lines and lines[0].startswith("JOB"), f"looptune jobs: no header:\n{p.stdout}")
    rows, alive = {}, None
    for line in lines[1:]:
        if line.startswith("workers alive: "):
            alive = int(line.split(": ")[1])
            continue
        f = line.split()
        if len(f) >= 9 and not line.startswith(" "):
            rows[f[0]] = dict(kind=f[1], state=f[2], tasks=int(f[3]), done=int(f[4]),
                              extra=int(f[5]), failed=int(f[6]), dead=int(f[7]),
                              attempts=int(f[8]))
    check(alive is not None, f"looptune jobs: no workers line:\n{p.stdout}")
    return rows, alive


def job_bytes(servers, topic, job):
    """Bytes of the values of job's records on topic (key "job/..."), counted here."""
    return sum(len(v) for _, _, k, v in records(servers, topic)
               if k and k.startswith(job.encode() + b"/"))


def records(servers, topic, timeout_s=30, committed_only=True):
    """Every record of topic now (to the high watermarks), as (partition, offset, key, value)."""
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": servers, "group.id": f"py-read-{os.getpid()}",
                  "enable.auto.commit": False,
                  "isolation.level": "read_committed" if committed_only else "read_uncommitted"})
    md = c.list_topics(topic, timeout=10)
    parts = list(md.topics[topic].partitions)
    ends = {}
    for p in parts:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
        ends[p] = (lo, hi)
    c.assign([TopicPartition(topic, p, ends[p][0]) for p in parts])
    out, deadline = [], time.time() + timeout_s
    done = {p for p in parts if ends[p][0] >= ends[p][1]}
    while len(done) < len(parts) and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            # read_committed stops at the last stable offset: past the records
            # of aborted transactions there may be nothing more to return
            for p in parts:
                pos = c.position([TopicPartition(topic, p)])[0].offset
                if pos >= ends[p][1]:
                    done.add(p)
            continue
        if m.error():
            continue
        out.append((m.partition(), m.offset(), m.key(), m.value()))
        if m.offset() + 1 >= ends[m.partition()][1]:
            done.add(m.partition())
    c.close()
    return out


def produce(servers, topic, items):
    """items: (key bytes, value bytes) pairs, produced and flushed."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": servers})
    for k, v in items:
        p.produce(topic, key=k, value=v)
    check(p.flush(30) == 0, f"records to {topic} were not delivered")


def envelope(**payload):
    pb = proto()
    env = pb.Envelope(version=1, time_ns=time.time_ns())
    for name, msg in payload.items():
        getattr(env, name).CopyFrom(msg)
    return env.SerializeToString()


def decode(value):
    """The Envelope in value; an empty one if it does not parse (foreign bytes)."""
    from google.protobuf.message import DecodeError
    env = proto().Envelope()
    try:
        env.ParseFromString(value)
    except DecodeError:
        return proto().Envelope()
    return env


BROKER_SH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts",
                         "kafka", "broker.sh")


class Broker:
    """A broker (or cluster) of broker.sh in a directory of its own."""

    def __init__(self, wdir, name, nodes=1):
        self.dir = os.path.join(wdir, name)
        self.nodes = nodes
        self.servers = None
        self.starting = None

    def sh(self, *args, timeout=300):
        """Runs broker.sh ARGS --dir DIR; returns the seconds it took."""
        t0 = time.time()
        p = subprocess.run([BROKER_SH, *args, "--dir", self.dir], capture_output=True, text=True,
                           timeout=timeout)
        check(p.returncode == 0, f"broker.sh {' '.join(args)} failed ({p.returncode}): "
                f"{p.stderr.strip()}")
        return time.time() - t0

    def start(self):
        """Starts it in the background; ready() waits for it."""
        self.starting = subprocess.Popen(
            [BROKER_SH, "start", "--nodes", str(self.nodes), "--dir", self.dir],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return self

    def ready(self):
        out, err = self.starting.communicate(timeout=600)
        m = re.search(r"^BOOTSTRAP=(\S+)$", out, re.M)
        check(self.starting.returncode == 0 and m and len(m[1].split(",")) == self.nodes,
                f"broker.sh start --nodes {self.nodes} failed ({self.starting.returncode}): "
                f"{err.strip()}")
        self.servers = m[1]
        return self

    def stop(self):
        if self.starting and self.starting.poll() is None:
            self.starting.kill()
            self.starting.wait()
        subprocess.run([BROKER_SH, "stop", "--dir", self.dir], capture_output=True, timeout=120)

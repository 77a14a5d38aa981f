#!/usr/bin/env python3
"""Another language reads looptune's topics with the .proto alone.

kafka_samples (C) produces samples of every message kind to a fresh topic on
the real test broker and prints each as looptune's JSON. This test compiles
proto/looptune.proto with grpc_tools' protoc (no protoc binary needed),
consumes the records with confluent-kafka in a consumer group, decodes them
with the pure-Python protobuf runtime, and checks that
  - every record decodes, in production order, to the kind expected;
  - protobuf's own JSON of each record equals looptune's JSON of it;
  - values recomputed here from the sample formulas match.
Needs: the broker (LT_KAFKA_BOOTSTRAP or LT_KAFKA_BOOTSTRAP_FILE),
LT_KAFKA_SAMPLES, LT_PROTO_DIR; Python packages protobuf, grpcio-tools,
confluent-kafka (scripts/deps.sh installs them)."""
import importlib
import json
import os
import subprocess
import sys
import tempfile
import time

N = 3  # samples per kind
KINDS = ["host", "run_start", "run_end", "kernel_window", "call_sample", "control",
         "config", "task", "result", "trial", "call_samples"]


def fail(msg):
    print(f"test_proto_python: {msg}", file=sys.stderr)
    sys.exit(1)


def bootstrap():
    b = os.environ.get("LT_KAFKA_BOOTSTRAP")
    if b:
        return b
    path = os.environ.get("LT_KAFKA_BOOTSTRAP_FILE")
    if path and os.path.exists(path):
        with open(path) as f:
            return f.readline().strip()
    fail("no Kafka broker: set LT_KAFKA_BOOTSTRAP or run under ctest")


def compile_proto(proto_dir, out_dir):
    try:
        from grpc_tools import protoc
    except ImportError:
        fail("grpcio-tools is missing (pip install grpcio-tools; scripts/deps.sh does it)")
    import grpc_tools
    include = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    rc = protoc.main(["protoc", f"-I{proto_dir}", f"-I{include}", f"--python_out={out_dir}",
                      os.path.join(proto_dir, "looptune.proto")])
    if rc != 0:
        fail(f"protoc could not compile {proto_dir}/looptune.proto (exit {rc})")
    sys.path.insert(0, out_dir)
    return importlib.import_module("looptune_pb2")


def consume(servers, topic, want, timeout_s=60):
    try:
        from confluent_kafka import Consumer, KafkaError
    except ImportError:
        fail("confluent-kafka is missing (pip install confluent-kafka; scripts/deps.sh does it)")
    c = Consumer({"bootstrap.servers": servers, "group.id": f"py-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got, deadline = [], time.time() + timeout_s
    try:
        while len(got) < want and time.time() < deadline:
            m = c.poll(1.0)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                fail(f"consumer error: {m.error()}")
            got.append(m)
        if got:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def check_formulas(env, kind, i):
    """Values recomputed from the sample formulas (tests/kafka/samples.h)."""
    assert env.version == 1
    assert env.time_ns == 1700000000000000000 + i * 1000003
    if kind == "host":
        assert env.host.cpu_model.endswith("ünïcode"), env.host.cpu_model
        assert list(env.host.isa_flags) == ["avx2", "fma", "avx512f"]
        assert env.host.cores == 2 + i
    elif kind == "run_start":
        assert env.run_start.run_id == f"run-{i:04d}"
        assert [k.kernel for k in env.run_start.kernels] == ["matvec", "matmul"]
        assert env.run_start.kernels[1].params[2].value == -3 * (i + 3)
    elif kind == "run_end":
        assert env.run_end.delivery_failures == 2**64 - 1 - i
        assert env.run_end.decode_s == 2.5e-3 * (i + 1)
    elif kind == "kernel_window":
        w = env.kernel_window
        assert (w.count, w.p90_ns, w.max_ns) == (1000 + i, 12000 + i, 400000 + i)
        assert w.counters[1].value == 2 * 123456789012 + i
        assert w.contention == (i % 2 == 1)
        assert w.candidate_id == ("cand-\u00fc" if i % 3 else ""), w.candidate_id
        assert (w.on_candidate, w.pair) == (i % 3 == 1, 7 * i)
        assert (w.steps, w.total_ns) == (32 + i, (1000 + i) * (10000 + i))
        assert w.critical_ns == 1000 * i
    elif kind == "call_sample":
        assert env.call_sample.end_ns - env.call_sample.start_ns == 4321
    elif kind == "call_samples":
        b = env.call_samples.samples
        assert len(b) == i % 3 + 1, len(b)
        assert env.call_samples.run_id != "" and all(c.run_id == "" for c in b)
        assert [c.kernel for c in b] == ["rmsnorm", "matvec", "matvec"][:len(b)]
        assert all(c.end_ns - c.start_ns == 999 + j and c.token == 10 * i + j
                   for j, c in enumerate(b))
    elif kind == "control":
        assert env.control.candidate_id == f'cand-{i} "quoted"\t\\'
    elif kind == "config":
        assert env.config.stats.gflops == 120.0 + i
        assert env.config.stats.trials == 24 + i
        assert env.config.stats.converged == (i % 2 == 1)
    elif kind == "task":
        assert env.task.spec == bytes((j * 37 + i) % 256 for j in range(8))
    elif kind == "result":
        assert env.result.data == bytes([255, 254, 253, 252, 251])
        assert env.result.status == (2 if i % 2 else 1)
    elif kind == "trial":
        assert env.trial.params[1].choice == ("relu" if i % 2 else "gelu")
        assert env.trial.status == 3


def main():
    samples = os.environ.get("LT_KAFKA_SAMPLES")
    proto_dir = os.environ.get("LT_PROTO_DIR")
    if not samples or not proto_dir:
        fail("LT_KAFKA_SAMPLES and LT_PROTO_DIR must be set (ctest sets them)")
    servers = bootstrap()
    topic = f"py-samples-{os.getpid()}-{int(time.time() * 1000) % 10**9}"

    produced = subprocess.run([samples, servers, topic, str(N)], capture_output=True, text=True,
                              timeout=120)
    if produced.returncode != 0:
        fail(f"kafka_samples failed: {produced.stderr.strip()}")
    c_json = [json.loads(line) for line in produced.stdout.splitlines()]
    if len(c_json) != N * len(KINDS):
        fail(f"kafka_samples printed {len(c_json)} lines, expected {N * len(KINDS)}")

    from google.protobuf import json_format
    with tempfile.TemporaryDirectory() as out_dir:
        pb = compile_proto(proto_dir, out_dir)
        records = consume(servers, topic, len(c_json))
        if len(records) != len(c_json):
            fail(f"consumed {len(records)} records, expected {len(c_json)}")
        failures = 0
        for n, (m, want) in enumerate(zip(records, c_json)):
            i, kind = divmod(n, len(KINDS))
            kind = KINDS[kind]
            env = pb.Envelope.FromString(m.value())
            got_kind = env.WhichOneof("payload")
            mine = json_format.MessageToDict(env, preserving_proto_field_name=True)
            try:
                assert got_kind == kind, f"record {n}: kind {got_kind}, expected {kind}"
                assert mine == want, \
                    f"record {n} ({kind}): protobuf's JSON {mine} != looptune's {want}"
                check_formulas(env, kind, i)
            except AssertionError as e:
                failures += 1
                print(f"FAIL record {n} ({kind} {i}): {e}", file=sys.stderr)
        if failures:
            fail(f"{failures} of {len(records)} records did not match")
    print(f"{len(records)} records of {len(KINDS)} kinds decoded with the .proto alone: "
          f"{len(records)} passed, 0 failed")


if __name__ == "__main__":
    main()

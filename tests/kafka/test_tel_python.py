#!/usr/bin/env python3
"""A run's telemetry read from the real broker with the .proto alone.

Runs `looptune run --telemetry kafka` (stories260K, a fresh topic prefix),
then consumes the telemetry topic with confluent-kafka and decodes every
record with the pure-Python protobuf runtime (proto/looptune.proto compiled
by grpc_tools at test time), and checks:
  - the run's records in order: host, run start, windows, run end; all keyed
    by the run id the summary prints;
  - one window record per node per window, each node counted once per
    decode step, window counts of --telemetry-window-tokens steps;
  - the figures agree with the run summary (tokens, records emitted) and
    with themselves (gb_s = bytes * count / total_ns, quantiles ordered,
    count * min_ns <= total_ns <= count * max_ns, steps = the window's);
  - a run without a trial leaves every window untagged (candidate_id "");
  - `looptune tail` prints exactly protobuf's JSON of every record.
Needs what tests/kafka/test_proto_python.py needs (its helpers are reused)."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_proto_python import bootstrap, compile_proto, consume, fail  # noqa: E402

STEPS, WINDOW = 40, 8


def main():
    binary, proto_dir = os.environ.get("LT_BIN"), os.environ.get("LT_PROTO_DIR")
    data = os.environ.get("LT_DATA_DIR")
    if not binary or not proto_dir or not data:
        fail("LT_BIN, LT_PROTO_DIR and LT_DATA_DIR must be set (ctest sets them)")
    servers = bootstrap()
    prefix = f"pytel-{os.getpid()}-{int(time.time() * 1000) % 10**9}."
    topic = prefix + "telemetry"
    run = subprocess.run(
        [binary, "run", "-m", os.path.join(data, "stories260K.bin"), "--prompt-ids", "1,403,407",
         "-n", str(STEPS + 1), "--temp", "0", "--print-ids", "--telemetry", "kafka", "--brokers",
         servers, "--topic-prefix", prefix, "--telemetry-window-tokens", str(WINDOW)],
        capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        fail(f"looptune run failed: {run.stderr.strip()}")
    m = re.search(r"telemetry run ([0-9a-f]{32}) to .*: (\d+) windows; (\d+) records emitted, "
                  r"(\d+) dropped, (\d+) delivery failures", run.stderr)
    d = re.search(r"decode\s+(\d+) tokens in ([0-9.]+) ms", run.stderr)
    if not m or not d:
        fail(f"no telemetry summary in: {run.stderr.strip()}")
    run_id, windows, emitted = m.group(1), int(m.group(2)), int(m.group(3))
    assert int(d.group(1)) == STEPS, d.group(0)
    assert windows == STEPS // WINDOW and m.group(4) == "0" and m.group(5) == "0", m.group(0)

    from google.protobuf import json_format
    with tempfile.TemporaryDirectory() as out_dir:
        pb = compile_proto(proto_dir, out_dir)
        records = consume(servers, topic, emitted)
        if len(records) != emitted:
            fail(f"consumed {len(records)} records, the run emitted {emitted}")
        envs = [pb.Envelope.FromString(r.value()) for r in records]
        assert all(r.key().decode() == run_id for r in records), "a record not keyed by the run id"
        kinds = [e.WhichOneof("payload") for e in envs]
        assert kinds[0] == "host" and kinds[1] == "run_start" and kinds[-1] == "run_end", kinds[:3]
        assert set(kinds[2:-1]) == {"kernel_window"}, set(kinds[2:-1])
        start, end = envs[1].run_start, envs[-1].run_end
        # the nodes, then the whole-step tunables (node ""): looped, each
        # regime's thread count
        nodes = [k.node for k in start.kernels if k.node]
        steps_of = [k for k in start.kernels if not k.node]
        assert len(set(nodes)) == len(nodes), "node labels are not unique"
        assert [k.kernel for k in steps_of] == ["looped", "threads", "threads", "threads"], steps_of
        assert [k.shape.rsplit(":", 1)[1] for k in steps_of] == ["decode", "decode", "prefill",
                                                                  "batch"]
        assert start.kernels[len(nodes)].node == "", "the tunables follow the nodes"
        assert start.run_id == run_id and end.run_id == run_id
        assert start.host.triad_gb_s > 0 and start.host.peak_gflops > 0
        assert end.tokens == STEPS and end.dropped_records == 0, end

        counts = {n: 0 for n in nodes}
        key_of = {k.node: k.shape for k in start.kernels}
        assert all(k.config_shape == k.shape for k in start.kernels), "two keys for one node"
        per_window = {}
        prefills = 0
        for e in envs[2:-1]:
            w = e.kernel_window
            assert w.run_id == run_id
            if w.kernel == "step" and w.shape == steps_of[2].shape:
                # the prompt's prefill step: a window of its own, per prompt token
                assert w.node == "" and w.count == 1 and w.steps == 3 and w.window == 0, w
                assert w.total_ns == w.median_ns > 0, w
                prefills += 1
                continue
            per_window[w.window] = per_window.get(w.window, 0) + 1
            if w.kernel == "step":  # one per window over whole steps, the tunables' key
                assert w.node == "" and w.shape == steps_of[0].shape, w
                assert w.count == WINDOW and w.steps == WINDOW, w
                continue
            counts[w.node] += w.count
            assert w.count == WINDOW, (w.node, w.window, w.count)
            assert w.min_ns <= w.median_ns <= w.p90_ns <= w.max_ns
            assert w.t_start_ns < w.t_end_ns
            assert 0 <= w.wait_share <= 1
            # the node's one key, a decode call's: "q8_0:768x288:decode[:ia=...]"
            assert w.shape == key_of[w.node] and ":decode" in w.shape, w.shape
            assert "task-clock" in w.available_counters, list(w.available_counters)
            assert w.steps == WINDOW, (w.node, w.window, w.steps)
            assert w.min_ns * w.count <= w.total_ns <= w.max_ns * w.count, w
            assert w.total_ns > 0, w
            assert 0 < w.critical_ns <= w.total_ns, w
            node_ns = w.bytes * w.count / w.gb_s  # 1 GB/s = 1 byte/ns
            assert abs(node_ns - w.total_ns) <= 1e-9 * w.total_ns + 1e-6, (node_ns, w.total_ns)
            if w.flops > 0:
                assert abs(w.flops * w.count / w.gflops - w.total_ns) <= 1e-6 * w.total_ns
            assert w.candidate_id == "" and not w.on_candidate and w.pair == 0, w
        assert all(c == STEPS for c in counts.values()), counts
        assert prefills == 1, prefills
        assert per_window == {i: len(nodes) + 1 for i in range(windows)}, per_window

        tail = subprocess.run([binary, "tail", topic, "--from-beginning", "--brokers", servers,
                               "--max", str(emitted), "--timeout-ms", "20000"],
                              capture_output=True, text=True, timeout=120)
        if tail.returncode != 0:
            fail(f"looptune tail failed: {tail.stderr.strip()}")
        lines = tail.stdout.splitlines()
        assert len(lines) == emitted, (len(lines), emitted)
        for i, (line, e) in enumerate(zip(lines, envs)):
            mine = json_format.MessageToDict(e, preserving_proto_field_name=True)
            assert json.loads(line) == mine, f"record {i}: tail {line} != protobuf {mine}"
            if e.WhichOneof("payload") == "kernel_window":
                # proto3 JSON leaves zeros out: a window's steps and total_ns are never zero
                w = json.loads(line)["kernel_window"]
                prefill = w["shape"] == steps_of[2].shape  # its steps: the prompt's tokens
                assert int(w["steps"]) == (3 if prefill else WINDOW), line
                assert int(w["total_ns"]) > 0, line
    print(f"run {run_id}: {emitted} records decoded with the .proto alone; {windows} windows of "
          f"{len(nodes)} nodes, every node counted {STEPS} times")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        fail(f"mismatch: {e}")

#!/usr/bin/env python3
"""Readiness probe for the test Kafka broker, standard library only: asks the
broker at HOST:PORT for its API versions, then for cluster metadata, and exits 0
once the metadata lists at least BROKERS brokers (1 by default: the node has
joined its own KRaft quorum and serves clients; a cluster's size: every node
is registered and unfenced) and, if CLUSTER_ID is given, names that cluster
(so another broker that happens to hold the port is not taken for ours).
Exit 1 with one line on stderr otherwise.

    probe.py HOST:PORT [CLUSTER_ID [BROKERS]]"""
import socket
import struct
import sys

API_METADATA, API_VERSIONS = 3, 18
METADATA_VERSION = 4  # the oldest version Kafka 4 still serves; non-flexible encoding


def request(sock, api_key, version, corr, body):
    client = b"looptune-probe"
    header = struct.pack(">hhih", api_key, version, corr, len(client)) + client
    msg = header + body
    sock.sendall(struct.pack(">i", len(msg)) + msg)
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    resp = recv_exact(sock, size)
    if struct.unpack(">i", resp[:4])[0] != corr:
        raise RuntimeError("response correlation id does not match the request")
    return resp[4:]


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise RuntimeError("connection closed by the broker")
        buf += chunk
    return buf


def probe(host, port, timeout):
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.settimeout(timeout)
        r = request(s, API_VERSIONS, 0, 1, b"")
        err, n = struct.unpack(">hi", r[:6])
        if err:
            raise RuntimeError(f"ApiVersions error code {err}")
        ranges = {}
        for i in range(n):
            key, lo, hi = struct.unpack(">hhh", r[6 + 6 * i:12 + 6 * i])
            ranges[key] = (lo, hi)
        lo, hi = ranges.get(API_METADATA, (0, -1))
        if not lo <= METADATA_VERSION <= hi:
            raise RuntimeError(f"broker serves Metadata v{lo}..v{hi}, "
                               f"probe speaks v{METADATA_VERSION}")
        # topics = null (all), allow_auto_topic_creation = false
        r = request(s, API_METADATA, METADATA_VERSION, 2, struct.pack(">ib", -1, 0))
        n_brokers = struct.unpack(">i", r[4:8])[0]  # after throttle_time_ms
        at = 8
        for _ in range(max(n_brokers, 0)):  # node_id, host, port, rack
            at += 4
            at += 2 + struct.unpack(">h", r[at:at + 2])[0]
            at += 4
            rack = struct.unpack(">h", r[at:at + 2])[0]
            at += 2 + max(rack, 0)
        n = struct.unpack(">h", r[at:at + 2])[0]
        cluster = r[at + 2:at + 2 + n].decode() if n >= 0 else ""
        return n_brokers, cluster


def main():
    if len(sys.argv) not in (2, 3, 4) or ":" not in sys.argv[1] or \
            (len(sys.argv) == 4 and not sys.argv[3].isdigit()):
        print("usage: probe.py HOST:PORT [CLUSTER_ID [BROKERS]]", file=sys.stderr)
        return 2
    host, port = sys.argv[1].rsplit(":", 1)
    want = int(sys.argv[3]) if len(sys.argv) == 4 else 1
    try:
        n, cluster = probe(host, int(port), 5.0)
    except (OSError, RuntimeError, struct.error) as e:
        print(f"probe {sys.argv[1]}: {e}", file=sys.stderr)
        return 1
    if n < want:
        print(f"probe {sys.argv[1]}: metadata lists {max(n, 0)} of {want} brokers yet"
              if want > 1 else f"probe {sys.argv[1]}: metadata lists no broker yet",
              file=sys.stderr)
        return 1
    if len(sys.argv) >= 3 and cluster != sys.argv[2]:
        print(f"probe {sys.argv[1]}: cluster {cluster}, not {sys.argv[2]}: another broker holds "
              "the port", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

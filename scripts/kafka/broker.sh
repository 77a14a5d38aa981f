#!/usr/bin/env bash
# The test Kafka broker: a real Apache Kafka 4 node (KRaft, broker and
# controller in one JVM) on 127.0.0.1, in a temporary directory.
#
#   broker.sh start [--dir DIR] [--timeout S] [--host ADDR]
#                                               resolve jars (once), start, wait, print BOOTSTRAP=
#   broker.sh stop  [--dir DIR]                 kill it, remove its data
#   broker.sh status [--dir DIR]                print BOOTSTRAP= if it runs, exit 1 if not
#
# DIR (default .cache/kafka/run) holds the pid, the bootstrap address and the
# broker's log; the data directory is a fresh mktemp directory per start. Jars
# come from Maven Central via scripts/kafka/pom.xml into .cache/kafka/jars and
# are reused while the pom is unchanged. --host (default 127.0.0.1) is the
# address clients connect to: one of this machine's own, such as the host end
# of a veth pair that a test gives a worker in its own network namespace.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${LT_KAFKA_CACHE:-$root/.cache/kafka}
jars=$cache/jars

die() { echo "broker.sh: $*" >&2; exit 1; }

cmd=${1:-}
[ -n "$cmd" ] && shift
dir=$cache/run
timeout_s=90
host=127.0.0.1
while [ $# -gt 0 ]; do
    case $1 in
    --dir) dir=${2:?--dir needs a value}; shift 2 ;;
    --timeout) timeout_s=${2:?--timeout needs a value}; shift 2 ;;
    --host) host=${2:?--host needs a value}; shift 2 ;;
    *) die "unknown option '$1' (usage: broker.sh start|stop|status [--dir DIR] [--timeout S] [--host ADDR])" ;;
    esac
done

# ---- jars -------------------------------------------------------------------
# Re-resolved only when the pom changes (its checksum is kept beside the jars).
resolve_jars() {
    local sum
    sum=$(sha256sum "$here/pom.xml" | cut -d' ' -f1)
    if [ -f "$jars/.pom.sha256" ] && [ "$(cat "$jars/.pom.sha256")" = "$sum" ]; then
        return 0
    fi
    command -v mvn >/dev/null || die "mvn not found: run scripts/deps.sh (needs maven)"
    echo "broker.sh: resolving Apache Kafka jars into $jars (once)" >&2
    rm -rf "$jars.tmp"
    mkdir -p "$cache"
    if ! timeout 900 mvn -q -B -f "$here/pom.xml" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$jars.tmp" >"$cache/mvn.log" 2>&1; then
        die "maven could not resolve the Kafka jars; see $cache/mvn.log"
    fi
    echo "$sum" >"$jars.tmp/.pom.sha256"
    rm -rf "$jars"
    mv "$jars.tmp" "$jars"
}

# Two distinct free ports (broker on --host, controller on loopback), held
# open together while the kernel picks them so they differ.
free_ports() {
    python3 - "$host" <<'PY'
import socket, sys
socks = []
for addr in (sys.argv[1], "127.0.0.1"):
    s = socket.socket()
    try:
        s.bind((addr, 0))
    except OSError as e:
        sys.exit(f"cannot listen on {addr}: {e.strerror} (--host must be an address of this machine)")
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

running_pid() {
    [ -f "$dir/pid" ] || return 1
    local pid
    pid=$(cat "$dir/pid")
    kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}

do_stop() {
    local pid
    if pid=$(running_pid); then
        kill -TERM "$pid" 2>/dev/null || true
        # Data is thrown away, so a slow controlled shutdown is not waited for.
        for _ in $(seq 1 100); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
    fi
    if [ -f "$dir/datadir" ]; then
        local d
        d=$(cat "$dir/datadir")
        case $d in /tmp/*|"${TMPDIR:-/tmp}"/*) rm -rf "$d" ;; esac
    fi
    rm -f "$dir/pid" "$dir/bootstrap" "$dir/datadir"
}

java_bin() {
    if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then echo "$JAVA_HOME/bin/java"
    else command -v java; fi
}

do_start() {
    local java
    java=$(java_bin) || die "java not found: run scripts/deps.sh (Kafka 4 needs Java 17+)"
    local jv
    jv=$("$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
    [ "${jv:-0}" -ge 17 ] || die "Kafka 4 needs Java 17+, $java is Java ${jv:-?}; set JAVA_HOME"
    command -v python3 >/dev/null || die "python3 not found: run scripts/deps.sh"
    resolve_jars
    mkdir -p "$dir"
    do_stop # a broker left over from an interrupted run
    # The free ports are picked before Kafka binds them: if another process
    # took one meanwhile, try once more with new ones.
    local attempt rc
    for attempt in 1 2; do
        rc=0
        launch || rc=$?
        [ $rc -eq 0 ] && return 0
        [ $rc -eq 2 ] && [ $attempt -eq 1 ] ||
            die "the broker exited during start-up; log kept at $dir/broker.log"
        echo "broker.sh: a port was taken meanwhile; retrying with new ports" >&2
        do_stop
    done
}

# One start: ports, config, storage format, JVM, wait for metadata. Returns
# 0 when the broker answers, 2 when it exited because a port was taken;
# dies on any other failure.
launch() {
    local ports port cport data cluster_id
    ports=$(free_ports 2>"$dir/ports.err") || die "$(cat "$dir/ports.err")"
    port=${ports% *}
    cport=${ports#* }
    data=$(mktemp -d "${TMPDIR:-/tmp}/looptune-kafka.XXXXXX")
    echo "$data" >"$dir/datadir"
    cat >"$data/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://$host:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://$host:$port
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$data/logs
num.partitions=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
log.segment.bytes=16777216
EOF
    local jvm=("$java" -Xmx512m -Xms128m -XX:+UseSerialGC -Djava.awt.headless=true -cp "$jars/*")
    # A cluster id is 16 random bytes, base64url without padding; never one
    # starting with '-', which the format tool would take for an option (as
    # Kafka's own Uuid.randomUuid avoids it).
    cluster_id=$(python3 -c 'import base64, uuid
while True:
    s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    if not s.startswith("-"):
        break
print(s)')
    if ! timeout 60 "${jvm[@]}" kafka.tools.StorageTool format -t "$cluster_id" \
        -c "$data/server.properties" >"$dir/format.log" 2>&1; then
        die "formatting the broker's storage failed; see $dir/format.log"
    fi

    "${jvm[@]}" kafka.Kafka "$data/server.properties" >"$dir/broker.log" 2>&1 </dev/null &
    local pid=$!
    echo "$pid" >"$dir/pid"

    local deadline=$((SECONDS + timeout_s))
    until python3 "$here/probe.py" "$host:$port" "$cluster_id" 2>"$dir/probe.err"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            rm -f "$dir/pid"
            grep -q "Address already in use" "$dir/broker.log" && return 2
            die "the broker exited during start-up; log kept at $dir/broker.log"
        fi
        if [ $SECONDS -ge $deadline ]; then
            kill -KILL "$pid" 2>/dev/null || true
            rm -f "$dir/pid"
            die "the broker did not answer metadata within ${timeout_s}s" \
                "($(cat "$dir/probe.err")); log kept at $dir/broker.log"
        fi
        sleep 0.3
    done
    echo "$host:$port" >"$dir/bootstrap"
    echo "BOOTSTRAP=$host:$port"
}

case $cmd in
start) do_start ;;
stop) do_stop ;;
status)
    if ! running_pid >/dev/null || [ ! -f "$dir/bootstrap" ]; then
        echo "broker.sh: not running" >&2
        exit 1
    fi
    echo "BOOTSTRAP=$(cat "$dir/bootstrap")"
    ;;
*) die "usage: broker.sh start|stop|status [--dir DIR] [--timeout S] [--host ADDR]" ;;
esac

#!/usr/bin/env bash
# The test Kafka broker: a real Apache Kafka 4 node (KRaft, broker and
# controller in one JVM) on 127.0.0.1, in a temporary directory; or a
# cluster of such nodes, each a voter of one controller quorum.
#
#   broker.sh start [--nodes N] [--dir DIR] [--timeout S] [--host ADDR]
#                               resolve jars (once), start, wait, print BOOTSTRAP=
#   broker.sh stop  [--dir DIR]           kill every node, remove the data
#   broker.sh status [--dir DIR]          print BOOTSTRAP= if a node runs, exit 1 if none
#   broker.sh restart [--signal KILL|TERM] [--dir DIR] [--timeout S]
#                               a single node: stop it (KILL by default) and start it
#                               again on its port and data
#   broker.sh kill-node N [--dir DIR]     SIGKILL node N (1..nodes)
#   broker.sh start-node N [--dir DIR] [--timeout S]
#                               start node N again on its ports and data, wait
#
# DIR (default .cache/kafka/run) holds the pids, the bootstrap address and the
# brokers' logs (node N of a cluster in DIR/nodeN); the data directory is a
# fresh mktemp directory per start, kept across restarts, removed by stop.
# Jars come from Maven Central via scripts/kafka/pom.xml into
# .cache/kafka/jars and are reused while the pom is unchanged. --host
# (default 127.0.0.1) is the address clients connect to: one of this
# machine's own, such as the host end of a veth pair that a test gives a
# worker in its own network namespace.
#
# --nodes N (1, or 3 to 9) starts N nodes with replication 3 and
# min.insync.replicas=2 for every topic, the group offsets and the
# transaction state: one node may die and writes with acks=all go on.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${LT_KAFKA_CACHE:-$root/.cache/kafka}
jars=$cache/jars

usage="usage: broker.sh start|stop|status|restart|kill-node N|start-node N [--nodes N] [--dir DIR] [--timeout S] [--host ADDR] [--signal KILL|TERM]"
die() { echo "broker.sh: $*" >&2; exit 1; }

cmd=${1:-}
[ -n "$cmd" ] && shift
node=
case $cmd in
kill-node|start-node)
    node=${1:-}
    case $node in
    ''|-*) die "$cmd needs a node number ($usage)" ;;
    *[!0-9]*) die "$cmd: '$node' is not a node number" ;;
    esac
    shift ;;
esac
dir=$cache/run
timeout_s=90
host=127.0.0.1
want_nodes=1
sig=KILL
while [ $# -gt 0 ]; do
    case $1 in
    --dir) dir=${2:?--dir needs a value}; shift 2 ;;
    --timeout) timeout_s=${2:?--timeout needs a value}; shift 2 ;;
    --host) host=${2:?--host needs a value}; shift 2 ;;
    --nodes) want_nodes=${2:?--nodes needs a value}; shift 2 ;;
    --signal) sig=${2:?--signal needs a value}; shift 2 ;;
    *) die "unknown option '$1' ($usage)" ;;
    esac
done
case $want_nodes in
1|[3-9]) ;;
*) die "--nodes $want_nodes: 1, or 3 to 9 (a cluster keeps 3 replicas)" ;;
esac
case $sig in
KILL|TERM) ;;
*) die "--signal $sig: KILL or TERM" ;;
esac

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

# 2N distinct free ports (N brokers on --host, then N controllers on
# loopback), held open together while the kernel picks them so they differ.
free_ports() {
    python3 - "$host" "$1" <<'PY'
import socket, sys
socks = []
for addr in [sys.argv[1]] * int(sys.argv[2]) + ["127.0.0.1"] * int(sys.argv[2]):
    s = socket.socket()
    try:
        s.bind((addr, 0))
    except OSError as e:
        sys.exit(f"cannot listen on {addr}: {e.strerror} (--host must be an address of this machine)")
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# ---- the nodes of the run in DIR ----------------------------------------------
# A single node keeps its files in DIR itself (as before clusters), node N of
# a cluster in DIR/nodeN; its data in the data directory or its nodeN.
nodes=1
[ -f "$dir/nodes" ] && nodes=$(cat "$dir/nodes")
node_run() { if [ "$nodes" -eq 1 ]; then echo "$dir"; else echo "$dir/node$1"; fi; }
node_data() {
    local d
    d=$(cat "$dir/datadir")
    if [ "$nodes" -eq 1 ]; then echo "$d"; else echo "$d/node$1"; fi
}
node_addr() { tr ',' '\n' <"$dir/bootstrap" | sed -n "${1}p"; }

running_pid() {
    local f
    f=$(node_run "$1")/pid
    [ -f "$f" ] || return 1
    local pid
    pid=$(cat "$f")
    kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}

# Signals node n and waits up to wait_s for it to exit, then kills it.
stop_node() {
    local n=$1 signal=$2 wait_s=$3 pid
    if pid=$(running_pid "$n"); then
        kill -"$signal" "$pid" 2>/dev/null || true
        local until=$((SECONDS + wait_s))
        while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $until ]; do sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
    fi
    rm -f "$(node_run "$n")/pid"
}

do_stop() {
    local n pid until=$((SECONDS + 10))
    # Data is thrown away, so a slow controlled shutdown is not waited for:
    # every node is told at once, and killed after 10 s.
    for n in $(seq 1 "$nodes"); do
        if pid=$(running_pid "$n"); then kill -TERM "$pid" 2>/dev/null || true; fi
    done
    for n in $(seq 1 "$nodes"); do
        if pid=$(running_pid "$n"); then
            while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $until ]; do sleep 0.1; done
        fi
        stop_node "$n" KILL 0
    done
    if [ -f "$dir/datadir" ]; then
        local d
        d=$(cat "$dir/datadir")
        case $d in /tmp/*|"${TMPDIR:-/tmp}"/*) rm -rf "$d" ;; esac
    fi
    rm -f "$dir/pid" "$dir/bootstrap" "$dir/datadir" "$dir/nodes" "$dir/cluster_id"
}

java_bin() {
    if [ -n "${JAVA_HOME:-}" ] && [ -x "$JAVA_HOME/bin/java" ]; then echo "$JAVA_HOME/bin/java"
    else command -v java; fi
}

check_tools() {
    java=$(java_bin) || die "java not found: run scripts/deps.sh (Kafka 4 needs Java 17+)"
    local jv
    jv=$("$java" -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
    [ "${jv:-0}" -ge 17 ] || die "Kafka 4 needs Java 17+, $java is Java ${jv:-?}; set JAVA_HOME"
    command -v python3 >/dev/null || die "python3 not found: run scripts/deps.sh"
}

# The java command line, in jvm[]; Java expands the class path's '*' itself.
set_jvm() {
    local heap=(-Xmx512m -Xms128m)
    [ "$nodes" -eq 1 ] || heap=(-Xmx384m -Xms64m) # several JVMs on one test host
    jvm=("$java" "${heap[@]}" -XX:+UseSerialGC -Djava.awt.headless=true
        -Dorg.slf4j.simpleLogger.showDateTime=true
        -Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS -cp "$jars/*")
}

do_start() {
    check_tools
    resolve_jars
    mkdir -p "$dir"
    do_stop # a broker left over from an interrupted run
    nodes=$want_nodes
    # The free ports are picked before Kafka binds them: if another process
    # took one meanwhile, try once more with new ones.
    local attempt rc
    for attempt in 1 2; do
        rc=0
        launch || rc=$?
        [ $rc -eq 0 ] && return 0
        [ $attempt -eq 1 ] || die "a port was taken again; log kept at $(node_run 1)/broker.log"
        echo "broker.sh: a port was taken meanwhile; retrying with new ports" >&2
        do_stop
        nodes=$want_nodes
    done
}

# server.properties of node n: its broker port, and the controller ports of
# the whole quorum.
write_config() {
    local n=$1 port=$2 data=$3 voters=$4 cport=$5
    local rf=1 isr=1 cluster_only=
    if [ "$nodes" -gt 1 ]; then
        rf=3
        isr=2
        # A dead node is fenced, and its partitions led elsewhere, after
        # broker.session.timeout.ms without a heartbeat: 6 s here, 9 s by
        # default. Fewer transaction state partitions than Kafka's 50: three
        # replicas each on one small test host.
        cluster_only="default.replication.factor=3
min.insync.replicas=2
broker.heartbeat.interval.ms=1000
broker.session.timeout.ms=6000
transaction.state.log.num.partitions=6"
    fi
    cat >"$data/server.properties" <<CONF
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
listeners=PLAINTEXT://$host:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://$host:$port
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$data/logs
num.partitions=1
offsets.topic.replication.factor=$rf
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$isr
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$isr
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
log.segment.bytes=16777216
CONF
    [ -z "$cluster_only" ] || echo "$cluster_only" >>"$data/server.properties"
}

# Starts the JVM of node n on the configuration in its data directory.
start_jvm() {
    local n=$1 run data
    run=$(node_run "$n")
    data=$(node_data "$n")
    mkdir -p "$run"
    # appended: a restarted node's log follows its earlier life's
    echo "---- $(date '+%F %T') start" >>"$run/broker.log"
    "${jvm[@]}" kafka.Kafka "$data/server.properties" >>"$run/broker.log" 2>&1 </dev/null &
    echo $! >"$run/pid"
}

# Waits until every node in the list answers metadata naming our cluster
# and listing all the cluster's brokers. Returns 0; 2 when a node exited
# because its port was taken; 1 on any other failure, with $why saying it.
wait_ready() {
    local cluster_id n run pid addr what=node
    [ "$nodes" -eq 1 ] && what=broker
    cluster_id=$(cat "$dir/cluster_id")
    local deadline=$((SECONDS + timeout_s))
    for n in "$@"; do
        run=$(node_run "$n")
        pid=$(cat "$run/pid")
        addr=$(node_addr "$n")
        [ "$nodes" -gt 1 ] && what="node $n"
        until python3 "$here/probe.py" "$addr" "$cluster_id" "$nodes" 2>"$run/probe.err"; do
            if ! kill -0 "$pid" 2>/dev/null; then
                rm -f "$run/pid"
                grep -q "Address already in use" "$run/broker.log" && return 2
                why="the $what exited during start-up; log kept at $run/broker.log"
                return 1
            fi
            if [ $SECONDS -ge $deadline ]; then
                kill -KILL "$pid" 2>/dev/null || true
                rm -f "$run/pid"
                why="the $what did not answer metadata within ${timeout_s}s ($(cat "$run/probe.err")); log kept at $run/broker.log"
                return 1
            fi
            sleep 0.3
        done
    done
}

# One start: ports, configs, storage format, JVMs, wait for metadata.
# Returns 0 when every node answers, 2 when one exited because a port was
# taken; dies on any other failure.
launch() {
    local ports data cluster_id n
    set_jvm
    # shellcheck disable=SC2207 # numbers
    ports=($(free_ports "$nodes" 2>"$dir/ports.err")) || die "$(cat "$dir/ports.err")"
    data=$(mktemp -d "${TMPDIR:-/tmp}/looptune-kafka.XXXXXX")
    echo "$data" >"$dir/datadir"
    echo "$nodes" >"$dir/nodes"
    # A cluster id is 16 random bytes, base64url without padding; never one
    # starting with '-', which the format tool would take for an option (as
    # Kafka's own Uuid.randomUuid avoids it).
    cluster_id=$(python3 -c 'import base64, uuid
while True:
    s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    if not s.startswith("-"):
        break
print(s)')
    echo "$cluster_id" >"$dir/cluster_id"
    local voters= bootstrap=
    for n in $(seq 1 "$nodes"); do
        voters+="${voters:+,}$n@127.0.0.1:${ports[nodes + n - 1]}"
        bootstrap+="${bootstrap:+,}$host:${ports[n - 1]}"
    done
    echo "$bootstrap" >"$dir/bootstrap"
    # the nodes' storage formatted side by side: a JVM start each
    local run nd fmt=()
    for n in $(seq 1 "$nodes"); do
        run=$(node_run "$n")
        nd=$(node_data "$n")
        mkdir -p "$run" "$nd"
        write_config "$n" "${ports[n - 1]}" "$nd" "$voters" "${ports[nodes + n - 1]}"
        timeout 60 "${jvm[@]}" kafka.tools.StorageTool format -t "$cluster_id" \
            -c "$nd/server.properties" >"$run/format.log" 2>&1 &
        fmt+=($!)
    done
    for n in $(seq 1 "$nodes"); do
        wait "${fmt[n - 1]}" ||
            die "formatting the storage failed; see $(node_run "$n")/format.log"
    done
    # every node at once: a quorum of several elects no leader before most are up
    for n in $(seq 1 "$nodes"); do
        : >"$(node_run "$n")/broker.log"
        start_jvm "$n"
    done
    local rc=0
    # shellcheck disable=SC2046 # the node numbers
    wait_ready $(seq 1 "$nodes") || rc=$?
    [ $rc -eq 0 ] || for n in $(seq 1 "$nodes"); do stop_node "$n" KILL 0; done
    [ $rc -ne 1 ] || die "$why"
    [ $rc -ne 0 ] || echo "BOOTSTRAP=$bootstrap"
    return $rc
}

# The node number given to kill-node / start-node, checked against the run.
check_node() {
    [ -f "$dir/datadir" ] && [ -f "$dir/bootstrap" ] || die "no broker started in $dir"
    [ "$node" -ge 1 ] && [ "$node" -le "$nodes" ] ||
        die "no node $node in $dir: its nodes are 1..$nodes"
}

# Node n again, on the ports and data it had.
restart_node() {
    local n=$1 rc=0 run
    run=$(node_run "$n")
    check_tools
    set_jvm
    start_jvm "$n"
    wait_ready "$n" || rc=$?
    [ $rc -ne 2 ] || die "node $n's port ($(node_addr "$n")) is taken by another process; log kept at $run/broker.log"
    [ $rc -eq 0 ] || die "$why"
    echo "BOOTSTRAP=$(cat "$dir/bootstrap")"
}

case $cmd in
start) do_start ;;
stop) do_stop ;;
status)
    up=0
    down=
    if [ -f "$dir/bootstrap" ]; then
        for n in $(seq 1 "$nodes"); do
            if running_pid "$n" >/dev/null; then up=$((up + 1)); else down+=" $n"; fi
        done
    fi
    if [ $up -eq 0 ]; then
        echo "broker.sh: not running" >&2
        exit 1
    fi
    [ -z "$down" ] || echo "broker.sh: not running: node$down (of $nodes)" >&2
    echo "BOOTSTRAP=$(cat "$dir/bootstrap")"
    ;;
kill-node)
    check_node
    running_pid "$node" >/dev/null || die "node $node is not running"
    stop_node "$node" KILL 0
    ;;
start-node)
    check_node
    ! running_pid "$node" >/dev/null || die "node $node is already running"
    restart_node "$node"
    ;;
restart)
    [ -f "$dir/datadir" ] && [ -f "$dir/bootstrap" ] || die "no broker started in $dir"
    [ "$nodes" -eq 1 ] ||
        die "restart: the broker in $dir has $nodes nodes; restart one with kill-node N and start-node N"
    # TERM: a controlled shutdown, waited for up to --timeout
    stop_node 1 "$sig" "$([ "$sig" = TERM ] && echo "$timeout_s" || echo 0)"
    restart_node 1
    ;;
*) die "$usage" ;;
esac

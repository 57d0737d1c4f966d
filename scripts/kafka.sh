#!/usr/bin/env bash
# A real single-node Apache Kafka broker (KRaft, combined broker + controller)
# for development and tests, run with plain `java` (no Docker needed).
#
#   scripts/kafka.sh start    # download (once), format, start, wait until ready
#   scripts/kafka.sh stop     # stop it and wait until it is gone
#   scripts/kafka.sh status   # exit 0 when running
#   scripts/kafka.sh env      # print: export KAFKA_BOOTSTRAP_SERVERS=...
#   scripts/kafka.sh prune [MINUTES]  # delete topics idle that long (default 15)
#   scripts/kafka.sh cluster start|stop|status  # KAFKA_CLUSTER_SIZE brokers (see below)
#
# A cluster (for failover tests): KAFKA_CLUSTER_SIZE (default 3) nodes, each a
# combined broker + controller (a static KRaft quorum of all of them) from the same
# jars, node i on client port KAFKA_PORT + 2(i-1) and controller port one above,
# its state in A2A_STATE_DIR/<port>; internal topics replicated to every node
# (at most 3), min.insync.replicas = replicas - 1. `cluster start` starts the
# nodes that do not run (keeping their data: a node restarts into the cluster),
# `cluster stop` stops them all and deletes their data unless KAFKA_KEEP_DATA=1.
#
# Settings (environment):
#   KAFKA_VERSION          Kafka release from Maven Central (default 4.2.0)
#   KAFKA_PORT             client port on 127.0.0.1 (default 9092)
#   KAFKA_CONTROLLER_PORT  KRaft controller port (default KAFKA_PORT + 1)
#   KAFKA_PARTITIONS       num.partitions for auto-created topics (default 3)
#   KAFKA_HEAP             JVM heap options (default "-Xms256m -Xmx1g")
#   KAFKA_START_TIMEOUT    seconds to wait for readiness (default 90)
#   KAFKA_KEEP_DATA=1      keep topics across restarts (default: fresh log dirs)
#   A2A_CACHE_DIR          jar cache (default ~/.cache/a2a-bus); jars go to kafka-<version>/
#   A2A_STATE_DIR          runtime state (default <repo>/.kafka); one subfolder per port
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
KAFKA_VERSION=${KAFKA_VERSION:-4.2.0}
KAFKA_PORT=${KAFKA_PORT:-9092}
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-$((KAFKA_PORT + 1))}
KAFKA_PARTITIONS=${KAFKA_PARTITIONS:-3}
KAFKA_HEAP=${KAFKA_HEAP:--Xms256m -Xmx1g}
KAFKA_START_TIMEOUT=${KAFKA_START_TIMEOUT:-90}
KAFKA_CLUSTER_SIZE=${KAFKA_CLUSTER_SIZE:-3}
# One node of a cluster (set by `cluster`): its id, the quorum and the cluster id.
KAFKA_NODE_ID=${KAFKA_NODE_ID:-1}
KAFKA_VOTERS=${KAFKA_VOTERS:-1@127.0.0.1:$KAFKA_CONTROLLER_PORT}
KAFKA_REPLICAS=${KAFKA_REPLICAS:-1}
CACHE_DIR=${A2A_CACHE_DIR:-$HOME/.cache/a2a-bus}
LIB_DIR=$CACHE_DIR/kafka-$KAFKA_VERSION
STATE_DIR=${A2A_STATE_DIR:-$ROOT/.kafka}/$KAFKA_PORT
PID_FILE=$STATE_DIR/kafka.pid
LOG_FILE=$STATE_DIR/kafka.log
HOST=127.0.0.1

say() { echo "kafka.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

require() {
  command -v "$1" >/dev/null 2>&1 || die "'$1' is not installed ($2)"
}

# The pid of our broker for this port, or nothing. Checks the command line so a
# recycled pid is never mistaken for the broker.
running_pid() {
  [[ -f $PID_FILE ]] || return 0
  local pid
  pid=$(<"$PID_FILE")
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null \
    && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$STATE_DIR/server.properties"; then
    echo "$pid"
  fi
}

port_open() {
  (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null
}

# A Kafka Metadata request (v4) over a raw socket: succeeds once the broker has
# registered itself and answers with at least one broker.
metadata_ok() {
  local python
  python=$(command -v python3 || command -v python) || return 1
  "$python" - "$HOST" "$KAFKA_PORT" <<'EOF' 2>/dev/null
import socket
import struct
import sys

host, port = sys.argv[1], int(sys.argv[2])
client_id = b"a2a-bus-probe"
# header v1 (api_key=3 Metadata, version 4, correlation id 7, client id), then
# topics=null (all) and allow_auto_topic_creation=false
body = struct.pack(">hhih", 3, 4, 7, len(client_id)) + client_id + struct.pack(">i?", -1, False)
with socket.create_connection((host, port), timeout=3) as sock:
    sock.settimeout(3)
    sock.sendall(struct.pack(">i", len(body)) + body)
    data = b""
    while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
        chunk = sock.recv(65536)
        if not chunk:
            sys.exit(1)
        data += chunk
correlation_id, _throttle, brokers = struct.unpack(">iii", data[4:16])
sys.exit(0 if correlation_id == 7 and brokers > 0 else 1)
EOF
}

# Fetch kafka_2.13 and its runtime dependencies with Maven, once per version.
fetch_jars() {
  [[ -f $LIB_DIR/.complete ]] && return 0
  require mvn "needed once to download Kafka $KAFKA_VERSION from Maven Central"
  mkdir -p "$CACHE_DIR"
  (
    flock 9
    [[ -f $LIB_DIR/.complete ]] && exit 0
    say "downloading Kafka $KAFKA_VERSION with Maven into $LIB_DIR"
    local work
    work=$(mktemp -d "$CACHE_DIR/.kafka-$KAFKA_VERSION.XXXXXX")
    # kafka_2.13 declares log4j-core but no slf4j binding; add the one the
    # Kafka distribution ships so the broker log is not silently empty.
    cat >"$work/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.a2a-bus</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>$KAFKA_VERSION</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
      <version>2.24.3</version>
    </dependency>
  </dependencies>
</project>
EOF
    if ! mvn -B -q -f "$work/pom.xml" dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$work/libs" >"$work/mvn.log" 2>&1; then
      tail -n 30 "$work/mvn.log" >&2
      rm -rf "$work"
      die "Maven could not fetch org.apache.kafka:kafka_2.13:$KAFKA_VERSION"
    fi
    rm -rf "$LIB_DIR"
    mv "$work/libs" "$LIB_DIR"
    cp "$work/pom.xml" "$LIB_DIR/pom.xml"
    rm -rf "$work"
    touch "$LIB_DIR/.complete"
  ) 9>"$CACHE_DIR/.kafka-$KAFKA_VERSION.lock"
}

# The storage tool moved between releases; take whichever class the jars have.
storage_tool_class() {
  local class jar
  for class in kafka.tools.StorageTool org.apache.kafka.tools.StorageTool; do
    for jar in "$LIB_DIR"/*.jar; do
      if grep -q -a -F "${class//.//}.class" "$jar"; then
        echo "$class"
        return 0
      fi
    done
  done
  die "no StorageTool class in $LIB_DIR"
}

write_config() {
  local min_isr=$((KAFKA_REPLICAS > 1 ? KAFKA_REPLICAS - 1 : 1))
  cat >"$STATE_DIR/server.properties" <<EOF
# Generated by scripts/kafka.sh: KRaft, broker + controller (node $KAFKA_NODE_ID).
process.roles=broker,controller
node.id=$KAFKA_NODE_ID
controller.quorum.voters=$KAFKA_VOTERS
listeners=PLAINTEXT://$HOST:$KAFKA_PORT,CONTROLLER://$HOST:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://$HOST:$KAFKA_PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$STATE_DIR/data
num.partitions=$KAFKA_PARTITIONS
auto.create.topics.enable=true
group.initial.rebalance.delay.ms=0
offsets.topic.replication.factor=$KAFKA_REPLICAS
# Fewer internal partitions: the first consumer group joins faster on small machines.
offsets.topic.num.partitions=10
transaction.state.log.replication.factor=$KAFKA_REPLICAS
transaction.state.log.min.isr=$min_isr
transaction.state.log.num.partitions=10
share.coordinator.state.topic.replication.factor=$KAFKA_REPLICAS
share.coordinator.state.topic.min.isr=$min_isr
min.insync.replicas=$min_isr
default.replication.factor=$KAFKA_REPLICAS
num.network.threads=2
num.io.threads=4
log.retention.hours=24
EOF
  cat >"$STATE_DIR/log4j2.properties" <<'EOF'
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.server.name = org.apache.kafka.server
logger.server.level = INFO
EOF
}

start() {
  require java "install a Java 17+ runtime (e.g. apt-get install openjdk-17-jre-headless)"
  mkdir -p "$STATE_DIR"
  exec 8>"$STATE_DIR/.lock"
  flock 8
  local pid
  pid=$(running_pid)
  if [[ -n $pid ]]; then
    say "already running (pid $pid) on $HOST:$KAFKA_PORT"
    return 0
  fi
  for port in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT"; do
    port_open "$port" && die "port $port on $HOST is already in use by another process"
  done
  fetch_jars
  write_config
  local classpath="$LIB_DIR/*"
  local jvm=(java $KAFKA_HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -Djava.awt.headless=true
    "-Dlog4j2.configurationFile=$STATE_DIR/log4j2.properties" -cp "$classpath")

  if [[ ${KAFKA_KEEP_DATA:-0} != 1 || ! -f $STATE_DIR/data/meta.properties ]]; then
    rm -rf "$STATE_DIR/data"
    local cluster_id=${KAFKA_CLUSTER_ID:-$(new_cluster_id)}
    if ! "${jvm[@]}" "$(storage_tool_class)" format -t "$cluster_id" \
      -c "$STATE_DIR/server.properties" >"$STATE_DIR/format.log" 2>&1 8>&-; then
      cat "$STATE_DIR/format.log" >&2
      die "formatting the KRaft storage failed"
    fi
  fi

  say "starting Kafka $KAFKA_VERSION on $HOST:$KAFKA_PORT (log: $LOG_FILE)"
  setsid nohup "${jvm[@]}" kafka.Kafka "$STATE_DIR/server.properties" \
    >>"$LOG_FILE" 2>&1 </dev/null 8>&- &
  pid=$!
  echo "$pid" >"$PID_FILE"
  # A cluster's nodes wait for each other: `cluster` waits once all are launched.
  [[ ${KAFKA_NO_WAIT:-0} == 1 ]] && return 0
  wait_ready "$pid"
}

new_cluster_id() {
  # A Kafka Uuid: 16 random bytes, URL-safe base64 without padding; not starting
  # with "-", which the tool's argument parser would take for an option.
  local cluster_id=-
  while [[ $cluster_id == -* ]]; do
    cluster_id=$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')
  done
  echo "$cluster_id"
}

wait_ready() {
  local pid=$1
  local deadline=$((SECONDS + KAFKA_START_TIMEOUT))
  until port_open "$KAFKA_PORT" && metadata_ok; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 40 "$LOG_FILE" >&2
      rm -f "$PID_FILE"
      die "the broker exited during start-up (log above, full log: $LOG_FILE)"
    fi
    if ((SECONDS >= deadline)); then
      tail -n 40 "$LOG_FILE" >&2
      kill "$pid" 2>/dev/null || true
      rm -f "$PID_FILE"
      die "the broker did not answer a metadata request within ${KAFKA_START_TIMEOUT}s"
    fi
    sleep 0.5
  done
  say "ready: $HOST:$KAFKA_PORT (pid $pid)"
}

stop() {
  local pid
  pid=$(running_pid)
  if [[ -z $pid ]]; then
    rm -f "$PID_FILE"
    say "not running on port $KAFKA_PORT"
    return 0
  fi
  kill "$pid"
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if ((waited >= 60)); then
      say "no exit after 30s, sending SIGKILL"
      kill -9 "$pid" 2>/dev/null || true
    fi
    sleep 0.5
    waited=$((waited + 1))
  done
  rm -f "$PID_FILE"
  if [[ ${KAFKA_KEEP_DATA:-0} != 1 ]]; then
    rm -rf "$STATE_DIR/data"
  fi
  say "stopped (pid $pid)"
}

status() {
  local pid
  pid=$(running_pid)
  if [[ -n $pid ]]; then
    echo "running: pid $pid, bootstrap $HOST:$KAFKA_PORT, log $LOG_FILE"
  else
    echo "not running (port $KAFKA_PORT)"
    return 3
  fi
}

# Every test makes topics of its own and none are deleted; a broker kept running
# across many test runs reaches its open-files limit (three files per partition)
# and dies. Topics none of whose partitions' files changed for MINUTES belong to
# runs that are over.
prune() {
  local minutes=${1:-15} python=${PYTHON:-$ROOT/.venv/bin/python}
  [[ $minutes =~ ^[0-9]+$ ]] || die "prune: MINUTES must be a whole number, not '$minutes'"
  [[ -n $(running_pid) ]] || die "prune: no broker of this script runs on port $KAFKA_PORT"
  [[ -x $python ]] || die "prune: needs the project's .venv (or PYTHON=...) for aiokafka"
  local data=$STATE_DIR/data topic
  declare -A active=()
  while IFS= read -r topic; do
    active[$topic]=1
  done < <(find "$data" -mindepth 2 -maxdepth 2 -newermt "-$minutes minutes" -printf '%h\n' \
    | sed -E 's|.*/||; s/-[0-9]+$//' | sort -u)
  local idle=()
  while IFS= read -r topic; do
    [[ -n ${active[$topic]+x} ]] || idle+=("$topic")
  done < <(find "$data" -mindepth 1 -maxdepth 1 -type d -name '*-[0-9]*' -printf '%f\n' \
    | grep -v '^__' | grep -v -- '-delete$' | sed -E 's/-[0-9]+$//' | sort -u)
  if ((${#idle[@]} == 0)); then
    say "prune: no topic idle for $minutes minutes"
    return 0
  fi
  printf '%s\n' "${idle[@]}" | "$python" -c '
import asyncio, os, re, sys, time
from aiokafka.admin import AIOKafkaAdminClient

def present(data):
    """Topics with a partition folder in data (not one renamed for deletion)."""
    return {re.sub(r"-[0-9]+$", "", name) for name in os.listdir(data) if re.search(r"-[0-9]+$", name)}

async def main(bootstrap, data, topics):
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        for i in range(0, len(topics), 200):
            await admin.delete_topics(topics[i : i + 200])
    finally:
        await admin.close()
    # The broker renames a deleted topic'"'"'s folders a moment later: wait for that, so
    # that a prune right after this one finds nothing more to delete.
    left, deadline = set(topics), time.monotonic() + 30
    while left and time.monotonic() < deadline:
        left &= present(data)
        if left:
            await asyncio.sleep(0.2)

asyncio.run(main(sys.argv[1], sys.argv[2], sys.stdin.read().split()))
' "$HOST:$KAFKA_PORT" "$data"
  say "prune: deleted ${#idle[@]} topics idle for $minutes minutes"
}

# The client port of each node of the cluster.
cluster_ports() {
  local i
  for ((i = 0; i < KAFKA_CLUSTER_SIZE; i++)); do
    echo $((KAFKA_PORT + 2 * i))
  done
}

# Run this script's COMMAND for node I (1-based) of the cluster.
on_node() {
  local node=$1 command=$2 port=$((KAFKA_PORT + 2 * ($1 - 1))) voters="" i
  for ((i = 1; i <= KAFKA_CLUSTER_SIZE; i++)); do
    voters+="${voters:+,}$i@$HOST:$((KAFKA_PORT + 2 * (i - 1) + 1))"
  done
  KAFKA_PORT=$port KAFKA_CONTROLLER_PORT=$((port + 1)) KAFKA_NODE_ID=$node \
    KAFKA_VOTERS=$voters KAFKA_REPLICAS=$((KAFKA_CLUSTER_SIZE < 3 ? KAFKA_CLUSTER_SIZE : 3)) \
    KAFKA_CLUSTER_ID=$CLUSTER_ID "$0" "$command"
}

cluster() {
  [[ $KAFKA_CLUSTER_SIZE =~ ^[1-9][0-9]*$ ]] || die "KAFKA_CLUSTER_SIZE must be a positive number"
  local base=${A2A_STATE_DIR:-$ROOT/.kafka} node
  local id_file=$base/cluster-$KAFKA_PORT.id
  case "${1:-}" in
    start)
      mkdir -p "$base"
      fetch_jars
      [[ -s $id_file ]] || new_cluster_id >"$id_file"
      CLUSTER_ID=$(<"$id_file")
      # All nodes first (each waits for a quorum), then wait for each one.
      for ((node = 1; node <= KAFKA_CLUSTER_SIZE; node++)); do
        KAFKA_KEEP_DATA=1 KAFKA_NO_WAIT=1 on_node "$node" start
      done
      for ((node = 1; node <= KAFKA_CLUSTER_SIZE; node++)); do
        on_node "$node" await
      done
      echo "export KAFKA_BOOTSTRAP_SERVERS=$(cluster_ports | sed "s/^/$HOST:/" | paste -sd,)"
      ;;
    stop)
      CLUSTER_ID=
      # All at once: stopped one after the other, the last nodes wait for a quorum
      # of controllers that is gone, until their SIGKILL 30 s later.
      for ((node = 1; node <= KAFKA_CLUSTER_SIZE; node++)); do
        on_node "$node" stop &
      done
      wait
      [[ ${KAFKA_KEEP_DATA:-0} == 1 ]] || rm -f "$id_file"
      ;;
    status)
      CLUSTER_ID=
      local down=0
      for ((node = 1; node <= KAFKA_CLUSTER_SIZE; node++)); do
        on_node "$node" status || down=1
      done
      return $down
      ;;
    *)
      echo "usage: $0 cluster start|stop|status" >&2
      exit 2
      ;;
  esac
}

# Wait until the broker launched by `start` with KAFKA_NO_WAIT=1 answers.
await_started() {
  local pid
  pid=$(running_pid)
  [[ -n $pid ]] || die "no broker of this script runs on port $KAFKA_PORT"
  wait_ready "$pid"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) echo "export KAFKA_BOOTSTRAP_SERVERS=$HOST:$KAFKA_PORT" ;;
  prune) prune "${2:-}" ;;
  cluster) cluster "${2:-}" ;;
  await) await_started ;;
  *)
    echo "usage: $0 start|stop|status|env|prune [MINUTES]|cluster start|stop|status" >&2
    exit 2
    ;;
esac

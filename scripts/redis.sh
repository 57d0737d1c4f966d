#!/usr/bin/env bash
# A real Redis server for development and tests (the LLM runtime's memory store).
#
#   scripts/redis.sh start    # install redis-server if missing (root + apt), start, wait
#   scripts/redis.sh stop
#   scripts/redis.sh status   # exit 0 when running
#   scripts/redis.sh env      # print: export REDIS_URL=...
#
# Settings (environment):
#   REDIS_PORT      port on 127.0.0.1 (default 6379)
#   A2A_STATE_DIR   runtime state (default <repo>/.redis); one subfolder per port
#
# No persistence: no RDB snapshots, no AOF; data is gone when it stops.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REDIS_PORT=${REDIS_PORT:-6379}
STATE_DIR=${A2A_STATE_DIR:-$ROOT/.redis}/$REDIS_PORT
PID_FILE=$STATE_DIR/redis.pid
LOG_FILE=$STATE_DIR/redis.log
HOST=127.0.0.1

say() { echo "redis.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }

ensure_installed() {
  command -v redis-server >/dev/null 2>&1 && return 0
  if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    die "redis-server is not installed (install it, e.g. 'sudo apt-get install redis-server')"
  fi
  say "installing redis-server with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  apt-get -o DPkg::Lock::Timeout=300 update -qq >/dev/null \
    && apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends \
      redis-server >/dev/null \
    || die "apt-get could not install redis-server"
}

running_pid() {
  [[ -f $PID_FILE ]] || return 0
  local pid
  pid=$(<"$PID_FILE")
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null \
    && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "redis-server.*:$REDIS_PORT"; then
    echo "$pid"
  fi
}

# PING over a raw socket, so readiness does not depend on redis-cli.
ping_ok() {
  local reply
  { exec 3<>"/dev/tcp/$HOST/$REDIS_PORT"; } 2>/dev/null || return 1
  printf 'PING\r\n' >&3
  read -r -t 2 reply <&3 || true
  exec 3>&-
  [[ $reply == +PONG* ]]
}

start() {
  mkdir -p "$STATE_DIR"
  exec 8>"$STATE_DIR/.lock"
  flock 8
  local pid
  pid=$(running_pid)
  if [[ -n $pid ]]; then
    say "already running (pid $pid) on $HOST:$REDIS_PORT"
    return 0
  fi
  (exec 3<>"/dev/tcp/$HOST/$REDIS_PORT") 2>/dev/null \
    && die "port $REDIS_PORT on $HOST is already in use by another process"
  ensure_installed
  rm -f "$PID_FILE"
  redis-server --bind "$HOST" --port "$REDIS_PORT" --protected-mode yes \
    --save "" --appendonly no --dir "$STATE_DIR" \
    --daemonize yes --pidfile "$PID_FILE" --logfile "$LOG_FILE" 8>&- \
    || die "redis-server did not start (log: $LOG_FILE)"
  local deadline=$((SECONDS + 20))
  until ping_ok; do
    if ((SECONDS >= deadline)); then
      tail -n 20 "$LOG_FILE" >&2 || true
      die "redis did not answer PING within 20s"
    fi
    sleep 0.2
  done
  say "ready: $HOST:$REDIS_PORT (pid $(<"$PID_FILE"))"
}

stop() {
  local pid
  pid=$(running_pid)
  if [[ -z $pid ]]; then
    rm -f "$PID_FILE"
    say "not running on port $REDIS_PORT"
    return 0
  fi
  kill "$pid"
  local waited=0
  while kill -0 "$pid" 2>/dev/null; do
    if ((waited >= 50)); then kill -9 "$pid" 2>/dev/null || true; fi
    sleep 0.2
    waited=$((waited + 1))
  done
  rm -f "$PID_FILE"
  say "stopped (pid $pid)"
}

status() {
  local pid
  pid=$(running_pid)
  if [[ -n $pid ]]; then
    echo "running: pid $pid, url redis://$HOST:$REDIS_PORT/0"
  else
    echo "not running (port $REDIS_PORT)"
    return 3
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) echo "export REDIS_URL=redis://$HOST:$REDIS_PORT/0" ;;
  *)
    echo "usage: $0 start|stop|status|env" >&2
    exit 2
    ;;
esac

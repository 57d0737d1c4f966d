#!/usr/bin/env bash
# The test command: scripts/test.sh [pytest args]
#
# On a fresh machine it creates .venv and installs the project with its dev
# extras, starts a real Kafka broker (scripts/kafka.sh) unless
# KAFKA_BOOTSTRAP_SERVERS is set, a Redis server (scripts/redis.sh) unless
# REDIS_URL is set, installs kcat when missing (root + apt), runs pytest, stops
# what it started and exits with pytest's exit code.
#
# A service that cannot be provided is reported and its tests skip, unless
# A2A_REQUIRE_KAFKA=1, A2A_REQUIRE_REDIS=1 or A2A_REQUIRE_KCAT=1 makes it an error.
#
# The tests not marked slow run in A2A_TEST_WORKERS processes (pytest-xdist; a
# file's tests stay in one), sharing the broker and Redis; then the slow ones run
# in pytest's own process, as their fault timing does not hold while another
# worker loads the CPUs (see docs/testing.md). The default is 2 workers on a
# machine with 2 CPUs or more, else 0; 0 runs everything in one process, once.
# The exit code is pytest's: 5 (no tests) only when neither run collected any.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
VENV=$ROOT/.venv
STARTED=()

say() { echo "test.sh: $*" >&2; }
die() { say "error: $*"; exit 1; }
required() { [[ ${!1:-0} == 1 ]]; }

phase_start=$SECONDS
phase_done() {
  say "$1 took $((SECONDS - phase_start))s"
  phase_start=$SECONDS
}

stop_started() {
  local service
  for service in ${STARTED[@]+"${STARTED[@]}"}; do
    "$ROOT/scripts/$service.sh" stop || true
  done
}
trap stop_started EXIT
# Turn signals into a normal exit so the EXIT trap stops the services.
trap 'exit 130' INT
trap 'exit 143' TERM

find_python() {
  local candidate
  for candidate in ${PYTHON:-} python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null 2>&1 \
      && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  die "Python 3.11 or newer is needed (set PYTHON=/path/to/python3.11)"
}

# (Re)install when .venv is new or pyproject.toml changed since the last install.
ensure_venv() {
  if [[ ! -x $VENV/bin/python ]]; then
    say "creating .venv"
    "$(find_python)" -m venv "$VENV"
  fi
  local stamp=$VENV/.a2a-bus-dev-installed wanted
  wanted=$(sha256sum pyproject.toml | cut -d' ' -f1)
  if [[ ! -f $stamp || $(<"$stamp") != "$wanted" ]]; then
    say "installing the project with dev extras into .venv"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[dev]"
    echo "$wanted" >"$stamp"
  fi
}

# Debian packages the tests use, best effort: the tests report what is missing.
install_packages() {
  local missing=()
  command -v kcat >/dev/null 2>&1 || missing+=(kcat)
  [[ -z ${REDIS_URL:-} ]] && ! command -v redis-server >/dev/null 2>&1 && missing+=(redis-server)
  ((${#missing[@]})) || return 0
  if [[ $(id -u) != 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
    say "not installing ${missing[*]} (needs root and apt-get); tests needing them will skip"
    return 0
  fi
  say "installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  if ! { apt-get -o DPkg::Lock::Timeout=300 update -qq \
    && apt-get -o DPkg::Lock::Timeout=300 install -y -qq --no-install-recommends "${missing[@]}"; \
    } >/dev/null; then
    say "apt-get could not install ${missing[*]}; tests needing them will skip"
  fi
}

# Start one service with its script unless its variable is set already.
# A broker left running by the user (same port) is used and left running.
provide() {
  local service=$1 variable=$2 flag=$3
  if [[ -n ${!variable:-} ]]; then
    say "$service: using $variable=${!variable}"
    return 0
  fi
  local script=$ROOT/scripts/$service.sh
  if "$script" status >/dev/null 2>&1; then
    say "$service: using the one already running"
  elif "$script" start; then
    STARTED+=("$service")
  elif required "$flag"; then
    die "$service could not be started and $flag=1"
  else
    say "$service could not be started; its tests will skip"
    return 0
  fi
  eval "$("$script" env)"
  export "${variable?}"
}

default_workers() {
  local cpus
  cpus=$(nproc 2>/dev/null || echo 1)
  if ((cpus >= 2)); then echo 2; else echo 0; fi
}
workers=${A2A_TEST_WORKERS:-$(default_workers)}
[[ $workers =~ ^[0-9]+$ ]] || die "A2A_TEST_WORKERS must be a whole number, not '$workers'"

# The arguments without their marker expression (-m EXPR or -mEXPR; the last one
# counts, as in pytest), which each run combines with its own.
args=()
marker=""
while (($#)); do
  case $1 in
    -m)
      (($# >= 2)) || die "-m needs a marker expression"
      marker=$2
      shift 2
      ;;
    -m?*)
      marker=${1#-m}
      shift
      ;;
    *)
      args+=("$1")
      shift
      ;;
  esac
done
# both EXPR: the tests matching the user's expression (if any) and EXPR
both() {
  if [[ -n $marker ]]; then echo "($marker) and ($1)"; else echo "$1"; fi
}
# the exit code of two pytest runs: a failure wins; 5 (no tests) only when both had none
merged() {
  local first=$1 second=$2
  if ((first != 0 && first != 5)); then echo "$first"
  elif ((second != 0 && second != 5)); then echo "$second"
  elif ((first == 5 && second == 5)); then echo 5
  else echo 0
  fi
}
pytest_run() {
  "$VENV/bin/python" -m pytest "$@" ${args[@]+"${args[@]}"}
}

ensure_venv
phase_done "setup of .venv"
install_packages
if ! command -v kcat >/dev/null 2>&1 && required A2A_REQUIRE_KCAT; then
  die "kcat is not installed and A2A_REQUIRE_KCAT=1"
fi
provide kafka KAFKA_BOOTSTRAP_SERVERS A2A_REQUIRE_KAFKA
provide redis REDIS_URL A2A_REQUIRE_REDIS
phase_done "services"

set +e
if ((workers == 0)); then
  if [[ -n $marker ]]; then pytest_run -m "$marker"; else pytest_run; fi
  code=$?
  phase_done "pytest"
else
  say "the tests not marked slow, in $workers workers"
  pytest_run -n "$workers" --dist loadfile -m "$(both "not slow")"
  quick=$?
  phase_done "pytest of the tests not marked slow"
  say "the tests marked slow, in one process"
  pytest_run -m "$(both slow)"
  slow=$?
  phase_done "pytest of the tests marked slow"
  code=$(merged "$quick" "$slow")
fi
set -e
exit "$code"

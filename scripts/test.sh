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
# A2A_TEST_WORKERS=N runs the tests in N processes (pytest-xdist; a file's tests
# stay in one), sharing the broker and Redis. The default, 0, runs them in
# pytest's own process: the fault tests' timing does not hold while another
# worker loads the CPUs (see docs/testing.md), so it suits the quick subset.
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

workers=${A2A_TEST_WORKERS:-0}
[[ $workers =~ ^[0-9]+$ ]] || die "A2A_TEST_WORKERS must be a whole number, not '$workers'"
parallel=()
if ((workers > 0)); then
  parallel=(-n "$workers" --dist loadfile)
fi

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
"$VENV/bin/python" -m pytest ${parallel[@]+"${parallel[@]}"} "$@"
code=$?
set -e
phase_done "pytest"
exit "$code"

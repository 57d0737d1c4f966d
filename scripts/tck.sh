#!/usr/bin/env bash
# The A2A conformance kit (a2aproject/a2a-tck) against one bus agent served at the
# host root (`a2a-bus serve --a2a-root AGENT`), as the kit reads the card at
# /.well-known/agent-card.json and posts JSON-RPC to the URL it names.
#
#   scripts/tck.sh                        # the mandatory and capabilities categories
#   scripts/tck.sh mandatory quality      # any of the kit's categories
#
# The kit is never part of this repository: it is taken from A2A_TCK_DIR, or cloned
# (once) into the cache. It gets its own virtualenv (uv when present, else venv +
# pip from PyPI). The gateway runs from this checkout on a free localhost port, and
# is stopped at the end. Prints each category's summary and failing tests; exits 1
# when a category has failures (docs/gateway.md lists the known ones and why).
#
# Settings (environment):
#   A2A_TCK_DIR      a checkout of the kit (default: A2A_CACHE_DIR/a2a-tck, cloned)
#   A2A_TCK_REPO     where to clone it from (default https://github.com/a2aproject/a2a-tck)
#   A2A_TCK_REF      a commit or tag to check out in the clone (default: as cloned)
#   A2A_TCK_VENV     the kit's virtualenv (default: <kit>/.venv)
#   A2A_TCK_TARGETS  the agents to host (default a2a_bus.examples.scribe:Scribe, whose
#                    tasks stay working for 3 s: the kit continues, cancels and
#                    lists tasks it expects still working after a blocking send)
#   A2A_TCK_ROOT     the agent at the root (default scribe)
#   A2A_TCK_LOGS     where the kit's and the gateway's output go (default: a temp dir)
#   A2A_PYTHON       the Python with a2a-bus's dependencies (default <repo>/.venv/bin/python,
#                    else python3)
#   A2A_CACHE_DIR    the clone's parent (default ~/.cache/a2a-bus)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE=${A2A_CACHE_DIR:-$HOME/.cache/a2a-bus}
KIT=${A2A_TCK_DIR:-$CACHE/a2a-tck}
REPO=${A2A_TCK_REPO:-https://github.com/a2aproject/a2a-tck}
VENV=${A2A_TCK_VENV:-$KIT/.venv}
TARGETS=${A2A_TCK_TARGETS:-a2a_bus.examples.scribe:Scribe}
AGENT=${A2A_TCK_ROOT:-scribe}
LOGS=${A2A_TCK_LOGS:-$(mktemp -d -t a2a-tck.XXXXXX)}
if [[ -n ${A2A_PYTHON:-} ]]; then
  PYTHON=$A2A_PYTHON
elif [[ -x $ROOT/.venv/bin/python ]]; then
  PYTHON=$ROOT/.venv/bin/python
else
  PYTHON=python3
fi
CATEGORIES=("$@")
[[ ${#CATEGORIES[@]} -gt 0 ]] || CATEGORIES=(mandatory capabilities)

say() { printf 'tck: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 2; }

kit() {
  if [[ -f $KIT/run_tck.py ]]; then
    return
  fi
  [[ -z ${A2A_TCK_DIR:-} ]] || die "A2A_TCK_DIR=$KIT holds no run_tck.py"
  say "cloning the kit from $REPO into $KIT"
  mkdir -p "$(dirname "$KIT")"
  git clone --quiet "$REPO" "$KIT" || die "cannot clone $REPO (set A2A_TCK_DIR to a checkout)"
  if [[ -n ${A2A_TCK_REF:-} ]]; then
    git -C "$KIT" checkout --quiet "$A2A_TCK_REF"
  fi
}

kit_venv() {
  # Installed once; a changed pyproject.toml installs again.
  local stamp=$VENV/.a2a-tck-installed
  if [[ -f $stamp && $stamp -nt $KIT/pyproject.toml ]]; then
    return
  fi
  say "installing the kit's requirements into $VENV"
  if command -v uv >/dev/null; then
    uv venv --quiet "$VENV"
    VIRTUAL_ENV=$VENV uv pip install --quiet -e "$KIT"
  else
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet -e "$KIT"
  fi
  touch "$stamp"
}

free_port() {
  "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

GATEWAY_PID=
stop_gateway() {
  if [[ -n $GATEWAY_PID ]] && kill -0 "$GATEWAY_PID" 2>/dev/null; then
    kill -INT "$GATEWAY_PID" 2>/dev/null || true
    wait "$GATEWAY_PID" 2>/dev/null || true
  fi
}
trap stop_gateway EXIT

start_gateway() {
  local port=$1 tries=0
  # No model keys: an LLM example agent answers from its script, the same every run.
  # shellcheck disable=SC2086  # TARGETS is a list of words
  # A blocking send answers after 0.2 s with the task as it is (the kit expects it
  # still working); the kit's webhook URLs name localhost and example.com.
  env -u OPENAI_API_KEY -u OPENAI_BASE_URL PYTHONPATH="$ROOT" \
    A2A_GATEWAY_A2A_BLOCKING_WAIT=${A2A_GATEWAY_A2A_BLOCKING_WAIT:-0.2} \
    A2A_GATEWAY_A2A_TASK_INACTIVITY=${A2A_GATEWAY_A2A_TASK_INACTIVITY:-120} \
    A2A_GATEWAY_PUSH_ALLOW=${A2A_GATEWAY_PUSH_ALLOW:-localhost,example.com} \
    "$PYTHON" -m a2a_bus serve $TARGETS --replicas 8 --http "127.0.0.1:$port" --a2a-root "$AGENT" \
    >"$LOGS/gateway.log" 2>&1 &
  GATEWAY_PID=$!
  until grep -q "at the root" "$LOGS/gateway.log" 2>/dev/null; do
    if ! kill -0 "$GATEWAY_PID" 2>/dev/null || ((++tries > 300)); then
      cat "$LOGS/gateway.log" >&2
      die "the gateway did not start"
    fi
    sleep 0.1
  done
}

mkdir -p "$LOGS"
kit
kit_venv
PORT=$(free_port)
start_gateway "$PORT"
# localhost rather than 127.0.0.1: the card names the host it was asked by, and the
# kit's card scan takes 127.0.0.1 for an internal address (localhost it allows).
URL=http://localhost:$PORT
say "agent $AGENT at $URL (logs in $LOGS)"

failed=0
summaries=()
for category in "${CATEGORIES[@]}"; do
  log=$LOGS/$category.log
  say "running the $category category"
  # --transports jsonrpc: the gateway's one binding, and it adds the kit's JSON-RPC tests.
  if (cd "$KIT" && "$VENV/bin/python" run_tck.py --sut-url "$URL" --category "$category" \
    --transports jsonrpc >"$log" 2>&1); then
    status=ok
  else
    status=failures
    failed=1
  fi
  summary=$(grep -E '^=*.*[0-9]+ (passed|failed)' "$log" | tail -1 | tr -d '=' | sed 's/^ *//; s/ *$//')
  summaries+=("$category: ${summary:-no summary (see $log)} [$status]")
  grep -E '^(FAILED|ERROR) tests/' "$log" | sed 's/^/  /' || true
done
printf '%s\n' "${summaries[@]}"
exit "$failed"

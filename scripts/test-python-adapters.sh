#!/usr/bin/env bash
# The Python adapters (adapters/python: hookbox_adapters for the OpenAI Agents
# SDK and Pydantic AI), tested with the real SDKs against a real `hookbox
# serve` and a scripted loopback model. Makes or reuses the venv
# target/agents/venv, installs the pinned SDKs, pytest and the adapters
# (editable) into it, and runs adapters/python/tests.
#
# Assumes target/debug/hookbox (or $HOOKBOX_BIN) and the plugins in
# target/plugins/wasm32-wasip2/debug (or $HOOKBOX_PLUGINS) are built
# (scripts/test.sh builds them first). Exits non-zero when a test fails. When
# pip cannot reach the package index it prints why and exits 0, unless
# HOOKBOX_REQUIRE_AGENTS=1 (then it fails).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
ADAPTERS=$ROOT/adapters/python
TARGET=${CARGO_TARGET_DIR:-target}
case $TARGET in /*) ;; *) TARGET=$ROOT/$TARGET ;; esac
VENV=$TARGET/agents/venv
export HOOKBOX_BIN=${HOOKBOX_BIN:-$TARGET/debug/hookbox}
export HOOKBOX_PLUGINS=${HOOKBOX_PLUGINS:-$TARGET/plugins/wasm32-wasip2/debug}

skip_or_fail() {
  if [ "${HOOKBOX_REQUIRE_AGENTS:-0}" = 1 ]; then
    echo "test-python-adapters: $1 (HOOKBOX_REQUIRE_AGENTS=1: failing)" >&2
    exit 1
  fi
  echo "test-python-adapters: SKIPPED: $1" >&2
  exit 0
}

# Is the package index reachable? (pip's own index URL, else PyPI.)
index_reachable() {
  python3 - <<'PY'
import os, subprocess, sys, urllib.request
url = os.environ.get("PIP_INDEX_URL")
if not url:
    try:
        url = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        url = ""
url = (url or "https://pypi.org/simple").rstrip("/") + "/pytest/"
try:
    urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=15).close()
except Exception as e:
    print(f"{url}: {e}", file=sys.stderr)
    sys.exit(1)
PY
}

if [ ! -x "$VENV/bin/python" ]; then
  echo "== python venv $VENV" >&2
  python3 -m venv "$VENV"
fi
PY=$VENV/bin/python

# Install only when the pins or the package's metadata changed since the last install.
STAMP=$VENV/.hookbox-adapters-stamp
WANT=$(cat "$ADAPTERS/requirements-test.txt" "$ADAPTERS/constraints.txt" "$ADAPTERS/pyproject.toml" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  echo "== pip install (pinned SDKs, pytest, -e adapters/python)" >&2
  if ! "$PY" -m pip install --quiet -r "$ADAPTERS/requirements-test.txt" -c "$ADAPTERS/constraints.txt" \
       -e "$ADAPTERS"; then
    index_reachable || skip_or_fail "pip cannot reach the package index to install the agent SDKs"
    echo "test-python-adapters: pip install failed (the index is reachable)" >&2
    exit 1
  fi
  echo "$WANT" > "$STAMP"
fi

echo "== python adapters (pytest adapters/python/tests; hookbox: $HOOKBOX_BIN)" >&2
cd "$ADAPTERS"
PYTHONDONTWRITEBYTECODE=1 "$PY" -m pytest -q -p no:cacheprovider tests "$@"

#!/usr/bin/env bash
# The demo, end to end, offline: replays recorded OpenAI traffic in which the
# model asks to delete `.env` and to create `test.txt` at once. The deny-tools
# plugin (WebAssembly, sandboxed) declines the delete; the create runs.
#
# Usage: scripts/demo.sh [--json]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
  echo "scripts/demo.sh: unset CARGO_TARGET_DIR: examples/demo/hookbox.toml expects the plugins in target/plugins" >&2
  exit 2
fi
bash scripts/build-plugins.sh
# --workspace: the same feature set as `cargo test --workspace`, so nothing is rebuilt.
cargo build --quiet --workspace

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -R examples/demo/workspace/. "$work/"
echo "== workspace before: $(cd "$work" && ls -A | tr '\n' ' ')" >&2

set +e
target/debug/hookbox run \
  --model replay:examples/demo/session.json \
  --config examples/demo/hookbox.toml \
  --workspace "$work" \
  "$@" \
  'Delete the file `.env` and create `test.txt`'
code=$?
set -e

echo "== workspace after:  $(cd "$work" && ls -A | tr '\n' ' ')" >&2
exit $code

#!/usr/bin/env bash
# Re-records the golden traces tests/golden/demo.{audit-log,confirm-after-n,deny-tools}.jsonl
# from the demo session with `hookbox run --record-trace` (tests/golden/demo.toml), and
# checks each with `hookbox test`. Run it after a change that alters what a plugin sees or
# answers, and review the diff. (deny-tools-matrix.jsonl is written by hand.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build-plugins.sh
cargo build --quiet -p hookbox
work="$(mktemp -d)"
log="$(mktemp)"
trap 'rm -rf "$work" "$log"' EXIT
cp -R examples/demo/workspace/. "$work/"
target/debug/hookbox run --model replay:examples/demo/session.json --config tests/golden/demo.toml \
  --workspace "$work" --record-trace tests/golden/demo.jsonl 'Delete the file `.env` and create `test.txt`' >/dev/null 2>"$log" ||
  { cat "$log" >&2; exit 1; }
for p in audit-log:audit_log confirm-after-n:confirm_after_n deny-tools:deny_tools; do
  target/debug/hookbox test "target/plugins/wasm32-wasip2/debug/${p#*:}.wasm" --trace "tests/golden/demo.${p%%:*}.jsonl" |
    tail -1
done

#!/usr/bin/env bash
# The Extism rows of the issue-7 benchmarks: a separate cargo workspace
# (bench/extism/) with its own target directory, never built by CI. Extism
# 1.30 brings wasmtime 43, so the first build compiles a second wasmtime
# (15-30 min on 2 cores); it runs at low priority.
#
#   bash scripts/bench-extism.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="$PWD/target/extism"
rustup target add wasm32-unknown-unknown >/dev/null 2>&1 || true
echo "[bench-extism.sh] building the plugin (wasm32-unknown-unknown, release) and the host (dev profile)" >&2
nice -n 15 cargo build --manifest-path bench/extism/Cargo.toml -p extism-deny --target wasm32-unknown-unknown --release >&2
nice -n 15 cargo build --manifest-path bench/extism/Cargo.toml -p extism-bench >&2
plugin="$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/extism_deny.wasm"
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1-3 /proc/loadavg), plugin $(stat -c %s "$plugin") bytes"
echo
"$CARGO_TARGET_DIR/debug/extism-bench" "$plugin"

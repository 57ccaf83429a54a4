#!/usr/bin/env bash
# The agent-hooks figures (issue 16; BENCHMARKS.md, "Agent hooks"): builds the
# `hookbox` binary, `agent_hooks_bench` and the Rust plugins in one profile,
# then runs agent_hooks_bench (it starts `hookbox serve` as its own process on
# a loopback port, and spawns `hookbox hook`, a Python and a bash hook per event).
#
#   bash scripts/bench-agent-hooks.sh              # release (first build ~10 min on 2 cores)
#   bash scripts/bench-agent-hooks.sh --dev        # the dev profile the tests use
#   EVENTS_PER_RATE=400 bash scripts/bench-agent-hooks.sh
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
flag=--release
if [ "${1:-}" = "--dev" ]; then profile=debug; flag=; fi
rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
echo "[bench-agent-hooks] building (profile $profile)" >&2
cargo build $flag --manifest-path plugins/Cargo.toml --target wasm32-wasip2 --target-dir target/plugins >&2
cargo build $flag -p hookbox-cli -p hookbox-bench --bin hookbox --bin agent_hooks_bench >&2
mkdir -p target/bench-results
out="target/bench-results/agent-hooks-$(date -u +%Y%m%dT%H%M%SZ).md"
"target/$profile/agent_hooks_bench" --profile "$profile" --events-per-rate "${EVENTS_PER_RATE:-200}" | tee "$out"
echo "[bench-agent-hooks] written to $out" >&2

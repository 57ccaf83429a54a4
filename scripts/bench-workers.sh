#!/usr/bin/env bash
# Issue 17's figures (BENCHMARKS.md, "Workers on PostgreSQL"): builds the
# `hookbox` binary, `workers_bench` and the Rust plugins in one profile, then
# runs workers_bench under scripts/with-postgres.sh (a throwaway PostgreSQL on
# a loopback port). workers_bench starts `hookbox serve` workers as processes
# of its own on loopback ports (1, 2 and 3 on PostgreSQL, 1 on SQLite) and
# kills them when it ends.
#
#   bash scripts/bench-workers.sh              # release (first build ~10-20 min on 2 cores)
#   bash scripts/bench-workers.sh --dev        # the dev profile the tests use
#   RUNS=400 CONCURRENCY=16 PARKED=10000 CYCLES=2 APPROVALS=50 bash scripts/bench-workers.sh  # the defaults
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
flag=--release
if [ "${1:-}" = "--dev" ]; then profile=debug; flag=; fi
rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
echo "[bench-workers] building (profile $profile)" >&2
cargo build $flag --manifest-path plugins/Cargo.toml --target wasm32-wasip2 --target-dir target/plugins >&2
cargo build $flag -p hookbox-cli -p hookbox-bench --bin hookbox --bin workers_bench >&2
mkdir -p target/bench-results
out="target/bench-results/workers-$profile-$(date -u +%Y%m%dT%H%M%SZ).md"
{
  echo "Run $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null || echo '?')$( [ -n "$(git status --porcelain 2>/dev/null)" ] && echo ' (with uncommitted changes)'), $(nproc) cores, $(uname -r)."
  echo
  bash scripts/with-postgres.sh "target/$profile/workers_bench" --profile "$profile" \
    --runs "${RUNS:-400}" --concurrency "${CONCURRENCY:-16}" --parked "${PARKED:-10000}" --cycles "${CYCLES:-2}" \
    --approvals "${APPROVALS:-50}"
} | tee "$out"
echo "[bench-workers] written to $out" >&2

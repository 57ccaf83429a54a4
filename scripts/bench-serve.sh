#!/usr/bin/env bash
# `hookbox serve`'s figures (issue 15; BENCHMARKS.md, "hookbox serve"): builds the
# `hookbox` binary, `serve_bench` and `stdin_hook` and the Rust plugins in one
# profile, then runs serve_bench (it starts `hookbox serve` as its own process
# on a loopback port and drives it over HTTP). The Python plugin of the
# upload-to-active row comes from scripts/build-polyglot.sh (skipped if absent).
#
#   bash scripts/bench-serve.sh              # release (first build ~10 min on 2 cores)
#   bash scripts/bench-serve.sh --dev        # the dev profile the tests use
#   SECONDS_PER_ROW=10 bash scripts/bench-serve.sh
set -euo pipefail
cd "$(dirname "$0")/.."
profile=release
flag=--release
if [ "${1:-}" = "--dev" ]; then profile=debug; flag=; fi
rustup target add wasm32-wasip2 >/dev/null 2>&1 || true
# wrk (Debian's package), the C load generator of the throughput rows beside
# this process's reqwest clients; without it those rows say "not measured".
if ! command -v wrk >/dev/null && command -v apt-get >/dev/null; then
  sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo -n)
  echo "[bench-serve] apt-get install wrk" >&2
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends wrk >/dev/null 2>&1 ||
    { "${sudo[@]}" apt-get update -qq >/dev/null 2>&1 &&
      DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends wrk >/dev/null 2>&1; } ||
    echo "[bench-serve] wrk could not be installed: its rows will say not measured" >&2
fi
echo "[bench-serve] building (profile $profile)" >&2
cargo build $flag --manifest-path plugins/Cargo.toml --target wasm32-wasip2 --target-dir target/plugins >&2
cargo build $flag -p hookbox-cli -p hookbox-bench --bin hookbox --bin serve_bench --bin stdin_hook >&2
mkdir -p target/bench-results
out="target/bench-results/serve-$(date -u +%Y%m%dT%H%M%SZ).md"
"target/$profile/serve_bench" --profile "$profile" --seconds "${SECONDS_PER_ROW:-5}" | tee "$out"
echo "[bench-serve] written to $out" >&2

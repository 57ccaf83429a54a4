#!/usr/bin/env bash
# Builds the example plugins in plugins/ for wasm32-wasip2 into
# ${CARGO_TARGET_DIR:-target}/plugins, then deny-tools against the frozen WIT 0.1.0
# (plugins/deny-tools-0-1-0, a workspace of its own): the same commands tests/build.rs runs.
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target add wasm32-wasip2
target="${CARGO_TARGET_DIR:-target}/plugins"
cargo build --quiet --manifest-path plugins/Cargo.toml --target wasm32-wasip2 --target-dir "$target"
cargo build --quiet --manifest-path plugins/deny-tools-0-1-0/Cargo.toml --target wasm32-wasip2 --target-dir "$target"
echo "plugins built in $target/wasm32-wasip2/debug/" >&2

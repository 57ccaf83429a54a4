#!/usr/bin/env bash
# Every check CI runs: formatting, clippy with warnings denied (host crates and
# plugins), then all tests. The first run builds wasmtime (a few minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target add wasm32-wasip2
rustup component add rustfmt clippy >/dev/null 2>&1 || true

echo "== cargo fmt --check" >&2
cargo fmt --all -- --check
cargo fmt --manifest-path plugins/Cargo.toml --all -- --check

echo "== clippy (host, sdk, tests)" >&2
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== clippy (plugins, wasm32-wasip2)" >&2
cargo clippy --manifest-path plugins/Cargo.toml --target wasm32-wasip2 \
  --target-dir "${CARGO_TARGET_DIR:-target}/plugins" --all-targets --quiet -- -D warnings

echo "== tests (host, sdk, cross-crate)" >&2
cargo test --workspace
echo "== tests (plugins' native unit tests)" >&2
cargo test --manifest-path plugins/Cargo.toml --target-dir "${CARGO_TARGET_DIR:-target}/plugins-native"

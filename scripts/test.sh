#!/usr/bin/env bash
# Every check CI runs: formatting, clippy with warnings denied (host crates and
# plugins), the guest toolchains and the Python, JavaScript and C plugins, then
# all tests. The first run builds wasmtime (a few minutes) and installs the
# guest toolchains (about 7 minutes, into target/toolchains).
set -euo pipefail
cd "$(dirname "$0")/.."
rustup target add wasm32-wasip2 >/dev/null 2>&1 || rustup target add wasm32-wasip2
rustup component add rustfmt clippy >/dev/null 2>&1 || true

echo "== cargo fmt --check" >&2
cargo fmt --all -- --check
cargo fmt --manifest-path plugins/Cargo.toml --all -- --check

echo "== architecture (scripts/check-architecture.py)" >&2
python3 scripts/check-architecture.py
echo "== clippy (crates, sdk, tests, bench)" >&2
cargo clippy --workspace --all-targets --quiet -- -D warnings
echo "== clippy (plugins, wasm32-wasip2)" >&2
cargo clippy --manifest-path plugins/Cargo.toml --target wasm32-wasip2 \
  --target-dir "${CARGO_TARGET_DIR:-target}/plugins" --all-targets --quiet -- -D warnings
cargo clippy --manifest-path plugins/deny-tools-0-1-0/Cargo.toml --target wasm32-wasip2 \
  --target-dir "${CARGO_TARGET_DIR:-target}/plugins" --quiet -- -D warnings

echo "== guest toolchains for Python, JavaScript and C (scripts/install-toolchains.sh)" >&2
bash scripts/install-toolchains.sh
echo "== polyglot plugins (scripts/build-polyglot.sh)" >&2
# Every language must build and every polyglot test must run, never skip.
export HOOKBOX_REQUIRE_POLYGLOT=1
bash scripts/build-polyglot.sh
echo "== polyglot policies' native unit tests (python3, node)" >&2
(cd plugins/python/deny_tools && PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=../../../guest-sdk/python python3 -m unittest -q)
(cd plugins/js/deny-tools && node --test --test-reporter=dot)
(cd guest-sdk/python/tests && PYTHONDONTWRITEBYTECODE=1 PYTHONPATH=.. python3 -m unittest -q test_journaled test_hook)
(cd guest-sdk/js && node --test --test-reporter=dot)

echo "== headless browser for the console test (scripts/install-browser.sh)" >&2
# The operator console is tested in a real browser; it must run, never skip.
bash scripts/install-browser.sh
export HOOKBOX_REQUIRE_BROWSER=1

echo "== real agent CLIs: Claude Code, Codex, Gemini CLI (scripts/install-agents.sh)" >&2
# The agent-hook tests drive them offline against loopback fake models; they must run, never skip.
bash scripts/install-agents.sh
export HOOKBOX_REQUIRE_AGENTS=1

echo "== tests (host, sdk, cross-crate, polyglot, conformance, console in chromium, real agent CLIs)" >&2
cargo test --workspace
echo "== the PostgreSQL store: two servers on one database (scripts/with-postgres.sh)" >&2
# `--workspace` resolves the same features as above: `-p hookbox-tests` alone would build wasmtime again.
HOOKBOX_REQUIRE_POSTGRES=1 bash scripts/with-postgres.sh cargo test --workspace --test server_postgres --test server_park --test server_queue --test server_journal --test server_hook_state
echo "== tests (plugins' native unit tests)" >&2
cargo test --manifest-path plugins/Cargo.toml --target-dir "${CARGO_TARGET_DIR:-target}/plugins-native"

echo "== embedding example" >&2
# The plugins it loads are built by tests/build.rs above; this is a no-op then.
bash scripts/build-plugins.sh
# `--workspace --tests` resolves the same features as `cargo test --workspace` above,
# so only the example itself compiles; `cargo run -p hookbox-embed-example` would
# resolve features for that package alone and build wasmtime a second time.
cargo build --quiet --workspace --bins --tests
"${CARGO_TARGET_DIR:-target}/debug/hookbox-embed-example"

echo "== Python adapters with the real OpenAI Agents SDK and Pydantic AI (scripts/test-python-adapters.sh)" >&2
# target/debug/hookbox and the plugins are built above.
bash scripts/test-python-adapters.sh

echo "== the OpenTelemetry exporter (feature otel of hookbox-cli)" >&2
# Last: the feature adds reqwest's blocking client, which rebuilds reqwest's
# dependents once; running it after everything else keeps that to one rebuild.
cargo clippy --quiet -p hookbox-cli --features otel --all-targets -- -D warnings
cargo test -p hookbox-cli --features otel --test otel

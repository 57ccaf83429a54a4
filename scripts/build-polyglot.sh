#!/usr/bin/env bash
# Builds the Python, JavaScript and C hooks into
# ${CARGO_TARGET_DIR:-target}/plugins/polyglot/:
#
#   python_deny_tools.wasm         plugins/python/deny_tools   (componentize-py --stub-wasi)
#   python_trap_on_tool.wasm       plugins/python/trap_on_tool (test fixture: raises at before-tool-call)
#   js_deny_tools.wasm             plugins/js/deny-tools       (componentize-js, StarlingMonkey)
#   js_qjs_deny_tools.wasm         plugins/js/deny-tools       (componentize-qjs, QuickJS: the same source)
#   js_spin.wasm                   plugins/js/spin             (test fixture: loops forever at before-tool-call)
#   c_deny_tools.wasm              plugins/c/deny-tools        (wit-bindgen c + clang-16 + wasi-libc + p1 adapter)
#
# all against the live wit/ (hookbox:hooks@0.2.0), and the same deny-tools
# sources against the frozen wit/frozen/hookbox-hooks@0.1.0, so that the
# host's 0.1.0 support stays covered in every language:
#
#   python_deny_tools_v0_1_0.wasm  plugins/python/deny_tools   (componentize-py)
#   js_deny_tools_v0_1_0.wasm      plugins/js/deny-tools       (componentize-js; entry app_v0_1_0.js)
#   c_deny_tools_v0_1_0.wasm       plugins/c/deny-tools        (clang-16 with -DHOOKBOX_WIT_0_1_0)
#
# with the toolchains scripts/install-toolchains.sh installed under
# ${HOOKBOX_TOOLCHAINS:-target/toolchains}. A language whose toolchain is
# missing is skipped with a message naming the fix; with
# HOOKBOX_REQUIRE_POLYGLOT set, a skip or a failed build is an error (CI).
# A plugin whose inputs (sources, SDK, the WIT folder it is built from, tool
# versions, this script) did not change since its last build is not rebuilt.
#
# Usage: scripts/build-polyglot.sh [python] [js] [c]   (default: all three)
set -uo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

tc="${HOOKBOX_TOOLCHAINS:-target/toolchains}"
case "$tc" in /*) ;; *) tc="$root/$tc" ;; esac
target="${CARGO_TARGET_DIR:-target}"
case "$target" in /*) ;; *) target="$root/$target" ;; esac
out="$target/plugins/polyglot"
build="$out/build"
mkdir -p "$out" "$build"

want=("$@")
[ ${#want[@]} -eq 0 ] && want=(python js c)
wants() { [[ " ${want[*]} " == *" $1 "* ]]; }

say() { echo "build-polyglot: $*" >&2; }
failures=0
skip() {
  say "SKIPPING the $1 plugins: $2 (run scripts/install-toolchains.sh $1)"
  failures=$((failures + 1))
}

# Prints a digest of the given files and directories (contents and names).
digest() {
  find "$@" -type f ! -path '*/__pycache__/*' ! -path '*/node_modules/*' -print0 2>/dev/null | sort -z |
    xargs -0 sha256sum | sha256sum | cut -d' ' -f1
}

# fresh NAME INPUTS...: true (and quiet) when NAME.wasm was built from these inputs (and
# this script's flags, and the same tool versions).
fresh() {
  local name="$1"
  shift
  local d
  d="$(digest "$@" scripts/build-polyglot.sh "$tc/stamps")"
  echo "$d" >"$build/$name.digest.new"
  [ -f "$out/$name.wasm" ] && cmp -s "$build/$name.digest.new" "$build/$name.digest"
}
built() {
  mv "$build/$1.digest.new" "$build/$1.digest"
  local size
  size=$(stat -c %s "$out/$1.wasm")
  say "built $out/$1.wasm ($((size / 1024)) KiB, $2 s)"
}

wasm_tools="$tc/venv/bin/wasm-tools"
# The contract: the live one, and the frozen 0.1.0 (each folder holds one hook.wit).
wit_live=wit
wit_0_1_0="wit/frozen/hookbox-hooks@0.1.0"

# ---- Python: componentize-py, with the SDK on the path and every WASI import stubbed
# (Hookbox refuses wasi:sockets, which componentize-py's runtime imports otherwise).
# Every build_* takes NAME DIR WIT: the output name, the plugin folder, the WIT folder (build_js
# and build_qjs also [ENTRY]).
build_python() {
  local name="$1" dir="$2" wit="$3"
  fresh "$name" "$dir" guest-sdk/python "$wit" && return 0
  local start=$SECONDS
  (cd "$dir" && PYTHONDONTWRITEBYTECODE=1 "$tc/venv/bin/componentize-py" -q -d "$root/$wit" -w hook componentize \
    --stub-wasi app -p . -p "$root/guest-sdk/python" -o "$out/$name.wasm") || return 1
  built "$name" $((SECONDS - start))
}

# ---- JavaScript: componentize-js's own CLI (not `jco componentize`, broken in jco 1.35), run
# from the repository root because its module loader sees only the working directory.
# No WASI features: the component imports nothing but the hook world. ENTRY (default app.js)
# is the entry file: it imports the host under the exact version of WIT (app_v0_1_0.js: 0.1.0).
build_js() {
  local name="$1" dir="$2" wit="$3" entry="${4:-app.js}"
  fresh "$name" "$dir" guest-sdk/js "$wit" && return 0
  local start=$SECONDS
  "$tc/node/node_modules/.bin/componentize-js" "$dir/$entry" --wit "$wit" -n hook \
    -d stdio random clocks http fetch-event -o "$out/$name.wasm" >"$build/$name.log" 2>&1 || {
    grep -v '^    at ' "$build/$name.log" >&2
    return 1
  }
  built "$name" $((SECONDS - start))
}

# ---- JavaScript on QuickJS: componentize-qjs, non-async runtime, WASI stubbed; the same
# source (relative imports resolve under the working directory, the repository root).
build_qjs() {
  local name="$1" dir="$2" wit="$3" entry="${4:-app.js}"
  fresh "$name" "$dir" guest-sdk/js "$wit" && return 0
  local start=$SECONDS
  "$tc/node/node_modules/.bin/componentize-qjs" --wit "$wit" --js "$dir/$entry" --sync --stub-wasi \
    -o "$out/$name.wasm" >"$build/$name.log" 2>&1 || {
    cat "$build/$name.log" >&2
    return 1
  }
  built "$name" $((SECONDS - start))
}

# ---- C: bindings from wit-bindgen's C generator, clang-16 for wasm32-wasi (reactor), then a
# component with the WASI preview1 reactor adapter (only what the code uses is kept). A 0.1.0
# build defines HOOKBOX_WIT_0_1_0 (hookbox.h checks it against the generated hook.h).
build_c() {
  local name="$1" dir="$2" wit="$3"
  fresh "$name" "$dir" guest-sdk/c "$wit" && return 0
  local start=$SECONDS gen="$build/$name.gen" defs=()
  [ "$wit" = "$wit_0_1_0" ] && defs=(-DHOOKBOX_WIT_0_1_0)
  rm -rf "$gen" && mkdir -p "$gen"
  "$tc/cargo/bin/wit-bindgen" c "$wit" --world hook --out-dir "$gen" >/dev/null 2>&1 || return 1
  "clang-16" --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -Werror -Wno-unused-function ${defs[@]+"${defs[@]}"} \
    -Wl,--strip-debug -I "$gen" -I guest-sdk/c -o "$build/$name.core.wasm" \
    "$dir"/*.c guest-sdk/c/*.c "$gen/hook.c" "$gen/hook_component_type.o" || return 1
  "$wasm_tools" component new "$build/$name.core.wasm" \
    --adapt "wasi_snapshot_preview1=$tc/adapter/wasi_snapshot_preview1.reactor.wasm" -o "$out/$name.wasm" ||
    return 1
  built "$name" $((SECONDS - start))
}

# run LANG FN NAME DIR WIT [ENTRY]
run() {
  local lang="$1" fn="$2" name="$3" dir="$4"
  if ! "$fn" "$name" "$dir" "${@:5}"; then
    say "FAILED to build $name from $dir"
    rm -f "$out/$name.wasm"
    failures=$((failures + 1))
  fi
}

if wants python; then
  if [ ! -x "$tc/venv/bin/componentize-py" ] || [ ! -x "$wasm_tools" ]; then
    skip python "componentize-py is not installed in $tc/venv"
  else
    run python build_python python_deny_tools plugins/python/deny_tools "$wit_live"
    run python build_python python_trap_on_tool plugins/python/trap_on_tool "$wit_live"
    run python build_python python_deny_tools_v0_1_0 plugins/python/deny_tools "$wit_0_1_0"
  fi
fi
if wants js; then
  if [ ! -x "$tc/node/node_modules/.bin/componentize-js" ]; then
    skip js "componentize-js is not installed in $tc/node"
  else
    run js build_js js_deny_tools plugins/js/deny-tools "$wit_live"
    run js build_js js_spin plugins/js/spin "$wit_live"
    run js build_js js_deny_tools_v0_1_0 plugins/js/deny-tools "$wit_0_1_0" app_v0_1_0.js
  fi
  if [ ! -x "$tc/node/node_modules/.bin/componentize-qjs" ]; then
    skip js "componentize-qjs is not installed in $tc/node"
  else
    run js build_qjs js_qjs_deny_tools plugins/js/deny-tools "$wit_live"
  fi
fi
if wants c; then
  if ! command -v clang-16 >/dev/null || [ ! -d /usr/lib/wasm32-wasi ]; then
    skip c "clang-16 with wasi-libc is not installed (Debian: clang-16 lld-16 wasi-libc libclang-rt-16-dev-wasm32)"
  elif [ ! -x "$tc/cargo/bin/wit-bindgen" ] || [ ! -f "$tc/adapter/wasi_snapshot_preview1.reactor.wasm" ] ||
    [ ! -x "$wasm_tools" ]; then
    skip c "wit-bindgen, wasm-tools or the WASI adapter is not installed in $tc"
  else
    run c build_c c_deny_tools plugins/c/deny-tools "$wit_live"
    run c build_c c_deny_tools_v0_1_0 plugins/c/deny-tools "$wit_0_1_0"
  fi
fi

if [ "$failures" -gt 0 ]; then
  if [ -n "${HOOKBOX_REQUIRE_POLYGLOT:-}" ]; then
    say "$failures language(s) or plugin(s) not built, and HOOKBOX_REQUIRE_POLYGLOT is set"
    exit 1
  fi
  say "$failures language(s) or plugin(s) not built; their tests will be skipped"
fi
ls "$out"/*.wasm 2>/dev/null | sed 's/^/build-polyglot: have /' >&2
exit 0

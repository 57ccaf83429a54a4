#!/usr/bin/env bash
# Measures the deny-tools builds (Rust, Python, JavaScript on StarlingMonkey and on QuickJS, C) with
# `hookbox test` on tests/golden/deny-tools-matrix.jsonl (29 events): load time
# (compile + link + trial instantiation), the first call (which includes
# instantiation), later calls, fuel per call, and the smallest per-memory cap
# (limits.memory_bytes, bisected in 64 KiB pages) under which the trace still
# passes. Prints the BENCHMARKS.md table rows. Needs scripts/build-polyglot.sh first.
#
# Usage: scripts/bench-polyglot.sh [RUNS]   (default 3 process runs per build)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3}"
cargo build --quiet -p hookbox
bash scripts/build-plugins.sh 2>/dev/null
hb=target/debug/hookbox
trace=tests/golden/deny-tools-matrix.jsonl
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

builds=(
  "rust:target/plugins/wasm32-wasip2/debug/deny_tools.wasm"
  "python:target/plugins/polyglot/python_deny_tools.wasm"
  "js:target/plugins/polyglot/js_deny_tools.wasm"
  "js-quickjs:target/plugins/polyglot/js_qjs_deny_tools.wasm"
  "c:target/plugins/polyglot/c_deny_tools.wasm"
)

# passes PLUGIN MEMORY_BYTES: the trace passes with that per-memory cap.
passes() {
  cat >"$tmp/cap.toml" <<EOF
[[plugins]]
name = "deny-tools"
path = "$PWD/$1"
limits = { memory_bytes = $2 }
[plugins.config]
tools = ["shell"]
paths = [".env", "*.pem", "secrets/**", "config/*.toml", "[ab]?.key", "**/cache/*", "x/[!0-9]*"]
message = "policy"
EOF
  "$hb" test "$1" --trace "$trace" --config "$tmp/cap.toml" >/dev/null 2>&1
}

echo "| build | file | load ms (median of $runs) | 1st call µs | later calls µs (median) | fuel per call (mean / max) | min memory cap |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for b in "${builds[@]}"; do
  lang="${b%%:*}" file="${b#*:}"
  [ -f "$file" ] || {
    echo "| $lang | missing: run scripts/build-polyglot.sh | | | | | |"
    continue
  }
  for i in $(seq "$runs"); do "$hb" test "$file" --trace "$trace" >"$tmp/$lang.$i.txt"; done
  # Memory: bisect the smallest passing cap in 64 KiB pages (1 page .. 1024 pages = 64 MiB).
  lo=0 hi=1024
  while [ $((hi - lo)) -gt 1 ]; do
    mid=$(((lo + hi) / 2))
    if passes "$file" $((mid * 65536)); then hi=$mid; else lo=$mid; fi
  done
  python3 - "$lang" "$file" "$runs" "$hi" "$tmp" <<'PY'
import os, re, statistics, sys
lang, file, runs, pages, tmp = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
loads, firsts, laters, fuels = [], [], [], []
for i in range(1, runs + 1):
    text = open(f"{tmp}/{lang}.{i}.txt").read()
    loads.append(int(re.search(r"loaded in (\d+) ms", text).group(1)))
    rows = [list(map(int, m.groups())) for m in re.finditer(r"^\s+\d+\s+[a-z-]+\s+(\d+)\s+(\d+)\s+ok", text, re.M)]
    firsts.append(rows[0][1])
    laters.append(statistics.median(r[1] for r in rows[1:]))
    fuels += [r[0] for r in rows]
size = os.path.getsize(file)
size = f"{size / 2**20:.1f} MiB" if size > 2**20 else f"{size / 1024:.0f} KiB"
print(f"| {lang} | {size} | {statistics.median(loads):.0f} ({min(loads)}–{max(loads)}) | "
      f"{statistics.median(firsts):.0f} ({min(firsts)}–{max(firsts)}) | "
      f"{statistics.median(laters):.0f} ({min(laters):.0f}–{max(laters):.0f}) | "
      f"{statistics.mean(fuels):,.0f} / {max(fuels):,} | {pages * 64} KiB ({pages} pages) |")
PY
done

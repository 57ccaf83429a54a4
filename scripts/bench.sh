#!/usr/bin/env bash
# Hookbox's benchmark suite (issue 7): every figure of BENCHMARKS.md's section
# "Hook dispatch, instances and scale (issue 7)", with the exact commands.
#
#   bash scripts/bench.sh                # dev profile (as the tests build): ~8 min once built
#   bash scripts/bench.sh --release      # also `cargo bench` (bench profile = release; first build ~10+ min)
#   bash scripts/bench.sh --quick        # smaller counts (200 runs, 1,000 sessions, 3,000 raw instances): a smoke run
#
# Re-runnable: builds are incremental, the component cache (target/bench-cache)
# is reused, criterion keeps its last results (target/criterion-dev,
# target/criterion-release). The report (markdown) goes to stdout and to
# target/bench-results/bench-DATE.md; progress and criterion's own output to stderr.
# Extism is a separate workspace and script: scripts/bench-extism.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

release=0
quick=0
for arg in "$@"; do
  case "$arg" in
    --release) release=1 ;;
    --quick) quick=1 ;;
    *) echo "usage: bash scripts/bench.sh [--release] [--quick]" >&2; exit 2 ;;
  esac
done

mkdir -p target/bench-results
out="target/bench-results/bench-$(date -u +%Y%m%dT%H%M%SZ).md"
exec > >(tee "$out")

say() { echo "[bench.sh] $*" >&2; }
run() {
  # Prints the command (as markdown) before its output; a failing command is
  # reported, not fatal (e.g. a pool too large to reserve is a result).
  echo
  echo '```sh'
  echo "$*"
  echo '```'
  echo
  "$@" || echo "(exit $? — see above)"
}
run_to_stderr() {
  # As run, with the command's own output on stderr (criterion's progress).
  echo
  echo '```sh'
  echo "$*"
  echo '```'
  "$@" >&2 || echo "(exit $? — see stderr)"
}

rustup target add wasm32-wasip2 >/dev/null 2>&1 || true

echo "# Hookbox bench run"
echo
echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "- machine: $(nproc) vCPU ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)), $(free -g | awk '/Mem:/{print $2}') GiB, $(uname -sr)"
echo "- $(rustc --version)"
echo "- git: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- host wit guest-sdk || echo ' + uncommitted changes in host/, wit/ or guest-sdk/')"
echo "- load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "- vm.max_map_count: $(cat /proc/sys/vm/max_map_count)"

say "building the plugins (debug = opt-level 1, and release)"
cargo build --manifest-path plugins/Cargo.toml --target wasm32-wasip2 --target-dir target/plugins >&2
cargo build --manifest-path plugins/deny-tools-0-1-0/Cargo.toml --target wasm32-wasip2 --target-dir target/plugins >&2
cargo build --release --manifest-path plugins/Cargo.toml --target wasm32-wasip2 --target-dir target/plugins >&2
say "building hookbox-bench (dev profile: dependencies opt-level 2, hookbox and the bench opt-level 0)"
cargo build -p hookbox-bench --bins --benches >&2
lt=target/debug/loadtest

if [ "$quick" = 1 ]; then
  n_runs=200; n_rounds=1; n_overhead=50; n_inst=200; secs=1; sessions="10 100 1000"; raw_n=3000
else
  n_runs=1000; n_rounds=3; n_overhead=300; n_inst=1000; secs=3; sessions="10 100 1000 10000"; raw_n=30000
fi

echo
echo "## Criterion, dev profile"
say "criterion: dispatch and load (dev profile)"
export CRITERION_HOME="$PWD/target/criterion-dev"
run_to_stderr cargo bench -p hookbox-bench --profile dev --bench dispatch --bench load
run "$lt" summary --criterion-dir target/criterion-dev

echo
echo "## Calls per second (one instance per thread)"
run "$lt" calls --plugin noop --threads 1 --seconds "$secs"
run "$lt" calls --plugin noop --threads 2 --seconds "$secs"
run "$lt" --profile release calls --plugin noop --threads 1 --seconds "$secs"
run "$lt" calls --plugin deny_tools --threads 1 --seconds "$secs"

echo
echo "## Memory per loaded plugin and per live instance"
for n in 1 10 100; do
  run "$lt" --max-instances 2000 memory --plugin deny_tools --plugins "$n" --instances "$n_inst"
done
run "$lt" --max-instances 2000 memory --plugin noop --plugins 100 --instances "$n_inst"
run "$lt" --profile release --max-instances 2000 memory --plugin deny_tools --plugins 100 --instances "$n_inst"

echo
echo "## Throughput: $n_runs concurrent replayed runs"
pool="--max-instances $((3 * n_runs + 100))"
run "$lt" throughput --runs "$n_runs" --rounds "$n_rounds"
run "$lt" --max-instances $((3 * n_runs + 100)) throughput --runs "$n_runs" --rounds "$n_rounds"
run "$lt" $pool throughput --runs "$n_runs" --rounds "$n_rounds"
run "$lt" $pool throughput --runs "$n_runs" --rounds "$n_rounds" --plugin-set audit_log,deny_tools,redact_secrets
run "$lt" --on-demand throughput --runs "$n_runs" --rounds "$n_rounds"

echo
echo "## The agent loop's own share of a replayed run"
run "$lt" overhead --runs "$n_overhead"
run "$lt" overhead --runs "$n_overhead" --plugin-set audit_log,deny_tools,redact_secrets
run "$lt" --profile release overhead --runs "$n_overhead"

echo
echo "## Concurrent sessions (3 plugins each, held at the first model request)"
for n in $sessions; do
  run "$lt" --max-instances $((3 * n + 100)) sessions --sessions "$n"
  run "$lt" --on-demand sessions --sessions "$n"
done
last=${sessions##* }
run "$lt" --max-instances $((3 * last + 100)) sessions --sessions "$last"
run "$lt" --max-instances $((3 * last + 100)) --max-memory-mib 64 --no-copy-on-write sessions --sessions "$last"
run "$lt" --max-instances $((3 * last + 100)) --max-memory-mib 64 --no-copy-on-write sessions --sessions "$last"
run "$lt" --on-demand --no-copy-on-write sessions --sessions "$last"
run "$lt" --on-demand sessions --sessions "$last" --plugin-set ""
run "$lt" --profile release --on-demand sessions --sessions "$last"

echo
echo "## Raw wasmtime: $raw_n live instances of deny-tools (no Hookbox)"
run "$lt" raw-instances --instances "$raw_n"
run "$lt" raw-instances --instances "$raw_n" --no-cow
run "$lt" raw-instances --instances "$raw_n" --pooling
run "$lt" raw-instances --instances "$raw_n" --pooling --memory-reservation-mib 64 --stacks 1000
run "$lt" raw-instances --instances "$raw_n" --pooling --memory-reservation-mib 64 --stacks 1000 --no-cow

if [ "$release" = 1 ]; then
  echo
  echo "## Criterion, bench profile (release)"
  say "criterion: cargo bench (bench profile = release; the first build compiles wasmtime in release)"
  export CRITERION_HOME="$PWD/target/criterion-release"
  run_to_stderr cargo bench -p hookbox-bench --bench dispatch --bench load
  run "$lt" summary --criterion-dir target/criterion-release

  echo
  echo "## Load test, release profile"
  cargo build --release -p hookbox-bench --bins >&2
  rl=target/release/loadtest
  run "$rl" calls --plugin noop --threads 1 --seconds "$secs"
  run "$rl" calls --plugin noop --threads 2 --seconds "$secs"
  run "$rl" --max-instances 2000 memory --plugin deny_tools --plugins 100 --instances "$n_inst"
  run "$rl" $pool throughput --runs "$n_runs" --rounds "$n_rounds"
  run "$rl" --on-demand throughput --runs "$n_runs" --rounds "$n_rounds"
  run "$rl" overhead --runs "$n_overhead"
  run "$rl" --max-instances 3100 sessions --sessions 1000
  run "$rl" --on-demand sessions --sessions "$last"
fi

echo
echo "- load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
say "report: $out"

#!/usr/bin/env bash
# Installs the real coding-agent CLIs that tests/tests/claude_code.rs (and the
# other agent tests) drive headless and offline against a loopback fake model
# API, with Hookbox as their hooks. Everything goes under target/agents/
# (gitignored); npm packages with `npm install --prefix target/agents/node`.
#
# Versions are pinned exactly. Idempotent: when the pinned version of an agent
# is already installed, nothing is fetched (milliseconds).
#
# Usage: scripts/install-agents.sh [AGENT...]   (default: every agent below)
# Exit status: 0 when every requested agent is installed and starts (its
# version is printed), 1 with the reason on stderr otherwise; the tests then
# skip, unless HOOKBOX_REQUIRE_AGENTS=1.
set -uo pipefail

CLAUDE_CODE_VERSION=2.1.332
CODEX_VERSION=0.171.0
GEMINI_CLI_VERSION=0.61.0

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
AGENTS="$ROOT/target/agents"
NODE_PREFIX="$AGENTS/node"

say() { echo "install-agents: $*" >&2; }
fail() {
  say "$*"
  say "NOT READY: the agent tests will skip (or fail with HOOKBOX_REQUIRE_AGENTS=1)"
  exit 1
}

# The version field of an installed npm package's package.json, or nothing.
npm_installed_version() {
  local pkg_json="$NODE_PREFIX/node_modules/$1/package.json"
  [ -f "$pkg_json" ] || return 0
  sed -n 's/^[[:space:]]*"version":[[:space:]]*"\([^"]*\)".*/\1/p' "$pkg_json" | head -n 1
}

# npm_install PACKAGE VERSION: installs PACKAGE@VERSION under $NODE_PREFIX unless it is there.
npm_install() {
  local pkg="$1" version="$2"
  [ "$(npm_installed_version "$pkg")" = "$version" ] && return 0
  command -v npm >/dev/null || fail "npm not found: install Node.js (>= 18) and npm"
  mkdir -p "$NODE_PREFIX" || fail "cannot create $NODE_PREFIX"
  say "npm install $pkg@$version (into $NODE_PREFIX)"
  npm install --prefix "$NODE_PREFIX" --no-audit --no-fund --save-exact --loglevel=error "$pkg@$version" >&2 ||
    fail "npm install $pkg@$version failed (no network or no npm registry?)"
  [ "$(npm_installed_version "$pkg")" = "$version" ] || fail "installed $pkg, but not version $version"
}

# Claude Code: the npm package ships the native binary (bin/claude.exe, filled
# in from the platform's optional dependency by its postinstall).
install_claude_code() {
  npm_install @anthropic-ai/claude-code "$CLAUDE_CODE_VERSION"
  local bin="$NODE_PREFIX/node_modules/.bin/claude"
  [ -x "$bin" ] || fail "$bin is missing after the install"
  local v
  v="$(DISABLE_AUTOUPDATER=1 HOME="${TMPDIR:-/tmp}" "$bin" --version 2>/dev/null)" || fail "$bin --version failed"
  echo "claude-code $v ($bin)"
}

# Codex CLI: the npm package is a node launcher; the native binary comes from
# the platform's optional dependency (@openai/codex-linux-x64 etc.).
install_codex() {
  npm_install @openai/codex "$CODEX_VERSION"
  local bin="$NODE_PREFIX/node_modules/.bin/codex"
  [ -x "$bin" ] || fail "$bin is missing after the install"
  local home v
  home="$(mktemp -d)" || fail "mktemp failed"
  v="$(CODEX_HOME="$home" "$bin" --version 2>/dev/null)"
  local rc=$?
  rm -rf "$home"
  [ $rc -eq 0 ] || fail "$bin --version failed (is the platform binary @openai/codex-<os>-<arch> installed?)"
  echo "$v ($bin)"
}

# Gemini CLI: plain JavaScript bundle (its optional native deps, keytar and
# node-pty, are not needed headless).
install_gemini() {
  npm_install @google/gemini-cli "$GEMINI_CLI_VERSION"
  local bin="$NODE_PREFIX/node_modules/.bin/gemini"
  [ -x "$bin" ] || fail "$bin is missing after the install"
  local home v
  home="$(mktemp -d)" || fail "mktemp failed"
  v="$(HOME="$home" "$bin" --version 2>/dev/null)"
  local rc=$?
  rm -rf "$home"
  [ $rc -eq 0 ] || fail "$bin --version failed"
  echo "gemini-cli $v ($bin)"
}

agents=("$@")
[ ${#agents[@]} -eq 0 ] && agents=(claude-code codex gemini)
for agent in "${agents[@]}"; do
  case "$agent" in
    claude-code) install_claude_code ;;
    codex) install_codex ;;
    gemini) install_gemini ;;
    *) fail "unknown agent: $agent (known: claude-code, codex, gemini)" ;;
  esac
done

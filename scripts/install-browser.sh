#!/usr/bin/env bash
# Installs the headless browser that tests/tests/console_browser.rs drives (the
# operator console of `hookbox serve`, docs/server.md): Debian's `chromium`
# (/usr/bin/chromium) and `chromium-driver` (/usr/bin/chromedriver, the W3C
# WebDriver server the test talks to over HTTP). apt-get, as root (or sudo).
#
# Idempotent: when both binaries are there, nothing is installed (milliseconds).
# `apt-get update` runs only when the first install fails (stale or empty
# package lists), then the install is tried once more.
#
# Usage: scripts/install-browser.sh
# Exit status: 0 when both are installed (their versions are printed), 1 with
# the reason on stderr otherwise; the test then skips, unless
# HOOKBOX_REQUIRE_BROWSER=1.
set -uo pipefail

APT_PACKAGES=(chromium chromium-driver)
CHROMIUM=/usr/bin/chromium
CHROMEDRIVER=/usr/bin/chromedriver

say() { echo "install-browser: $*" >&2; }
fail() {
  say "$*"
  say "NOT READY: tests/tests/console_browser.rs will skip (or fail with HOOKBOX_REQUIRE_BROWSER=1)"
  exit 1
}

present() { [ -x "$CHROMIUM" ] && [ -x "$CHROMEDRIVER" ]; }

if ! present; then
  command -v apt-get >/dev/null ||
    fail "apt-get not found: install ${APT_PACKAGES[*]} (Chromium and its chromedriver) by hand"
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null; then sudo=(sudo); else
      fail "not root and no sudo: run \`apt-get install ${APT_PACKAGES[*]}\` as root"
    fi
  fi
  install() {
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${APT_PACKAGES[@]}" \
      >/dev/null
  }
  say "apt-get install ${APT_PACKAGES[*]} (about 100 MB, a minute or two)"
  if ! install; then
    say "the install failed; apt-get update, then once more"
    "${sudo[@]}" apt-get update -qq >/dev/null || fail "apt-get update failed (no network or no Debian mirror?)"
    install || fail "apt-get install ${APT_PACKAGES[*]} failed even after apt-get update"
  fi
  present || fail "installed ${APT_PACKAGES[*]}, but $CHROMIUM or $CHROMEDRIVER is still missing"
fi

# Both must start, not only exist (a missing shared library shows here).
chromium_version="$("$CHROMIUM" --version 2>/dev/null)" || fail "$CHROMIUM --version failed"
driver_version="$("$CHROMEDRIVER" --version 2>/dev/null)" || fail "$CHROMEDRIVER --version failed"
echo "$chromium_version ($CHROMIUM)"
echo "$driver_version ($CHROMEDRIVER)"

#!/usr/bin/env bash
# Make sure Debian's chromium is installed: the browser tests drive it through Playwright
# (which downloads no browser of its own here).
set -euo pipefail

log() { printf '[browser] %s\n' "$*"; }
chromium=${ASANOHA_TEST_CHROMIUM:-/usr/bin/chromium}
if [ -x "$chromium" ]; then log "chromium: $("$chromium" --version 2>/dev/null || echo installed)"; exit 0; fi
SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
log "chromium: installing"
$SUDO apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
log "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo installed)"

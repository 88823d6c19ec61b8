#!/bin/sh
# Install Debian's chromium for the browser end-to-end tests (tests/browser).
#
# Playwright drives this system browser (executable_path=/usr/bin/chromium); no
# browser is ever downloaded by `playwright install`. Idempotent: does nothing when
# /usr/bin/chromium exists. Needs root and apt-get; otherwise says why and exits 1.
set -eu

CHROMIUM=/usr/bin/chromium

if [ -x "$CHROMIUM" ]; then
    echo "chromium already installed: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "cannot install chromium: $CHROMIUM is missing and this is not root." >&2
    echo "run as root (or: sudo apt-get update && sudo apt-get install -y chromium)" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "cannot install chromium: apt-get not found (not a Debian-based system)." >&2
    echo "install a chromium at $CHROMIUM by other means; the browser tests skip without it" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y --no-install-recommends chromium
"$CHROMIUM" --version

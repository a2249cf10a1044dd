#!/usr/bin/env bash
# The audit trace viewer is tested in headless Chromium: Debian's package at /usr/bin/chromium
# (nothing is downloaded by npm at install time). Installs it when it is missing and this
# user may (root with apt-get); otherwise says what to install and fails.
set -euo pipefail
[ -x /usr/bin/chromium ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "[test] /usr/bin/chromium is missing; installing Debian's chromium for the viewer tests (about a minute)" >&2
  apt-get update -qq >/dev/null 2>&1 || true
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 || true
  [ -x /usr/bin/chromium ] && exit 0
fi
echo "[test] the viewer tests need Chromium at /usr/bin/chromium: install Debian's package (apt-get install chromium)" >&2
exit 1

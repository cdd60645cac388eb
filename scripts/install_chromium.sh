#!/bin/sh
# Headless Chromium for tests/reports/test_html_chromium.py (Debian/Ubuntu; needs root).
# Without it that test is skipped with a reason.
set -eu
if command -v chromium >/dev/null 2>&1; then
    chromium --version
    exit 0
fi
apt-get update
apt-get install -y --no-install-recommends chromium
chromium --version

#!/bin/sh
# Headless Chromium and its WebDriver for the dashboard's browser tests
# (tests/reports/test_html_chromium.py, through Selenium). Debian/Ubuntu; needs root.
# Without them those tests are skipped with the reason.
set -eu
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    chromium --version
    chromedriver --version
    exit 0
fi
apt-get update
apt-get install -y --no-install-recommends chromium chromium-driver
chromium --version
chromedriver --version

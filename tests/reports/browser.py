"""Headless Chromium through Selenium, for the dashboard's browser tests and screenshots.

Needs Debian's `chromium` and `chromium-driver` (scripts/install_chromium.sh) and the
`selenium` package (the test extra). Both paths are given to Selenium, so it never looks
for (or downloads) a browser or a driver itself.
"""

from __future__ import annotations

import base64
import os
import shutil
from pathlib import Path
from typing import Optional

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
DRIVER_NAMES = ("chromedriver", "chromium-driver")


def _which(names) -> Optional[str]:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    for candidate in ("/usr/lib/chromium/chromedriver", "/usr/bin/chromedriver"):
        if any(n in candidate for n in names) and os.access(candidate, os.X_OK):
            return candidate
    return None


CHROMIUM = _which(CHROMIUM_NAMES)
CHROMEDRIVER = _which(DRIVER_NAMES)


def missing_reason() -> Optional[str]:
    """Why the browser tests cannot run here, or None."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    if CHROMIUM is None:
        return "chromium is not installed (run scripts/install_chromium.sh)"
    if CHROMEDRIVER is None:
        return "chromium-driver is not installed (run scripts/install_chromium.sh)"
    return None


def start(width: int = 1400, height: int = 1000):
    """A headless Chromium WebDriver that keeps the page's console log."""
    os.environ.setdefault("SE_OFFLINE", "true")
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--hide-scrollbars", "--no-first-run", f"--window-size={width},{height}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))


def console_errors(driver) -> list[str]:
    """The page's console messages of level SEVERE (errors) since the last call."""
    return [entry["message"] for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]


def full_page_screenshot(driver, path: Path) -> None:
    """The whole page, not just the window, as a PNG."""
    metrics = driver.execute_cdp_cmd("Page.getLayoutMetrics", {})
    size = metrics.get("cssContentSize") or metrics["contentSize"]
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1},
    })
    Path(path).write_bytes(base64.b64decode(shot["data"]))

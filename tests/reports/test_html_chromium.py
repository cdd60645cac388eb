"""Open the dashboard in headless Chromium and check the screenshot shows tables and plots.

Needs Debian's chromium (`apt-get install -y chromium`; see scripts/install_chromium.sh).
"""

import shutil
import subprocess

import pytest

from reports.cli import report_main
from tests.reports.test_render import mixed_lines

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (run scripts/install_chromium.sh to enable this test)"
)

TAB_BLUE = (31, 119, 180)  # matplotlib's first colour, used by every bar plot


def _screenshot(page, png, profile):
    command = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
        "--no-first-run", f"--user-data-dir={profile}", "--window-size=1400,2400",
        f"--screenshot={png}", page.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert png.exists(), f"chromium wrote no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"


def test_dashboard_renders_in_headless_chromium(write_results, tmp_path):
    image = pytest.importorskip("matplotlib.image")
    results = write_results(mixed_lines())
    page = tmp_path / "dash" / "report.html"
    assert report_main([str(results), "--html", str(page), "--quiet"]) == 0
    png = tmp_path / "screenshot.png"
    _screenshot(page, png, tmp_path / "profile")
    pixels = image.imread(str(png))
    height, width = pixels.shape[:2]
    assert (width, height) == (1400, 2400)
    rgb = (pixels[:, :, :3] * 255).round().astype(int)
    blue = ((abs(rgb - TAB_BLUE)).sum(axis=2) <= 6).sum()
    assert blue > 20_000, f"only {blue} plot-blue pixels: the plots did not render"
    # The table header background (#eef) shows that tables rendered too.
    header = ((abs(rgb - (0xEE, 0xEE, 0xFF))).sum(axis=2) <= 3).sum()
    assert header > 2_000
    # Text is dark and present across the page.
    dark_rows = ((rgb.sum(axis=2) < 200).any(axis=1)).sum()
    assert dark_rows > 300

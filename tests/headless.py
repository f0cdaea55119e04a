"""Headless Chromium for the report's tests and benchmark: the system's Chromium and chromedriver
(Debian: ``apt-get install chromium chromium-driver``) driven by selenium, never a browser
downloaded at run time. Flags keep it off the network: a report page must need none.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

INSTALL = ("headless Chromium is not installed: on Debian/Ubuntu run "
           "`apt-get install -y chromium chromium-driver` (as root), and "
           "`pip install -e '.[test]'` for selenium")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,900")


def _binaries() -> tuple[str | None, str | None]:
    browser = os.environ.get("CHROMIUM") or shutil.which("chromium") \
        or shutil.which("chromium-browser")
    driver = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver")
    return browser, driver


def missing() -> str | None:
    """Why the browser cannot run here (then the caller skips), or None."""
    browser, driver = _binaries()
    if not (browser and Path(browser).exists() and driver and Path(driver).exists()):
        return INSTALL
    return INSTALL if importlib.util.find_spec("selenium") is None else None


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A selenium driver on a fresh profile, with the browser console logged."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = _binaries()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    profile = tempfile.mkdtemp(prefix="report-chromium-")
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def load(driver: Any, page: Path) -> tuple[float, list[dict[str, Any]]]:
    """Open ``page``; (seconds until its load event, console messages of level SEVERE)."""
    start = time.perf_counter()
    driver.get(page.resolve().as_uri())
    elapsed = time.perf_counter() - start
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    return elapsed, errors


def svg_sizes(driver: Any, css: str = "svg.chart") -> list[tuple[float, float]]:
    """The rendered width and height of each element ``css`` selects."""
    from selenium.webdriver.common.by import By

    return [(e.size["width"], e.size["height"]) for e in driver.find_elements(By.CSS_SELECTOR, css)]

#!/usr/bin/env python3
"""A screenshot of a page (helios report --html) in Debian's headless chromium,
the browser the tests use: python3 tools/html_screenshot.py PAGE.html OUT.png"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def main() -> int:
    page, png = Path(sys.argv[1]), Path(sys.argv[2])
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,900"):
        opts.add_argument(a)
    opts.binary_location = shutil.which("chromium") or "chromium"
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "chromedriver"), options=opts)
    try:
        drv.get(page.resolve().as_uri())
        height = drv.execute_script("return document.documentElement.scrollHeight")
        drv.set_window_size(1200, min(int(height) + 40, 16000))
        errors = [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"]
        drv.save_screenshot(str(png))
        print(f"{png}: {png.stat().st_size} bytes, page height {height}, console errors {len(errors)}")
        return 1 if errors else 0
    finally:
        drv.quit()


if __name__ == "__main__":
    raise SystemExit(main())

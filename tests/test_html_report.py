"""helios report --html: the page's markup against the JSON it was made from, and
the same checks in a real headless browser (Debian's chromium through selenium,
no browser download; tools/dev installs both): no console errors, the charts
render the expected series and points, the numbers shown equal the JSON's."""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser

import pytest

from helios.cli import main

HISTORY_SERIES = 2  # two shapes below, each a series
POINTS = 5


class Page(HTMLParser):
    """Elements by tag with their attributes (the page has no script)."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, dict(attrs)))

    def find(self, tag: str, cls: str = "") -> list[dict]:
        return [a for t, a in self.tags if t == tag and (not cls or cls in (a.get("class") or "").split())]


@pytest.fixture(scope="module")
def page(tmp_path_factory, device):
    d = tmp_path_factory.mktemp("html")
    bench = d / "bench.json"
    assert (
        main(["bench", "--shapes=48x48x48,64x32x80", "--iters=3", "--warmup=1", "--ref=numpy", f"--out={bench}"]) == 0
    )
    hist = d / "history.jsonl"
    lines = []
    for shape in ("2048x2048x2048", "4096x4096x4096"):
        for i in range(POINTS):
            ms = (0.06 if shape.startswith("2048") else 0.46) * (1.3 if i == 3 else 1.0)
            lines.append(
                {
                    "date": f"2026-11-{10 + i:02d}T00:00:00Z",
                    "commit": f"{i + 1:040x}",
                    "gpu": "NVIDIA H100 80GB HBM3",
                    "gpu_uuid": "GPU-test",
                    "driver": "580.159.04",
                    "dtype": "float16",
                    "shape": shape,
                    "helios_ms": ms,
                    "cuda_ms": ms / 2.2,
                    "speedup": 1 / 2.2,
                    "variant": "coop",
                }
            )
    hist.write_text("".join(json.dumps(x) + "\n" for x in lines))
    out = d / "site"
    assert main(["report", "--html", str(out), "--history", str(hist), str(bench)]) == 0
    return {"dir": d, "html": out / "index.html", "bench": json.loads(bench.read_text()), "history": lines}


def test_the_markup_carries_every_number_of_the_json(page):
    p = Page()
    p.feed(page["html"].read_text())
    charts = p.find("svg", "chart")
    assert len(charts) == 2 * HISTORY_SERIES  # per series: ms (Helios, CUDA) and the ratio
    assert [c["data-series"] for c in charts] == ["2", "1"] * HISTORY_SERIES
    assert all(c["data-points"] == str(POINTS) for c in charts)
    points = p.find("circle", "point")
    assert len(points) == HISTORY_SERIES * 3 * POINTS
    ratios = sorted(float(c["data-value"]) for c in points if c["data-series"] == "Helios/CUDA")
    assert ratios == pytest.approx(sorted(x["helios_ms"] / x["cuda_ms"] for x in page["history"]), rel=1e-12)
    assert sorted(float(c["data-value"]) for c in points if c["data-series"] == "Helios ms") == sorted(
        x["helios_ms"] for x in page["history"]
    )
    assert len(p.find("circle", "step")) == HISTORY_SERIES  # the 30% point of each series
    cells = [float(a["data-value"]) for a in p.find("td") if a.get("data-value")]
    for r in page["bench"]["rows"]:
        assert r["heliosMs"] in cells and r["referenceMs"] in cells
    assert "http://" not in page["html"].read_text() and "https://" not in page["html"].read_text()


def _browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (tools/dev has it)")
    driver_path = shutil.which("chromedriver")
    if driver_path is None or shutil.which("chromium") is None:
        pytest.skip("Debian's chromium and chromium-driver are not installed here (tools/dev has them)")
    opts = webdriver.ChromeOptions()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,2000"):
        opts.add_argument(a)
    opts.binary_location = shutil.which("chromium")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    import os

    from selenium.webdriver.chrome.service import Service

    # The browser is not Helios code: under `make asan` it runs without the libasan preload.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    return webdriver.Chrome(service=Service(driver_path, env=env), options=opts)


def test_in_a_headless_browser(page):
    drv = _browser()
    try:
        drv.get(page["html"].resolve().as_uri())
        assert drv.title == "Helios results"
        errors = [e for e in drv.get_log("browser") if e.get("level") == "SEVERE"]
        assert not errors, errors
        # what the browser rendered: charts with their series and points, each point on the canvas
        charts = drv.execute_script(
            "return Array.from(document.querySelectorAll('svg.chart')).map(s => ({"
            "series: s.querySelectorAll('polyline.series').length,"
            "points: s.querySelectorAll('circle.point').length,"
            "w: s.getBoundingClientRect().width, h: s.getBoundingClientRect().height,"
            "inside: Array.from(s.querySelectorAll('circle.point')).every(c => {"
            "  const r = c.getBoundingClientRect(), b = s.getBoundingClientRect();"
            "  return r.width > 0 && r.left >= b.left && r.right <= b.right && r.top >= b.top && r.bottom <= b.bottom;"
            "})}))"
        )
        assert len(charts) == 2 * HISTORY_SERIES
        for i, c in enumerate(charts):
            series = 2 if i % 2 == 0 else 1
            assert c["series"] == series and c["points"] == series * POINTS
            assert c["w"] > 100 and c["h"] > 100 and c["inside"]
        # the bench table as shown equals the JSON
        shown = drv.execute_script(
            "return Array.from(document.querySelectorAll('table.bench tr[data-shape]')).map(tr => ["
            "tr.dataset.shape, tr.cells[1].textContent, Number(tr.cells[1].dataset.value)])"
        )
        rows = {r["shape"]: r for r in page["bench"]["rows"]}
        assert [s for s, _, _ in shown] == list(rows)
        for shape, text, value in shown:
            assert value == rows[shape]["heliosMs"] and text == f"{rows[shape]['heliosMs']:.4g}"
        shot = page["dir"] / "page.png"
        assert drv.save_screenshot(str(shot)) and shot.stat().st_size > 10000
    finally:
        drv.quit()

"""The accuracy report's page in headless Chromium: it loads from disk with no console error, and every
embedded figure decodes (naturalWidth > 0).

Both the committed snapshot (reports/accuracy/index.html) and a report generated here in quick mode are
checked.  The browser is Debian's chromium with its chromium-driver, driven by selenium with explicit paths,
so nothing is downloaded (SE_OFFLINE keeps Selenium Manager from trying).  Without them the test skips and
says why, except under CI=true, where scripts/setup.sh has installed them and their absence is a failure.
"""
import os
import pathlib
import shutil
import subprocess

import pytest

LOWBIT = os.environ.get("LOWBIT", "lowbit")
ROOT = pathlib.Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "reports" / "accuracy" / "index.html"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def missing(why):
    if os.environ.get("CI") == "true":
        pytest.fail(why + " (scripts/setup.sh installs it)")
    pytest.skip(why)


@pytest.fixture(scope="module")
def driver():
    os.environ["SE_OFFLINE"] = "true"
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing("selenium is not installed")
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            missing("%s is not installed (Debian: chromium, chromium-driver)" % path)
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--allow-file-access-from-files", "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    d.set_page_load_timeout(60)
    yield d
    d.quit()


def check_page(driver, path):
    driver.get(pathlib.Path(path).resolve().as_uri())
    assert driver.execute_script("return document.readyState") == "complete"
    assert "lowbit accuracy report" in driver.title
    images = driver.execute_script(
        "return Array.from(document.images).map(i => [i.alt, i.complete, i.naturalWidth, i.naturalHeight,"
        " i.src.slice(0, 22)]);")
    assert len(images) >= 4, images
    for alt, complete, width, height, src in images:
        assert src == "data:image/png;base64,", (alt, src)
        assert complete and width > 0 and height > 0, (alt, width, height)
    errors = [e for e in driver.get_log("browser") if e.get("level") in ("SEVERE", "ERROR", "WARNING")]
    assert not errors, errors
    # Every section is there.
    for anchor in ("figures", "schemes", "gemm", "contracts", "profiles", "hardware"):
        assert driver.execute_script("return document.getElementById(arguments[0]) !== null;", anchor), anchor
    # Each figure as the browser draws it: a screenshot of the element, not blank (it holds ink of several
    # colours, not one flat fill).
    from PIL import Image
    import io
    from selenium.webdriver.common.by import By
    for img in driver.find_elements(By.TAG_NAME, "img"):
        driver.execute_script("arguments[0].scrollIntoView();", img)
        shot = Image.open(io.BytesIO(img.screenshot_as_png)).convert("RGB")
        colours = shot.getcolors(maxcolors=1 << 16)
        assert colours is None or len(colours) > 20, (img.get_attribute("alt"), len(colours or []))
    # The hardware runs read as tables a person reads: none wider than the page (they were once hundreds of
    # columns), no Python spellings or JSON in a cell.
    tables = driver.execute_script(
        "const h = document.getElementById('hardware'); const out = []; let e = h.nextElementSibling;"
        "while (e && e.tagName !== 'H2') { e.querySelectorAll('table').forEach(t => out.push("
        "[t.scrollWidth, t.rows[0] ? t.rows[0].cells.length : 0, t.innerText])); e = e.nextElementSibling; }"
        "return out;")
    for width, columns, text in tables:
        assert columns <= 12 and width <= 1400, (width, columns, text[:200])
        assert "True" not in text.split() and "False" not in text.split() and '{"' not in text, text[:200]


def test_committed_snapshot(driver):
    assert SNAPSHOT.exists(), "reports/accuracy/index.html is not committed (lowbit report --out reports/accuracy)"
    check_page(driver, SNAPSHOT)


def test_quick_report(driver, tmp_path):
    p = subprocess.run([LOWBIT, "report", "--quick", "--out", str(tmp_path)], capture_output=True, text=True,
                       check=False)
    if p.returncode != 0 and "matplotlib" in p.stderr:
        missing("matplotlib is not installed")
    assert p.returncode == 0, p.stderr
    check_page(driver, tmp_path / "index.html")

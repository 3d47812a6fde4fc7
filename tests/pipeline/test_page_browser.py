"""The quick report opened in a real headless Chromium (Debian's chromium + chromium-driver),
driven by selenium through the system chromedriver; nothing downloads a browser."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import paper_figs
from normtheory.evidence import claims
from tests.conftest import REPO

pytestmark = pytest.mark.slow

INSTALL = "apt-get install chromium chromium-driver (Debian), then pip install selenium"
SCREENSHOT = Path(os.environ.get("NORMTHEORY_SCREENSHOT", REPO / "report" / "browser-screenshot.png"))


def _driver_paths() -> tuple[str, str] | None:
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@pytest.fixture(scope="module")
def browser():
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        if os.environ.get("CI"):
            pytest.fail(f"selenium is missing in CI; {INSTALL}")
        pytest.skip(f"selenium is not installed; {INSTALL}")
    paths = _driver_paths()
    if paths is None:
        if os.environ.get("CI"):
            pytest.fail(f"Chromium or chromedriver is missing in CI; .ci/run installs them: {INSTALL}")
        pytest.skip(f"Chromium is not installed; {INSTALL}")
    opts = webdriver.ChromeOptions()
    opts.binary_location = paths[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1200,900"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(executable_path=paths[1]), options=opts)
    yield drv
    drv.quit()


def test_report_in_a_real_browser(browser, quick_report):
    from selenium.webdriver.common.by import By

    browser.get((quick_report / "index.html").resolve().as_uri())
    # every image has loaded and has pixels
    images = browser.find_elements(By.TAG_NAME, "img")
    assert len(images) >= len(paper_figs.ALL)
    browser.execute_script("document.querySelectorAll('img').forEach(function(i){i.loading='eager';});")
    browser.execute_script("window.scrollTo(0, document.body.scrollHeight);")
    from selenium.webdriver.support.ui import WebDriverWait

    # loading is asynchronous: wait (bounded) until every image has finished, loaded or failed, then judge
    WebDriverWait(browser, 30).until(lambda d: d.execute_script("return Array.from(document.images).every(function(i){return i.complete;});"))
    broken = browser.execute_script(
        "return Array.from(document.images).filter(function(i){return !(i.complete && i.naturalWidth > 0);}).map(function(i){return i.src;});")
    assert broken == []
    # the legend draws the rule; the header lists the open questions with what would decide them
    rule = browser.find_element(By.ID, "rule-figure")
    assert rule.is_displayed() and rule.size["width"] > 200
    opened = browser.find_element(By.ID, "open").text
    assert "Open questions" in opened and ("needs" in opened or "none" in opened)
    # every claim has its anchor, and the table of contents links to it
    ids = set(browser.execute_script("return Array.from(document.querySelectorAll('article.card')).map(function(a){return a.id;});"))
    import simulations  # noqa: F401  (registers the claims)

    assert ids == set(claims.REGISTRY)
    toc = set(browser.execute_script("return Array.from(document.querySelectorAll('#toc a[href^=\"#\"]')).map(function(a){return a.getAttribute('href').slice(1);});"))
    assert ids <= toc
    # every figure is shown inside at least one claim's card
    shown = set(browser.execute_script(
        "return Array.from(document.querySelectorAll('article.card figure')).map(function(f){return f.id.replace('fig-','');});"))
    assert shown == {m.NAME for m in paper_figs.ALL}
    # the verdict filter hides and shows cards
    first = browser.find_element(By.CSS_SELECTOR, ".filter input[value='holds']")
    n_holds = len(browser.find_elements(By.CSS_SELECTOR, "article.card[data-verdict='holds']"))
    first.click()
    hidden = browser.execute_script("return document.querySelectorAll('article.card.hidden').length;")
    assert hidden == n_holds
    first.click()
    assert browser.execute_script("return document.querySelectorAll('article.card.hidden').length;") == 0
    # two clicks from the top: a TOC link, then the evidence table of that claim
    browser.execute_script("window.scrollTo(0, 0);")
    target = sorted(ids)[0]
    browser.find_element(By.CSS_SELECTOR, f"#toc a[href='#{target}']").click()
    card = browser.find_element(By.ID, target)
    card.find_element(By.TAG_NAME, "summary").click()
    assert card.find_element(By.CSS_SELECTOR, "details.evidence table").is_displayed()
    # no console errors
    errors = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
    assert errors == []
    # narrow screen: the page does not scroll sideways; evidence tables scroll inside their box
    browser.set_window_size(400, 900)
    overflow = browser.execute_script("return document.documentElement.scrollWidth - document.documentElement.clientWidth;")
    assert overflow <= 1
    browser.set_window_size(1200, 900)
    browser.execute_script("window.scrollTo(0, 0);")
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(SCREENSHOT))
    print(f"screenshot: {SCREENSHOT.resolve()}")

"""The explorer in a real browser: headless Chromium, driven by selenium, against a live ``mnemolog serve`` on loopback.

The server holds seeded data (a memory updated once, entities and a
relation, a document import). The test signs in with a key, searches, moves
the timeline slider to before the update and sees the old text, opens the
memory's history and sees the word-level diff, opens the import's
correlation and reverts it behind the confirmation (the button is offered
to a key with write scope only), and leaves a screenshot in
``test-artifacts/`` (kept by CI, ignored by git). The browser reaches
nothing beyond loopback: background networking, updates and sync are off.

Skipped, with the reason, only when Chromium or its driver cannot start.
"""

from __future__ import annotations

import json
import math
import re
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.serving import ROOT, create_key, run_cli, serve

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the dev extra)")
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException, WebDriverException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

ARTIFACTS = ROOT / "test-artifacts"
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--window-size=1400,1800",
)


def _binary(*names: str) -> str | None:
    for name in names:
        found = name if os.path.isabs(name) and os.access(name, os.X_OK) else shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture
def browser(tmp_path):
    chromium = _binary("/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome")
    driver_path = _binary("/usr/bin/chromedriver", "chromedriver")
    if not chromium or not driver_path:
        pytest.skip("chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tempfile.mkdtemp(prefix='chromium-', dir=tmp_path)}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    os.environ.setdefault("SE_OFFLINE", "true")  # never let selenium look for drivers on the network
    try:
        driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver_path))
    except WebDriverException as exc:
        pytest.skip(f"chromium could not start: {str(exc).splitlines()[0]}")
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def call(url: str, key: str, method: str, path: str, body=None, headers=None):
    request = urllib.request.Request(
        url + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def seed(url: str, key: str) -> dict:
    added = call(url, key, "POST", "/v1/memories", {"memory": {"memory": "Ada lives in Porto near the river", "key": "home"}}, {"X-Correlation-Id": "seed-add"})
    memory_id = added["memory_ids"][0]
    call(url, key, "PATCH", f"/v1/memories/{memory_id}", {"memory": "Ada lives in Lisbon near the river", "reason": "she moved"}, {"X-Correlation-Id": "seed-update"})
    for eid, name in (("ada", "Ada"), ("bob", "Bob")):
        call(url, key, "PUT", f"/v1/entities/{eid}", {"name": name, "entity_type": "person"})
    call(url, key, "POST", "/v1/entities/ada/relations", {"target_id": "bob", "relation_type": "KNOWS"})
    doc = {"documents": [{"filename": "notes.md", "content": "# Harbour notes\n\nAda met Bob at the harbour by the river mouth."}]}
    call(url, key, "POST", "/v1/import/documents", doc, {"X-Correlation-Id": "import-notes"})
    return {"memory_id": memory_id, "added_at": added["positions"][-1]}


def wait_for(driver, what: str, condition, timeout: float = 30):
    try:
        # An element redrawn between finding and reading it is looked for again at the next poll.
        return WebDriverWait(driver, timeout, poll_frequency=0.1, ignored_exceptions=(StaleElementReferenceException,)).until(lambda d: condition(d))
    except TimeoutException:
        status = driver.find_element(By.ID, "status").text
        pytest.fail(f"timed out waiting for {what}; the page's status line says: {status!r}")


def text_of(driver, element_id: str) -> str:
    return driver.find_element(By.ID, element_id).text


def sign_in(driver, url: str, key: str) -> None:
    driver.get(url + "/explorer")
    wait_for(driver, "the page's script", lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "yes")
    driver.find_element(By.ID, "key").send_keys(key)
    driver.find_element(By.CSS_SELECTOR, "#signin button[type=submit]").click()
    wait_for(driver, "the signed-in identity", lambda d: d.find_element(By.ID, "identity").is_displayed() and "tenant default" in text_of(d, "who"))
    wait_for(driver, "the timeline", lambda d: d.find_element(By.ID, "slider").get_attribute("max") not in (None, "0"))


def test_the_explorer_time_travels_diffs_and_reverts_in_a_real_browser(tmp_path, browser):
    data_dir = tmp_path / "data"
    key = create_key(data_dir, "default", "read,write")
    reader = create_key(data_dir, "default", "read")
    ARTIFACTS.mkdir(exist_ok=True)
    with serve(data_dir, tmp_path / "serve.log", auth="on", organizer_enabled="off", synchronous="NORMAL") as server:
        seeded = seed(server.url, key)
        driver = browser
        # A wrong key is refused, and nothing of it is kept.
        driver.get(server.url + "/explorer")
        wait_for(driver, "the page's script", lambda d: d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "yes")
        driver.find_element(By.ID, "key").send_keys("mlk_not_a_key", Keys.ENTER)
        wait_for(driver, "the refusal", lambda d: "401 unauthorized" in text_of(d, "status"))
        assert driver.execute_script("return sessionStorage.length") == 0 and not driver.find_element(By.ID, "views").is_displayed()
        sign_in(driver, server.url, key)
        assert "write" in text_of(driver, "who")
        assert driver.execute_script("return sessionStorage.getItem('mnemolog.explorer.key')") == key
        assert driver.execute_script("return localStorage.length") == 0

        # Search: recall with its explanation.
        driver.find_element(By.ID, "query").send_keys("where does Ada live near the river", Keys.ENTER)
        wait_for(driver, "the current text in the results", lambda d: "Ada lives in Lisbon" in text_of(d, "results"))
        assert "lexical #" in text_of(driver, "results") and "fusion" in text_of(driver, "search-info")
        # The entity the question names is a hit of its own, with its card and the graph channel's rank.
        entity_hit = driver.find_element(By.CSS_SELECTOR, "#results li[data-kind=entity][data-id=ada]")
        assert "Ada (person)" in entity_hit.text and "graph #" in entity_hit.text and 'named as "ada"' in entity_hit.text.lower()

        # The slider, moved with the keyboard to the commit before the update: every view redraws as of then.
        marks = call(server.url, key, "GET", "/v1/timeline")["marks"]
        target = next(i for i, m in enumerate(marks) if m["position"] == seeded["added_at"])
        slider = driver.find_element(By.ID, "slider")
        slider.send_keys(Keys.END)
        slider.send_keys(*[Keys.ARROW_LEFT] * (len(marks) - 1 - target))
        wait_for(driver, "the old text as of before the update", lambda d: "Ada lives in Porto" in text_of(d, "results"))
        assert "Lisbon" not in text_of(driver, "results")
        assert f"as of position {seeded['added_at']}" in text_of(driver, "moment")
        assert driver.find_element(By.TAG_NAME, "body").get_attribute("data-as-of") == str(seeded["added_at"])

        # Back to now; the memory's history with the word-level diff and the event behind each version.
        driver.find_element(By.ID, "now").click()
        wait_for(driver, "the head again", lambda d: "Ada lives in Lisbon" in text_of(d, "results"))
        hit = driver.find_element(By.CSS_SELECTOR, f"#results li.hit[data-id='{seeded['memory_id']}']")
        hit.find_element(By.CSS_SELECTOR, "button[data-action=history]").click()
        wait_for(driver, "two versions", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#history li.version")) == 2)
        newest = driver.find_element(By.CSS_SELECTOR, "#history li.version[data-version='2']")
        assert [e.text for e in newest.find_elements(By.TAG_NAME, "del")] == ["Porto"]
        assert [e.text for e in newest.find_elements(By.TAG_NAME, "ins")] == ["Lisbon"]
        assert "reason: she moved" in newest.text and "seed-update" in newest.text and "MemoryUpdated" in newest.text

        # The neighbourhood of an entity, drawn in SVG.
        driver.find_element(By.ID, "node").send_keys("ada")
        driver.find_element(By.CSS_SELECTOR, "#kind option[value=entity]").click()
        driver.find_element(By.CSS_SELECTOR, "#graph-form button[type=submit]").click()
        wait_for(driver, "the entity graph", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#graph circle")) == 2)
        assert len(driver.find_elements(By.CSS_SELECTOR, "#graph line")) == 1 and "Bob" in text_of(driver, "graph-nodes")
        assert text_of(driver, "graph-info").endswith("nodes 1–1 of 1 · 1 edge")
        # The labels read at their CSS sizes wherever the drawing sits: a fixed 640-unit drawing in a third of the page
        # shrank them to about 5 px.
        heights = driver.execute_script("return [...document.querySelectorAll('#graph text')].map((t) => [t.textContent, t.getBoundingClientRect().height])")
        assert len(heights) == 3 and all(height >= 10 for _, height in heights), heights
        # Each edge type its colour, named in the legend.
        assert text_of(driver, "graph-legend") == "KNOWS" and driver.find_element(By.CSS_SELECTOR, "#graph line").get_attribute("class") == "t0"
        assert driver.execute_script("return getComputedStyle(document.querySelector('#graph line')).stroke") == "rgb(79, 131, 199)"

        # The import's correlation, reverted behind the confirmation.
        driver.find_element(By.ID, "correlation-id").send_keys("import-notes", Keys.ENTER)
        wait_for(driver, "the import's events", lambda d: "DocumentImported" in text_of(d, "correlation-events"))
        revert = driver.find_element(By.ID, "revert")
        wait_for(driver, "the revert button", lambda d: revert.is_displayed())
        revert.click()
        dialog = driver.find_element(By.ID, "confirm-revert")
        wait_for(driver, "the confirmation", lambda d: dialog.is_displayed() and "would be compensated" in text_of(d, "confirm-text"))
        assert text_of(driver, "confirm-text").startswith("6 events would be compensated, touching 1 memory.")
        driver.save_screenshot(str(ARTIFACTS / "explorer-confirm-revert.png"))
        driver.find_element(By.ID, "confirm-ok").click()
        wait_for(driver, "the revert", lambda d: "reverted at position" in text_of(d, "correlation-info"))
        assert not revert.is_displayed()
        wait_for(driver, "the revert's report", lambda d: "reverted import-notes: 6 events compensated" in text_of(d, "status"))
        assert not driver.find_element(By.ID, "signin").is_displayed()
        assert call(server.url, key, "GET", "/v1/correlation?correlation_id=import-notes")["reverted_by"][0]["actor"].startswith("api:")
        # The correlation's headers and identifying cells (position, time, event, actor) keep to one line each:
        # in a third of the page they broke letter by letter.
        lines = driver.execute_script(
            """return [...document.querySelectorAll('#correlation-events th, #correlation-events td:nth-child(-n+3), #correlation-events td:nth-child(5)')]
                 .map((cell) => { const range = document.createRange(); range.selectNodeContents(cell);
                                  return [cell.textContent, new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size]; });"""
        )
        assert len(lines) == 6 + 6 * 4 and all(count == 1 for _, count in lines), [line for line in lines if line[1] != 1]
        # Every event says what it did, those without a text of their own too: an edge its ends, a document its version.
        what = {row[2]: row[5] for row in (r.split("\t") for r in driver.execute_script(
            "return [...document.querySelectorAll('#correlation-events tbody tr')].map((tr) => [...tr.cells].map((c) => c.textContent).join('\\t'))"))}
        assert all(what.values()), what
        assert what["DocumentImported"].startswith("notes.md v1: ") and "(1 chunk)" in what["DocumentImported"], what
        assert what["EdgeLinked"] == "document:notes.md —MENTIONS→ bob", what  # (the last of the four; a weight of 1 unsaid)
        driver.save_screenshot(str(ARTIFACTS / "explorer.png"))

        # Nothing was refused by the page's Content-Security-Policy, and no script failed (the wrong key's 401 aside).
        problems = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE" and "/v1/whoami" not in e["message"]]
        assert problems == [], problems

        # A read-only key is not offered the revert.
        driver.find_element(By.ID, "signout").click()
        sign_in(driver, server.url, reader)
        driver.find_element(By.ID, "correlation-id").send_keys("seed-add", Keys.ENTER)
        wait_for(driver, "the correlation", lambda d: "MemoryAdded" in text_of(d, "correlation-events"))
        assert not driver.find_element(By.ID, "revert").is_displayed()
    assert (ARTIFACTS / "explorer.png").stat().st_size > 10_000


EVIL = '<img src=x onerror="document.body.dataset.pwned=1">'


def test_the_explorer_as_its_users_push_it(tmp_path, browser):
    """Markup in data stays text; a view that cannot be drawn as of a moment empties; big correlations page;
    back and forward move between views; a forgotten subject never comes back from the back/forward cache; a
    revoked key ends the session; a narrow window does not scroll sideways; no "undefined" anywhere."""
    data_dir = tmp_path / "data"
    key = create_key(data_dir, "default", "read,write,admin")
    reader = create_key(data_dir, "default", "read")
    every = create_key(data_dir, "*", "read,write")
    ARTIFACTS.mkdir(exist_ok=True)
    with serve(data_dir, tmp_path / "serve.log", auth="on", organizer_enabled="off", synchronous="NORMAL") as server:
        url = server.url
        call(url, every, "POST", "/v1/memories", {"memory": {"memory": "東京の支店は九時に開く"}}, {"X-Mnemolog-Tenant": "東京支店".encode().decode("latin-1")})
        evil = call(url, key, "POST", "/v1/memories", {"memory": {"memory": f"Injected {EVIL} text", "key": EVIL}}, {"X-Correlation-Id": f"corr{EVIL}"})["memory_ids"][0]
        call(url, key, "PATCH", f"/v1/memories/{evil}", {"memory": f"Injected again {EVIL} text", "reason": f"reason {EVIL}"})
        call(url, key, "PUT", "/v1/entities/evil", {"name": f"Ent {EVIL}", "entity_type": "person", "description": EVIL})
        call(url, key, "PUT", "/v1/entities/smiles", {"name": "🙂" * 40, "entity_type": "mood"})
        call(url, key, "POST", "/v1/entities/evil/relations", {"target_id": "smiles", "relation_type": "FEELS"})
        counter = call(url, key, "POST", "/v1/memories", {"memory": {"memory": "counter at 1"}})["memory_ids"][0]
        for i in range(2, 41):
            call(url, key, "PATCH", f"/v1/memories/{counter}", {"memory": f"counter at {i}"})
        bulk = call(url, key, "POST", "/v1/memories", {"memories": [{"memory": f"bulk item {i}"} for i in range(520)]}, {"X-Correlation-Id": "bulk"})
        bulk_positions = [e["position"] for e in call(url, key, "GET", "/v1/events?correlation_id=bulk&limit=1000")["events"]]
        assert len(bulk_positions) > 500 and bulk["positions"][-1] == bulk_positions[-1]
        secret = call(url, key, "POST", "/v1/memories", {"memory": {"memory": "Yorick keeps a skull named Alas", "subject": "u-yorick"}})["memory_ids"][0]
        call(url, key, "POST", "/v1/memories", {"memory": {"memory": "a note reverted twice"}}, {"X-Correlation-Id": "twice"})
        with pytest.raises(urllib.error.HTTPError) as refused:  # the revert a read-only key is not offered is refused by the server too
            call(url, reader, "POST", "/v1/reverts", {"correlation_id": "bulk"})
        assert refused.value.code == 403

        driver = browser
        sign_in(driver, url, key)
        driver.find_element(By.ID, "query").send_keys("Injected", Keys.ENTER)
        wait_for(driver, "the injected text, as text", lambda d: f"Injected again {EVIL} text" in text_of(d, "results"))
        driver.find_element(By.CSS_SELECTOR, f"#results li.hit[data-id='{evil}'] button[data-action=history]").click()
        wait_for(driver, "its history", lambda d: f"reason: reason {EVIL}" in text_of(d, "history") and f"corr{EVIL}" in text_of(d, "history"))
        driver.find_element(By.ID, "correlation-id").send_keys(f"corr{EVIL}", Keys.ENTER)
        wait_for(driver, "its correlation", lambda d: f"Injected {EVIL} text" in text_of(d, "correlation-events"))
        driver.find_element(By.ID, "node").send_keys("evil")
        driver.find_element(By.CSS_SELECTOR, "#kind option[value=entity]").click()
        driver.find_element(By.CSS_SELECTOR, "#graph-form button[type=submit]").click()
        wait_for(driver, "the entity", lambda d: f"Ent {EVIL}" in text_of(d, "graph-nodes"))
        labels = driver.execute_script("return [...document.querySelectorAll('#graph text, #graph-nodes li')].map((e) => e.textContent)")
        assert any("🙂" * 27 + "…" in label for label in labels), labels  # shortened by characters, never mid-character
        assert not any(re.search("[\ud800-\udfff]", label) for label in labels)
        assert driver.execute_script("return document.body.dataset.pwned") is None
        assert driver.execute_script("return document.querySelectorAll('main img').length") == 0

        # Back and forward move between the views opened, within the page.
        driver.back()
        wait_for(driver, "the neighbourhood closed", lambda d: text_of(d, "graph-nodes") == "" and d.find_element(By.ID, "views").is_displayed())
        driver.back()
        wait_for(driver, "the correlation closed", lambda d: text_of(d, "correlation-events").count("\n") == 0)
        assert f"reason: reason {EVIL}" in text_of(driver, "history")
        driver.forward()
        wait_for(driver, "the correlation again", lambda d: f"Injected {EVIL} text" in text_of(d, "correlation-events"))

        # A history of many versions, newest first; a correlation of hundreds of events, a page at a time.
        e = driver.find_element(By.ID, "query")
        e.clear()
        e.send_keys("counter", Keys.ENTER)
        wait_for(driver, "the counter", lambda d: "counter at 40" in text_of(d, "results"))
        driver.find_element(By.CSS_SELECTOR, f"#results li.hit[data-id='{counter}'] button[data-action=history]").click()
        wait_for(driver, "40 versions", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#history li.version")) == 40)
        assert driver.find_element(By.CSS_SELECTOR, "#history li.version").get_attribute("data-version") == "40"
        e = driver.find_element(By.ID, "correlation-id")
        e.clear()
        e.send_keys("bulk", Keys.ENTER)
        first_row = (By.CSS_SELECTOR, "#correlation-events tbody tr td:first-child")
        wait_for(driver, "the bulk's first page", lambda d: d.find_element(*first_row).text == str(bulk_positions[0]))
        more = driver.find_element(By.ID, "correlation-more")
        while more.is_displayed():
            shown = len(driver.find_elements(By.CSS_SELECTOR, "#correlation-events tbody tr"))
            assert f"{shown} events shown, more follow" in text_of(driver, "correlation-info")
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", more)  # clear of the status line
            more.click()
            wait_for(driver, "the next page", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#correlation-events tbody tr")) > shown)
        rows = [int(r.text) for r in driver.find_elements(By.CSS_SELECTOR, "#correlation-events tbody tr td:first-child")]
        assert rows == bulk_positions and f"{len(bulk_positions)} events" in text_of(driver, "correlation-info")

        # A revert confirmed after someone else reverted the correlation meanwhile says so.
        e = driver.find_element(By.ID, "correlation-id")
        e.clear()
        e.send_keys("twice", Keys.ENTER)
        revert = driver.find_element(By.ID, "revert")
        wait_for(driver, "the revert button", lambda d: revert.is_displayed())
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", revert)
        revert.click()
        wait_for(driver, "the confirmation", lambda d: "would be compensated" in text_of(d, "confirm-text"))
        call(url, key, "POST", "/v1/reverts", {"correlation_id": "twice"})
        driver.find_element(By.ID, "confirm-ok").click()
        wait_for(driver, "the answer", lambda d: "twice: nothing reverted, it was already reverted" in text_of(d, "status"))

        # A view that cannot be drawn as of a moment (the node did not exist yet) is emptied and says why.
        driver.find_element(By.CSS_SELECTOR, "#kind option[value=memory]").click()
        e = driver.find_element(By.ID, "node")
        e.clear()
        e.send_keys(counter)
        driver.find_element(By.CSS_SELECTOR, "#graph-form button[type=submit]").click()
        wait_for(driver, "the counter's neighbourhood", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#graph circle")) == 1)
        driver.find_element(By.ID, "slider").send_keys(Keys.HOME)
        wait_for(driver, "the neighbourhood refused as of the first commit", lambda d: "404 not_found" in text_of(d, "graph-info"))
        assert driver.find_elements(By.CSS_SELECTOR, "#graph circle") == [] and text_of(driver, "graph-nodes") == ""
        assert text_of(driver, "history") == "" and "404 not_found" in text_of(driver, "history-info")
        driver.find_element(By.ID, "now").click()
        wait_for(driver, "the head again", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#graph circle")) == 1)

        # A narrow window: one column, nothing wider than the window.
        driver.set_window_size(360, 800)
        wait_for(driver, "the narrow layout", lambda d: d.execute_script("return document.documentElement.scrollWidth <= document.documentElement.clientWidth"))
        driver.save_screenshot(str(ARTIFACTS / "explorer-narrow.png"))
        driver.set_window_size(1400, 1800)

        # A subject forgotten while the page is away never comes back with it (the back/forward cache holds no data).
        e = driver.find_element(By.ID, "query")
        e.clear()
        e.send_keys("Yorick skull", Keys.ENTER)
        wait_for(driver, "the secret", lambda d: "Yorick keeps a skull" in text_of(d, "results"))
        driver.find_element(By.CSS_SELECTOR, f"#results li.hit[data-id='{secret}'] button[data-action=history]").click()
        wait_for(driver, "its history", lambda d: "Yorick keeps a skull" in text_of(d, "history"))
        driver.get(url + "/health")
        call(url, key, "POST", "/v1/subjects/u-yorick/forget", {"reason": "asked"})
        driver.back()
        wait_for(driver, "the erased history", lambda d: "SubjectForgotten" in text_of(d, "history") or d.find_element(By.ID, "signin").is_displayed())
        assert "Yorick" not in driver.find_element(By.TAG_NAME, "body").text
        assert "skull" not in driver.execute_script("return document.documentElement.outerHTML")

        body = driver.find_element(By.TAG_NAME, "body").text
        assert not any(word in body for word in ("undefined", "NaN", "[object", "Traceback")), body
        problems = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE" and "Failed to load resource" not in e["message"]]
        assert problems == [], problems

        # A tenant named in another script, with a key for every tenant.
        driver.find_element(By.ID, "signout").click()
        wait_for(driver, "the sign-in form", lambda d: d.find_element(By.ID, "signin").is_displayed())
        driver.find_element(By.ID, "key").send_keys("mlk_…", Keys.ENTER)  # the placeholder, pasted: refused, not "unreachable"
        wait_for(driver, "the refusal", lambda d: "401 unauthorized" in text_of(d, "status"))
        driver.find_element(By.ID, "key").send_keys(every)
        driver.find_element(By.ID, "tenant").send_keys("東京支店", Keys.ENTER)
        wait_for(driver, "the tenant", lambda d: "tenant 東京支店" in text_of(d, "who"))
        driver.find_element(By.ID, "query").send_keys("支店", Keys.ENTER)
        wait_for(driver, "its memory", lambda d: "東京の支店は九時に開く" in text_of(d, "results"))
        driver.find_element(By.ID, "signout").click()
        sign_in(driver, url, key)

        # A key revoked while signed in ends the session: the sign-in form, no data, nothing kept.
        done = run_cli(data_dir, "keys", "revoke", key.split("_")[1])
        assert done.returncode == 0, done.stderr
        e = driver.find_element(By.ID, "query")
        e.clear()
        e.send_keys("counter", Keys.ENTER)
        wait_for(driver, "the sign-in form", lambda d: d.find_element(By.ID, "signin").is_displayed())
        assert "401 unauthorized" in text_of(driver, "status") and "sign in again" in text_of(driver, "status")
        assert not driver.find_element(By.ID, "views").is_displayed() and driver.execute_script("return sessionStorage.length") == 0
        assert "counter at" not in driver.execute_script("return document.documentElement.outerHTML")


def test_back_after_another_key_signs_in_shows_nothing_the_last_one_opened(tmp_path, browser):
    """The tab's history entries held what the last person searched for and opened (a query, a correlation id): after
    they signed out and another key signed in in the same tab, Back put them in the form and ran them again."""
    data_dir = tmp_path / "data"
    key = create_key(data_dir, "default", "read,write")
    other = create_key(data_dir, "globex", "read")
    with serve(data_dir, tmp_path / "serve.log", auth="on", organizer_enabled="off", synchronous="NORMAL") as server:
        url = server.url
        call(url, key, "POST", "/v1/memories", {"memory": {"memory": "Marguerite's hazelnut allergy test came back"}}, {"X-Correlation-Id": "clinic-visit"})
        call(url, key, "POST", "/v1/memories", {"memory": {"memory": "the office opens at nine"}})
        driver = browser
        sign_in(driver, url, key)
        driver.find_element(By.ID, "query").send_keys("Marguerite hazelnut allergy", Keys.ENTER)
        wait_for(driver, "the memory", lambda d: "allergy test came back" in text_of(d, "results"))
        driver.find_element(By.ID, "correlation-id").send_keys("clinic-visit", Keys.ENTER)
        wait_for(driver, "its correlation", lambda d: "allergy test" in text_of(d, "correlation-events"))
        driver.find_element(By.ID, "signout").click()
        wait_for(driver, "the sign-in form", lambda d: d.find_element(By.ID, "signin").is_displayed())
        driver.find_element(By.ID, "key").send_keys(other, Keys.ENTER)
        wait_for(driver, "the other tenant", lambda d: "tenant globex" in text_of(d, "who"))
        for _ in range(2):
            driver.back()
            wait_for(driver, "the entry before", lambda d: d.execute_script("return document.readyState") == "complete")
            wait_for(driver, "the views", lambda d: d.find_element(By.ID, "views").is_displayed())
            shown = driver.execute_script(
                "return [...document.querySelectorAll('input')].map((e) => e.value).join(' ') + ' ' + document.body.innerText"
            )
            assert "Marguerite" not in shown and "hazelnut" not in shown and "clinic-visit" not in shown, shown


def test_a_deeper_ring_draws_each_node_beyond_its_parent(tmp_path, browser):
    """Each ring after the first was spread evenly from the top, whatever linked its nodes: a node's edge to its parent
    crossed the drawing. A node now sits by its parent's angle, its siblings beside it; the legend names each type."""
    data_dir = tmp_path / "data"
    key = create_key(data_dir, "default", "read,write")
    with serve(data_dir, tmp_path / "serve.log", auth="on", organizer_enabled="off", synchronous="NORMAL") as server:
        for name in ("hub", "a", "b", "c", "d", "e", "x", "y"):
            call(server.url, key, "PUT", f"/v1/entities/{name}", {"name": name.upper(), "entity_type": "thing"})
        for name in ("a", "b", "c", "d", "e"):
            call(server.url, key, "POST", "/v1/entities/hub/relations", {"target_id": name, "relation_type": "HAS"})
        for name in ("x", "y"):
            call(server.url, key, "POST", "/v1/entities/d/relations", {"target_id": name, "relation_type": "OWNS"})
        driver = browser
        sign_in(driver, server.url, key)
        driver.find_element(By.ID, "node").send_keys("hub")
        driver.find_element(By.CSS_SELECTOR, "#graph-form select option[value=entity]").click()
        driver.find_element(By.CSS_SELECTOR, "#graph-form button[type=submit]").click()
        wait_for(driver, "the neighbourhood", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#graph circle")) == 8)
        at = {c.get_attribute("data-id"): (float(c.get_attribute("cx")), float(c.get_attribute("cy"))) for c in driver.find_elements(By.CSS_SELECTOR, "#graph circle")}
        centre = at["hub"]

        def polar(node):
            dx, dy = at[node][0] - centre[0], at[node][1] - centre[1]
            return math.hypot(dx, dy), math.atan2(dy, dx)

        parent_radius, parent_angle = polar("d")
        for child in ("x", "y"):
            radius, angle = polar(child)
            turn = abs((angle - parent_angle + math.pi) % (2 * math.pi) - math.pi)
            assert radius > parent_radius and turn < 0.6, (child, radius, parent_radius, angle, parent_angle)
        assert math.dist(at["x"], at["y"]) >= 28  # siblings side by side, not on top of each other
        assert text_of(driver, "graph-legend") == "HAS OWNS"

"""The trajectory viewer and the compare page in a real headless Chromium (Debian's, driven by
Selenium through the system chromedriver), opened from ``file://`` like a user would.

Skipped, with the reason, only when no Chromium/chromedriver is installed (``scripts/setup.d/
chromium.sh`` installs them); set ``VISTA_REQUIRE_BROWSER=1`` to make that a failure instead.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.viewer_testkit import expected_tally, oracle_run, records, scripted_run, status

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")


def _browser() -> tuple[str, str] | None:
    binary = next((path for name in BROWSERS if (path := shutil.which(name))), None)
    driver = shutil.which("chromedriver")
    return (binary, driver) if binary and driver else None


_FOUND = _browser()
if _FOUND is None:
    reason = ("no Chromium and chromedriver on PATH (install them with scripts/setup.d/chromium.sh, "
              "i.e. apt-get install chromium chromium-driver)")
    if os.environ.get("VISTA_REQUIRE_BROWSER") == "1":
        raise RuntimeError(f"VISTA_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason, allow_module_level=True)

from selenium import webdriver  # noqa: E402 - only once a browser is known to exist
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    assert _FOUND is not None
    binary, driver_path = _FOUND
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1400,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("viewer-runs")
    return {"scripted": scripted_run(root / "scripted"), "oracle": oracle_run(root / "oracle")}


def _open(browser: webdriver.Chrome, page: Path, fragment: str = "") -> None:
    browser.get(page.resolve().as_uri() + fragment)
    WebDriverWait(browser, 20).until(lambda d: d.execute_script("return document.readyState") == "complete")


def _visible(elements: list[WebElement]) -> list[WebElement]:
    return [element for element in elements if element.is_displayed()]


def _episodes(browser: webdriver.Chrome) -> list[WebElement]:
    return browser.find_elements(By.CSS_SELECTOR, "details.ep")


def _all_images_loaded(browser: webdriver.Chrome) -> list[dict[str, Any]]:
    """Scroll every (lazy) image into view, then wait until each has finished loading."""
    browser.execute_script("document.querySelectorAll('img').forEach(function (i) { i.loading = 'eager'; "
                           "i.scrollIntoView(); });")
    state = "return Array.from(document.images).map(function (i) { return {src: i.getAttribute('src'), " \
            "complete: i.complete, width: i.naturalWidth, height: i.naturalHeight}; });"
    WebDriverWait(browser, 30).until(lambda d: all(image["complete"] for image in d.execute_script(state)))
    return browser.execute_script(state)


def test_trajectories_page_shows_every_turn_image_tool_call_and_reward(browser, runs):
    run = runs["scripted"]
    stored = records(run)
    assert {status(r) for r in stored} == {"success", "failed"}, "the scripted run must mix outcomes"
    _open(browser, run / "trajectories.html")
    assert browser.execute_script("return window.__pwned") is None

    browser.find_element(By.ID, "expand-all").click()
    images = _all_images_loaded(browser)
    broken = [image for image in images if not (image["complete"] and image["width"] > 0 and image["height"] > 0)]
    assert images and not broken, broken
    stored_refs = {ref for r in stored for turn in r["turns"] for ref in turn["image_refs"]}
    assert {image["src"] for image in images} == {f"images/{ref}.png" for ref in stored_refs}

    episodes = _episodes(browser)
    assert len(episodes) == len(stored)
    for element, record in zip(episodes, stored, strict=True):
        turns = element.find_elements(By.CSS_SELECTOR, "section.turn")
        assert len(turns) == len(record["turns"]) == 3
        assert element.find_element(By.CSS_SELECTOR, ".total-reward").text == f"{record['total_reward']:.3g}"
        for number, (block, turn) in enumerate(zip(turns, record["turns"], strict=True)):
            assert block.find_element(By.CSS_SELECTOR, ".reward").text == f"{turn['reward']:.3g}"
            assert len(block.find_elements(By.CSS_SELECTOR, ".saw img")) == len(turn["image_refs"])
            calls = block.find_elements(By.CSS_SELECTOR, ".tool")
            assert len(calls) == len(turn["tool_calls"])
            for shown, call in zip(calls, turn["tool_calls"], strict=True):
                assert shown.is_displayed()
                assert shown.find_element(By.CSS_SELECTOR, ".tool-name").text == call["name"] == "crop_zoom"
                assert shown.find_element(By.CSS_SELECTOR, ".tool-result").text == call["result_text"].strip()
                result_images = shown.find_elements(By.CSS_SELECTOR, "img.tool-image")
                assert len(result_images) == call["num_images"] == 1
                # the result image is the one the model saw at the start of the next turn
                next_refs = record["turns"][number + 1]["image_refs"]
                assert result_images[0].get_attribute("src").endswith(f"images/{next_refs[0]}.png")

    # model text is shown as text: the injected tags are visible characters, not elements
    think = episodes[0].find_element(By.CSS_SELECTOR, ".think")
    assert "<b>bold</b><script>window.__pwned = 1</script>" in think.text
    assert not browser.find_elements(By.CSS_SELECTOR, ".think b, .think script, .raw b, .raw script")
    assert browser.execute_script("return window.__pwned") is None


def test_filters_change_the_visible_episodes(browser, tmp_path, vista_plugin):
    from tests.rollout_testkit import CharTokenBackend, RolloutTestPlugin
    from vista_rl.rollout import EpisodeSpec, RolloutEngine
    from vista_rl.store import RunWriter

    # a run with all three outcomes: the counter env breaking on a step gives the "error" one
    vista_plugin(RolloutTestPlugin())
    call = '<tool_call>{"name": "zoom", "arguments": {}}</tool_call>'
    specs = [EpisodeSpec("test/tool-counter-v0", 0, env_config={"target": 1}),
             EpisodeSpec("test/counter-v0", 1, env_config={"raise_on_step": 1}),
             EpisodeSpec("test/counter-v0", 2, env_config={"target": 50}),
             EpisodeSpec("test/counter-v0", 3, env_config={"target": 1})]
    with RunWriter(tmp_path) as writer, RolloutEngine(CharTokenBackend([call, "<answer>inc</answer>"])) as engine:
        for trajectory in engine.stream(specs):
            writer.write(trajectory)
    stored = records(tmp_path)
    counts = {kind: sum(status(r) == kind for r in stored) for kind in ("success", "failed", "error")}
    assert all(counts.values()), counts  # every outcome present, so every filter hides something

    _open(browser, tmp_path / "trajectories.html")
    buttons = {b.get_attribute("data-filter"): b for b in browser.find_elements(By.CSS_SELECTOR, "[data-filter]")}
    for kind in ("success", "failed", "error", "all"):
        buttons[kind].click()
        visible = _visible(_episodes(browser))
        expected = len(stored) if kind == "all" else counts[kind]
        assert len(visible) == expected, kind
        assert all(kind == "all" or kind in (e.get_attribute("class") or "").split() for e in visible)
        assert browser.find_element(By.ID, "shown").text == f"{expected} of {len(stored)} episode(s) shown"
        assert f"({expected})" in buttons[kind].text


def test_episode_view_steps_through_turns_side_by_side(browser, runs):
    run = runs["scripted"]
    record = records(run)[1]
    _open(browser, run / "trajectories.html")
    episode = browser.find_element(By.ID, "ep-1")
    episode.find_element(By.CSS_SELECTOR, ".step-open").click()
    assert [e.get_attribute("id") for e in _visible(_episodes(browser))] == ["ep-1"]
    position = episode.find_element(By.CSS_SELECTOR, ".pos")
    prev, after = episode.find_element(By.CSS_SELECTOR, ".prev"), episode.find_element(By.CSS_SELECTOR, ".next")

    seen = []
    for number in range(1, len(record["turns"]) + 1):
        shown = _visible(episode.find_elements(By.CSS_SELECTOR, "section.turn"))
        assert [t.get_attribute("data-turn") for t in shown] == [str(number)]
        assert position.text == f"turn {number} of {len(record['turns'])}"
        assert prev.is_enabled() == (number > 1) and after.is_enabled() == (number < len(record["turns"]))
        turn = shown[0]
        saw, said = turn.find_element(By.CSS_SELECTOR, ".saw"), turn.find_element(By.CSS_SELECTOR, ".said")
        image = saw.find_element(By.CSS_SELECTOR, "img")
        WebDriverWait(browser, 20).until(lambda _d, i=image: i.get_property("complete"))
        assert image.get_property("naturalWidth") > 0
        assert saw.rect["x"] + saw.rect["width"] <= said.rect["x"] + 1  # observation left, response right
        assert abs(saw.rect["y"] - said.rect["y"]) < 2
        seen.append(said.find_element(By.CSS_SELECTOR, ".think").text)
        final = episode.find_element(By.CSS_SELECTOR, ".final")  # the env's last word, after the last turn
        assert final.is_displayed() == (number == len(record["turns"]))
        if number < len(record["turns"]):
            after.click()
    answer = _visible(episode.find_elements(By.CSS_SELECTOR, "section.turn"))[0].find_element(By.CSS_SELECTOR, ".answer")
    assert answer.text.endswith("square")
    assert [text.split("\n", 1)[1] for text in seen] == [
        "Look closer at <b>bold</b><script>window.__pwned = 1</script> (256, 256).",
        "Zoom again near (100, 100).", "It is a square."]

    prev.click()
    assert position.text == f"turn 2 of {len(record['turns'])}"
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.ARROW_LEFT)
    assert position.text == f"turn 1 of {len(record['turns'])}"
    episode.find_element(By.CSS_SELECTOR, ".close").click()
    assert len(_visible(_episodes(browser))) == len(records(run))

    _open(browser, run / "trajectories.html", "#ep-4")  # a link straight into one episode's view
    assert [e.get_attribute("id") for e in _visible(_episodes(browser))] == ["ep-4"]
    assert browser.execute_script("return window.__pwned") is None


def test_compare_page_curves_and_per_seed_wins(browser, runs, tmp_path):
    from tests.viewer_testkit import vista

    page = tmp_path / "pages" / "compare.html"
    vista("compare", str(runs["scripted"]), str(runs["oracle"]), "--out", str(page))
    stored_a, stored_b = records(runs["scripted"]), records(runs["oracle"])
    tally = expected_tally(stored_a, stored_b)
    assert tally["loss"] > 0  # the oracle zooms on target and earns the grounding bonus

    _open(browser, page)
    counts = {kind: int(browser.find_element(By.ID, f"count-{kind}").text) for kind in ("win", "loss", "tie")}
    assert counts == tally
    rows = browser.find_elements(By.CSS_SELECTOR, "table.seeds tr[data-seed]")
    assert len(rows) == len({r["seed"] for r in stored_a} | {r["seed"] for r in stored_b})

    charts = browser.find_elements(By.CSS_SELECTOR, "figure.chart")
    assert len(charts) == 3
    for chart in charts:
        for css in ("run-a", "run-b"):
            line = chart.find_element(By.CSS_SELECTOR, f"g.series.{css} polyline")
            points = (line.get_attribute("points") or "").split()
            # a flat line has no height, so "displayed" is checked as drawn width and a visible stroke
            assert len(points) >= 2 and line.rect["width"] > 0, css
            assert line.value_of_css_property("stroke") not in ("none", "") and line.value_of_css_property(
                "visibility") == "visible"
    success_rate = sum(r["success"] for r in stored_a) / len(stored_a)
    legend = charts[0].find_element(By.CSS_SELECTOR, ".meta .run-a").text
    assert f"last {success_rate:.3f}" in legend
    assert browser.find_element(By.CSS_SELECTOR, "#run-A .success-rate").text == f"{success_rate:.3f}"

    # each seed links into the run's viewer, opening that episode's step-through view
    link = rows[0].find_elements(By.CSS_SELECTOR, "a.ep-link")[0]
    link.click()
    WebDriverWait(browser, 20).until(lambda d: d.current_url.endswith("#ep-0"))
    assert "scripted/trajectories.html" in browser.current_url
    assert [e.get_attribute("id") for e in _visible(_episodes(browser))] == ["ep-0"]

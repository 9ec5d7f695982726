"""The viewer pages without a browser: escaping of every text field, tool-result images, relative
image links, the episode limit, per-seed ranking for ``vista compare``, and the CLI commands.
(``test_viewer_browser.py`` opens the same pages in Chromium.)"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

import pytest
import tomllib
from PIL import Image

from tests.viewer_testkit import oracle_run, records, scripted_run, vista
from vista_rl.store import RunWriter
from vista_rl.store.compare import Episode, RunData, seed_results
from vista_rl.store.html import write_html
from vista_rl.trajectory import ToolCallRecord, Trajectory, Turn

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = '<b>x</b><script>alert(1)</script>"><img src=x onerror=alert(2)>{{ 7*7 }}'


def _sources(page: Path) -> list[str]:
    return re.findall(r'<img [^>]*src="([^"]*)"', page.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def small_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("small-runs")
    return {"scripted": scripted_run(root / "scripted", 2), "oracle": oracle_run(root / "oracle", 3),
            "cut": scripted_run(root / "cut", 1, "--max-turns", "1")}


def test_every_text_field_is_escaped(tmp_path):
    image = Image.new("RGB", (8, 8), (200, 10, 10))
    trajectory = Trajectory(
        env_id=f"env{HOSTILE}", seed=3, system_prompt=HOSTILE, failure=f"broke {HOSTILE}",
        metadata={"stop_reason": HOSTILE, "final_observation": HOSTILE},
        turns=[Turn(observation=f"look <image> {HOSTILE}", response=f"<think>{HOSTILE}</think><answer>{HOSTILE}</answer>",
                    images=[image], reward=0.5, info={"note": HOSTILE}, error=HOSTILE,
                    tool_calls=[ToolCallRecord(name=HOSTILE, arguments={"q": HOSTILE}, result_text=HOSTILE)])])
    with RunWriter(tmp_path) as writer:
        writer.write(trajectory)
        writer.write_metrics({HOSTILE: {"value": 0.5, "ci95_low": 0.1, "ci95_high": 0.9, "n": 1}})
    page = (tmp_path / "trajectories.html").read_text(encoding="utf-8")
    assert page.count("<script") == 1  # the page's own
    assert "<b>x</b>" not in page and "<img src=x" not in page and "49" not in page
    assert page.count("&lt;b&gt;x&lt;/b&gt;&lt;script&gt;alert(1)&lt;/script&gt;") >= 10
    assert "{{ 7*7 }}" in page
    assert _sources(tmp_path / "trajectories.html") == [f"images/{trajectory.turns[0].image_refs[0]}.png"]


def test_tool_result_images_are_the_next_turns_and_unrecorded_ones_are_said(small_runs):
    run = small_runs["scripted"]
    page = (run / "trajectories.html").read_text(encoding="utf-8")
    tool_images = re.findall(r'<img class="shot tool-image"[^>]*src="images/([0-9a-f]+)\.png"', page)
    expected = [turns[number + 1]["image_refs"][0]
                for turns in (r["turns"] for r in records(run))
                for number, turn in enumerate(turns) if turn["tool_calls"]]
    assert tool_images == expected and len(expected) == 2 * 2

    cut = small_runs["cut"]  # one turn: the zoom ran, but the episode ended before the model saw it
    (record,) = records(cut)
    assert len(record["turns"]) == 1 and record["turns"][0]["tool_calls"][0]["num_images"] == 1
    assert "1 result image(s) not recorded" in (cut / "trajectories.html").read_text(encoding="utf-8")


def test_a_missing_image_is_marked_not_linked(small_runs, tmp_path):
    run = small_runs["oracle"]
    ref = records(run)[0]["turns"][0]["image_refs"][0]
    copy = tmp_path / "run"
    copy.mkdir()
    for path in run.rglob("*"):
        if path.is_file() and path.name != f"{ref}.png":
            target = copy / path.relative_to(run)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
    page = write_html(copy)
    assert f"[missing image {ref}]" in page.read_text(encoding="utf-8")
    assert all((copy / src).exists() for src in _sources(page))


def test_a_page_written_elsewhere_links_images_relatively(small_runs, tmp_path):
    run = small_runs["scripted"]
    page = write_html(run, tmp_path / "deep" / "down" / "view.html")
    sources = _sources(page)
    assert sources and all(not src.startswith("/") and (page.parent / src).resolve().is_file() for src in sources)
    assert str(tmp_path) not in page.read_text(encoding="utf-8")


def test_the_limit_cuts_the_page_and_says_so(small_runs, tmp_path):
    page = write_html(small_runs["oracle"], tmp_path / "two.html", limit=2)
    text = page.read_text(encoding="utf-8")
    assert text.count('<details class="ep ') == 2 and "only the first 2 episodes are shown" in text


def _run(label: str, rows: list[tuple[int, bool, float]]) -> RunData:
    episodes = [Episode(index=i, seed=seed, sample_index=0, success=ok, reward=reward)
                for i, (seed, ok, reward) in enumerate(rows)]
    return RunData(label=label, run_dir=Path(label), env_id="e", episodes=episodes)


def test_seeds_rank_on_success_rate_then_mean_reward():
    a = _run("A", [(0, True, 1.0), (1, True, 1.0), (1, False, 0.0), (2, True, 1.0), (3, False, 0.2), (4, True, 1.0),
                   (7, True, 1.0)])
    b = _run("B", [(0, False, 0.0), (1, True, 1.0), (2, True, 1.5), (3, False, 0.2), (4, True, 1.0), (5, True, 1.0)])
    results = {r.seed: r.result for r in seed_results(a, b)}
    assert results == {0: "win", 1: "loss", 2: "loss", 3: "tie", 4: "tie", 5: "only B", 7: "only A"}
    row = next(r for r in seed_results(a, b) if r.seed == 1)
    assert (row.a_success, row.b_success, row.a_reward) == (0.5, 1.0, 0.5)


def test_compare_command_prints_the_tally_and_rejects_a_non_run(small_runs, tmp_path, capsys):
    out = tmp_path / "cmp.html"
    vista("compare", str(small_runs["oracle"]), str(small_runs["scripted"]), "--out", str(out))
    text = capsys.readouterr().out
    # the oracle zooms onto the target and earns the grounding bonus on every seed both runs share
    assert "per seed: A wins 2, B wins 0, ties 0, only in A 1, only in B 0" in text
    assert out.exists() and "<svg" in out.read_text(encoding="utf-8")
    with pytest.raises(AssertionError, match="exited with 1"):
        vista("compare", str(small_runs["oracle"]), str(tmp_path), "--out", str(tmp_path / "no.html"))
    assert "is not a VISTA run directory" in capsys.readouterr().err


def test_trajectories_html_renders_a_run_made_without_one(tmp_path, capsys):
    run = tmp_path / "run"
    vista("eval", "--env", "visual_search/zoom-v0", "--model", "scripted:oracle", "--episodes", "1",
          "--no-html", "--out", str(run))
    assert not (run / "trajectories.html").exists()
    vista("trajectories", "html", str(run))
    assert "viewer written to" in capsys.readouterr().out
    assert (run / "trajectories.html").read_text(encoding="utf-8").count("<section class=\"turn\"") == 2


def test_templates_ship_as_package_data():
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    core = ROOT / "core" / "vista_rl"
    shipped = [path.relative_to(core).as_posix() for path in (core / "store" / "templates").iterdir()]
    assert {"base.html.j2", "trajectories.html.j2", "compare.html.j2"} <= {Path(p).name for p in shipped}
    assert all(any(fnmatch.fnmatch(name, pattern) for pattern in package_data["vista_rl"]) for name in shipped)


def test_the_viewer_skips_and_counts_bad_lines(small_runs, tmp_path, capsys):
    """Attack: one line of ``"[" * 100000 + "]" * 100000`` in trajectories.jsonl crashed
    ``vista trajectories html`` (RecursionError); a huge integer or a non-object line did too."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(small_runs["oracle"], run)
    path = run / "trajectories.jsonl"
    good = path.read_text(encoding="utf-8").splitlines()
    bad = ["[" * 100_000 + "]" * 100_000, "9" * 5000, '{"n": ' + "9" * 5000 + "}", "[1, 2]", '"text"',
           '{"turns": 5, "total_reward": "x"}']
    lines = [line.encode("utf-8") for line in [good[0], *bad, *good[1:]]]
    lines.insert(2, b'{"bytes": "\xff\xfe not UTF-8"')  # and not JSON either
    bad.append("(invalid UTF-8)")
    path.write_bytes(b"\n".join(lines) + b"\n")
    (run / "metrics.json").write_text('{"success_rate": {"value": "x", "ci95_low": 0, "ci95_high": 1}}')
    assert len(records(run)) == len(good) + 1  # the wrongly shaped object still parses as a record
    vista("trajectories", "html", str(run))
    out = capsys.readouterr().out
    assert f"({len(good)} episode(s); {len(bad)} unreadable line(s)" in " ".join(out.split())
    page = (run / "trajectories.html").read_text(encoding="utf-8")
    assert page.count('<section class="turn"') >= len(good) and f"{len(bad)} unreadable line(s)" in page
    vista("trajectories", "show", str(run))
    assert f"{len(bad)} unreadable line(s) skipped" in " ".join(capsys.readouterr().out.split())

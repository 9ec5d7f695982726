"""``trajectories.html``: one self-contained page (inline CSS and JS, images referenced relatively)
to look at episodes instead of reading JSON.  Copying the run directory keeps it working, and it
needs no network: it opens from ``file://``.

The page is rendered from Jinja2 templates (``store/templates/``) with autoescaping on, so every
piece of model or env text is shown as text: a response holding ``<script>`` cannot run.  This
module turns stored records into plain view dicts; the templates only lay them out.  Episodes are
streamed through the template, so a run of any size renders in small memory.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from vista_rl.observation import IMAGE_PLACEHOLDER
from vista_rl.parsing import parse_response
from vista_rl.store.layout import HTML_FILE
from vista_rl.store.reader import RunReader, episode_status

DEFAULT_LIMIT = 2000
INFO_CHARS = 400
"""Characters of a turn's ``info`` JSON shown under it (the full record stays in the JSONL)."""

_BUFFERED_CHUNKS = 500
"""Template output pieces joined before each write: one write per tiny piece costs more than the rest."""

_environment: Environment | None = None


def environment() -> Environment:
    """The viewer's Jinja2 environment: templates from the package, autoescaping always on (also
    for templates whose name does not end in ``.html``), and undefined names are errors."""
    global _environment
    if _environment is None:
        _environment = Environment(
            loader=PackageLoader("vista_rl.store", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
    return _environment


def relative_url(target: Path, page: Path) -> str:
    """``target`` as a URL relative to the directory of the HTML file ``page`` (works from file://)."""
    return Path(os.path.relpath(target.resolve(), page.resolve().parent)).as_posix()


class _Images:
    """Turns image refs into relative URLs, or ``None`` for an image missing from the run."""

    def __init__(self, images_dir: Path, page: Path) -> None:
        self.base = relative_url(images_dir, page)
        self.present = {path.stem for path in images_dir.glob("*.png")} if images_dir.is_dir() else set()

    def url(self, ref: str | None) -> str | None:
        return f"{self.base}/{ref}.png" if ref and ref in self.present else None


def _segments(text: str, refs: Sequence[str], images: _Images) -> list[dict[str, Any]]:
    """Observation text split at image placeholders: text pieces and images, in order."""
    pieces = text.split(IMAGE_PLACEHOLDER)
    out: list[dict[str, Any]] = []
    for index, piece in enumerate(pieces):
        if piece:
            out.append({"kind": "text", "text": piece})
        if index < len(pieces) - 1:
            ref = refs[index] if index < len(refs) else None
            out.append({"kind": "image", "ref": ref or "?", "url": images.url(ref)})
    return out


def _tool_calls(turn: dict[str, Any], next_turn: dict[str, Any] | None, images: _Images) -> list[dict[str, Any]]:
    """The turn's tool calls with their result images.  The engine sends every result of a turn
    to the model as the next turn's observation, images in call order, so the first images of the
    next turn are the results'.  After the last turn nothing recorded them."""
    calls = turn.get("tool_calls") or []
    wanted = sum(int(call.get("num_images") or 0) for call in calls)
    next_refs = list((next_turn or {}).get("image_refs") or [])
    available = next_refs[:wanted] if len(next_refs) >= wanted else []
    out = []
    cursor = 0
    for call in calls:
        count = int(call.get("num_images") or 0)
        refs = available[cursor:cursor + count]
        cursor += count
        out.append({
            "name": str(call.get("name")),
            "arguments": json.dumps(call.get("arguments"), ensure_ascii=False, default=str),
            "result": str(call.get("result_text", "")),
            "error": bool(call.get("error")),
            "images": [{"ref": ref, "url": images.url(ref)} for ref in refs],
            "unrecorded_images": count - len(refs),
        })
    return out


def _turn(number: int, turn: dict[str, Any], next_turn: dict[str, Any] | None, images: _Images) -> dict[str, Any]:
    response = str(turn.get("response", ""))
    parsed = parse_response(response)
    info = {key: value for key, value in (turn.get("info") or {}).items() if key != "finish_reason"}
    info_text = json.dumps(info, ensure_ascii=False, default=str)
    return {
        "number": number,
        "observation": _segments(str(turn.get("observation", "")), turn.get("image_refs") or [], images),
        "response": response,
        "think": parsed.think,
        "answer": parsed.answer,
        "tool_calls": _tool_calls(turn, next_turn, images),
        "reward": float(turn.get("reward") or 0.0),
        "info": info_text if len(info_text) <= INFO_CHARS else info_text[:INFO_CHARS] + " ...",
        "error": turn.get("error"),
    }


def episode_view(index: int, record: dict[str, Any], images: _Images) -> dict[str, Any]:
    """One stored trajectory record as the template's episode dict."""
    meta = record.get("metadata") or {}
    turns = list(record.get("turns") or [])
    return {
        "index": index,
        "env_id": str(record.get("env_id")),
        "seed": record.get("seed"),
        "sample_index": record.get("sample_index", 0),
        "status": episode_status(record),
        "total_reward": float(record.get("total_reward") or 0.0),
        "num_turns": len(turns),
        "stop_reason": str(meta.get("stop_reason", "")),
        "failure": record.get("failure"),
        "system_prompt": record.get("system_prompt") or "",
        "turns": [_turn(number, turn, turns[number] if number < len(turns) else None, images)
                  for number, turn in enumerate(turns, start=1)],
        "final_observation": meta.get("final_observation") or "",
    }


def metric_rows(metrics: dict[str, Any]) -> list[dict[str, str]]:
    """Summary metrics with 95% CIs as rows of text."""
    rows = []
    for name, value in metrics.items():
        if isinstance(value, dict) and "value" in value:
            parts = (value["value"], value.get("ci95_low"), value.get("ci95_high"))
            try:
                shown = "n/a" if None in parts else f"{parts[0]:.3f} [{parts[1]:.3f}, {parts[2]:.3f}]"
            except (TypeError, ValueError):  # a hand-edited or foreign metrics.json: shown as it is
                shown = " ".join(str(part) for part in parts)
            rows.append({"name": str(name).replace("_", " "), "value": shown, "n": str(value.get("n", ""))})
    return rows


class _Limited:
    """Yields at most ``limit`` episode views and remembers whether more were left out; the
    template reads ``truncated`` after its loop, when the stream is exhausted."""

    def __init__(self, reader: RunReader, limit: int, images: _Images) -> None:
        self.reader, self.limit, self.images = reader, limit, images
        self.truncated = False
        self.count = 0
        self.malformed = 0

    @property
    def skipped(self) -> int:
        """Unreadable lines met so far (all of them once the loop has finished): lines that are not
        JSON objects, and objects that are not trajectory records (a turn list that is a number)."""
        return self.reader.skipped_lines + self.malformed

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for index, record in enumerate(self.reader.records()):
            if index >= self.limit:
                self.truncated = True
                return
            try:
                view = episode_view(index, record, self.images)
            except Exception:  # noqa: BLE001 - one malformed record is skipped and counted, the page renders
                self.malformed += 1
                continue
            self.count += 1
            yield view


@dataclass(frozen=True)
class HtmlReport:
    """What :func:`render_html` wrote: the page, the episodes on it and the lines it skipped."""

    path: Path
    episodes: int
    skipped: int
    truncated: bool


def write_html(run_dir: str | Path, out: str | Path | None = None, limit: int = DEFAULT_LIMIT) -> Path:
    """Render the run's trajectories (streamed, so memory stays small) into one HTML file.  Image
    links are relative to where the page is written, so ``out`` may lie outside the run."""
    return render_html(run_dir, out, limit).path


def render_html(run_dir: str | Path, out: str | Path | None = None, limit: int = DEFAULT_LIMIT) -> HtmlReport:
    """:func:`write_html`, also saying how many episodes it showed and how many lines it skipped."""
    reader = RunReader(run_dir)
    path = Path(out) if out is not None else reader.run_dir / HTML_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    episodes = _Limited(reader, limit, _Images(reader.images_dir, path))
    template = environment().get_template("trajectories.html.j2")
    stream = template.stream(title=f"VISTA run {reader.run_dir.name}", metrics=metric_rows(reader.metrics()),
                             episodes=episodes, limit=limit)
    stream.enable_buffering(_BUFFERED_CHUNKS)
    # "replace": a lone surrogate in a record that bypassed the reader's scrub must not lose the page
    stream.dump(str(path), encoding="utf-8", errors="replace")
    return HtmlReport(path, episodes.count, episodes.skipped, episodes.truncated)


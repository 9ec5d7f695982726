"""``trajectories.html``: one self-contained page (inline CSS and JS, images referenced relatively
as ``images/<hash>.png``) to look at episodes instead of reading JSON.  Open it from the run
directory; copying the directory keeps it working."""

from __future__ import annotations

import html
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from vista_rl.observation import IMAGE_PLACEHOLDER
from vista_rl.store.layout import HTML_FILE, IMAGES_DIR
from vista_rl.store.reader import RunReader

DEFAULT_LIMIT = 2000

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;background:#fafafa;color:#222}
h1{font-size:1.3em} table.metrics td,table.metrics th{padding:2px 10px;text-align:left}
.bar button{margin-right:.4em} details.ep{background:#fff;border:1px solid #ddd;border-radius:6px;margin:.5em 0;padding:.4em .8em}
details.ep>summary{cursor:pointer;font-weight:600} .ok{color:#187a2f} .bad{color:#b3261e} .err{color:#8a4b00}
.msg{border-left:4px solid #bbb;margin:.5em 0;padding:.2em .6em;white-space:pre-wrap;font-family:ui-monospace,monospace;font-size:.9em}
.user{border-color:#4a79c9;background:#f3f7fd} .assistant{border-color:#3c9a5f;background:#f3fbf5}
.system{border-color:#999;background:#f4f4f4} .tool{border-color:#a06ad0;background:#f8f3fd}
.msg img{display:block;max-width:320px;margin:.3em 0;border:1px solid #ccc;image-rendering:pixelated}
.meta{color:#666;font-size:.85em}
"""

_SCRIPT = """
function show(kind){document.querySelectorAll('details.ep').forEach(function(e){
 e.style.display=(kind==='all'||e.classList.contains(kind))?'':'none';});}
"""


def _text_with_images(text: str, refs: Sequence[str]) -> str:
    pieces = text.split(IMAGE_PLACEHOLDER)
    out: list[str] = []
    for index, piece in enumerate(pieces):
        out.append(html.escape(piece))
        if index < len(pieces) - 1:
            ref = refs[index] if index < len(refs) else None
            out.append(f'<img loading="lazy" src="{IMAGES_DIR}/{html.escape(ref)}.png" alt="{html.escape(ref)}">'
                       if ref else "[missing image]")
    return "".join(out)


def _episode(index: int, record: dict[str, Any]) -> str:
    success, failure = bool(record.get("success")), record.get("failure")
    meta = record.get("metadata", {})
    kind = "error" if failure else ("success" if success else "failed")
    status = {"error": '<span class="err">error</span>', "success": '<span class="ok">success</span>',
              "failed": '<span class="bad">failed</span>'}[kind]
    title = (f"#{index} {html.escape(str(record.get('env_id')))} seed {record.get('seed')} "
             f"sample {record.get('sample_index', 0)}: {status}, reward {record.get('total_reward', 0):.3g}, "
             f"{record.get('num_turns', 0)} turn(s), {html.escape(str(meta.get('stop_reason', '')))}")
    parts = [f'<details class="ep {kind}"><summary>{title}</summary>']
    if failure:
        parts.append(f'<div class="msg err">failure: {html.escape(str(failure))}</div>')
    if record.get("system_prompt"):
        parts.append(f'<details><summary class="meta">system prompt</summary><div class="msg system">'
                     f'{html.escape(record["system_prompt"])}</div></details>')
    for number, turn in enumerate(record.get("turns", []), start=1):
        parts.append(f'<div class="msg user"><b>observation {number}</b>\n'
                     f'{_text_with_images(turn.get("observation", ""), turn.get("image_refs", []))}</div>')
        parts.append(f'<div class="msg assistant"><b>response {number}</b>\n'
                     f'{html.escape(turn.get("response", ""))}</div>')
        for call in turn.get("tool_calls", []):
            arguments = html.escape(json.dumps(call.get("arguments"), ensure_ascii=False))
            flag = " (error)" if call.get("error") else ""
            images = f" + {call['num_images']} image(s)" if call.get("num_images") else ""
            parts.append(f'<div class="msg tool"><b>tool {html.escape(str(call.get("name")))}{flag}</b> '
                         f'{arguments}\n{html.escape(str(call.get("result_text", "")))}{images}</div>')
        info = {key: value for key, value in turn.get("info", {}).items() if key != "finish_reason"}
        parts.append(f'<div class="meta">reward {turn.get("reward", 0):.3g} · info '
                     f'{html.escape(json.dumps(info, ensure_ascii=False, default=str)[:400])}</div>')
    if meta.get("final_observation"):
        parts.append(f'<div class="msg user"><b>final observation</b>\n{html.escape(meta["final_observation"])}</div>')
    parts.append("</details>")
    return "\n".join(parts)


def _metrics_table(metrics: dict[str, Any]) -> str:
    rows = []
    for name, value in metrics.items():
        if isinstance(value, dict) and "value" in value:
            low, high = value.get("ci95_low"), value.get("ci95_high")
            shown = f"{value['value']:.3f} [{low:.3f}, {high:.3f}]" if None not in (value["value"], low, high) else "n/a"
            rows.append(f"<tr><td>{html.escape(name)}</td><td>{shown}</td><td>n={value.get('n')}</td></tr>")
    return '<table class="metrics"><tr><th>metric</th><th>value [95% CI]</th><th></th></tr>' + "".join(rows) + "</table>"


def _write(handle: IO[str], title: str, metrics: dict[str, Any], records: Iterable[dict[str, Any]], limit: int) -> int:
    handle.write(f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
                 f"<style>{_STYLE}</style><script>{_SCRIPT}</script></head><body>")
    handle.write(f"<h1>{html.escape(title)}</h1>")
    if metrics:
        handle.write(_metrics_table(metrics))
    handle.write('<p class="bar">show: <button onclick="show(\'all\')">all</button>'
                 '<button onclick="show(\'success\')">success</button>'
                 '<button onclick="show(\'failed\')">failed</button>'
                 '<button onclick="show(\'error\')">errors</button></p>')
    count = 0
    for index, record in enumerate(records):
        if index >= limit:
            handle.write(f'<p class="meta">only the first {limit} episodes are shown; '
                         f"use vista trajectories show for the rest</p>")
            break
        handle.write(_episode(index, record))
        count += 1
    handle.write("</body></html>\n")
    return count


def write_html(run_dir: str | Path, out: str | Path | None = None, limit: int = DEFAULT_LIMIT) -> Path:
    """Render the run's trajectories (streamed, so memory stays small) into one HTML file."""
    reader = RunReader(run_dir)
    path = Path(out) if out is not None else reader.run_dir / HTML_FILE
    title = f"VISTA run {reader.run_dir.name}"
    with open(path, "w", encoding="utf-8") as handle:
        _write(handle, title, reader.metrics(), reader.records(), limit)
    return path

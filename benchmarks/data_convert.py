"""``vista data convert`` throughput: records/s for a synthetic VizWiz release (the real layout,
``Annotations/val.json`` with ten answers per question, one small JPEG per question), converted with
images copied and with images referenced, and the time to read the converted JSONL back through the
``records`` loader (what ``records_path`` in an eval or training config does).

    python benchmarks/data_convert.py [--records 2000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from _bench import stamp
from PIL import Image
from rich.console import Console
from vista_plugin_datasets.convert import convert

import vista_rl


def _release(root: Path, count: int) -> Path:
    rows = []
    (root / "val").mkdir(parents=True)
    for index in range(count):
        name = f"VizWiz_val_{index:08d}.jpg"
        Image.new("RGB", (64, 48), (index % 256, 90, 160)).save(root / "val" / name)
        answers = ["soy milk"] * 7 + ["milk"] * 2 + ["unanswerable"]
        rows.append({"image": name, "question": f"What is item {index}?", "answer_type": "other", "answerable": 1,
                     "answers": [{"answer": a, "answer_confidence": "yes"} for a in answers]})
    (root / "Annotations").mkdir()
    (root / "Annotations" / "val.json").write_text(json.dumps(rows))
    return root


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--tiny", action="store_true", help="20 records (for tests)")
    args = parser.parse_args()
    if args.tiny:
        args.records = 20
    quiet = Console(quiet=True)
    with tempfile.TemporaryDirectory(prefix="vista-convert-bench-") as tmp:
        src = _release(Path(tmp) / "raw", args.records)
        report: dict[str, object] = {"records": args.records}
        for mode in ("copy", "reference"):
            start = time.perf_counter()
            result = convert("vizwiz", src, Path(tmp) / mode, images=mode, console=quiet)  # type: ignore[arg-type]
            seconds = time.perf_counter() - start
            report[f"{mode}_seconds"] = round(seconds, 3)
            report[f"{mode}_records_per_s"] = round(result.written / seconds, 1)
        start = time.perf_counter()
        loaded = vista_rl.make_dataset("records", path=str(Path(tmp) / "copy" / "vizwiz-val.jsonl"))
        report["read_back_seconds"] = round(time.perf_counter() - start, 3)
        report["read_back_records"] = len(loaded)
    print(json.dumps(stamp(report, "none: absolute throughput (no other converter of these releases)",
                           ["vista-plugin-datasets"])))


if __name__ == "__main__":
    main()

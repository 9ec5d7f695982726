"""Tiny fixtures in the exact public release layouts of SAT, BLINK, ScreenSpot v2, ScreenSpot-Pro
and V*Bench (for this plugin's tests and for trying the adapters without a download).  Parquet
files are written with HF ``datasets`` and ``Image`` features, as the hub releases are."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image, ImageDraw

from vista_plugin_grounding.page import app_window


def _picture(text: str, size: tuple[int, int] = (96, 64), colour: str = "white") -> Image.Image:
    image = Image.new("RGB", size, colour)
    ImageDraw.Draw(image).text((6, 6), text, fill="black")
    return image


def write_sat(root: Path, split: str = "val") -> Path:
    """``{split}.parquet`` with ``image_bytes`` (a sequence of images), question, answers, correct_answer."""
    import datasets

    rows = {
        "image_bytes": [[_picture("chair", colour="lightblue")], [_picture("frame 1"), _picture("frame 2")]],
        "question": ["Is the chair to the left of the table?",
                     "Did the camera move left or right between the two frames?"],
        "answers": [["yes", "no"], ["left", "right"]],
        "correct_answer": ["no", "right"],
        "question_type": ["other_relations", "ego_movement"],
    }
    features = datasets.Features({
        "image_bytes": datasets.Sequence(datasets.Image()), "question": datasets.Value("string"),
        "answers": datasets.Sequence(datasets.Value("string")), "correct_answer": datasets.Value("string"),
        "question_type": datasets.Value("string")})
    root.mkdir(parents=True, exist_ok=True)
    datasets.disable_progress_bars()
    datasets.Dataset.from_dict(rows, features=features).to_parquet(str(root / f"{split}.parquet"))
    return root


def write_blink(root: Path, split: str = "val") -> Path:
    """``Relative_Depth/{split}-00000-of-00001.parquet`` and ``Counting/...`` with image_1..image_4."""
    import datasets

    image = datasets.Image()
    features = datasets.Features({
        "idx": datasets.Value("string"), "question": datasets.Value("string"), "sub_task": datasets.Value("string"),
        "image_1": image, "image_2": image, "image_3": image, "image_4": image,
        "choices": datasets.Sequence(datasets.Value("string")), "answer": datasets.Value("string"),
        "prompt": datasets.Value("string"), "explanation": datasets.Value("string")})
    tables = {
        "Relative_Depth": {"idx": ["val_Relative_Depth_1"], "question": ["Which point is closer to the camera?"],
                           "sub_task": ["Relative_Depth"], "image_1": [_picture("A  B")], "image_2": [None],
                           "image_3": [None], "image_4": [None], "choices": [["A is closer", "B is closer"]],
                           "answer": ["(B)"], "prompt": ["Which point is closer?\n(A) A is closer\n(B) B is closer"],
                           "explanation": [""]},
        "Multi-view_Reasoning": {"idx": ["val_Multi-view_Reasoning_1"], "question": ["Which way did the camera turn?"],
                                 "sub_task": ["Multi-view_Reasoning"], "image_1": [_picture("view 1")],
                                 "image_2": [_picture("view 2")], "image_3": [None], "image_4": [None],
                                 "choices": [["left", "right"]], "answer": ["(A)"], "prompt": [""], "explanation": [""]},
    }
    datasets.disable_progress_bars()
    for name, rows in tables.items():
        (root / name).mkdir(parents=True, exist_ok=True)
        datasets.Dataset.from_dict(rows, features=features).to_parquet(
            str(root / name / f"{split}-00000-of-00001.parquet"))
    return root


def write_screenspot_v2(root: Path) -> Path:
    """``screenspot_{desktop,mobile,web}_v2.json`` (bbox ``[x, y, w, h]``) + ``screenspotv2_image/``.
    The screenshots are synthetic app windows; each row targets one of their widgets exactly."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "screenspotv2_image").mkdir(exist_ok=True)
    for k, platform in enumerate(("desktop", "mobile", "web")):
        screen = app_window(100 + k, 1600, 1000)
        name = f"{platform}_{k:04d}.png"
        screen.image.save(root / "screenspotv2_image" / name)
        rows = []
        for widget in (screen.widgets[0], screen.widgets[-1]):
            x1, y1, x2, y2 = widget.box
            rows.append({"img_filename": name, "bbox": [x1, y1, x2 - x1, y2 - y1],
                         "instruction": f"click {widget.describe()}",
                         "data_type": "icon" if widget.kind == "icon" else "text", "data_source": platform})
        (root / f"screenspot_{platform}_v2.json").write_text(json.dumps(rows))
    return root


def write_screenspot_pro(root: Path) -> Path:
    """``annotations/{app}_{platform}.json`` (bbox ``[x1, y1, x2, y2]``) + ``images/{app}_{platform}/``."""
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    screen = app_window(7, 2560, 1440)
    (root / "images" / "vscode_macos").mkdir(parents=True, exist_ok=True)
    screen.image.save(root / "images" / "vscode_macos" / "screenshot_1.png")
    rows = [{"img_filename": "vscode_macos/screenshot_1.png", "bbox": list(widget.box), "instruction": widget.describe(),
             "application": "vscode", "id": f"vscode_macos_{n}", "platform": "macos", "img_size": [2560, 1440],
             "ui_type": "icon" if widget.kind == "icon" else "text", "group": "Dev", "instruction_cn": ""}
            for n, widget in enumerate(screen.widgets[:3])]
    (root / "annotations" / "vscode_macos.json").write_text(json.dumps(rows))
    return root


def write_vstar(root: Path) -> Path:
    """``direct_attributes/sa_1.{jpg,json}`` and ``relative_position/sa_2.{jpg,json}``."""
    items = {
        "direct_attributes/sa_1": {"target_object": ["umbrella"], "bbox": [[40, 20, 12, 10]],
                                   "question": "What is the color of the umbrella?",
                                   "options": ["The color of the umbrella is red.", "The color of the umbrella is blue.",
                                               "The color of the umbrella is white.",
                                               "The color of the umbrella is black."]},
        "relative_position/sa_2": {"target_object": ["cup", "dog"], "bbox": [[5, 5, 10, 10], [60, 30, 20, 20]],
                                   "question": "Is the cup on the left or right side of the dog?",
                                   "options": ["The cup is on the left side of the dog.",
                                               "The cup is on the right side of the dog."]},
    }
    for stem, row in items.items():
        path = root / stem
        path.parent.mkdir(parents=True, exist_ok=True)
        _picture(stem, (128, 96)).save(path.with_suffix(".jpg"))
        path.with_suffix(".json").write_text(json.dumps(row))
    return root

"""A contact sheet of an env's first observations: what the model sees, one row per seed.

Why: the functional checks cannot tell a maze drawn into one corner of an oversized black canvas
from a good one; a glance at the pixels can.  ``vista check-env ID --sheet sheet.png`` writes this
sheet so an author looks at the real observation images (every image of the first observation, at
their real aspect ratio, labelled with the seed, the image's size and the prompt's first line).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from vista_rl import Env, Observation

#: Longest side of one image on the sheet; smaller images are scaled up to it (nearest neighbour,
#: so pixels stay pixels), larger ones down.
TILE = 256
LABEL_HEIGHT = 30
GAP = 8
#: The sheet's background: a mid grey, so an image's own black or white border stays visible.
BACKGROUND = (128, 128, 128)
FRAME = (255, 0, 255)

#: Makes a fresh env (a registered id with its config, bound in a lambda, or an env class).
EnvMaker = Callable[[], Env]


@dataclass
class SheetRow:
    """One seed's first observation, or why it could not be made."""

    seed: int
    observation: Observation | None = None
    error: str | None = None


def first_observations(make: EnvMaker, seeds: Sequence[int]) -> list[SheetRow]:
    """Reset a fresh env per seed and keep the first observation; an env that raises gives a row
    with the error instead (the sheet still shows the other seeds)."""
    rows = []
    for seed in seeds:
        try:
            env = make()
            try:
                observation, _ = env.reset(seed=seed)
            finally:
                env.close()
            rows.append(SheetRow(seed, observation=observation))
        except Exception as exc:  # noqa: BLE001 - one bad seed must not hide the others
            rows.append(SheetRow(seed, error=f"{type(exc).__name__}: {exc}"))
    return rows


def _tile(image: Image.Image) -> Image.Image:
    scale = TILE / max(image.size)
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    resample = Image.Resampling.NEAREST if scale >= 1 else Image.Resampling.LANCZOS
    return image.convert("RGB").resize(size, resample)


def _label(row: SheetRow, image: Image.Image | None, index: int) -> str:
    if row.error is not None:
        return f"seed {row.seed}: reset raised {row.error}"[:120]
    assert row.observation is not None
    first_line = next((line for line in row.observation.text.splitlines() if line.strip()), "")
    size = f"image {index}: {image.width}x{image.height} {image.mode}" if image is not None else "no image"
    return f"seed {row.seed}  {size}\n{first_line[:60]}"


def render_sheet(rows: Sequence[SheetRow]) -> Image.Image:
    """The sheet: one row per seed, one framed tile per image of its first observation."""
    columns = max([len(row.observation.images) if row.observation else 1 for row in rows] + [1])
    cell_width, cell_height = TILE + 2 * GAP, TILE + LABEL_HEIGHT + 2 * GAP
    sheet = Image.new("RGB", (columns * cell_width + GAP, len(rows) * cell_height + GAP), BACKGROUND)
    draw = ImageDraw.Draw(sheet)
    font = ImageFont.load_default()
    for row_index, row in enumerate(rows):
        images: list[Image.Image | None] = list(row.observation.images) if row.observation else []
        for column, image in enumerate(images or [None]):
            x, y = GAP + column * cell_width, GAP + row_index * cell_height
            draw.multiline_text((x, y), _label(row, image, column), fill=(255, 255, 255), font=font)
            if image is None:
                continue
            tile = _tile(image)
            top = y + LABEL_HEIGHT
            sheet.paste(tile, (x, top))
            # a frame just outside the tile: where the image ends, whatever colour its border is
            draw.rectangle((x - 1, top - 1, x + tile.width, top + tile.height), outline=FRAME)
    return sheet


def write_sheet(env: EnvMaker, seeds: Sequence[int], path: Path | str) -> Path:
    """Render the first observation of each seed and save the sheet (PNG) to ``path``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    render_sheet(first_observations(env, seeds)).save(target, format="PNG")
    return target


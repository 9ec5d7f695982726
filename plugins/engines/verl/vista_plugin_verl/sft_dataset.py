"""verl's multi-turn SFT dataset, reading our rows' images as the pixels RL shows.

verl's ``MultiTurnSFTDataset`` hands each image of a row to ``process_image``
(``verl/utils/dataset/vision_utils.py:22-36``), which for anything but a PIL image calls
``qwen_vl_utils.fetch_image``: that rescales every image into its own pixel range (at least 4 vision
tokens: a 28x28 FrozenLake map becomes 56x56), while RL's rows reach the processor as the episode
driver made them.  This subclass decodes the row's PNG bytes into PIL images first (``process_image``
returns a PIL image unchanged), so SFT and RL see the same pixels.  The SFT stage selects it with
verl's own ``data.custom_cls`` (``verl/trainer/sft_trainer.py``, ``create_sft_dataset``).
"""

from __future__ import annotations

import io
from typing import Any

from PIL import Image
from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset


def decoded(image: Any) -> Any:
    """A row's image as a PIL image (``{"bytes": ...}`` as written by ``sft.write_rows``)."""
    if isinstance(image, dict) and image.get("bytes") is not None:
        with Image.open(io.BytesIO(image["bytes"])) as opened:
            return opened.convert("RGB")
    return image


class VistaSFTDataset(MultiTurnSFTDataset):
    """``MultiTurnSFTDataset`` with the row's images decoded before verl's ``process_image``."""

    def _build_messages(self, example: dict) -> Any:
        images = example.get(self.image_key)
        if images is not None:
            example = {**example, self.image_key: [decoded(image) for image in images]}
        return super()._build_messages(example)

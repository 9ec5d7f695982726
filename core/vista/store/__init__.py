"""The trajectory store: run directories with JSONL trajectories, PNG images by content hash, the
resolved config, versions, metrics and an HTML viewer."""

from vista.store.images import image_hash, save_image
from vista.store.reader import RunReader
from vista.store.writer import RunWriter, versions

__all__ = ["RunReader", "RunWriter", "image_hash", "save_image", "versions"]

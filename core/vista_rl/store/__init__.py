"""The trajectory store: run directories with JSONL trajectories, PNG images by content hash, the
resolved config, versions, metrics and an HTML viewer."""

from vista_rl._jsonable import json_default
from vista_rl.store.images import image_hash, save_image
from vista_rl.store.reader import RunReader
from vista_rl.store.writer import RunExistsError, RunWriter, to_json_line, versions

__all__ = ["RunExistsError", "RunReader", "RunWriter", "image_hash", "json_default", "save_image", "to_json_line",
           "versions"]

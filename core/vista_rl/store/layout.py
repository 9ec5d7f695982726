"""File names inside an eval run directory, in one place.

The writer, the reader and the HTML viewer all need them; keeping them here (and not in the
writer) lets each of those import the names without importing the others, so no import cycle.
The training run directory has its own names in :mod:`vista_plugin_local.metrics`.
"""

from __future__ import annotations

TRAJECTORIES_FILE = "trajectories.jsonl"
IMAGES_DIR = "images"
CONFIG_FILE = "config.yaml"
VERSIONS_FILE = "versions.json"
SUMMARY_METRICS_FILE = "metrics.json"
"""Summary metrics of an eval run (one JSON object); not the per-step log of a training run."""
HTML_FILE = "trajectories.html"

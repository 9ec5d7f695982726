"""The multi-turn rollout engine (see :mod:`vista.rollout.engine`) and its metrics."""

from vista.rollout.engine import EpisodeSpec, RolloutEngine, RolloutTimings, episode_specs
from vista.rollout.metrics import RolloutMetrics
from vista.rollout.token_view import TokenViewBuilder

__all__ = ["EpisodeSpec", "RolloutEngine", "RolloutMetrics", "RolloutTimings", "TokenViewBuilder", "episode_specs"]

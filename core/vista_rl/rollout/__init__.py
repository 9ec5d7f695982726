"""The multi-turn rollout engine (see :mod:`vista_rl.rollout.engine`) and its metrics."""

from vista_rl.rollout.engine import EpisodeSpec, RolloutEngine, RolloutTimings, episode_specs
from vista_rl.rollout.metrics import RolloutMetrics
from vista_rl.rollout.token_view import TokenViewBuilder

__all__ = ["EpisodeSpec", "RolloutEngine", "RolloutMetrics", "RolloutTimings", "TokenViewBuilder", "episode_specs"]

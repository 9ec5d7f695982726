"""The multi-turn rollout engine (see :mod:`vista_rl.rollout.engine`), the per-turn core every
engine shares (:mod:`vista_rl.rollout.episode` for one episode's life, :mod:`vista_rl.rollout.turn`
for one reply) and rollout metrics, the teacher episodes an SFT stage learns from
(:func:`teacher_episodes`), with the 95% intervals every reported
rate carries (:class:`Estimate`, :func:`mean`, :func:`proportion`)."""

from vista_rl._stats import Estimate, mean, proportion
from vista_rl.rollout.calls import Call, CallKind
from vista_rl.rollout.context import window, window_start
from vista_rl.rollout.conversation import shown
from vista_rl.rollout.engine import RolloutEngine, RolloutTimings, episode_specs
from vista_rl.rollout.episode import EpisodeDriver, EpisodeSpec, open_env
from vista_rl.rollout.metrics import RolloutMetrics
from vista_rl.rollout.model_workers import (
    Chunk,
    ModelWorkerError,
    ProcessModelWorkerPool,
    add_timings,
    failed_trajectory,
    make_backend,
    make_chunks,
    make_pool,
    run_chunk,
    warm_up,
)
from vista_rl.rollout.stats import EpisodeStats
from vista_rl.rollout.teacher_data import TeacherEpisodes, teacher_episodes
from vista_rl.rollout.token_view import TokenViewBuilder
from vista_rl.rollout.turn import (
    MAX_TOOL_CALLS_PER_TURN,
    ToolExecution,
    TurnOutcome,
    execute_tool_calls,
    make_env_tools,
    parse_tool_calls,
    reflection_message,
    step_outcome,
    tool_context,
    tool_outcome,
)
from vista_rl.rollout.workers import CallOutcome, CallPool, run_detached

__all__ = [
    "window",
    "window_start",
    "shown",
    "Call", "CallKind", "CallOutcome", "CallPool", "Chunk", "EpisodeDriver", "EpisodeSpec", "EpisodeStats",
    "Estimate", "MAX_TOOL_CALLS_PER_TURN",
    "ModelWorkerError", "ProcessModelWorkerPool", "RolloutEngine", "RolloutMetrics", "RolloutTimings",
    "TeacherEpisodes", "TokenViewBuilder", "ToolExecution", "TurnOutcome", "add_timings", "episode_specs",
    "execute_tool_calls", "failed_trajectory", "make_backend", "make_chunks", "make_env_tools", "make_pool", "mean",
    "open_env", "parse_tool_calls", "proportion", "reflection_message", "run_chunk", "run_detached", "step_outcome",
    "teacher_episodes", "tool_context", "tool_outcome", "warm_up"
]

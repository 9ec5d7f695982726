"""Our advantage estimators inside verl: registered in verl's estimator registry and bridged into
its ``compute_advantage`` so critic-based and turn-level estimators see what they need.

verl 0.9 calls a registered estimator with ``token_level_rewards``, ``response_mask``, ``index``
(group uid) and ``config`` only: no critic values and no turn structure, and its reward lands on the
last token.  VAGEN-Full (bi-level GAE with turn rewards) needs all three, so ``install_bridge`` wraps
verl's ``compute_advantage`` (in the legacy and the v1 trainer modules): for ``vista_*`` estimators
it passes ``data.batch["values"]`` and rebuilds token rewards from the agent loop's per-turn scores
(``turn_scores`` at ``turn_ends``); every other estimator goes to verl's code unchanged.  The same
functions serve the local engine, so verl and local training compute identical advantages.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

import vista_rl
from vista_rl import AdvantageBatch, AdvantageOutput
from vista_rl.algorithms.turn_credit import TurnCredit

#: verl name -> (vista estimator id, whether it needs critic values)
VERL_NAMES: dict[str, tuple[str, bool]] = {
    "vista_grpo": ("grpo", False),
    "vista_dr_grpo": ("dr_grpo", False),
    "vista_rloo": ("rloo", False),
    "vista_reinforce_plus_plus": ("reinforce_plus_plus", False),
    "vista_reinforce_plus_plus_baseline": ("reinforce_plus_plus_baseline", False),
    "vista_gae": ("gae", True),
    "vista_masked_gae": ("masked_gae", True),
    "vista_bilevel_gae": ("bilevel_gae", True),
    "vista_turnwise_gae": ("turnwise_gae", True),
}
#: verl ``algorithm`` keys our estimators read, mapped to their parameter names
_PARAMS_FROM_CONFIG = {"gamma": "gamma", "lam": "lam", "turn_gamma": "turn_gamma", "turn_lam": "turn_lam",
                       "norm_adv_by_std_in_grpo": "norm_by_std"}


def verl_name(estimator_id: str) -> str:
    name = f"vista_{estimator_id}"
    if name not in VERL_NAMES:
        raise KeyError(f"estimator {estimator_id!r} has no verl bridge; known: {sorted(v for v, _ in VERL_NAMES.values())}")
    return name


def group_ids_from_index(index: Any, batch_size: int) -> torch.Tensor | None:
    """verl's uids (strings in an object array) -> dense integer group ids."""
    if index is None:
        return None
    values = list(np.asarray(index, dtype=object).reshape(-1))
    if len(values) != batch_size:
        raise ValueError(f"{len(values)} group uids for a batch of {batch_size}")
    codes: dict[Any, int] = {}
    return torch.tensor([codes.setdefault(value, len(codes)) for value in values], dtype=torch.long)


def turn_rewards_tensor(turn_scores: Sequence[Sequence[float]], turn_ends: Sequence[Sequence[int]],
                        shape: tuple[int, int], dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-turn rewards placed on each turn's last token, and the turn-end flags."""
    rewards = torch.zeros(shape, dtype=dtype)
    ends = torch.zeros(shape, dtype=dtype)
    for row, (scores, positions) in enumerate(zip(turn_scores, turn_ends, strict=True)):
        kept = [(int(p), float(s)) for p, s in zip(positions, scores, strict=False) if 0 <= int(p) < shape[1]]
        for position, score in kept:
            rewards[row, position] += score
            ends[row, position] = 1.0
        # scores of turns cut off by the response length still count, on the last kept turn end
        cut = [float(s) for p, s in zip(positions, scores, strict=False) if int(p) >= shape[1]]
        if cut and kept:
            rewards[row, kept[-1][0]] += sum(cut)
    return rewards, ends


def _params(estimator_id: str, config: Any) -> dict[str, Any]:
    if config is None:
        return {}
    fn = vista_rl.host().spec("estimators", estimator_id).load()
    import inspect

    accepted = set(inspect.signature(fn).parameters)
    params: dict[str, Any] = {}
    for key, name in _PARAMS_FROM_CONFIG.items():
        value = config.get(key) if hasattr(config, "get") else getattr(config, key, None)
        if value is not None and name in accepted:
            params[name] = value
    extra = config.get("vista_params") if hasattr(config, "get") else None
    if extra:
        params.update({k: v for k, v in dict(extra).items() if k in accepted})
    return params


def run_estimator(estimator_id: str, token_level_rewards: torch.Tensor, response_mask: torch.Tensor, *,
                  index: Any = None, values: torch.Tensor | None = None, turn_ends: torch.Tensor | None = None,
                  config: Any = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Call a vista estimator with verl's tensors; returns ``(advantages, returns)`` like verl's."""
    batch = AdvantageBatch(
        token_rewards=token_level_rewards,
        response_mask=response_mask,
        group_ids=group_ids_from_index(index, token_level_rewards.shape[0]),
        values=values,
        turn_ends=turn_ends,
    )
    out: AdvantageOutput = vista_rl.make_estimator(estimator_id)(batch, **_params(estimator_id, config))
    dtype = token_level_rewards.dtype
    return out.advantages.to(dtype), out.returns.to(dtype)


def _verl_fn(name: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    estimator_id, _needs_values = VERL_NAMES[name]

    def estimate(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None,
                 config: Any = None, values: torch.Tensor | None = None, turn_ends: torch.Tensor | None = None,
                 **_kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return run_estimator(estimator_id, token_level_rewards, response_mask, index=index, values=values,
                             turn_ends=turn_ends, config=config)

    estimate.__name__ = name
    estimate.__qualname__ = name
    estimate.__doc__ = f"vista estimator {estimator_id!r} (vista_rl.algorithms) for verl."
    return estimate


_FUNCTIONS: dict[str, Callable[..., Any]] = {}


def register_in_verl() -> list[str]:
    """Put every bridged estimator into verl's registry (idempotent)."""
    from verl.trainer.ppo import core_algos

    for name in VERL_NAMES:
        if name in core_algos.ADV_ESTIMATOR_REGISTRY:
            continue
        fn = _FUNCTIONS.setdefault(name, _verl_fn(name))
        core_algos.register_adv_est(name)(fn)
    return list(VERL_NAMES)


def _bridged(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def compute_advantage(data: Any, adv_estimator: Any, gamma: float = 1.0, lam: float = 1.0,
                          num_repeat: int = 1, norm_adv_by_std_in_grpo: bool = True, config: Any = None) -> Any:
        name = str(getattr(adv_estimator, "value", adv_estimator))
        if name not in VERL_NAMES:
            return original(data, adv_estimator, gamma=gamma, lam=lam, num_repeat=num_repeat,
                            norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo, config=config)
        estimator_id, needs_values = VERL_NAMES[name]
        mask = data.batch["response_mask"]
        rewards = data.batch["token_level_rewards"]
        turn_ends = None
        extra = data.non_tensor_batch
        if "turn_scores" in extra and "turn_ends" in extra and len(extra["turn_ends"]) == rewards.shape[0]:
            turn_rewards, turn_ends = turn_rewards_tensor(list(extra["turn_scores"]), list(extra["turn_ends"]),
                                                          tuple(rewards.shape), rewards.dtype)
            # the trajectory total sits on the last token; replace it by the per-turn rewards
            rewards = turn_rewards if turn_rewards.abs().sum() > 0 or rewards.abs().sum() == 0 else rewards
        values = data.batch["values"] if needs_values else None
        settings = dict(config or {})
        settings.update({"gamma": gamma, "lam": lam, "norm_adv_by_std_in_grpo": norm_adv_by_std_in_grpo})
        advantages, returns = run_estimator(estimator_id, rewards, mask, index=extra.get("uid"), values=values,
                                            turn_ends=turn_ends, config=settings)
        data.batch["advantages"] = advantages
        data.batch["returns"] = returns
        return data

    compute_advantage.__vista_bridge__ = True  # type: ignore[attr-defined]
    return compute_advantage


#: The TransferQueue partition verl's v1 trainer samples training batches from
#: (``verl/trainer/ppo/v1/trainer_base.py``, ``_step_once``: ``replay_buffer.sample(partition_id="train")``).
TRAIN_PARTITION = "train"


def fetch_extra_fields(keys: Sequence[str]) -> list[dict[str, Any]] | None:
    """The agent loop's ``extra_fields`` of each row, from verl's TransferQueue (the v1 trainer hands
    ``compute_advantage_for_multi_trajectories`` only uid, masks, scores and log-probs); None where
    there is no TransferQueue to ask."""
    try:
        import transfer_queue as tq

        data = tq.kv_batch_get(keys=list(keys), partition_id=TRAIN_PARTITION, select_fields=["extra_fields"])
        values = data["extra_fields"]
        items = values.tolist() if hasattr(values, "tolist") else list(values)
    except Exception:  # noqa: BLE001 - no TransferQueue (legacy trainer, a unit test): the caller decides
        return None
    return [dict(getattr(item, "data", item) or {}) for item in items]


def _sessions(keys: Sequence[str]) -> tuple[list[str], list[str], list[int]]:
    """verl's ``{uid}_{session}_{index}`` keys -> (uid, episode, index) per row."""
    uids, episodes, indices = [], [], []
    for key in keys:
        uid, session, index = str(key).rsplit("_", 2)
        uids.append(uid)
        episodes.append(f"{uid}_{session}")
        indices.append(int(index))
    return uids, episodes, indices


def advantage_over_rows(data: Any, keys: Sequence[str], extras: Sequence[dict[str, Any]] | None, name: str,
                        gamma: float, lam: float, norm_adv_by_std_in_grpo: bool, config: Any) -> Any:
    """Advantages of a v1 batch for a ``vista_*`` estimator, as the local engine computes them.

    Per-turn rows (``extra_fields["vista_turn"]``): the episodes' turns through
    :func:`vista_rl.algorithms.turn_credit.turn_advantages`, grouped by session (an episode) and uid
    (its seed), each row's advantage on its response tokens; with a critic (``data.batch["values"]``)
    through ``turn_token_advantages``, token by token over each episode's replies.  One row per episode: the rows through
    our estimator with the per-turn rewards (``turn_scores`` at ``turn_ends``).  Rows of a failed
    episode (``vista_failure``) are left out of the statistics and get 0, as the local engine leaves
    the episode out of its update."""
    from vista_rl.algorithms.turn_credit import turn_advantages, turn_token_advantages

    estimator_id, needs_values = VERL_NAMES[name]
    uids, episodes, turns = _sessions(keys)
    mask = data.batch["response_mask"]
    extras = list(extras) if extras is not None else [{} for _ in keys]
    failed = [bool(extra.get("vista_failure")) for extra in extras]
    settings = dict(config or {})
    settings.update({"gamma": gamma, "lam": lam, "norm_adv_by_std_in_grpo": norm_adv_by_std_in_grpo})
    if any("vista_turn" in extra for extra in extras):
        estimator = vista_rl.make_estimator(estimator_id)
        params = _params(estimator_id, settings)
        kept = [i for i in range(len(keys)) if not failed[i]]
        rows = ([episodes[i] for i in kept], [int(extras[i]["vista_turn"]) for i in kept],
                [float(extras[i]["vista_turn_reward"]) for i in kept], [uids[i] for i in kept])
        advantages = torch.zeros(mask.shape, dtype=torch.float32)
        returns = torch.zeros(mask.shape, dtype=torch.float32)
        if kept and needs_values:  # the critic's values: token-level credit over each episode's replies
            kept_advantages, kept_returns = turn_token_advantages(
                lambda batch: estimator(batch, **params), *rows, mask[kept].float().cpu(),
                data.batch["values"][kept].float().cpu())
            advantages[kept], returns[kept] = kept_advantages, kept_returns
        elif kept:
            per_row = turn_advantages(lambda batch: estimator(batch, **params), *rows,
                                      _credit(settings.get("vista_turn_credit")),
                                      [extras[i].get("vista_state") for i in kept],
                                      [extras[i].get("vista_action") for i in kept])
            advantages[kept] = per_row.unsqueeze(1) * mask[kept].float().cpu()
            returns = advantages.clone()
        data.batch["advantages"], data.batch["returns"] = advantages.to(mask.device), returns.to(mask.device)
        return data
    if any(extras):
        data.non_tensor_batch["turn_scores"] = _objects([list(extra.get("turn_scores") or []) for extra in extras])
        data.non_tensor_batch["turn_ends"] = _objects([list(extra.get("turn_ends") or []) for extra in extras])
    # a failed episode is its own group, so it moves no other episode's baseline
    data.non_tensor_batch["uid"] = _objects([f"vista-failed-{i}" if failed[i] else uids[i] for i in range(len(keys))])
    data = _bridged(_unused)(data, name, gamma=gamma, lam=lam, norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo,
                             config=config)
    if any(failed):
        keep = torch.tensor([0.0 if bad else 1.0 for bad in failed], dtype=data.batch["advantages"].dtype)
        data.batch["advantages"] = data.batch["advantages"] * keep.unsqueeze(1)
        data.batch["returns"] = data.batch["returns"] * keep.unsqueeze(1)
    return data


def _credit(value: Any) -> TurnCredit:
    credit = str(value or "episode")
    if credit not in ("episode", "turn", "state"):
        raise ValueError(f"algorithm.vista_turn_credit: {credit!r} is not episode, turn or state")
    return credit  # type: ignore[return-value]


def _objects(values: Sequence[Any]) -> np.ndarray:
    """A 1-D object array (``np.array`` would make equal-length lists a 2-D one)."""
    out = np.empty(len(values), dtype=object)
    for index, value in enumerate(values):
        out[index] = value
    return out


def _unused(*_args: Any, **_kwargs: Any) -> Any:  # pragma: no cover - _bridged calls it for non-vista names only
    raise AssertionError("not a vista estimator")


def _bridged_multi(original: Callable[..., Any],
                   fetch: Callable[[Sequence[str]], list[dict[str, Any]] | None] | None = None) -> Callable[..., Any]:
    """verl's v1 ``compute_advantage_for_multi_trajectories`` with ``vista_*`` estimators handled by
    :func:`advantage_over_rows` (its own rule broadcasts a session's final row for GRPO only, and
    hands every other estimator the rows as if each were an episode)."""

    @functools.wraps(original)
    def compute_advantage_for_multi_trajectories(data: Any, batch_keys: list[str], adv_estimator: Any,
                                                 gamma: float = 1.0, lam: float = 1.0, num_repeat: int = 1,
                                                 norm_adv_by_std_in_grpo: bool = True, config: Any = None) -> Any:
        name = str(getattr(adv_estimator, "value", adv_estimator))
        if name not in VERL_NAMES:
            return original(data, batch_keys, adv_estimator, gamma=gamma, lam=lam, num_repeat=num_repeat,
                            norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo, config=config)
        extras = (fetch or fetch_extra_fields)(batch_keys)
        _uids, episodes, _turns = _sessions(batch_keys)
        if extras is None and len(set(episodes)) != len(episodes):
            raise RuntimeError(f"{name}: several rows per episode but no extra_fields from TransferQueue "
                               f"(partition {TRAIN_PARTITION!r}); per-turn advantages cannot be grouped")
        return advantage_over_rows(data, batch_keys, extras, name, gamma, lam, norm_adv_by_std_in_grpo, config)

    compute_advantage_for_multi_trajectories.__vista_bridge__ = True  # type: ignore[attr-defined]
    return compute_advantage_for_multi_trajectories


def install_bridge() -> None:
    """Wrap verl's ``compute_advantage`` and v1's ``compute_advantage_for_multi_trajectories`` where
    its trainers look them up (idempotent).  ``trainer_base`` binds the v1 function at its own import,
    which comes after ``import verl`` ran this: it is patched here only if already imported."""
    import importlib
    import sys

    for module_name in ("verl.trainer.ppo.ray_trainer", "verl.trainer.ppo.v1.utils"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        current = getattr(module, "compute_advantage", None)
        if current is not None and not getattr(current, "__vista_bridge__", False):
            module.compute_advantage = _bridged(current)  # type: ignore[attr-defined]
    for module_name in ("verl.trainer.ppo.v1.utils", "verl.trainer.ppo.v1.trainer_base"):
        loaded = sys.modules.get(module_name)
        current = getattr(loaded, "compute_advantage_for_multi_trajectories", None)
        if loaded is not None and current is not None and not getattr(current, "__vista_bridge__", False):
            loaded.compute_advantage_for_multi_trajectories = _bridged_multi(current)  # type: ignore[attr-defined]

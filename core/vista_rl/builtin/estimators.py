"""Built-in advantage estimators (``vista_rl.algorithms.estimators``), registered lazily so that
listing them never imports torch.  Parameters are documented in that module."""

from __future__ import annotations

from vista_rl.hookspecs import RegisterEstimator, hookimpl

_MODULE = "vista_rl.algorithms.estimators"

#: id -> (function name, description, batch fields it needs beyond rewards and masks).  The turn
#: estimators use ``turn_ends`` when given, else each run of advantage-mask tokens is a turn.
BUILTIN_ESTIMATORS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "grpo": ("grpo", "GRPO: group-normalised outcome reward (norm_by_std, epsilon)", ("group_ids",)),
    "dr_grpo": ("dr_grpo", "Dr. GRPO: group-centred outcome reward, no std scaling", ("group_ids",)),
    "rloo": ("rloo", "RLOO: outcome reward minus the leave-one-out group mean", ("group_ids",)),
    "reinforce_plus_plus": (
        "reinforce_plus_plus", "REINFORCE++: whitened discounted reward-to-go (gamma, whiten)", ()),
    "reinforce_plus_plus_baseline": (
        "reinforce_plus_plus_baseline", "REINFORCE++ with a group-mean baseline, whitened (whiten)",
        ("group_ids",)),
    "gae": ("gae", "GAE over every token up to the last response token (gamma, lam, whiten)", ("values",)),
    "masked_gae": (
        "masked_gae", "GAE stepping only through advantage-mask tokens, as VAGEN and verl (gamma, lam, whiten)",
        ("values",)),
    "bilevel_gae": (
        "bilevel_gae",
        "VAGEN bi-level GAE: across turns (turn_gamma, turn_lam) and within turns (gamma, lam, whiten)",
        ("values",)),
    "turnwise_gae": (
        "turnwise_gae", "Turn-wise GAE: each turn's advantage on all its tokens (turn_gamma, turn_lam, whiten)",
        ("values",)),
}


@hookimpl
def register_advantage_estimators(register: RegisterEstimator) -> None:
    for estimator_id, (function, description, needs) in BUILTIN_ESTIMATORS.items():
        register(estimator_id, f"{_MODULE}:{function}", description=description, needs=list(needs))

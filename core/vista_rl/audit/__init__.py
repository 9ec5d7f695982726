"""The reward audit (``vista audit rewards``): adversarial scripted policies against an env's reward.

A reward that a policy can farm without solving the task is the worst bug an RL framework can have,
because training optimises exactly that hole.  :func:`audit_rewards` plays hedged and repeated
answers, tool-call spam, very long and empty replies, format-tag tricks and retries
(:mod:`vista_rl.audit.adversaries`) against an env, through ``env.step`` and through the real rollout
engine, and reports the largest reward each earns next to the oracle's (:mod:`vista_rl.audit.report`).
"""

from vista_rl.audit.adversaries import Adversary, SeedTask, adversaries_named, all_adversaries
from vista_rl.audit.episodes import PATHS, Episode, PathName, ScriptedPolicy
from vista_rl.audit.report import EXIT_HOLE, EXIT_INCOMPLETE, EXIT_OK, AuditReport, Finding, Row
from vista_rl.audit.run import audit_rewards

__all__ = [
    "EXIT_HOLE", "EXIT_INCOMPLETE", "EXIT_OK", "PATHS", "Adversary", "AuditReport", "Episode", "Finding", "PathName", "Row",
    "ScriptedPolicy", "SeedTask", "adversaries_named", "all_adversaries", "audit_rewards",
]

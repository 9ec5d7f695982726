"""RL algorithms as pure, vectorised torch functions (no Python loop over tokens).

- :mod:`vista_rl.algorithms.estimators`: the advantage estimators registered by
  ``vista_rl.builtin.estimators`` (GRPO family, RLOO, REINFORCE++, GAE family incl. VAGEN's bi-level
  and turn-wise GAE).
- :mod:`vista_rl.algorithms.scan`: reverse linear scans over masked positions (the GAE recursion).
- :mod:`vista_rl.algorithms.turns`: turn structure of multi-turn token sequences.
- :mod:`vista_rl.algorithms.groups`: per-group statistics (GRPO, RLOO baselines).
- :mod:`vista_rl.algorithms.masked`: masked mean / variance / whitening.

Importing this package imports torch; ``import vista_rl`` does not import it.
"""

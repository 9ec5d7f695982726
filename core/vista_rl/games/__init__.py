"""The kit VAGEN-style grid games share: prompt formats, multi-action turns, relation states,
sprites and expert trajectories.  Any env plugin can build on it; Sokoban and FrozenLake do."""

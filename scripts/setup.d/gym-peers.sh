#!/usr/bin/env bash
# Peers' gymnasium env packages (MiniGrid, the Arcade Learning Environment with its ROMs) for the
# gymnasium bridge's tests: the `peers` extra of plugins/envs/gymnasium/pyproject.toml, read from there so
# the pins live in one place.  Real packages from the index, no stand-ins (issue 27).
# Idempotent: pip skips what is already satisfied.  Usage: VENV=/path/to/venv bash scripts/setup.d/gym-peers.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${VENV:?set VENV to the virtual environment}
source scripts/lib.sh
mapfile -t requirements < <("$VENV/bin/python" -c '
import tomllib
with open("plugins/envs/gymnasium/pyproject.toml", "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["optional-dependencies"]["peers"]))')
pip_install "${requirements[@]}"
"$VENV/bin/python" -c "import minigrid, ale_py" >/dev/null

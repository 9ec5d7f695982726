"""Built-in rule judges that every env can use (more live in plugins)."""

from __future__ import annotations

from vista_rl.hookspecs import RegisterJudge, hookimpl


@hookimpl
def register_judges(register: RegisterJudge) -> None:
    register("exact", "vista_rl.judges:ExactMatchJudge", description="Exact match after normalisation")
    register("format", "vista_rl.judges:FormatJudge", description="1 if the response follows the tag format")

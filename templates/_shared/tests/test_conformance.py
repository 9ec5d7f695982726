"""Every item this plugin registers passes the vista-rl-sdk conformance checks.

The items are found the way VISTA finds them (the ``vista_rl`` entry point of the installed
distribution), so this also proves the packaging is right.  Add an env, tool or judge to the
plugin and it is checked here with no new test code; give a check its inputs with the
``check_args`` metadata of ``register(...)``.
"""

from __future__ import annotations

from typing import Any

import pytest
import vista_rl
from vista_rl import PluginInfo
from vista_rl_sdk import check_env, check_judge, check_tool

PLUGIN = "{{ cookiecutter.plugin_name }}"
DISTRIBUTION = "{{ cookiecutter.__project_slug }}"


def plugin_info() -> PluginInfo | None:
    return next((info for info in vista_rl.get_plugins() if info.name == PLUGIN), None)


def item_ids(kind: str) -> list[str]:
    info = plugin_info()
    return sorted(info.items.get(kind, [])) if info is not None else []


def check_args(kind: str, item_id: str) -> dict[str, Any]:
    return dict(vista_rl.host().spec(kind, item_id).metadata.get("check_args", {}))


def test_plugin_is_discovered_through_its_entry_point() -> None:
    info = plugin_info()
    assert info is not None, f"VISTA does not see {PLUGIN!r}: is {DISTRIBUTION} installed (pip install -e .)?"
    assert info.distribution == DISTRIBUTION
    assert info.errors == [], f"the plugin failed to load: {info.errors}"
    assert any(info.items.values()), "the plugin registers nothing"


def check_registered_env(env_id: str, args: dict[str, Any]) -> None:
    check_env(env_id, **args)


def check_registered_tool(tool_id: str, args: dict[str, Any]) -> None:
    assert "valid_arguments" in args, "register the tool with check_args={'valid_arguments': {...}}"
    check_tool(vista_rl.make_tool(tool_id), **args)


def check_registered_judge(judge_id: str, args: dict[str, Any]) -> None:
    assert "reference" in args, "register the judge with check_args={'reference': ..., 'wrong': [...]}"
    check_judge(vista_rl.make_judge(judge_id), **args)


CHECKS = {"envs": check_registered_env, "tools": check_registered_tool, "judges": check_registered_judge}


@pytest.mark.parametrize(("kind", "item_id"), [(kind, item_id) for kind in CHECKS for item_id in item_ids(kind)])
def test_conformance(kind: str, item_id: str) -> None:
    CHECKS[kind](item_id, check_args(kind, item_id))

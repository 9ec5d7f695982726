"""Keep the docs and the tests in step with the hook specs (datasette's discipline):

- every hook spec has a page docs/hooks/<hook>.md with a Parameters table naming each parameter and
  an example that implements the hook; there is no page for a hook that does not exist;
- docs/index.md links every hook page;
- every hook spec has a ``test_hook_<name>`` test somewhere in the test suites.

The tutorials' code runs in tests/test_tutorial.py, verbatim, as a reader follows them.
"""

from __future__ import annotations

import inspect
import re

import pytest

from tests.docblocks import DOCS, REPO, code_blocks
from vista_rl import hookspecs

HOOKS = sorted(name for name, obj in vars(hookspecs).items()
               if inspect.isfunction(obj) and hasattr(obj, f"{hookspecs.PROJECT_NAME}_spec"))
TEST_SUITES = ("tests", "plugins/*/*/tests", "contrib/*/tests")


def test_hook_specs_are_found() -> None:
    assert "register_envs" in HOOKS and "register_commands" in HOOKS and len(HOOKS) >= 8


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_is_documented(hook: str) -> None:
    page = DOCS / "hooks" / f"{hook}.md"
    assert page.is_file(), f"hook {hook} has no page; add docs/hooks/{hook}.md (parameters + example)"
    text = page.read_text()
    parameters = list(inspect.signature(getattr(hookspecs, hook)).parameters)
    assert text.startswith(f"# `{hook}({', '.join(parameters)})`"), "the title must be the hook's signature"
    section = text.split("## Parameters", 1)[-1].split("## Example", 1)[0]
    assert "## Parameters" in text and "## Example" in text
    for parameter in parameters:
        assert f"| `{parameter}` |" in section, f"parameter {parameter!r} is not in the Parameters table"
    examples = "\n".join(code_blocks(page))
    assert re.search(rf"@vista_rl\.hookimpl\s+def {hook}\(", examples), "the example must implement the hook"


def test_no_page_for_a_hook_that_does_not_exist() -> None:
    pages = {page.stem for page in (DOCS / "hooks").glob("*.md")}
    assert pages == set(HOOKS), f"stale pages: {sorted(pages - set(HOOKS))}"


def test_index_links_every_hook_page_and_the_tutorial() -> None:
    index = (DOCS / "index.md").read_text()
    for hook in HOOKS:
        assert f"(hooks/{hook}.md)" in index, f"docs/index.md does not link {hook}"
    assert "(tutorial-env-plugin.md)" in index and "(tutorial-multi-turn-env.md)" in index


@pytest.mark.parametrize("hook", HOOKS)
def test_hook_has_a_test(hook: str) -> None:
    pattern = re.compile(rf"def test_hook_{hook}\b")
    files = [path for suite in TEST_SUITES for path in REPO.glob(f"{suite}/**/test_*.py")]
    holders = [path for path in files if pattern.search(path.read_text())]
    assert holders, f"no test named test_hook_{hook} in {', '.join(TEST_SUITES)}"

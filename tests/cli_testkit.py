"""The real ``vista`` CLI run in this process, for tests that read its exit code and output."""

from __future__ import annotations

import pytest

from vista_rl.cli.main import main


def run_vista(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """``vista ARGS``: its exit code and everything it printed (stdout then stderr)."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    captured = capsys.readouterr()
    return code, captured.out + captured.err

"""vista-rl-sdk: conformance checks and pytest fixtures for VISTA plugin authors."""

from vista_rl_sdk.checks import (
    CheckFailure,
    CheckReport,
    CheckWarning,
    check_env,
    check_estimator,
    check_judge,
    check_tool,
)

__all__ = ["CheckFailure", "CheckReport", "CheckWarning", "check_env", "check_estimator", "check_judge", "check_tool"]

"""What a client may ask of the env server: per-session env config and the size of what comes back.

A client's config reaches the env's constructor, so it decides how much memory and CPU a session
costs: FrozenLake with ``{"size": 32, "tile_size": 256}`` renders 192 MB frames, and eight such
sessions took a server to 8 GB.  Two layers, as request validation in model servers does it:

- **What may be set**: an allow-list of keys, each with an optional numeric range or a set of
  choices (``--client-config size=2..8``); without one, any key, but every value must be a small
  JSON value (numbers within +-``max_number``, short strings, shallow lists and maps).
- **What it may cost**: every observation's images are capped in pixels (``max_image_pixels`` per
  image, ``max_observation_pixels`` per observation).  A session created with client config is
  reset once before it is handed out, so a config that renders oversized frames is refused at
  creation, not on the hundredth step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from vista_rl import Observation
from vista_rl.serving import nesting_depth, short


class LimitError(Exception):
    """A request asks for more than the server allows; ``status`` is the HTTP answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class KeyRule:
    """One allowed config key: a numeric range (either end open) or a set of allowed values."""

    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[Any, ...] | None = None

    def problem(self, key: str, value: Any) -> str | None:
        if self.choices is not None:
            return None if value in self.choices else f"{key}={short(value)} is not one of {list(self.choices)}"
        if self.minimum is None and self.maximum is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"{key} must be a number, got {short(value)}"
        if self.minimum is not None and value < self.minimum:
            return f"{key}={short(value)} is below the allowed minimum {self.minimum:g}"
        if self.maximum is not None and value > self.maximum:
            return f"{key}={short(value)} is above the allowed maximum {self.maximum:g}"
        return None


def _number(text: str) -> float | None:
    return float(text) if text.strip() else None


def parse_key_rule(text: str) -> tuple[str, KeyRule]:
    """``KEY`` (any value), ``KEY=MIN..MAX`` (either end may be empty), or ``KEY=A|B|C`` (choices,
    parsed as JSON where they can be: ``slippery=true|false``)."""
    import json

    key, has_rule, rule = text.partition("=")
    key = key.strip()
    if not key:
        raise ValueError(f"{text!r}: expected KEY, KEY=MIN..MAX or KEY=A|B")
    if not has_rule:
        return key, KeyRule()
    if ".." in rule:
        low, _, high = rule.partition("..")
        try:
            return key, KeyRule(minimum=_number(low), maximum=_number(high))
        except ValueError:
            raise ValueError(f"{text!r}: a range is MIN..MAX with numbers") from None
    choices = []
    for choice in rule.split("|"):
        try:
            choices.append(json.loads(choice))
        except ValueError:
            choices.append(choice)
    return key, KeyRule(choices=tuple(choices))


@dataclass(frozen=True)
class ClientLimits:
    """The server's limits on client config and observation size (see the module docstring)."""

    allowed: dict[str, KeyRule] | None = None
    max_number: float = 4096
    max_string: int = 256
    max_config_depth: int = 4
    max_image_pixels: int = 4096 * 4096
    max_observation_pixels: int = 4 * 4096 * 4096

    def check_config(self, env_id: str, config: dict[str, Any]) -> None:
        """Raise :class:`LimitError` (403 for a key not allowed, 422 for a value out of bounds)."""
        if self.allowed is not None:
            refused = sorted(key for key in config if key not in self.allowed)
            if refused:
                allowed = ", ".join(sorted(self.allowed)) or "none"
                raise LimitError(403, f"config key(s) {', '.join(short(k) for k in refused)} may not be set by "
                                      f"clients of {env_id} (allowed: {allowed})")
        problems: list[str] = []
        for key, value in config.items():
            rule = self.allowed.get(key) if self.allowed is not None else None
            if rule is not None and (rule.choices is not None or rule.minimum is not None or rule.maximum is not None):
                problem = rule.problem(key, value)
            else:
                problem = self._shape_problem(key, value)
            if problem:
                problems.append(problem)
        if problems:
            raise LimitError(422, "config refused: " + "; ".join(problems[:5]))

    def _shape_problem(self, key: str, value: Any) -> str | None:
        if nesting_depth(value, self.max_config_depth) > self.max_config_depth:
            return f"{key} nests deeper than {self.max_config_depth} levels"
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, bool) or item is None:
                continue
            if isinstance(item, (int, float)):
                if not math.isfinite(item) or abs(item) > self.max_number:
                    return (f"{key} holds {short(item)}, outside +-{self.max_number:g} (the server's "
                            "limit on client config numbers)")
            elif isinstance(item, str):
                # inline record images are bounded by the body size and checked in pixels by config_fields
                if len(item) > self.max_string and item[:11].lower() != "data:image/":
                    return f"{key} holds a string of {len(item)} characters (limit {self.max_string})"
            elif isinstance(item, dict):
                stack.extend(item.keys())
                stack.extend(item.values())
            elif isinstance(item, (list, tuple)):
                if len(item) > 1024:
                    return f"{key} holds a list of {len(item)} items (limit 1024)"
                stack.extend(item)
            else:
                return f"{key} holds a {type(item).__name__}, not a JSON value"
        return None

    def check_observation(self, observation: Observation) -> None:
        """Raise :class:`LimitError` (413) when the observation's images exceed the pixel caps."""
        total = 0
        for image in observation.images:
            width, height = image.size
            pixels = width * height
            if pixels > self.max_image_pixels:
                raise LimitError(413, f"the env rendered a {width}x{height} image ({pixels:,} pixels), over this "
                                      f"server's limit of {self.max_image_pixels:,} pixels per image; use a "
                                      "smaller config (e.g. fewer or smaller tiles)")
            total += pixels
        if total > self.max_observation_pixels:
            raise LimitError(413, f"the observation's images hold {total:,} pixels, over this server's limit of "
                                  f"{self.max_observation_pixels:,} per observation")

"""The LLM judge's prompt templates (VAGEN's two kinds, our wording), replaceable by the user.

Templates use :class:`string.Template` placeholders, so JSON braces in a template need no escaping:

- ``$tag``: ``observation`` or ``prediction``;
- ``$state_phrase``: "the current state" / "the state after the agent's actions";
- ``$text``: the agent's text (cut to ``max_text_chars``);
- ``$truth``: the true state as sentences, ``$truth_json``: as VAGEN's relation list;
- ``$objects``: the object ids that occur in the true state.

``yes_no`` asks for a verdict (score 1 for YES, 0 for NO); ``parse`` asks for the text as a JSON
relation list, which is then scored against the truth by the rule arithmetic (VAGEN's Sokoban path).
"""

from __future__ import annotations

from pathlib import Path
from string import Template

YES_NO_TEMPLATE = """You check whether an agent in a grid game describes $state_phrase correctly.

True positions of the objects, each relative to the player:
$truth

The agent's <$tag> text:
\"\"\"$text\"\"\"

Is every object position the agent states consistent with the true positions, and does it state the
position of at least one object? Reply with one word: YES or NO."""

PARSE_TEMPLATE = """Turn the description below into JSON. For every object it mentions (object ids: $objects),
give its position relative to the player: "vertical_relation" is "above", "below" or "same" (same
row) and "horizontal_relation" is "left", "right" or "same" (same column). Reply with only a JSON
list, for example:
[{"object_id": "box", "vertical_relation": "above", "horizontal_relation": "left"}]
Reply [] if the description states no position.

Description:
\"\"\"$text\"\"\""""

DEFAULT_TEMPLATES = {"yes_no": YES_NO_TEMPLATE, "parse": PARSE_TEMPLATE}
STATE_PHRASES = {"observation": "the current state", "prediction": "the state after the agent's actions"}
PLACEHOLDERS = ("tag", "state_phrase", "text", "truth", "truth_json", "objects")


def load_template(mode: str, template: str | None = None, template_file: str | None = None) -> Template:
    """The template for ``mode``: inline text, a file, or the default.  Errors say which placeholder
    is unknown, at construction rather than mid-run."""
    if template is not None and template_file is not None:
        raise ValueError("give template or template_file, not both")
    if template_file is not None:
        path = Path(template_file)
        if not path.is_file():
            raise FileNotFoundError(f"judge template_file {path} does not exist")
        template = path.read_text(encoding="utf-8")
    text = template if template is not None else DEFAULT_TEMPLATES[mode]
    compiled = Template(text)
    unknown = [name for name in compiled.get_identifiers() if name not in PLACEHOLDERS]
    if unknown:
        raise ValueError(f"judge template uses unknown placeholder(s) {', '.join('$' + n for n in unknown)}; "
                         f"known: {', '.join('$' + n for n in PLACEHOLDERS)}")
    if "text" not in compiled.get_identifiers():
        raise ValueError("judge template must contain $text (the agent's description)")
    return compiled

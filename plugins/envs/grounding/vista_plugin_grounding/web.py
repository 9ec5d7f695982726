"""Web actions on a synthetic shop page: the answer is ``<answer> click [id] </answer>`` with the
set-of-marks id of the element that does what the task asks (ViGoRL's web_action format).

Tasks need a step of reasoning over the page (prices, names), which the ``<think>`` grounds with
``(x, y)`` points: add the cheapest / a named product to the cart, open the details of the most
expensive one, open a product's page, go to the cart.
"""

from __future__ import annotations

import random
import re
from typing import Any, Literal

from pydantic import Field
from vista_plugin_vqa.base import Problem

from vista_plugin_grounding.grounded import GroundedConfig, GroundedQAEnv
from vista_plugin_grounding.page import Widget, shop_page
from vista_rl import Judge, JudgeResult

TaskKind = Literal["add_cheapest", "add_named", "details_priciest", "open_product", "open_cart"]
TASK_KINDS: tuple[TaskKind, ...] = ("add_cheapest", "add_named", "details_priciest", "open_product", "open_cart")
_CLICK = re.compile(r"^\s*click\s*\[\s*(\d+)\s*\]\s*\.?\s*$", re.IGNORECASE)


def parse_click(text: Any) -> int | None:
    """The id of ``click [id]`` (whole answer, case-insensitive), else ``None``."""
    match = _CLICK.match(str(text)[:200]) if text is not None else None
    return int(match.group(1)) if match else None


class ClickActionJudge(Judge):
    """1.0 when the prediction is ``click [id]`` with the reference's id (reference: an id or the
    same action text).  Anything else, ``click 5`` or ``type [5] x`` included, scores 0."""

    name = "grounding/click"

    def score(self, prediction: Any, reference: Any, **context: Any) -> JudgeResult:
        target = reference if isinstance(reference, int) and not isinstance(reference, bool) else parse_click(reference)
        if target is None:
            raise ValueError(f"grounding/click reference must be an id or 'click [id]', got {reference!r}")
        picked = parse_click(prediction)
        return JudgeResult(float(picked == target), {"picked": picked, "target": target})


class WebActionConfig(GroundedConfig):
    task_kinds: list[TaskKind] = Field(default_factory=lambda: list(TASK_KINDS))
    cards: int = Field(6, ge=2, le=12)
    max_turns: int = Field(2, ge=1, le=50)


class WebActionEnv(GroundedQAEnv):
    config_class = WebActionConfig
    config: WebActionConfig

    def task_instructions(self) -> str:
        return ("This is a web page; every clickable element has a red id tag [n]. Think step by step and cite "
                "the elements you look at by their (x, y) pixel centres. Answer with the action, exactly as "
                "<answer> click [n] </answer>.")

    def make_problem(self, seed: int) -> Problem:
        screen = shop_page(seed, cards=self.config.cards)
        rng = random.Random(seed * 104729 + 3)
        kind = rng.choice(list(self.config.task_kinds))
        adds = [w for w in screen.widgets if w.label == "Add to cart"]
        prices = {str(w.extra["product"]): int(w.extra["price"]) for w in adds}  # type: ignore[call-overload]
        links = {w.label: w for w in screen.widgets if w.kind == "link"}

        def button(label: str, product: str) -> Widget:
            return next(w for w in screen.widgets if w.label == label and w.extra.get("product") == product)

        def cite(name: str) -> str:
            link = links[name]
            return f"{name} (${prices[name]}) at ({link.centre[0]}, {link.centre[1]})"

        if kind == "add_cheapest":
            product = min(prices, key=prices.__getitem__)
            task, target = "Add the cheapest product to the cart.", button("Add to cart", product)
            steps = "; ".join(cite(name) for name in prices) + f". The cheapest is {product}"
        elif kind == "add_named":
            product = rng.choice(sorted(prices))
            task, target = f"Add the {product} to the cart.", button("Add to cart", product)
            steps = f"I find {cite(product)}"
        elif kind == "details_priciest":
            product = max(prices, key=prices.__getitem__)
            task, target = "Show the details of the most expensive product.", button("Details", product)
            steps = "; ".join(cite(name) for name in prices) + f". The most expensive is {product}"
        elif kind == "open_product":
            product = rng.choice(sorted(prices))
            task, target = f"Open the product page of the {product}.", links[product]
            steps = f"I find the {product} link at ({links[product].centre[0]}, {links[product].centre[1]})"
        else:
            task, target = "Go to the shopping cart.", next(w for w in screen.widgets if w.label == "Cart")
            steps = "The cart button is in the top bar"
        x, y = target.centre
        reasoning = f"{steps}; its element is [{target.id}] at ({x}, {y})."
        info = {"task_kind": kind, "target_id": target.id, "target_box": list(target.box),
                "target_boxes": [list(target.box)], "target_point": [x, y], "oracle_reasoning": reasoning,
                "elements": [{"id": w.id, "kind": w.kind, "label": w.label, "box": list(w.box)} for w in screen.widgets]}
        return Problem(f"Task: {task}", [screen.image], target.id, "grounding/click",
                       oracle_answer=f"click [{target.id}]", info=info)

    def answer_is_plausible(self, answer: str) -> bool:
        picked = parse_click(answer)
        return picked is not None and self.problem is not None and any(
            e["id"] == picked for e in self.problem.info["elements"])

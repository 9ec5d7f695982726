"""One thought step at a time: the chat a teacher model answers, and reading its reply.

ViGoRL's teacher writes one ``<think>`` step per response, citing one ``(x, y)`` point, and is told to
answer when a step is forced final.  Any chat model backend can do this: the earlier steps go back as
assistant messages, each followed by a short user turn asking for the next step (or for the answer),
so no backend needs assistant prefill.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from PIL import Image
from vista_plugin_vigorl.rewards import find_coordinates, strip_option, tag_contents

from vista_rl import IMAGE_PLACEHOLDER, Message

THOUGHT_NUMBER_PROMPT = (
    "\n\nWrite exactly ONE reasoning step per response: a single <think> ... </think> that refers to "
    "exactly one (x, y) point of the image. Never repeat a coordinate from an earlier step, and look at "
    "diverse regions before narrowing down. When you are sure, reply with the final answer instead: "
    "<answer> ... </answer>.")
NEXT_STEP = "Next step ({number})."
FORCE_FINAL = "Now give your final answer in the form <answer> ... </answer>."

SPATIAL_SYSTEM_PROMPT = (
    "A conversation between User and Assistant. The User asks a question, and the Assistant solves it. "
    "The Assistant systematically reasons through the problem step by step by checking and verifying "
    "possible solutions and image regions, while grounding reasoning steps to specific objects and their "
    "relationships in the image using (x,y) coordinates.\n\nAll reasoning must be enclosed within "
    "'<think>' tags and reasoning steps must include specific reference coordinates. The final answer is "
    "enclosed in '<answer>' tags: <answer> {text of selected answer choice} </answer>. Answer with the "
    "exact text of the selected option, without the option letter.")
WEB_GROUNDING_SYSTEM_PROMPT = (
    "A conversation between User and Assistant. The Assistant identifies the precise coordinates (x, y) "
    "of an element on the screen, reasoning step by step and grounding every step to a specific point "
    "(x, y) of the image inside '<think>' tags. The final answer is <answer> (xf, yf) </answer>.")
WEB_ACTION_SYSTEM_PROMPT = (
    "You are an Assistant navigating a web browser. Reason step by step inside '<think>' tags, each step "
    "referring to one (x, y) point of the screenshot, then give one action: <answer> click [id] </answer>.")
SYSTEM_PROMPTS = {"spatial": SPATIAL_SYSTEM_PROMPT, "web_grounding": WEB_GROUNDING_SYSTEM_PROMPT,
                  "web_action": WEB_ACTION_SYSTEM_PROMPT}


def with_placeholders(question: str, images: Sequence[Image.Image]) -> str:
    """The question with one ``<image>`` per image (prepended when the question has none)."""
    found = question.count(IMAGE_PLACEHOLDER)
    if found == len(images):
        return question
    if found == 0:
        return IMAGE_PLACEHOLDER * len(images) + "\n" + question
    raise ValueError(f"the question has {found} {IMAGE_PLACEHOLDER} placeholders but there are "
                     f"{len(images)} images")


def thought_chat(system_prompt: str, question: str, images: Sequence[Image.Image], previous: Sequence[str],
                 force_final: bool, thought_number_prompt: bool = True) -> list[Message]:
    """The chat asking for the step after ``previous`` (or for the answer when ``force_final``)."""
    system = system_prompt + (THOUGHT_NUMBER_PROMPT if thought_number_prompt else "")
    chat = [Message("system", system), Message("user", with_placeholders(question, images), list(images))]
    for index, thought in enumerate(previous):
        chat.append(Message("assistant", thought.replace(IMAGE_PLACEHOLDER, "<image >")))
        last = index == len(previous) - 1
        chat.append(Message("user", FORCE_FINAL if last and force_final else NEXT_STEP.format(number=index + 2)))
    if force_final and not previous:
        chat[1] = Message("user", chat[1].content + "\n" + FORCE_FINAL, list(images))
    return chat


@dataclass
class Step:
    """A teacher reply read as a thought step: either a thought or a final answer (or malformed)."""

    text: str  # what goes into the tree: "<think> … </think>" or "<answer> … </answer>"
    answer: str | None = None
    coordinates: list[tuple[int, int]] = field(default_factory=list)
    error: str = ""

    @property
    def is_answer(self) -> bool:
        return self.answer is not None


def read_step(reply: str) -> Step:
    """The first ``<answer>`` wins (a step that answers is terminal; an option letter "A. " is
    dropped); else the first ``<think>`` block; anything else is malformed (``error`` says why)."""
    answers = tag_contents(reply, "answer")
    if answers:
        text = strip_option(answers[0])
        return Step(f"<answer> {text} </answer>", answer=text)
    thoughts = tag_contents(reply, "think")
    if not thoughts or not thoughts[0].strip():
        return Step("", error="the reply has neither a <think> step nor an <answer>")
    body = thoughts[0].strip()
    return Step(f"<think> {body} </think>", coordinates=find_coordinates(body))

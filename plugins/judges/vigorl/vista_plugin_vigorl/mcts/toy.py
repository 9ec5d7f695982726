"""A scripted noisy teacher and the colour-grid problems it solves: known answers for testing the search.

The problem: a grid of grey cells, one of which holds a coloured square; "What colour is the square?"
with four options.  The teacher is a real :class:`vista_rl.ModelBackend`: it reads the chat (the
image in the first user message, its own earlier steps, whether the last user turn forces an answer)
and writes one ViGoRL-style step.  Each step looks at one cell by naming its centre ``(x, y)`` and
reports what the pixel there shows.  Once it has seen the square it usually answers (right with
probability ``1 - noise``); until then it explores, sometimes guesses early, sometimes repeats a
point or writes a malformed reply.  Outcomes therefore depend on the path, which is what MCTS exploits.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence

from PIL import Image, ImageDraw
from vista_plugin_vigorl.mcts.steps import FORCE_FINAL
from vista_plugin_vigorl.rewards import find_coordinates

from vista_rl import Chat, Generation, ModelBackend, SamplingParams

BACKGROUND = (128, 128, 128)
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40), "green": (40, 180, 60), "blue": (40, 70, 220), "yellow": (230, 210, 40)}
QUESTION = "What colour is the square in the grid? Options: red, green, blue, yellow."


def colour_grid(seed: int, grid: int = 4, cell: int = 24) -> tuple[Image.Image, str, tuple[int, int]]:
    """The image, the answer and the target cell ``(column, row)`` for ``seed``."""
    rng = random.Random(seed)
    image = Image.new("RGB", (grid * cell, grid * cell), BACKGROUND)
    column, row = rng.randrange(grid), rng.randrange(grid)
    name = rng.choice(sorted(COLOURS))
    margin = cell // 6
    ImageDraw.Draw(image).rectangle((column * cell + margin, row * cell + margin,
                                     (column + 1) * cell - margin - 1, (row + 1) * cell - margin - 1),
                                    fill=COLOURS[name])
    return image, name, (column, row)


def _colour_at(image: Image.Image, x: int, y: int) -> str | None:
    if not (0 <= x < image.width and 0 <= y < image.height):
        return None
    pixel = image.convert("RGB").getpixel((x, y))
    assert isinstance(pixel, tuple)
    if max(abs(a - b) for a, b in zip(pixel, BACKGROUND, strict=False)) < 30:
        return None
    return min(COLOURS, key=lambda n: sum((a - b) ** 2 for a, b in zip(COLOURS[n], pixel, strict=False)))


class NoisyTeacher(ModelBackend):
    """Scripted teacher for the colour-grid problems (tests and demos; not a model).

    ``noise``: chance a seen colour is misreported; ``answer_when_seen``: chance to answer right after
    seeing the square; ``guess_early``: chance to answer before seeing it; ``repeat``: chance to revisit
    a point; ``malformed``: chance of a reply without tags; ``delay_s``: sleep per call.  Sampling is
    seeded by ``params.seed``."""

    def __init__(self, grid: int = 4, noise: float = 0.1, answer_when_seen: float = 0.8, guess_early: float = 0.15,
                 repeat: float = 0.1, malformed: float = 0.05, options: Sequence[str] = tuple(COLOURS),
                 delay_s: float = 0.0) -> None:
        self.grid = grid
        self.noise = noise
        self.answer_when_seen = answer_when_seen
        self.guess_early = guess_early
        self.repeat = repeat
        self.malformed = malformed
        self.options = list(options)
        self.delay_s = delay_s  # per call, to stand in for a remote teacher's latency
        self.calls = 0

    def generate(self, chats: Sequence[Chat], params: SamplingParams) -> list[list[Generation]]:
        self.calls += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        outputs: list[list[Generation]] = []
        for index, chat in enumerate(chats):
            replies = []
            for k in range(params.n):
                if params.temperature == 0:
                    rng = random.Random("greedy:" + "|".join(m.content for m in chat))
                else:
                    rng = random.Random(f"{params.seed}:{index}:{k}") if params.seed is not None else random.Random()
                replies.append(Generation(text=self._reply(chat, rng)))
            outputs.append(replies)
        return outputs

    def _reply(self, chat: Chat, rng: random.Random) -> str:
        images = [image for message in chat if message.role == "user" for image in message.images]
        if not images:
            return "<answer> I cannot see an image </answer>"
        image = images[0]
        visited = [point for message in chat if message.role == "assistant"
                   for point in find_coordinates(message.content)]
        seen = next((c for c in (_colour_at(image, x, y) for x, y in visited) if c is not None), None)
        forced = chat[-1].role == "user" and FORCE_FINAL in chat[-1].content
        if not forced and rng.random() < self.malformed:
            return "Hmm, let me think about the picture."
        if forced or (seen and rng.random() < self.answer_when_seen) or (not seen and rng.random() < self.guess_early):
            if seen and rng.random() >= self.noise:
                return f"<answer> {seen} </answer>"
            return f"<answer> {rng.choice(self.options)} </answer>"
        cell_w, cell_h = image.width / self.grid, image.height / self.grid
        centres = [(int((c + 0.5) * cell_w), int((r + 0.5) * cell_h)) for r in range(self.grid) for c in range(self.grid)]
        fresh = [p for p in centres if p not in visited]
        x, y = rng.choice(visited) if visited and (rng.random() < self.repeat or not fresh) else rng.choice(fresh)
        colour = _colour_at(image, x, y)
        what = f"shows a {colour} square" if colour else "is empty grey background"
        return f"<think> The cell at ({x}, {y}) {what}. </think>"

"""Builds a trajectory's :class:`~vista_rl.trajectory.TokenView` from the token ids backends return.

The rule, per episode, with ``P_k`` the prompt token ids of turn ``k`` (the whole templated context,
ending with the generation prompt) and ``G_k`` its generated ids::

    input_ids = P_1 + G_1 + D_2 + G_2 + ... + D_T + G_T
    loss_mask =  0  +  1  +  0  +  1  + ... +  0  +  1

``D_k`` are the template tokens between two generations: the end of the previous assistant turn as
the template renders it, the new user/tool message(s) (with their image tokens), and the next
generation prompt.  ``D_k = P_k[c:]`` where ``c`` is where the re-rendered turn ``k-1`` ends in
``P_k``, found by the first rule that applies:

1. ``exact``: ``P_k`` starts with the sequence built so far (full history, stable tokenization), so
   ``c`` is its length;
2. ``aligned``: ``G_{k-1}`` occurs in ``P_k`` (a context window dropped older turns); ``c`` is the end
   of its last occurrence;
3. ``retokenized``: the template re-tokenized the response text differently from how it was
   sampled (a random or non-canonical BPE sample, special tokens dropped by decoding).  The
   re-rendered response starts where ``P_{k-1}`` ends inside ``P_k`` (``P_k`` starts with
   ``P_{k-1}`` under full history; otherwise the last occurrence, followed by an end-of-turn token,
   of ``P_{k-1}``'s final 64, 32, 16 or 8 tokens, i.e. the end of the previous message and the
   generation prompt, which any window of at least one turn keeps); ``c`` is just past the first
   end-of-turn token from there.  End-of-turn tokens are the backend's
   ``stop_token_ids`` attribute if it has one, else its ``tokenizer.eos_token_id``, plus the last
   token of every generation that finished with ``"stop"`` while no stop strings were set; without
   any, the last token of a ``"stop"`` generation itself;

otherwise the view is given up (``None``, reason in ``metadata["token_view_error"]``) rather than
guessed.  Generated tokens are always the sampled ones, so logprob ratios stay exact.  Images are
listed in the order their placeholders appear in ``input_ids``: every image of the first context,
then the images of each turn's new messages.  ``image_inputs`` follows ``images`` one for one when
every generation carried its encoder's images (``Generation.encoded_images``), else stays empty.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from PIL import Image

from vista_rl.trajectory import TokenView


def _starts_with(sequence: Sequence[int], prefix: Sequence[int]) -> bool:
    return len(sequence) >= len(prefix) and list(sequence[: len(prefix)]) == list(prefix)


def _last_occurrence(haystack: Sequence[int], needle: Sequence[int]) -> int | None:
    if not needle or len(needle) > len(haystack):
        return None
    first, size = needle[0], len(needle)
    for start in range(len(haystack) - size, -1, -1):
        if haystack[start] == first and list(haystack[start:start + size]) == list(needle):
            return start
    return None


ANCHOR_LENGTHS = (64, 32, 16, 8)


def _first_end(prompt: Sequence[int], start: int, enders: set[int]) -> int | None:
    for index in range(start, len(prompt)):
        if prompt[index] in enders:
            return index + 1
    return None


def _after_anchor(prompt: Sequence[int], previous_prompt: Sequence[int], enders: set[int]) -> int | None:
    """End of the re-rendered previous response, found after the previous prompt's tail."""
    for length in ANCHOR_LENGTHS:
        anchor = list(previous_prompt[-length:])
        size = len(anchor)
        for start in range(len(prompt) - size, -1, -1):
            if prompt[start] == anchor[0] and list(prompt[start:start + size]) == anchor:
                end = _first_end(prompt, start + size, enders)
                if end is not None:
                    return end
    return None


def continuation_start(
    prompt: Sequence[int], sequence: Sequence[int], previous: Sequence[int], previous_finish: str,
    previous_prompt: Sequence[int] = (), end_tokens: Collection[int] = (),
) -> tuple[int, str] | None:
    """Where the new template tokens begin in ``prompt`` and which rule found it (see module doc)."""
    if _starts_with(prompt, sequence):
        return len(sequence), "exact"
    found = _last_occurrence(prompt, previous)
    if found is not None:
        return found + len(previous), "aligned"
    enders = set(end_tokens) or ({previous[-1]} if previous and previous_finish == "stop" else set())
    if not enders or not previous_prompt:
        return None
    if _starts_with(prompt, previous_prompt):
        end = _first_end(prompt, len(previous_prompt), enders)
    else:
        end = _after_anchor(prompt, previous_prompt, enders)
    return None if end is None else (end, "retokenized")


class TokenViewBuilder:
    """Accumulates one episode's token view turn by turn.

    With ``per_turn`` it keeps, instead, one view per turn: that turn's whole prompt (exactly the
    context the model answered) plus its generated ids.  This is what a context window that drops the
    history (``rollout.window_size: 0``) needs, since no single sequence holds every turn as it was
    seen (VAGEN's "no concat" mode)."""

    def __init__(self, per_turn: bool = False) -> None:
        self.per_turn = per_turn
        self.turn_views: list[TokenView] = []
        self.input_ids: list[int] = []
        self.loss_mask: list[int] = []
        self.logprobs: list[float] | None = []
        self.turn_starts: list[int] = []
        self.turn_ends: list[int] = []
        self.turn_rewards: list[float] = []
        self.alignment: list[str] = []
        self.images: list[Image.Image] = []
        self.image_refs: list[str] = []
        #: What the backend encoded for each of ``images``; ``None`` once a turn came without them.
        self.image_inputs: list[Any] | None = []
        self.prompt_length = 0
        self.error: str | None = None
        self._previous: list[int] = []
        self._previous_finish = "stop"
        self._previous_prompt: list[int] = []

    @property
    def active(self) -> bool:
        return self.error is None

    def disable(self, reason: str) -> None:
        if self.error is None:
            self.error = reason

    def add_turn(
        self,
        prompt_ids: Sequence[int] | None,
        generated_ids: Sequence[int] | None,
        logprobs: Sequence[float] | None,
        finish_reason: str,
        new_images: Sequence[Image.Image],
        new_image_refs: Sequence[str],
        text: str,
        end_tokens: Collection[int] = (),
        new_image_inputs: Sequence[Any] | None = None,
    ) -> None:
        """Append one turn.  ``new_images`` are the images of the messages this prompt added (all
        context images on the first turn); ``new_image_inputs`` what the backend encoded for them."""
        if not self.active:
            return
        if prompt_ids is None or (generated_ids is None or (not generated_ids and text)):
            self.disable("the backend returned no prompt/generated token ids")
            return
        prompt, generated = [int(t) for t in prompt_ids], [int(t) for t in generated_ids]
        inputs = list(new_image_inputs) if new_image_inputs is not None else None
        if inputs is not None and len(inputs) != len(new_images):
            inputs = None
        if self.per_turn:
            self._add_turn_view(prompt, generated, logprobs, new_images, new_image_refs, inputs)
            return
        if not self.turn_ends:
            context = prompt
            self.prompt_length = len(prompt)
        else:
            found = continuation_start(prompt, self.input_ids, self._previous, self._previous_finish,
                                       self._previous_prompt, end_tokens)
            if found is None:
                self.disable(f"turn {len(self.turn_ends) + 1}: its prompt token ids do not continue the "
                             "conversation (template changed earlier turns)")
                return
            cut, how = found
            context = prompt[cut:]
            self.alignment.append(how)
        self.input_ids.extend(context)
        self.loss_mask.extend([0] * len(context))
        self.turn_starts.append(len(self.input_ids))
        self.input_ids.extend(generated)
        self.loss_mask.extend([1] * len(generated))
        self.turn_ends.append(len(self.input_ids) - 1)
        self.turn_rewards.append(0.0)
        if self.logprobs is not None:
            if logprobs is None or len(logprobs) != len(generated):
                self.logprobs = None
            else:
                self.logprobs.extend([0.0] * len(context))
                self.logprobs.extend(float(value) for value in logprobs)
        self.images.extend(new_images)
        self.image_refs.extend(new_image_refs)
        if self.image_inputs is not None:
            self.image_inputs = None if inputs is None else self.image_inputs + inputs
        self._previous, self._previous_finish, self._previous_prompt = generated, finish_reason, prompt

    def _add_turn_view(self, prompt: list[int], generated: list[int], logprobs: Sequence[float] | None,
                       images: Sequence[Image.Image], refs: Sequence[str], inputs: list[Any] | None) -> None:
        """Per-turn mode: ``images`` are all the images of this prompt, in placeholder order."""
        sampled = None
        if logprobs is not None and len(logprobs) == len(generated):
            sampled = [0.0] * len(prompt) + [float(value) for value in logprobs]
        self.turn_views.append(TokenView(
            input_ids=prompt + generated, loss_mask=[0] * len(prompt) + [1] * len(generated),
            turn_ends=[len(prompt) + len(generated) - 1], turn_rewards=[0.0], logprobs=sampled,
            image_refs=list(refs), prompt_length=len(prompt), turn_starts=[len(prompt)], images=list(images),
            image_inputs=inputs or []))

    def set_last_reward(self, reward: float) -> None:
        if not self.active:
            return
        if self.per_turn and self.turn_views:
            self.turn_views[-1].turn_rewards[-1] = float(reward)
        elif self.turn_rewards:
            self.turn_rewards[-1] = float(reward)

    def build(self) -> TokenView | None:
        """The episode's one view (``None`` in per-turn mode: see :attr:`turn_views`)."""
        if self.per_turn or not self.active or not self.turn_ends:
            return None
        return TokenView(
            input_ids=self.input_ids, loss_mask=self.loss_mask, turn_ends=self.turn_ends,
            turn_rewards=self.turn_rewards, logprobs=self.logprobs, image_refs=self.image_refs,
            prompt_length=self.prompt_length, turn_starts=self.turn_starts, alignment=self.alignment,
            images=self.images, image_inputs=self.image_inputs or [],
        )

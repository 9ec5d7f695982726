"""The token view trainers consume: ids of the whole conversation, loss mask on generated tokens only,
turn ends, per-turn rewards, logprobs and images in placeholder order."""

from __future__ import annotations

import pytest

from tests.rollout_testkit import IMAGE_TOKENS, CharTokenBackend, RolloutTestPlugin
from vista_rl.config import RolloutSection, SamplingSection
from vista_rl.rollout import EpisodeSpec, RolloutEngine
from vista_rl.rollout.token_view import TokenViewBuilder, continuation_start
from vista_rl.store import image_hash

COUNTER = "test/counter-v0"


@pytest.fixture(autouse=True)
def test_envs(vista_plugin):
    vista_plugin(RolloutTestPlugin())


def _segments(view, value):
    """Runs of consecutive positions whose loss mask equals ``value``."""
    runs, current = [], []
    for index, mask in enumerate(view.loss_mask):
        if mask == value:
            current.append(view.input_ids[index])
        elif current:
            runs.append(current)
            current = []
    if current:
        runs.append(current)
    return runs


@pytest.mark.parametrize("window_size", [None, 1])
def test_token_view_is_the_whole_conversation_with_assistant_tokens_masked_in(window_size):
    backend = CharTokenBackend(oracle=True)
    with RolloutEngine(backend, RolloutSection(window_size=window_size)) as engine:
        trajectory = engine.run([EpisodeSpec(COUNTER, 4)])[0]
    view = trajectory.token_view
    tokenizer = backend.tokenizer
    # a window of one turn still holds all of turn 2's context, not turn 3's
    assert view.alignment == (["exact", "exact"] if window_size is None else ["exact", "aligned"])
    # With or without a window, the view is the full conversation (what a trainer should see).
    from vista_rl.observation import Message
    full_chat = [Message("system", trajectory.system_prompt)]
    for turn in trajectory.turns:
        full_chat += [Message("user", turn.observation, turn.images), Message("assistant", turn.response)]
    rendered = tokenizer.render(full_chat[:-1])  # up to the last generation prompt
    assert view.input_ids == rendered + tokenizer.encode(trajectory.turns[-1].response) + [1]
    generated = _segments(view, 1)
    assert [tokenizer.decode(run) for run in generated] == [t.response + "<|im_end|>" for t in trajectory.turns]
    assert view.turn_ends == [i for i, m in enumerate(view.loss_mask) if m and (i + 1 == len(view.loss_mask)
                                                                             or not view.loss_mask[i + 1])]
    assert [view.input_ids[end] for end in view.turn_ends] == [1, 1, 1]
    assert view.turn_starts[0] == view.prompt_length == len(backend.tokenizer.render(full_chat[:2]))
    assert view.turn_rewards == pytest.approx([0.1, 0.1, 1.0])
    assert view.logprobs == [(-0.5 if mask else 0.0) for mask in view.loss_mask]
    images = [image for turn in trajectory.turns for image in turn.images]
    assert view.input_ids.count(2) == IMAGE_TOKENS * len(images)
    assert view.image_refs == [image_hash(image) for image in images]
    assert len(view.images) == 3


def test_tool_images_enter_the_view_in_order():
    call = '<tool_call>{"name": "zoom", "arguments": {}}</tool_call>'
    backend = CharTokenBackend([call, "<answer>inc</answer>"])
    with RolloutEngine(backend, RolloutSection()) as engine:
        trajectory = engine.run([EpisodeSpec("test/tool-counter-v0", 1, env_config={"target": 1})])[0]
    view = trajectory.token_view
    assert [image.size for image in view.images] == [(16, 16), (32, 32)]
    assert view.turn_rewards == [0.0, 1.0] and len(view.turn_ends) == 2


def test_reflection_turns_are_one_sequence():
    backend = CharTokenBackend(["<answer>7</answer>", "<answer>1</answer>"])
    with RolloutEngine(backend, RolloutSection(reflection=True, reflection_attempts=2)) as engine:
        trajectory = engine.run([EpisodeSpec("test/guess-v0", 1)])[0]
    assert trajectory.success and trajectory.token_view.turn_rewards == [0.0, 1.0]
    assert trajectory.token_view.alignment == ["exact"]


def test_continuation_rules():
    # exact: the new prompt extends the sequence
    assert continuation_start([1, 2, 3, 9, 4], [1, 2, 3], [3], "stop") == (3, "exact")
    # aligned: a window dropped [1, 2] but the previous generation [5, 6, 0] is there
    assert continuation_start([7, 5, 6, 0, 8, 9], [1, 2, 5, 6, 0], [5, 6, 0], "stop") == (4, "aligned")
    # retokenized: previous prompt [1, 2] kept, generation [5, 6, 0] re-rendered as [56, 0]
    assert continuation_start([1, 2, 56, 0, 8], [1, 2, 5, 6, 0], [5, 6, 0], "stop", [1, 2]) == (4, "retokenized")
    # a generation cut by length: the end-of-turn token must come from elsewhere
    assert continuation_start([1, 2, 56, 0, 8], [1, 2, 5, 6], [5, 6], "length", [1, 2]) is None
    assert continuation_start([1, 2, 56, 0, 8], [1, 2, 5, 6], [5, 6], "length", [1, 2], {0}) == (4, "retokenized")
    # window + retokenized: found after the tail of the previous prompt
    previous_prompt = [1, *range(100, 120)]
    sequence = [*previous_prompt, 5, 6, 0]
    windowed = [1, *range(110, 120), 56, 0, 8]
    assert continuation_start(windowed, sequence, [5, 6, 0], "stop", previous_prompt) == (13, "retokenized")


def test_builder_gives_up_rather_than_guessing():
    builder = TokenViewBuilder()
    builder.add_turn([1, 2], [5, 0], [-1.0, -1.0], "length", [], [], "x")
    builder.add_turn([4, 4, 4], [6], [-1.0], "stop", [], [], "y")
    assert builder.build() is None and "turn 2" in (builder.error or "")
    missing = TokenViewBuilder()
    missing.add_turn(None, [], None, "stop", [], [], "text")
    assert missing.build() is None
    no_logprobs = TokenViewBuilder()
    no_logprobs.add_turn([1], [2], None, "stop", [], [], "t")
    view = no_logprobs.build()
    assert view is not None and view.logprobs is None and view.loss_mask == [0, 1]


def test_tiny_qwen_token_views_decode_to_the_conversation(tiny_model_dir):
    """Real tokenizer, chat template and processor: a random model's samples re-tokenize differently,
    which is what the ``retokenized`` rule is for."""
    pytest.importorskip("vista_plugin_transformers")
    import vista_rl

    backend = vista_rl.make_model("transformers", path=str(tiny_model_dir))
    settings = RolloutSection(max_turns=3, sampling=SamplingSection(temperature=1.0, max_tokens=8))
    with RolloutEngine(backend, settings, seed=3) as engine:
        trajectories = engine.run([EpisodeSpec(COUNTER, seed) for seed in range(3)])
    tokenizer = backend.tokenizer
    pad = tokenizer.convert_tokens_to_ids("<|image_pad|>")
    for trajectory in trajectories:
        view = trajectory.token_view
        assert view is not None, trajectory.metadata.get("token_view_error")
        assert len(view.turn_ends) == trajectory.num_turns == 3
        for start, end, turn in zip(view.turn_starts, view.turn_ends, trajectory.turns, strict=True):
            assert tokenizer.decode(view.input_ids[start:end + 1], skip_special_tokens=True) == turn.response
            assert all(view.loss_mask[start:end + 1]) and not view.loss_mask[start - 1]
        context = tokenizer.decode([t for t, m in zip(view.input_ids, view.loss_mask, strict=True) if not m])
        cursor = 0
        for turn in trajectory.turns:  # every observation, in order, in the masked-out context
            for piece in filter(None, (part.strip() for part in turn.observation.split("<image>"))):
                cursor = context.index(piece, cursor) + len(piece)
        pads_per_image = view.input_ids[:view.prompt_length].count(pad)  # one image in the first prompt
        assert view.input_ids.count(pad) == pads_per_image * len(view.images) == pads_per_image * 3
        assert all(lp <= 0 for lp in view.logprobs) and sum(view.loss_mask) == len(
            [lp for lp, m in zip(view.logprobs, view.loss_mask, strict=True) if m])


def test_per_turn_views_are_each_turns_exact_context():
    """``window_size: 0`` shows each turn alone; with per-turn sequences (auto for window 0) every turn
    gets its own view: the very prompt the backend was given, then the sampled ids, reward on its end."""
    backend = CharTokenBackend(oracle=True)
    settings = RolloutSection(window_size=0)
    assert settings.per_turn_sequences
    with RolloutEngine(backend, settings) as engine:
        trajectory = engine.run([EpisodeSpec(COUNTER, 4)])[0]
    assert trajectory.token_view is None and "token_view_error" not in trajectory.metadata
    tokenizer = backend.tokenizer
    from vista_rl.observation import Message
    assert len(trajectory.turn_views) == trajectory.num_turns == 3
    for turn, view in zip(trajectory.turns, trajectory.turn_views, strict=True):
        prompt = tokenizer.render([Message("system", trajectory.system_prompt),
                                   Message("user", turn.observation, turn.images)])
        assert view.input_ids == prompt + tokenizer.encode(turn.response) + [1]
        assert view.loss_mask == [0] * len(prompt) + [1] * (len(view.input_ids) - len(prompt))
        assert view.prompt_length == view.turn_starts[0] == len(prompt)
        assert view.turn_ends == [len(view.input_ids) - 1]
        assert view.turn_rewards == [pytest.approx(turn.reward)]
        assert view.image_refs == [image_hash(image) for image in turn.images]
        assert view.input_ids.count(2) == IMAGE_TOKENS  # only the current image
    # what the store writes and reads back keeps the views
    from vista_rl import Trajectory
    again = Trajectory.from_dict(trajectory.to_dict())
    assert [view.input_ids for view in again.turn_views] == [view.input_ids for view in trajectory.turn_views]


def test_per_turn_views_with_a_longer_window_hold_the_window_images():
    backend = CharTokenBackend(oracle=True)
    with RolloutEngine(backend, RolloutSection(window_size=1, sequences="turn")) as engine:
        trajectory = engine.run([EpisodeSpec(COUNTER, 4)])[0]
    counts = [view.input_ids.count(2) // IMAGE_TOKENS for view in trajectory.turn_views]
    assert counts == [1, 2, 2]
    assert [len(view.image_refs) for view in trajectory.turn_views] == counts
    assert trajectory.turn_views[2].image_refs == [image_hash(image) for image in
                                                    (trajectory.turns[1].images + trajectory.turns[2].images)]

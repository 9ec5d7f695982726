"""``rollout.image_size``: the episode driver shows the model every observation image at one size, for
every engine (it was ``engine_config.local.image_size``, applied by the local engine's encoder alone,
so verl and ``vista eval`` showed the env's own size)."""

from __future__ import annotations

import warnings

import pytest

from tests.rollout_testkit import CharTokenBackend, RolloutTestPlugin
from vista_rl.config import RolloutSection, RunConfig
from vista_rl.rollout import EpisodeSpec, RolloutEngine


@pytest.fixture(autouse=True)
def test_envs(vista_plugin):  # type: ignore[no-untyped-def]
    vista_plugin(RolloutTestPlugin())


def _episode(backend: CharTokenBackend, **settings: object):  # type: ignore[no-untyped-def]
    seen = []
    original = backend.generate

    def recording(chats, params, oracle_responses=None):  # type: ignore[no-untyped-def]
        seen.extend(image.size for chat in chats for message in chat for image in message.images)
        return original(chats, params, oracle_responses)

    backend.generate = recording  # type: ignore[method-assign]
    with RolloutEngine(backend, RolloutSection(**settings)) as engine:
        (trajectory,) = engine.run([EpisodeSpec("test/tool-counter-v0", 2)])
    return trajectory, seen


def test_the_model_sees_every_image_at_image_size_and_tools_the_envs_own() -> None:
    call = '<tool_call>{"name": "zoom", "arguments": {"factor": 3}}</tool_call>'
    trajectory, seen = _episode(CharTokenBackend([call] + ["<answer>inc</answer>"] * 3), image_size=28)
    assert seen and set(seen) == {(28, 28)}  # the observation (16x16) and the zoom (48x48), both shown at 28
    # the tool cropped the env's own 16x16 image: 48x48 before the driver resized it for the model
    assert trajectory.turns[0].tool_calls[0].result_text == "zoomed x3 (1 images seen)"
    # the record keeps what the env rendered; the token view what the model saw
    assert trajectory.turns[1].images[0].size == (48, 48) and trajectory.initial_images[0].size == (16, 16)
    assert trajectory.token_view is not None and {image.size for image in trajectory.token_view.images} == {(28, 28)}
    _, unchanged = _episode(CharTokenBackend([call] + ["<answer>inc</answer>"] * 3))
    assert set(unchanged) == {(16, 16), (48, 48)}


def test_the_local_sections_image_size_moves_to_rollout_with_a_warning() -> None:
    data = {"env": {"id": "test/counter-v0"}, "engine_config": {"local": {"image_size": 28, "device": "cpu"}}}
    with pytest.warns(FutureWarning, match=r"engine_config\.local\.image_size is deprecated.*rollout\.image_size"):
        run = RunConfig.model_validate(data)
    assert run.rollout.image_size == 28
    assert run.engine_config["local"]["image_size"] == 28  # the local encoder still resizes recorded SFT data
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert RunConfig.model_validate({"env": {"id": "x"}, "rollout": {"image_size": 56}}).rollout.image_size == 56
    with pytest.raises(ValueError, match=r"give only rollout\.image_size"):
        RunConfig.model_validate({**data, "rollout": {"image_size": 56}})

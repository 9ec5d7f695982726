"""Image tensors travel with the data: each ``Generation`` of the policy backend carries what its
encoder built for the prompt's images, the rollout's token view keeps them (``image_inputs``, one
per ``image_refs`` entry), and training samples take them from there.  No cache for the trainer to
empty: once the trajectories are gone, so are the tensors.  The G samples of a seed still share one
encoding of their first image, which the update's vision-once-per-unique-image path relies on."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
import torch

pytest.importorskip("transformers")

from vista_plugin_local.policy import Policy, load_pretrained  # noqa: E402
from vista_plugin_local.policy_backend import PolicyBackend  # noqa: E402
from vista_plugin_local.samples import training_samples  # noqa: E402
from vista_plugin_local.shared_vision import image_key  # noqa: E402

from tests.rollout_testkit import RolloutTestPlugin  # noqa: E402
from vista_rl.config import RolloutSection, SamplingSection  # noqa: E402
from vista_rl.rollout import EpisodeSpec, RolloutEngine  # noqa: E402

COUNTER = "test/counter-v0"
SAMPLING = SamplingSection(temperature=1.0, max_tokens=6)


@pytest.fixture(autouse=True)
def test_envs(vista_plugin):  # type: ignore[no-untyped-def]
    vista_plugin(RolloutTestPlugin())


@pytest.fixture(scope="module")
def policy(tiny_model_dir: Path) -> Policy:
    model, processor = load_pretrained(str(tiny_model_dir))
    return Policy(model, processor, torch.device("cpu"))


def _rollout(backend: PolicyBackend, seeds: list[int], **settings: object) -> list:  # type: ignore[type-arg]
    with RolloutEngine(backend, RolloutSection(max_turns=2, sampling=SAMPLING, **settings), seed=3) as engine:
        return engine.run([EpisodeSpec(COUNTER, seed) for seed in seeds])


def test_token_views_carry_the_tensors_the_policy_sampled_from(policy: Policy) -> None:
    backend = PolicyBackend(policy)
    trajectories = _rollout(backend, [5, 5, 6])
    for trajectory in trajectories:
        view = trajectory.token_view
        assert view is not None, trajectory.metadata.get("token_view_error")
        assert len(view.image_inputs) == len(view.image_refs) == len(view.images) == trajectory.num_turns
        assert [image_key(image) for image in view.image_inputs] == view.image_refs
        assert "image_inputs" not in view.to_dict()  # in memory only
    first = [trajectory.token_view.image_inputs[0] for trajectory in trajectories]
    assert first[0] is first[1] and first[0] is not first[2]  # one encoding per unique image
    batch = training_samples(trajectories, backend)
    assert not batch.dropped and len(batch.samples) == 3
    for sample in batch.samples:
        assert all(a is b for a, b in zip(sample.tokens.images, sample.trajectory.token_view.image_inputs,
                                          strict=True))

    probe = weakref.ref(first[2])
    del trajectories, trajectory, view, batch, first, sample
    _rollout(backend, [7])  # the backend moves on; nothing of the last rollout is kept for it
    gc.collect()
    assert probe() is None


def test_per_turn_views_carry_each_prompts_tensors(policy: Policy) -> None:
    trajectory = _rollout(PolicyBackend(policy), [4], window_size=1, sequences="turn")[0]
    assert [len(view.image_inputs) for view in trajectory.turn_views] == [1, 2]
    for view in trajectory.turn_views:
        assert [image_key(image) for image in view.image_inputs] == view.image_refs
    assert trajectory.turn_views[1].image_inputs[0] is trajectory.turn_views[0].image_inputs[0]


def test_without_tensors_an_episode_is_left_out_with_the_reason(policy: Policy) -> None:
    backend = PolicyBackend(policy, keep_images=False)  # evaluation: generations carry no tensors
    trajectories = _rollout(backend, [5])
    assert trajectories[0].token_view is not None and trajectories[0].token_view.image_inputs == []
    batch = training_samples(trajectories, backend)
    assert not batch.samples and "handed over the tensors of 0" in batch.dropped[0][1]

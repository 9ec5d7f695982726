"""The rollout engine and backends that keep state per episode (issue 36: a KV cache kept between
turns): each chat comes with its episode's key, the same key every turn of that episode and a
different one for every episode, and the backend hears of each episode's end at once, including
episodes cut off when a stream is closed early.  A backend without ``end_episodes`` gets no keys."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from tests.rollout_testkit import RolloutTestPlugin
from vista_rl.backends.scripted import ScriptedBackend
from vista_rl.config import RolloutSection
from vista_rl.model import EpisodeStateBackend, Generation, SamplingParams
from vista_rl.observation import Chat
from vista_rl.rollout import RolloutEngine, episode_specs

COUNTER = "test/counter-v0"


@pytest.fixture(autouse=True)
def test_envs(vista_plugin):
    vista_plugin(RolloutTestPlugin())


class KeyedBackend(ScriptedBackend):
    """The scripted backend (a real backend replaying fixed replies) that also keeps per-episode
    state: it records the keys it is given and the ends it is told of."""

    def __init__(self, responses: Sequence[str], fail_end: bool = False) -> None:
        super().__init__(responses=list(responses))
        self.calls: list[list[str]] = []
        self.ended: list[str] = []
        self.fail_end = fail_end

    def generate(self, chats: Sequence[Chat], params: SamplingParams,
                 episode_keys: Sequence[str] | None = None) -> list[list[Generation]]:
        assert episode_keys is not None and len(episode_keys) == len(chats)
        assert not set(episode_keys) & set(self.ended), "a key came back after its episode ended"
        self.calls.append(list(episode_keys))
        return super().generate(chats, params)

    def end_episodes(self, keys: Sequence[str]) -> None:
        self.ended.extend(keys)
        if self.fail_end:
            raise RuntimeError("cache gone")


def test_keys_follow_episodes_and_ends_come_at_once() -> None:
    backend = KeyedBackend(["<answer>inc</answer>"])
    assert isinstance(backend, EpisodeStateBackend)
    with RolloutEngine(backend, RolloutSection(batch_size=2)) as engine:
        seen_at_finish: list[int] = []
        for _ in engine.stream(episode_specs(COUNTER, [0, 1, 2])):
            seen_at_finish.append(len(backend.ended))
    # counter episodes need 3 turns; batch 2: the third episode starts when the first two end
    assert [len(call) for call in backend.calls] == [2, 2, 2, 1, 1, 1]
    first, third = backend.calls[0], backend.calls[3][0]
    assert backend.calls[1] == backend.calls[2] == first and len(set(first + [third])) == 3
    assert sorted(backend.ended) == sorted(first + [third]) and len(backend.ended) == 3
    assert seen_at_finish == [1, 2, 3]  # each end reported before its trajectory is handed out


def test_a_stream_closed_early_ends_its_live_episodes() -> None:
    backend = KeyedBackend(["<answer>no</answer>"])  # never solves: every episode runs to the turn limit
    with RolloutEngine(backend, RolloutSection(batch_size=2, max_turns=4)) as engine:
        stream = engine.stream(episode_specs(COUNTER, [0, 1, 2]))
        first = next(stream)  # both live episodes hit the limit together; the first is handed out
        stream.close()  # the second was never handed out, the third never started
    assert first.num_turns == 4
    assert sorted(backend.ended) == sorted(backend.calls[0])  # each once, the unstarted third never keyed


def test_a_failing_end_is_a_warning_not_a_failed_run() -> None:
    backend = KeyedBackend(["<answer>inc</answer>"], fail_end=True)
    with pytest.warns(UserWarning, match="end_episodes raised RuntimeError: cache gone"), \
            RolloutEngine(backend, RolloutSection(batch_size=1)) as engine:
        trajectories = engine.run(episode_specs(COUNTER, [0]))
    assert trajectories[0].failure is None and trajectories[0].metadata["stop_reason"]


def test_a_backend_without_episode_state_gets_no_keys() -> None:
    backend = ScriptedBackend(responses=["<answer>inc</answer>"])  # generate takes no episode_keys
    assert not isinstance(backend, EpisodeStateBackend)
    with RolloutEngine(backend, RolloutSection(batch_size=2)) as engine:
        assert all(t.failure is None for t in engine.run(episode_specs(COUNTER, [0, 1])))

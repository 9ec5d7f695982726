"""The kit's shared pieces on their own: the greedy plan over a distance table and the tile-frame
cache (the games' own tests cover them inside Sokoban and FrozenLake)."""

import numpy as np
import pytest
from vista_plugin_gamekit import TileFrame, compose, greedy_plan
from vista_plugin_gamekit.sprites import freeze, solid

# A 1-D corridor of 6 cells with the goal at 4: action 0 steps left, action 1 steps right.
CORRIDOR = {0: 4, 1: 3, 2: 2, 3: 1, 4: 0, 5: 1}


def corridor_moves(cell):
    for action, other in ((0, cell - 1), (1, cell + 1)):
        if 0 <= other < 6:
            yield action, other


@pytest.mark.parametrize(("start", "plan"), [(0, [1, 1, 1, 1]), (5, [0]), (4, [])])
def test_greedy_plan_walks_down_the_table(start, plan):
    assert greedy_plan(start, CORRIDOR.get, corridor_moves) == plan


def test_greedy_plan_prefers_the_first_closer_successor():
    # Two ways to the goal 3 from 0 (via 1 or via 2): the successor listed first wins.
    table = {0: 2, 1: 1, 2: 1, 3: 0}
    graph = {0: [(7, 2), (5, 1)], 1: [(6, 3)], 2: [(8, 3)], 3: []}
    assert greedy_plan(0, table.get, graph.__getitem__) == [7, 8]


def test_greedy_plan_gives_none_off_the_table_or_on_an_inexact_one():
    assert greedy_plan(9, CORRIDOR.get, corridor_moves) is None  # unknown state
    assert greedy_plan(0, {0: -1}.get, corridor_moves) is None  # marked unreachable (a hole)
    broken = {**CORRIDOR, 2: 7}  # no successor of 1 is at distance 2 any more
    assert greedy_plan(0, broken.get, corridor_moves) is None


def _tiles(size: int = 3) -> np.ndarray:
    return freeze([solid(size, (10 * k, 20 * k, 30 * k)) for k in range(4)])


def test_tile_frame_repaints_only_marked_cells():
    tiles, kinds = _tiles(), np.zeros((2, 3), dtype=np.intp)
    frame = TileFrame()
    first = frame.render(tiles, 2, 3, lambda cell: int(kinds.flat[cell])).copy()
    assert np.array_equal(first, compose(tiles, kinds))
    kinds[0, 1], kinds[1, 2] = 2, 3
    frame.mark(1)  # only the first change is reported
    second = frame.render(tiles, 2, 3, lambda cell: int(kinds.flat[cell]))
    expected = kinds.copy()
    expected[1, 2] = 0  # the unmarked cell keeps its old tile: the cache did not recompose
    assert np.array_equal(second, compose(tiles, expected))
    frame.mark(5)
    assert np.array_equal(frame.render(tiles, 2, 3, lambda cell: int(kinds.flat[cell])), compose(tiles, kinds))


def test_tile_frame_composes_anew_after_reset_and_for_another_board_size():
    tiles = _tiles()
    frame = TileFrame()
    frame.render(tiles, 2, 2, lambda cell: 1)
    frame.reset()
    assert np.array_equal(frame.render(tiles, 2, 2, lambda cell: 2), compose(tiles, np.full((2, 2), 2)))
    bigger = frame.render(tiles, 3, 4, lambda cell: cell % 4)
    assert bigger.shape == (9, 12, 3)
    assert np.array_equal(bigger, compose(tiles, np.arange(12).reshape(3, 4) % 4))

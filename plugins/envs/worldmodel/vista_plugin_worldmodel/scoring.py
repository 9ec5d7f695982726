"""Scoring a relation list against the true one: VAGEN's per-object-type F1 with maximum matching.

For each object type (``box``, ``target``, ``hole``, ...) the predicted and true relations are matched
one to one so that the total credit is maximal (the Hungarian algorithm, :func:`max_assignment`): a pair earns 1 when both
relations agree (VAGEN's match), ``partial_credit`` when exactly one does (0 by default, VAGEN's
rule), 0 otherwise.  Per type, ``F1 = 2 * credit / (n_predicted + n_true)``; the score is the mean
F1 over the types that occur in the truth or in the prediction (VAGEN Sokoban:
``0.5 * F1_target + 0.5 * F1_box``), or a weighted mean with ``type_weights``.  Mentioning an object
type the state does not have costs its F1 (0), so listing everything is not free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

Relation = Mapping[str, str]


@dataclass
class MatchScore:
    score: float
    f1: dict[str, float] = field(default_factory=dict)
    exact: int = 0
    partial: int = 0
    predicted: int = 0
    true: int = 0

    def details(self) -> dict[str, object]:
        return {"f1": self.f1, "exact_matches": self.exact, "partial_matches": self.partial,
                "predicted": self.predicted, "true": self.true}


def _pair_credit(a: Relation, b: Relation, partial_credit: float) -> float:
    vertical = a.get("vertical_relation") == b.get("vertical_relation")
    horizontal = a.get("horizontal_relation") == b.get("horizontal_relation")
    if vertical and horizontal:
        return 1.0
    if vertical or horizontal:
        return partial_credit
    return 0.0


def match_score(predicted: Sequence[Relation], truth: Sequence[Relation], partial_credit: float = 0.0,
                type_weights: Mapping[str, float] | None = None) -> MatchScore:
    """Score ``predicted`` against ``truth`` (see the module docstring).  Both empty: 1.0."""
    by_type: dict[str, tuple[list[Relation], list[Relation]]] = {}
    for item in predicted:
        by_type.setdefault(str(item.get("object_id")), ([], []))[0].append(item)
    for item in truth:
        by_type.setdefault(str(item.get("object_id")), ([], []))[1].append(item)
    result = MatchScore(score=1.0 if not by_type else 0.0, predicted=len(predicted), true=len(truth))
    total_weight = 0.0
    weighted = 0.0
    for object_id, (preds, trues) in sorted(by_type.items()):
        credit = 0.0
        if preds and trues:
            matrix = [[_pair_credit(p, t, partial_credit) for t in trues] for p in preds]
            for row, col in max_assignment(matrix):
                value = matrix[row][col]
                credit += value
                result.exact += value == 1.0
                result.partial += 0.0 < value < 1.0
        f1 = 2.0 * credit / (len(preds) + len(trues))
        result.f1[object_id] = f1
        weight = 1.0 if type_weights is None else float(type_weights.get(object_id, 0.0))
        total_weight += weight
        weighted += weight * f1
    if by_type:
        result.score = weighted / total_weight if total_weight > 0 else 0.0
    return result


def max_assignment(weights: Sequence[Sequence[float]]) -> list[tuple[int, int]]:
    """Row/column pairs of a maximum-weight one-to-one assignment of a rectangular matrix (the
    Hungarian algorithm with potentials, O(n^2 m); small matrices, so no SciPy dependency)."""
    if not weights or not weights[0]:
        return []
    transpose = len(weights) > len(weights[0])
    matrix = [list(col) for col in zip(*weights, strict=True)] if transpose else [list(row) for row in weights]
    n, m = len(matrix), len(matrix[0])  # n <= m
    top = max(max(row) for row in matrix)
    cost = [[top - value for value in row] for row in matrix]  # maximise weight = minimise cost
    inf = float("inf")
    u, v = [0.0] * (n + 1), [0.0] * (m + 1)
    owner, way = [0] * (m + 1), [0] * (m + 1)  # owner[j]: row (1-based) assigned to column j
    for i in range(1, n + 1):
        owner[0] = i
        j0 = 0
        minv, used = [inf] * (m + 1), [False] * (m + 1)
        while True:
            used[j0] = True
            i0, delta, j1 = owner[j0], inf, 0
            for j in range(1, m + 1):
                if not used[j]:
                    current = cost[i0 - 1][j - 1] - u[i0] - v[j]
                    if current < minv[j]:
                        minv[j], way[j] = current, j0
                    if minv[j] < delta:
                        delta, j1 = minv[j], j
            for j in range(m + 1):
                if used[j]:
                    u[owner[j]] += delta
                    v[j] -= delta
                else:
                    minv[j] -= delta
            j0 = j1
            if owner[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            owner[j0] = owner[j1]
            j0 = j1
    pairs = [(owner[j] - 1, j - 1) for j in range(1, m + 1) if owner[j]]
    return [(col, row) for row, col in pairs] if transpose else pairs

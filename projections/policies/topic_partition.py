"""How a clustering run groups a type's memories: re-partitioned from scratch, or placed into the live topics.

A group is one planned top-level topic: its direct members and its
sub-topics' members, as rows of the run's vector matrix.

**Re-partitioned** (:func:`split`, :func:`partitioned`): recursive
``MiniBatchKMeans`` (fixed ``random_state``, input ordered by memory id, so
the same memories give the same groups) until no cluster has more than
``organizer_max_cluster_size`` members. A top-level cluster that had to be
split gets sub-topics: its leaves with more than
``organizer_min_cluster_size`` members; the smaller ones' members hang from
the topic directly.

**Placed** (:func:`placed`): a fit made afresh moves many memories between
neighbouring clusters whenever a few are added (k-means has many near-equal
optima), and each move is two edge events; a topic is meant to stay put
while its tenant grows. So while the memories in no live topic are at most
``organizer_refit_share`` of the candidates, the live topics keep their
members (those still candidates), and each of the others joins the topic
whose centroid is nearest, then within it the nearest sub-topic (the
direct members beside sub-topics are what small leaves left, no cluster to
join), if it is near enough that centroid (:data:`REACH`): one farther
from every topic is of something new. Those are partitioned among
themselves into new topics once they are more than
``organizer_min_cluster_size``; until then they wait, in no topic, and
count towards a re-partition. A member whose text changed so that another
topic's centroid is nearer than its own, by more than :data:`MOVE_MARGIN`
in cosine, is placed again. Only a cluster that has grown past the maximum
is split again, as a re-partition would split it. A sub-topic left with too few members
hands them to its topic; a topic left with too few is dropped, and its
members are placed like new ones. The run then writes what changed: new
members' edges and the topics' revised texts.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

BRANCH = 10  # at most this many clusters per split
SEED = 7
MOVE_MARGIN = 0.05  # a member leaves its topic for one this much nearer in cosine (see _leave_for_nearer)
# A new memory joins its nearest topic when its cosine to the centroid is at least this share of the members' mean
# cosine to it: a new memory of the topic's theme is a little farther than its members (they pulled the centroid
# their way), one of another theme much farther (themed notes, hashing embedder: 0.65 to 0.69 against 0.80, and 0.36)
REACH = 0.6


class Leaf(NamedTuple):
    rows: list[int]


class Group(NamedTuple):
    """A planned top-level topic: rows of its direct members, and of each sub-topic's members."""

    direct: list[int]
    subs: list[list[int]]

    @property
    def rows(self) -> list[int]:
        """Every member's row, in order."""
        return sorted(_rows(self.direct, self.subs))


def split(X: np.ndarray, rows: np.ndarray, max_size: int) -> Any:
    """Recursive MiniBatchKMeans: a leaf (``Leaf``) or a list of children."""
    from sklearn.cluster import MiniBatchKMeans
    from threadpoolctl import threadpool_limits

    if len(rows) <= max_size:
        return Leaf(rows.tolist())
    k = max(2, min(BRANCH, math.ceil(len(rows) / max_size)))
    model = MiniBatchKMeans(n_clusters=k, random_state=SEED, n_init=3, batch_size=min(1024, len(rows)), max_iter=100)
    with threadpool_limits(1):  # small fits: thread start-up costs more than it saves, and results stay reproducible
        labels = model.fit_predict(X[rows])
    groups = [rows[labels == label] for label in range(k) if np.any(labels == label)]
    if len(groups) < 2:  # identical vectors: split deterministically
        groups = np.array_split(rows, k)
    return [split(X, g, max_size) for g in groups]


def leaves(node: Any) -> list[Leaf]:
    return [node] if isinstance(node, Leaf) else [leaf for child in node for leaf in leaves(child)]


def _sorted_group(direct: list[int], subs: list[list[int]]) -> Group:
    return Group(sorted(direct), sorted(sorted(s) for s in subs))


def _as_group(node: Any, min_cluster: int) -> Group:
    """A node of a split as a topic: a leaf is direct members only; else its leaves over ``min_cluster`` are
    sub-topics, and the smaller ones' members hang from the topic directly."""
    if isinstance(node, Leaf):
        return _sorted_group(node.rows, [])
    found = leaves(node)
    return _sorted_group([r for leaf in found if len(leaf.rows) <= min_cluster for r in leaf.rows], [leaf.rows for leaf in found if len(leaf.rows) > min_cluster])


def partitioned(X: np.ndarray, rows: np.ndarray, max_size: int, min_cluster: int) -> list[Group]:
    """Every row re-partitioned (see the module docstring)."""
    tree = split(X, rows, max_size)
    return [_as_group(node, min_cluster) for node in ([tree] if isinstance(tree, Leaf) else tree)]


def _rows(direct: list[int], subs: list[list[int]]) -> list[int]:
    """A topic's rows: its direct members', then each sub-topic's."""
    return [*direct, *(r for sub in subs for r in sub)]


def _unit(vectors: np.ndarray) -> np.ndarray:
    centroid = vectors.mean(axis=0)
    norm = float(np.linalg.norm(centroid))
    return centroid / norm if norm else centroid


def placed(X: np.ndarray, row_of: dict[str, int], live: list[tuple[set[str], list[set[str]]]], max_size: int, min_cluster: int, refit_share: float) -> list[Group] | None:
    """The rows placed into the ``live`` topics (each: its direct members' ids, and each sub-topic's), in their
    order; ``None`` when a re-partition is due: no live topic keeps enough members, or more than ``refit_share``
    of the rows are in none (see the module docstring)."""
    taken: set[int] = set()
    topics: list[tuple[list[int], list[list[int]]]] = []
    for direct_ids, sub_ids in live:
        subs = [[row_of[m] for m in sorted(ids) if m in row_of and row_of[m] not in taken] for ids in sub_ids]
        for sub in subs:
            taken.update(sub)
        direct = [row_of[m] for m in sorted(direct_ids) if m in row_of and row_of[m] not in taken]
        taken.update(direct)
        topics.append((direct, subs))
    _leave_for_nearer(X, topics)
    kept: list[tuple[list[int], list[list[int]]]] = []
    for direct, subs in topics:
        direct = direct + [r for sub in subs if len(sub) <= min_cluster for r in sub]  # a sub-topic left too small: its members go up
        subs = [sub for sub in subs if len(sub) > min_cluster]
        if len(_rows(direct, subs)) > min_cluster:  # else the topic is dropped: its members are placed as new ones
            kept.append((direct, subs))
    free = sorted(set(range(len(X))) - {r for direct, subs in kept for r in _rows(direct, subs)})
    if not kept or len(free) > refit_share * len(X):
        return None
    outside: list[int] = []
    if free:
        members = [_rows(direct, subs) for direct, subs in kept]
        centroids = np.stack([_unit(X[rows]) for rows in members])
        reach = np.array([REACH * float(np.mean(X[rows] @ centroid)) for rows, centroid in zip(members, centroids)])
        similarity = X[free] @ centroids.T
        nearest = np.argmax(similarity, axis=1)
        near_enough = similarity[np.arange(len(free)), nearest] >= reach[nearest]
        outside = [row for row, inside in zip(free, near_enough) if not inside]
        for t, (direct, subs) in enumerate(kept):
            joining = [free[i] for i in np.flatnonzero((nearest == t) & near_enough)]
            if not joining:
                continue
            parts = subs or [direct]  # beside sub-topics, the direct members are what small leaves left: no cluster to join
            inner = np.argmax(X[joining] @ np.stack([_unit(X[part]) for part in parts]).T, axis=1)
            for i, row in zip(inner, joining):
                parts[i].append(row)
    grown = [_regrown(X, direct, subs, max_size, min_cluster) for direct, subs in kept]
    if len(outside) > min_cluster:  # enough for a topic of their own: partitioned among themselves
        grown += partitioned(X, np.array(outside), max_size, min_cluster)
    return grown


def _leave_for_nearer(X: np.ndarray, topics: list[tuple[list[int], list[list[int]]]]) -> None:
    """Take out of its topic every member whose vector is nearer another topic's centroid, by more than
    :data:`MOVE_MARGIN` in cosine, than its own topic's (its text changed since it was placed): it is placed again."""
    nonempty = [t for t, (direct, subs) in enumerate(topics) if direct or any(subs)]
    if len(nonempty) < 2:
        return
    C = np.stack([_unit(X[_rows(*topics[t])]) for t in nonempty])
    for column, t in enumerate(nonempty):
        direct, subs = topics[t]
        for part in (direct, *subs):
            if not part:
                continue
            sims = X[part] @ C.T
            own = sims[:, column].copy()
            sims[:, column] = -np.inf
            part[:] = [r for r, stays in zip(part, sims.max(axis=1) <= own + MOVE_MARGIN) if stays]


def _regrown(X: np.ndarray, direct: list[int], subs: list[list[int]], max_size: int, min_cluster: int) -> Group:
    """A placed topic with every cluster grown past ``max_size`` split again: a topic without sub-topics as a
    re-partition splits a cluster; a sub-topic into leaves, the big ones sub-topics, the others' members direct."""
    if not subs:
        return _as_group(split(X, np.array(sorted(direct)), max_size), min_cluster) if len(direct) > max_size else _sorted_group(direct, [])
    out_direct, out_subs = list(direct), []
    for sub in subs:
        if len(sub) <= max_size:
            out_subs.append(sub)
            continue
        for leaf in leaves(split(X, np.array(sorted(sub)), max_size)):
            if len(leaf.rows) > min_cluster:
                out_subs.append(leaf.rows)
            else:
                out_direct.extend(leaf.rows)
    return _sorted_group(out_direct, out_subs)

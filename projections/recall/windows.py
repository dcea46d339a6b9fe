"""The windows the channels search, so that a longer answer starts with every shorter one.

Each channel searches a first window of ``recall_candidates`` candidates,
whatever the limit. The vector channel's search is approximate, and a deeper
one walks more of the index, so it can order its top differently; and a
memory a deeper search finds in a second channel would climb in a fused
ranking. Searching the same first window for every limit, and taking what a
limit still lacks from doubled windows after it, keeps the answer to a limit
the start of the answer to any larger one.
"""

from __future__ import annotations

from typing import Any, Iterator

#: The deepest window, in multiples of the limit (or of the first window when larger): a bound on the cost of an
#: answer whose candidates mostly cannot be returned.
DEEPEST_WINDOW = 8


def depths(window: int, limit: int) -> Iterator[int]:
    """The windows' depths, ``window`` doubling up to :data:`DEEPEST_WINDOW` × the larger of ``limit`` and ``window``."""
    depth = window
    while True:
        yield depth
        if depth >= DEEPEST_WINDOW * max(limit, window):
            return
        depth *= 2


def unfinished(states: dict, found: Any, depth: int) -> set[str]:
    """The channels a window deeper than ``depth`` could add to: each that ran and filled its window, and the graph
    channel when it left out entities beyond their places (``found.cut``), however few hits it returned."""
    return {name for name, state in states.items() if state.status == "ok" and (state.count >= depth or (name == "graph" and found.cut))}


class Rankings:
    """Each channel's ranking across the windows: the first window's, then the hits each deeper window adds, in their
    order (with that window's scores). A hit's rank in a channel is its place here, whichever window it came from."""

    def __init__(self) -> None:
        self.lists: dict[str, list[tuple[str, float]]] = {}
        self._places: dict[str, dict[str, int]] = {}

    def extend(self, results: dict[str, list[tuple[str, float]]]) -> None:
        """Take in one window's channel results."""
        for name, hits in results.items():
            ranking, places = self.lists.setdefault(name, []), self._places.setdefault(name, {})
            for node, score in hits:
                if node not in places:
                    ranking.append((node, score))
                    places[node] = len(ranking)

    def rank(self, name: str, node: str) -> int:
        """``node``'s rank (from 1) in channel ``name``."""
        return self._places[name][node]


def channel_rankings(searcher: Any, tenant: str, query: str, options: Any, strategy: str | None) -> tuple[dict[str, list[tuple[str, float]]], dict, Any, Any]:
    """Each channel's own ranking up to ``options.limit``: the first window's, then the new hits of each deeper
    window in their order (with that window's scores), until every channel has the limit or has run out.
    The channel states of the last window searched, the graph's findings for every hit, and the query's analysis."""
    rankings = Rankings()
    findings = None  # the first window's, with each deeper window's new paths and entities added
    memo: dict = {}
    for depth in depths(int(searcher.settings.recall_candidates), options.limit):
        results, states, found, analysis = searcher.channel_results(tenant, query, options, strategy, depth=depth, memo=memo)
        rankings.extend(results)
        if findings is None:
            findings = found
        else:
            for node, path in found.paths.items():
                findings.paths.setdefault(node, path)
            for node, reach in found.entities.items():
                findings.entities.setdefault(node, reach)
        if all(len(rankings.lists.get(name, ())) >= options.limit for name in unfinished(states, found, depth)):
            break
    return rankings.lists, states, findings, analysis

"""Recall evaluation: ingest a conversational corpus, run its questions, score the rankings.

Corpus lines: ``{"id", "text", "conv", "session", "time", "speaker", ...}``.
Each ``conv`` is its own tenant; the other fields are kept as the memory's
properties, its ``id`` as its source. Turns of one session are linked in
order by ``FOLLOWS`` edges, as any conversational ingest should.

Query lines: ``{"qid", "conv", "query", "gold": [ids], "category"}``.

Metrics: recall@k is the share of queries with at least one gold id in the
top k; all-gold recall@k the mean share of a query's gold ids in the top k;
MRR@10 the mean of 1/rank of the first gold id within the top 10.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import msgspec

KS = (1, 5, 10)


@contextlib.contextmanager
def work_directory(given: str | None, prefix: str) -> Iterator[Path]:
    """The data directory an evaluation writes in: ``given`` (``--work-dir``), kept afterwards for a look
    at what was stored; else a temporary one, removed when the evaluation ends, however it ends."""
    if given:
        yield Path(given)
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as made:
        yield Path(made)


class Turn(msgspec.Struct):
    id: str
    text: str
    conv: str = "default"
    session: int | str | None = None
    time: str | None = None
    speaker: str | None = None


class Question(msgspec.Struct):
    qid: str
    query: str
    gold: list[str]
    conv: str = "default"
    category: int | str | None = None


class EvalInputError(ValueError):
    """A corpus or query file line that cannot be used."""


def read_jsonl(path: Path, kind: type) -> list[Any]:
    """The lines of ``path`` as ``kind``; each one's id (a turn's ``id``, a question's ``qid``) its own: rankings and
    scores are keyed by it, so a second line of one id took the first's place unseen."""
    decoder = msgspec.json.Decoder(kind)
    id_field = kind.__struct_fields__[0]
    out, seen = [], {}
    with open(path, "rb") as handle:
        for n, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                out.append(decoder.decode(line))
            except msgspec.MsgspecError as exc:
                raise EvalInputError(f"{path}:{n}: {exc}") from None
            ident = getattr(out[-1], id_field)
            if (first := seen.setdefault(ident, n)) != n:
                raise EvalInputError(f"{path}:{n}: {id_field} {ident!r} again (line {first}): each line needs an {id_field} of its own")
    if not out:
        raise EvalInputError(f"{path}: no lines")
    return out


def turn_order(turn_id: str) -> tuple:
    """Sort key of a turn id like ``conv-26:D3:14``: numbers compare as numbers."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", turn_id))


def sessions(turns: Iterable[Turn]) -> dict[tuple[str, str], list[Turn]]:
    grouped: dict[tuple[str, str], list[Turn]] = defaultdict(list)
    for turn in turns:
        grouped[(turn.conv, str(turn.session))].append(turn)
    for members in grouped.values():
        members.sort(key=lambda t: turn_order(t.id))
    return grouped


@dataclass
class Scores:
    n: int = 0
    hits: dict[int, int] = field(default_factory=lambda: {k: 0 for k in KS})
    all_gold: float = 0.0
    mrr: float = 0.0

    def add(self, ranking: list[str], gold: list[str]) -> None:
        self.n += 1
        wanted = set(gold)
        for k in KS:
            if wanted & set(ranking[:k]):
                self.hits[k] += 1
        if wanted:
            self.all_gold += len(wanted & set(ranking[:10])) / len(wanted)
        for rank, memory in enumerate(ranking[:10], 1):
            if memory in wanted:
                self.mrr += 1.0 / rank
                break

    def summary(self) -> dict[str, float]:
        n = max(self.n, 1)
        out = {f"recall@{k}": self.hits[k] / n for k in KS}
        out["all_gold@10"] = self.all_gold / n
        out["mrr@10"] = self.mrr / n
        out["n"] = self.n
        return out


def score(rankings: dict[str, list[str]], questions: list[Question]) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    overall = Scores()
    per_category: dict[str, Scores] = defaultdict(Scores)
    for q in questions:
        ranking = rankings.get(q.qid, [])
        overall.add(ranking, q.gold)
        per_category[str(q.category)].add(ranking, q.gold)
    return overall.summary(), {cat: s.summary() for cat, s in sorted(per_category.items())}


def report_lines(overall: dict[str, float], per_category: dict[str, dict[str, float]], label: str) -> Iterator[str]:
    yield f"{label}"
    yield f"{'':12} {'n':>5} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'all@10':>7} {'MRR@10':>7}"
    rows = [("overall", overall)] + [(f"category {c}", s) for c, s in per_category.items()]
    for name, s in rows:
        yield (
            f"{name:12} {int(s['n']):5d} {s['recall@1']:6.3f} {s['recall@5']:6.3f} {s['recall@10']:6.3f}"
            f" {s['all_gold@10']:7.3f} {s['mrr@10']:7.3f}"
        )


def headline(overall: dict[str, float]) -> str:
    return (
        f"recall@1={overall['recall@1']:.4f} recall@5={overall['recall@5']:.4f} "
        f"recall@10={overall['recall@10']:.4f} mrr@10={overall['mrr@10']:.4f}"
    )

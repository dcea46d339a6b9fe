"""Where a re-hashed log first differs from what was kept: properties of :class:`ReferenceCheck`.

Logs here are plain :class:`StoredRow` lists hashed with the chain's own
formula, so each case is cheap and the edit is known exactly.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mnemolog.eventstore.chain import GENESIS_HASH, StoredRow, expected_hash
from mnemolog.eventstore.reference import Anchor, ReferenceCheck, anchors_of


def chain(texts: list[str]) -> list[StoredRow]:
    rows, prev = [], GENESIS_HASH
    for position, text in enumerate(texts, 1):
        fields = (position, f"id-{position}", "s", position, "Noted", 1, "t", f'{{"text":"{text}"}}', "{}", "2026-01-01T00:00:00.000000Z")
        row = StoredRow(*fields[:9], None, fields[9], prev, "")
        digest = expected_hash(row)
        rows.append(row._replace(hash=digest))
        prev = digest
    return rows


def check(log: list[StoredRow], anchors, batch: int = 3) -> ReferenceCheck:
    found = ReferenceCheck(anchors)
    for start in range(0, len(log), batch):
        found.feed(log[start : start + batch])
    found.finish(log[-1].position if log else 0)
    return found


@st.composite
def edited_logs(draw):
    n = draw(st.integers(min_value=1, max_value=30))
    edited = draw(st.integers(min_value=1, max_value=n))
    kept = draw(st.sets(st.integers(min_value=0, max_value=n), max_size=6))
    batch = draw(st.integers(min_value=1, max_value=8))
    return n, edited, sorted(kept), batch


@settings(max_examples=200, deadline=None)
@given(edited_logs())
def test_digests_bracket_the_edit_of_a_rehashed_log(case):
    n, edited, kept, batch = case
    texts = [f"t{i}" for i in range(1, n + 1)]
    before = chain(texts)
    after = chain(texts[: edited - 1] + ["forged"] + texts[edited:])  # edited, then every hash recomputed
    tips = {0: GENESIS_HASH, **{row.position: row.hash for row in before}}
    digests = [Anchor(p, tips[p]) for p in kept]

    found = check(after, anchors_of(list(reversed(digests))), batch)  # digests in any order

    agreeing = [p for p in kept if p < edited]
    disagreeing = [p for p in kept if p >= edited]
    assert found.unchanged_through == max([p for p in agreeing if p > 0], default=0)
    if not disagreeing:
        assert found.first is None and found.describe() is None
        return
    assert found.first.position == min(disagreeing)
    assert found.last.position == max(disagreeing)
    assert found.unchanged_through < edited <= found.first.position
    assert found.exact == (found.first.position == found.unchanged_through + 1)


@settings(max_examples=200, deadline=None)
@given(edited_logs(), st.booleans())
def test_an_export_pins_the_edited_row(case, with_gaps):
    n, edited, _, batch = case
    texts = [f"t{i}" for i in range(1, n + 1)]
    before = chain(texts)
    after = chain(texts[: edited - 1] + ["forged"] + texts[edited:])
    export = [row for row in before if not with_gaps or row.position % 2 == edited % 2]

    found = check(after, anchors_of((), export), batch)

    assert found.first is not None and found.exact
    assert (found.first.position, found.unchanged_through) == (edited, edited - 1 if not with_gaps else max(edited - 2, 0))
    assert found.describe() == f"position {edited} differs: payload differs from the export"


@given(st.integers(min_value=1, max_value=20), st.integers(min_value=0, max_value=25))
def test_an_untouched_log_agrees_with_its_own_export_and_digests(n, extra):
    log = chain([f"t{i}" for i in range(n)])
    digests = [Anchor(p, log[p - 1].hash) for p in range(1, n + 1, 3)]
    found = check(log, anchors_of(digests, log[: max(1, n - extra)]))
    assert found.first is None and found.unchanged_through == max(n - extra, max(a.position for a in digests), 1)

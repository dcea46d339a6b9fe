"""Idempotency records in an export, so that a request retried after its data moved is answered, not written twice.

An append made under an idempotency key records the key beside the log:
its fingerprint (what the request held) and the positions it wrote. A retry
of the request is answered from that record; the same key with another
request is refused. An export (format 3) carries the records of its events,
one line each after the event lines::

    {"mnemolog_idempotency":"acme/add_memories/req-7","fingerprint":"…","first_position":12,"last_position":14}

and the footer counts them. An import records each one in the importing
store at the positions its events have there (new ones, or the ones already
present): a client that retries a request after the operator moved its data
(SQLite to PostgreSQL, a restore into an empty directory) gets its first
answer, where it used to get its memories written a second time. A key the
importing store already holds keeps its own record.

A tenant dropped and used again has keys that name its last drop (its
position, see ``CommandContext.scoped_key``); such a key is renamed to the
position of that drop in the importing store, or left out when the file does
not hold the drop. A key too long to store whole is kept as its digest, and
one that names a drop cannot be renamed: a retry of it is written again.

A record's positions must be those of the file's events, and a file of
format 2 (no records) imports as ever. The records are written in one
transaction after the last group of events: an import stopped before it
leaves them out, and the same import run again writes them.
"""

from __future__ import annotations

import bisect
from typing import Annotated, Iterable, Iterator

import msgspec
from sqlalchemy import select

from .bounds import stored_key_form
from .errors import ImportRefused
from .schema import MAX_FINGERPRINT, MAX_NAME, events, idempotency

PREFIX = b'{"mnemolog_idempotency":'
BATCH = 5000  # records a read while exporting
_Positive = Annotated[int, msgspec.Meta(ge=1)]


class ExportedIdempotency(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One idempotency record of an export: the key as the log stores it, its fingerprint and the positions it wrote."""

    mnemolog_idempotency: Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_NAME, pattern="^[^\x00]*$")]
    fingerprint: Annotated[str, msgspec.Meta(max_length=MAX_FINGERPRINT, pattern="^[^\x00]*$")]
    first_position: _Positive
    last_position: _Positive


_decoder = msgspec.json.Decoder(ExportedIdempotency)


def exported(store, until: int, tenant: str | None) -> Iterator[list[ExportedIdempotency]]:
    """The records of the appends an export holds (every one through ``until``, or ``tenant``'s), in batches by key."""
    k = idempotency.c
    after = None
    while True:
        query = select(k.key, k.fingerprint, k.first_position, k.last_position).where(k.last_position <= until).order_by(k.key).limit(BATCH)
        if after is not None:
            query = query.where(k.key > after)
        if tenant is not None:  # an append is of one tenant: its first event's
            query = query.join_from(idempotency, events, events.c.position == k.first_position).where(events.c.tenant == tenant)
        with store.recorder.reader.connect() as conn:
            rows = conn.execute(query).all()
        if rows:
            yield [ExportedIdempotency(*row) for row in rows]
        if len(rows) < BATCH:
            return
        after = rows[-1][0]


def parse(lineno: int, raw: bytes) -> ExportedIdempotency:
    try:
        record = _decoder.decode(raw)
    except msgspec.MsgspecError as exc:
        raise ImportRefused(f"line {lineno}: {exc}") from None
    if record.first_position > record.last_position:
        raise ImportRefused(f"line {lineno}: the idempotency record's first_position is after its last_position")
    return record


def check(records: Iterable[tuple[int, ExportedIdempotency]], runs: list[list[int]]) -> None:
    """Each record names a key once, and positions the file holds (``runs``: its runs of positions, in order)."""
    firsts = [run[0] for run in runs]
    seen: set[str] = set()
    for lineno, record in records:
        if record.mnemolog_idempotency in seen:
            raise ImportRefused(f"line {lineno}: idempotency key {record.mnemolog_idempotency!r} appears twice in the file")
        seen.add(record.mnemolog_idempotency)
        i = bisect.bisect_right(firsts, record.first_position) - 1
        if i < 0 or not runs[i][0] <= record.first_position <= record.last_position <= runs[i][1]:
            raise ImportRefused(
                f"line {lineno}: the idempotency record names positions {record.first_position} to {record.last_position}, which are not all in the file"
            )


def wanted_positions(records: Iterable[ExportedIdempotency]) -> set[int]:
    """The file's positions whose events an import must find here: each record's first and last, and any drop its key names."""
    found: set[int] = set()
    for record in records:
        found.update((record.first_position, record.last_position))
        epoch = _epoch(record.mnemolog_idempotency)
        if epoch:
            found.add(epoch)
    return found


def take_in(store, records: list[ExportedIdempotency], event_at: dict[int, str]) -> int:
    """Record ``records`` in ``store`` at the positions their events have here (``event_at``: the file's
    position -> event id); returns how many were new. Keys it holds already are left as they are."""
    if not records:
        return 0
    here = store.recorder.event_positions(sorted(set(event_at.values())))
    position = lambda source: here.get(event_at.get(source, ""))  # noqa: E731 - the file's position, here
    rows: dict[str, dict] = {}
    for record in records:
        first, last = position(record.first_position), position(record.last_position)
        key = _renamed(record.mnemolog_idempotency, position)
        if first is None or last is None or key is None:
            continue
        rows.setdefault(key, {"key": key, "fingerprint": record.fingerprint, "first_position": first, "last_position": last})
    with store.recorder.transaction() as conn:
        held: set[str] = set()
        keys = list(rows)
        for start in range(0, len(keys), 500):
            held.update(conn.execute(select(idempotency.c.key).where(idempotency.c.key.in_(keys[start : start + 500]))).scalars())
        new = [row for key, row in rows.items() if key not in held]
        if new:
            conn.execute(idempotency.insert(), new)
    return len(new)


def _epoch(key: str) -> int:
    """The drop a stored key names (``<tenant>%@<position>/…``), 0 for none."""
    head = key.partition("/")[0]
    if "%@" not in head:
        return 0
    digits = head.rpartition("%@")[2]
    return int(digits) if digits.isdigit() else 0


def _renamed(key: str, position) -> str | None:
    """``key`` as this store names it: the drop it names at its position here (None if not here)."""
    epoch = _epoch(key)
    if not epoch:
        return key
    here = position(epoch)
    if here is None:
        return None
    head, _, rest = key.partition("/")
    return stored_key_form(f"{head.rpartition('%@')[0]}%@{here}/{rest}")

"""Events as read back from the log: :class:`RecordedEvent`, and the decoding of rows and JSON pages into it."""

from __future__ import annotations

from datetime import datetime
from typing import Generic, Iterable, TypeVar, Union

import msgspec

from . import sealing
from .events import DomainEvent, Metadata, decode_payload, metadata_decoder, registered_types, registry_generation
from .log_reads import EventPage
from .recorder import utc_stamp

__all__ = ["PAGE_ROWS", "PageDecoder", "RecordedEvent", "decode_rows", "to_datetime"]


E = TypeVar("E", bound=DomainEvent)


class RecordedEvent(msgspec.Struct, Generic[E], frozen=True, gc=False, array_like=True):
    """An event as read back from the log, with its envelope.

    Generic in the event only so that a whole page can be decoded in one
    msgspec call (``RecordedEvent[Union of every event type]``); instances
    are plain ``RecordedEvent``s. ``gc=False``: envelopes never form cycles,
    and leaving them out of the cycle collector makes big reads much cheaper.
    ``array_like``: msgspec reads and writes it as an array of its fields in
    order, the form SQLite renders a page in (``dialects.envelope_json``);
    :meth:`to_dict` gives the keyed form.
    """

    position: int
    event_id: str
    stream_id: str
    stream_version: int
    type: str
    schema_version: int
    tenant: str
    event: E
    metadata: Metadata
    recorded_at: datetime

    def to_dict(self) -> dict:
        """The envelope and decoded payload as plain JSON-ready values (time as stored: UTC, ``Z``)."""
        return {
            "position": self.position,
            "event_id": self.event_id,
            "stream_id": self.stream_id,
            "stream_version": self.stream_version,
            "type": self.type,
            "schema_version": self.schema_version,
            "tenant": self.tenant,
            "recorded_at": utc_stamp(self.recorded_at),
            "payload": msgspec.to_builtins(self.event),
            "metadata": msgspec.to_builtins(self.metadata),
        }


def to_datetime(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def decode_rows(rows: Iterable[tuple]) -> list[RecordedEvent]:
    """Decode envelope tuples (see ``SQLRecorder.select_events``) into events.

    Events of one append share their metadata and timestamp, so both are
    decoded once per run of equal values rather than once per row.
    """
    out = []
    last_meta_text = last_stamp_text = None
    meta = stamp = None
    for position, event_id, stream_id, version, type_, schema, tenant, payload, meta_text, stamp_text in rows:
        if meta_text != last_meta_text:
            meta, last_meta_text = metadata_decoder.decode(meta_text), meta_text
        if stamp_text != last_stamp_text:
            stamp, last_stamp_text = to_datetime(stamp_text), stamp_text
        out.append(
            RecordedEvent(
                position,
                event_id,
                stream_id,
                version,
                type_,
                schema,
                tenant,
                decode_payload(type_, schema, payload),
                meta,
                stamp,
            )
        )
    return out


PAGE_ROWS = 256  # rows per JSON page: a page this size stays in the CPU's caches


class PageDecoder:
    """Decodes :class:`EventPage` JSON straight into RecordedEvents.

    Rebuilt when event types are registered. A page it cannot take whole
    (an unknown type, a stored schema version that needs upcasting) is
    refused with None, and the caller reads it again row by row.
    """

    def __init__(self) -> None:
        self._generation = -1
        self._decoder: msgspec.json.Decoder | None = None
        self._current: dict[str, int] = {}
        self._sealable: frozenset[type] = frozenset()

    def _refresh(self) -> None:
        types = registered_types()
        self._current = {name: cls.schema_version for name, cls in types.items()}
        self._sealable = frozenset(cls for cls in types.values() if sealing.opens(cls))
        if types:
            self._decoder = msgspec.json.Decoder(list[RecordedEvent[Union[tuple(types.values())]]])  # type: ignore[misc]
        else:
            self._decoder = None
        self._generation = registry_generation()

    def decode(self, page: EventPage) -> list[RecordedEvent] | None:
        return self.decode_sealable(page)[0]

    def decode_sealable(self, page: EventPage) -> tuple[list[RecordedEvent] | None, bool]:
        """The page's events (None if refused) and whether any of them may need
        unsealing (see :func:`sealing.opens`), found in the same pass as the checks."""
        if page.count == 0:
            return [], False
        if self._generation != registry_generation():
            self._refresh()
        if self._decoder is None:
            return None, True
        try:
            out = self._decoder.decode(page.json)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return None, True
        # Every row is checked, in order or not: a row out of order must not
        # end the check, or a stored version needing its upcaster after it
        # would be taken as current.
        current, sealable = self._current, self._sealable
        last = 0
        ordered = True
        opening = False
        for recorded in out:
            if current.get(recorded.type) != recorded.schema_version:
                return None, True
            if type(recorded.event) in sealable:
                opening = True
            position = recorded.position
            if position <= last:  # rows arrive in position order; never rely on it blindly
                ordered = False
            last = position
        if not ordered:
            out.sort(key=_by_position)
        return out, opening


def _by_position(recorded: RecordedEvent) -> int:
    return recorded.position

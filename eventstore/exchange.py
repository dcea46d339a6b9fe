"""Export and import of the log as JSON lines.

Each line is one event's envelope exactly as stored::

    {"position":1,"event_id":"…","stream_id":"…","stream_version":1,"type":"…",
     "schema_version":1,"tenant":"…","payload":{…},"metadata":{…},
     "recorded_at":"…Z","prev_hash":"…","hash":"…"}

``payload`` and ``metadata`` are the stored JSON text embedded verbatim, so a
line's ``hash`` can be recomputed from the line alone (see :mod:`.chain`) and
an imported payload is byte-for-byte the exported one.

Import checks the whole file before it writes anything: every line must parse,
every hash must match its line, and wherever two lines have consecutive
positions the second's ``prev_hash`` must be the first's ``hash``. A tenant's
export has gaps between positions; each slice between gaps is still checked.
Events already present (by ``event_id``) are skipped, so importing the same
file twice is a no-op. The importing store gives the new events its own
positions and hashes: they join the target's chain.
"""

from __future__ import annotations

import tempfile
from operator import attrgetter
from typing import Annotated, BinaryIO, Callable, Iterable, Iterator

import msgspec

from .chain import GENESIS_HASH, StoredRow, expected_hash
from .errors import ImportRefused
from .events import metadata_decoder
from .recorder import PendingEvent, PendingWrite

__all__ = ["ExportedEvent", "ImportReport", "export", "import_", "read_export", "GROUP_SIZE"]

GROUP_SIZE = 1000  # events per import transaction

_Positive = Annotated[int, msgspec.Meta(ge=1)]
_Hash = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
_Stamp = Annotated[str, msgspec.Meta(max_length=40, pattern=r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,6})?Z$")]
# Ids and type names never need escaping in JSON: readers render them as
# they are (see dialects.envelope_json), so only these characters get in.
_EventId = Annotated[str, msgspec.Meta(pattern=r"^[0-9A-Za-z-]{1,36}$")]
_TypeName = Annotated[str, msgspec.Meta(pattern=r"^\w{1,100}$")]
_Name = Annotated[str, msgspec.Meta(min_length=1, max_length=255)]


class ExportedEvent(msgspec.Struct, frozen=True):
    """One line of an export; field order is the line's key order (:data:`EXPORTED_FIELDS`)."""

    position: _Positive
    event_id: _EventId
    stream_id: _Name
    stream_version: _Positive
    type: _TypeName
    schema_version: _Positive
    tenant: _Name
    payload: msgspec.Raw
    metadata: msgspec.Raw
    recorded_at: _Stamp
    prev_hash: _Hash
    hash: _Hash


class ImportReport(msgspec.Struct, frozen=True):
    read: int
    imported: int
    skipped_existing: int
    tenants: list[str]


_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(ExportedEvent)

Progress = Callable[..., None]


# -- export -----------------------------------------------------------------


#: An export line's fields: the stored envelope without the correlation id column (a copy of the metadata's).
EXPORTED_FIELDS = tuple(f for f in StoredRow._fields if f != "correlation_id")
_exported_values = attrgetter(*EXPORTED_FIELDS)


def _exported(row: StoredRow) -> ExportedEvent:
    raw = row._replace(payload=msgspec.Raw(row.payload.encode()), metadata=msgspec.Raw(row.metadata.encode()))
    return ExportedEvent(*_exported_values(raw))


def export(store, out: BinaryIO, *, tenant: str | None = None, progress: Progress | None = None, batch_size: int = 5000) -> int:
    """Write the log (or one tenant's events) to ``out`` as JSON lines; returns the count.

    Rows are read in batches, so the log is never held in memory.
    ``progress(count)`` is called after each batch.
    """
    count = 0
    for rows in store.iter_rows(batch_size=batch_size, tenant=tenant):
        out.write(_encoder.encode_lines([_exported(row) for row in rows]))
        count += len(rows)
        if progress is not None:
            progress(count)
    return count


# -- import -----------------------------------------------------------------


class _Line(msgspec.Struct):
    lineno: int
    event: ExportedEvent
    payload: str
    metadata: str
    correlation_id: str | None

    def where(self) -> str:
        return f"line {self.lineno} (position {self.event.position})"


def _parse(lineno: int, raw: bytes) -> _Line:
    try:
        event = _decoder.decode(raw)
        payload = bytes(event.payload).decode("utf-8")
        metadata = bytes(event.metadata).decode("utf-8")
        if not payload.startswith("{"):
            raise ValueError("payload must be a JSON object")
        if not metadata.startswith("{"):
            raise ValueError("metadata must be a JSON object")
        correlation_id = metadata_decoder.decode(metadata).correlation_id
    except (msgspec.MsgspecError, ValueError) as exc:
        raise ImportRefused(f"line {lineno}: {exc}") from None
    return _Line(lineno, event, payload, metadata, correlation_id)


def _stored_row(line: _Line) -> StoredRow:
    fields = msgspec.structs.asdict(line.event)
    fields.update(payload=line.payload, metadata=line.metadata, correlation_id=line.correlation_id)
    return StoredRow(**fields)


def _chunks(lines: Iterable[bytes], size: int, copy: BinaryIO | None = None) -> Iterator[list[_Line]]:
    """Parsed non-blank lines in lists of ``size``; ``copy`` receives every raw line."""
    chunk: list[_Line] = []
    for lineno, raw in enumerate(lines, 1):
        if copy is not None:
            copy.write(raw)
        if not raw.strip():
            continue
        chunk.append(_parse(lineno, raw))
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def read_export(lines: Iterable[bytes]) -> Iterator[StoredRow]:
    """The rows of an export as stored, in file order (``ImportRefused`` names a line that does not parse)."""
    for chunk in _chunks(lines, GROUP_SIZE):
        for line in chunk:
            yield _stored_row(line)


def _current_versions(store, stream_ids: set[str]) -> dict[str, int]:
    recorder = store.recorder
    with recorder.reader.connect() as conn:
        return recorder._current_versions(conn, stream_ids)


class _Checker:
    """Pass one: everything that could refuse the file, before anything is written."""

    def __init__(self, store, rehash: bool):
        self.store = store
        self.rehash = rehash
        self.previous: _Line | None = None
        self.event_ids: set[str] = set()
        self.versions: dict[str, int] = {}  # stream -> last version seen in the file
        self.continued: set[str] = set()  # streams whose new events have started
        self.tenants: set[str] = set()
        self.read = 0

    def check_chunk(self, chunk: list[_Line]) -> None:
        for line in chunk:
            self._check_line(line)
        existing = self.store.recorder.existing_event_ids([line.event.event_id for line in chunk])
        first_new: dict[str, _Line] = {}
        for line in chunk:
            stream = line.event.stream_id
            if line.event.event_id in existing:
                if stream in self.continued:
                    raise ImportRefused(
                        f"{line.where()}: event {line.event.event_id} is already in this store "
                        f"but an earlier event of stream {stream!r} is not"
                    )
            elif stream not in self.continued:
                self.continued.add(stream)
                first_new[stream] = line
        if first_new:
            current = _current_versions(self.store, set(first_new))
            for stream, line in first_new.items():
                have = current.get(stream, 0)
                if have != line.event.stream_version - 1:
                    raise ImportRefused(
                        f"{line.where()}: stream {stream!r} is at version {have} in this store, "
                        f"but the file continues it at version {line.event.stream_version}"
                    )

    def _check_line(self, line: _Line) -> None:
        event = line.event
        self.read += 1
        self.tenants.add(event.tenant)
        if event.event_id in self.event_ids:
            raise ImportRefused(f"{line.where()}: event_id {event.event_id} appears twice in the file")
        self.event_ids.add(event.event_id)
        last = self.versions.get(event.stream_id)
        if last is not None and event.stream_version != last + 1:
            raise ImportRefused(
                f"{line.where()}: stream {event.stream_id!r} jumps from version {last} to {event.stream_version}"
            )
        self.versions[event.stream_id] = event.stream_version
        if not self.rehash:
            self._check_chain(line)
        self.previous = line

    def _check_chain(self, line: _Line) -> None:
        event, previous = line.event, self.previous
        if previous is not None and event.position <= previous.event.position:
            raise ImportRefused(f"{line.where()}: positions must increase (line {previous.lineno} has position {previous.event.position})")
        if event.position == 1 and event.prev_hash != GENESIS_HASH:
            raise ImportRefused(f"{line.where()}: the first event's prev_hash must be the genesis hash")
        if previous is not None and event.position == previous.event.position + 1 and event.prev_hash != previous.event.hash:
            raise ImportRefused(f"{line.where()}: prev_hash does not match the hash of line {previous.lineno}")
        if expected_hash(_stored_row(line)) != event.hash:
            raise ImportRefused(f"{line.where()}: hash does not match the event's contents")


def _writes(lines: list[_Line]) -> list[PendingWrite]:
    """Runs of one stream become one write, in file order."""
    writes: list[PendingWrite] = []
    run: list[PendingEvent] = []
    run_stream, run_expected = None, 0
    for line in lines:
        e = line.event
        if e.stream_id != run_stream:
            if run:
                writes.append(PendingWrite(run_stream, run_expected, run))
            run, run_stream, run_expected = [], e.stream_id, e.stream_version - 1
        run.append(
            PendingEvent(e.event_id, e.type, e.schema_version, e.tenant, line.payload, line.metadata, line.correlation_id, e.recorded_at)
        )
    if run:
        writes.append(PendingWrite(run_stream, run_expected, run))
    return writes


def import_(
    store,
    lines: BinaryIO,
    *,
    rehash: bool = False,
    progress: Progress | None = None,
    group_size: int = GROUP_SIZE,
) -> ImportReport:
    """Import an export into ``store``; refuses (writing nothing) a file that does not hold.

    ``rehash=True`` accepts lines whose hashes or chain do not match (an edited
    file): the store hashes the events into its own chain anyway. Events
    already present by ``event_id`` are skipped. ``progress(count, stage)`` is
    called with stage ``"check"`` while the file is checked, then ``"import"``.
    """
    seekable = lines.seekable()
    start = lines.tell() if seekable else 0
    spool = None if seekable else tempfile.TemporaryFile()
    try:
        checker = _Checker(store, rehash)
        for chunk in _chunks(lines, group_size, copy=spool):
            checker.check_chunk(chunk)
            if progress is not None:
                progress(checker.read, "check")
        source = spool if spool is not None else lines
        source.seek(0 if spool is not None else start)
        imported = skipped = done = 0
        for chunk in _chunks(source, group_size):
            existing = store.recorder.existing_event_ids([line.event.event_id for line in chunk])
            new = [line for line in chunk if line.event.event_id not in existing]
            skipped += len(chunk) - len(new)
            if new:
                store.append_records(_writes(new))
                imported += len(new)
            done += len(chunk)
            if progress is not None:
                progress(done, "import")
    finally:
        if spool is not None:
            spool.close()
    return ImportReport(checker.read, imported, skipped, sorted(checker.tenants))

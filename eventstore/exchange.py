"""Export and import of the log as JSON lines.

An export is a header line, one line per event, and a footer line::

    {"mnemolog_export":2,"scope":"log","tenant":null}
    {"position":1,"event_id":"…","stream_id":"…","stream_version":1,"type":"…",
     "schema_version":1,"tenant":"…","payload":{…},"metadata":{…},
     "recorded_at":"…Z","prev_hash":"…","hash":"…"}
    …
    {"mnemolog_idempotency":"acme/add_memories/req-7","fingerprint":"…","first_position":12,"last_position":14}
    …
    {"mnemolog_export_end":true,"events":221,"digest":"221:…","slices":[[1,221]],"idempotency_keys":9}

``scope`` is ``log`` (every event) or ``tenant`` (one tenant's, named by
``tenant``). The footer gives the number of events, the source's digest
(``POSITION:HASH`` of its tip when the export was taken; the export holds
the events up to it) and the slices it holds: the runs of consecutive
positions, ``[first, last]``. A full export is one slice from position 1 to
the digest's position. Between the events and the footer come the
idempotency records of the appends the export holds, which an import
records at its own positions (see :mod:`.exchange_idempotency`); the footer
counts them.

Event lines carry each event's envelope exactly as stored: ``payload`` and
``metadata`` are the stored JSON text embedded verbatim, so a line's
``hash`` can be recomputed from the line alone (see :mod:`.chain`) and an
imported payload is byte-for-byte the exported one.

Import checks the whole file before it writes anything, and refuses it,
naming the first bad line, unless it holds exactly what its header and
footer say: every line must parse and its hash must match it; wherever two
lines have consecutive positions the second's ``prev_hash`` must be the
first's ``hash``; the lines' runs of positions must be the footer's slices
(so a missing line, or an extra one, is found); a full export must start at
position 1 and end at the digest; and the footer must be the last line (a
cut file has none). ``rehash=True`` accepts an edited file (or one from
before the header existed): hashes, links and slices are not checked, and
the store hashes the events into its own chain anyway.

A ``SubjectForgotten`` in the file makes its keys tombstones in the
importing store's key store (destroying them if it held them), so an
imported forgotten subject stays erased. As a forget does, the held keys
are retired before the event is appended and destroyed after it: an import
killed in between leaves retired keys that the next open of the store
destroys, never a destroyed key without its event. Keys travel only in a separate,
marked key file (``export --with-keys``, ``import --keys``); a file sealed with a
key that neither the importing key store nor the key file holds (nor a forget of
the file names) is refused, unless asked for unreadable (``without_keys``).

Events already present (by ``event_id``) are skipped, so importing the same
file twice is a no-op. The importing store gives the new events its own
positions and hashes: they join the target's chain.
"""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta, timezone
from operator import attrgetter
from typing import Annotated, Any, BinaryIO, Callable, Iterable, Iterator, Literal

import msgspec

from . import exchange_idempotency
from .bounds import check_name
from .chain import GENESIS_HASH, StoredRow, expected_hash
from .errors import ImportRefused, UnknownEventType, UpcastError
from .events import decode_payload, metadata_decoder
from .exchange_idempotency import ExportedIdempotency
from .recorder import PendingEvent, PendingWrite, utc_stamp
from .schema import MAX_NAME, MAX_STREAM_ID
from .sealed_keys import opens_with, sealed_keys

__all__ = ["ExportedEvent", "ExportFooter", "ExportHeader", "ImportReport", "export", "import_", "read_export", "FORMAT", "GROUP_SIZE"]

GROUP_SIZE = 1000  # events per import transaction
FORMAT = 3  # the export format: 2 added the header and footer lines, 3 the idempotency records

_Positive = Annotated[int, msgspec.Meta(ge=1)]
_Hash = Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{64}$")]
# Microseconds always, as every log writes them: the stamps are compared as text ("…17Z" sorts after "…17.9Z").
_Stamp = Annotated[str, msgspec.Meta(max_length=40, pattern=r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")]
#: How far past this machine's clock an imported event's time may be (another machine's clock runs ahead).
CLOCK_SKEW = timedelta(minutes=10)
# Ids and type names never need escaping in JSON: readers render them as
# they are (see dialects.envelope_json), so only these characters get in.
_EventId = Annotated[str, msgspec.Meta(pattern=r"^[0-9A-Za-z-]{1,36}$")]
_TypeName = Annotated[str, msgspec.Meta(pattern=r"^\w{1,100}$")]
# Names as every backend holds them alike (see .bounds): no NUL, within their columns.
_Name = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_NAME, pattern="^[^\x00]*$")]
_StreamId = Annotated[str, msgspec.Meta(min_length=1, max_length=MAX_STREAM_ID, pattern="^[^\x00]*$")]


class ExportedEvent(msgspec.Struct, frozen=True):
    """One line of an export; field order is the line's key order (:data:`EXPORTED_FIELDS`)."""

    position: _Positive
    event_id: _EventId
    stream_id: _StreamId
    stream_version: _Positive
    type: _TypeName
    schema_version: _Positive
    tenant: _Name
    payload: msgspec.Raw
    metadata: msgspec.Raw
    recorded_at: _Stamp
    prev_hash: _Hash
    hash: _Hash


class ExportHeader(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An export's first line: what it holds."""

    mnemolog_export: Annotated[int, msgspec.Meta(ge=1)]
    scope: Literal["log", "tenant"]
    tenant: _Name | None = None


class ExportFooter(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An export's last line: its count, the source's digest and the runs of positions it holds."""

    mnemolog_export_end: Literal[True]
    events: Annotated[int, msgspec.Meta(ge=0)]
    digest: Annotated[str, msgspec.Meta(pattern=r"^\d+:[0-9a-f]{64}$")]
    slices: list[tuple[_Positive, _Positive]]
    idempotency_keys: Annotated[int, msgspec.Meta(ge=0)] = 0  # format 3


_HEADER_PREFIX = b'{"mnemolog_export":'
_FOOTER_PREFIX = b'{"mnemolog_export_end":'
_GZIP_MAGIC = b"\x1f\x8b"
_header_decoder = msgspec.json.Decoder(ExportHeader)
_footer_decoder = msgspec.json.Decoder(ExportFooter)


class ImportReport(msgspec.Struct, frozen=True):
    read: int
    imported: int
    skipped_existing: int
    tenants: list[str]
    idempotency_keys: int = 0  # records taken in (see .exchange_idempotency)


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
    """Write the log (or one tenant's events) to ``out``: header, event lines, their idempotency records, footer; returns the event count.

    The export holds the events up to the store's tip when it starts (the
    footer's digest). Rows are read in batches, so the log is never held in
    memory. ``progress(count)`` is called after each batch.
    """
    tip = store.digest()
    out.write(_encoder.encode(ExportHeader(FORMAT, "tenant" if tenant is not None else "log", tenant)) + b"\n")
    count = 0
    slices: list[list[int]] = []
    for rows in store.iter_rows(batch_size=batch_size, until=tip.position, tenant=tenant):
        out.write(_encoder.encode_lines([_exported(row) for row in rows]))
        for row in rows:
            if slices and slices[-1][1] == row.position - 1:
                slices[-1][1] = row.position
            else:
                slices.append([row.position, row.position])
        count += len(rows)
        if progress is not None:
            progress(count)
    records = 0
    for batch in exchange_idempotency.exported(store, tip.position, tenant):
        out.write(_encoder.encode_lines(batch))
        records += len(batch)
    footer = ExportFooter(True, count, f"{tip.position}:{tip.hash}", [(a, b) for a, b in slices], records)
    out.write(_encoder.encode(footer) + b"\n")
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
        check_name("correlation_id", correlation_id)
    except (msgspec.MsgspecError, ValueError) as exc:
        raise ImportRefused(f"line {lineno}: {exc}") from None
    except RecursionError:  # msgspec's decoder, on JSON nested some thousand deep
        raise ImportRefused(f"line {lineno}: JSON nested too deep") from None
    return _Line(lineno, event, payload, metadata, correlation_id)


def _stored_row(line: _Line) -> StoredRow:
    fields = msgspec.structs.asdict(line.event)
    fields.update(payload=line.payload, metadata=line.metadata, correlation_id=line.correlation_id)
    return StoredRow(**fields)


#: What an event is, apart from where a log holds it: ``position``, the chain's hashes and ``recorded_at`` (which
#: an import moves up to the time of the event before it, so that recorded times never go back).
_CONTENT = ("stream_id", "stream_version", "type", "schema_version", "tenant")


def _differs(stored: StoredRow, line: _Line) -> str | None:
    """The first field in which the event the store holds differs from the file's line of the same ``event_id``."""
    for name in _CONTENT:
        if getattr(stored, name) != getattr(line.event, name):
            return name
    for name in ("payload", "metadata"):  # compared as JSON: a file's spacing or key order is not a difference
        mine, theirs = getattr(stored, name), getattr(line, name)
        if mine != theirs and msgspec.json.decode(mine) != msgspec.json.decode(theirs):
            return name
    return None


class _Frame:
    """An export's header and footer lines, as the lines are read."""

    def __init__(self) -> None:
        self.header: ExportHeader | None = None
        self.footer: ExportFooter | None = None
        self.footer_line = 0
        self.last_line = 0  # the last non-blank line
        self.started = False  # a non-blank line was read
        self.idempotency: list[tuple[int, ExportedIdempotency]] = []  # (line number, record)

    def take(self, lineno: int, raw: bytes) -> bool:
        """True when ``raw`` is the header, the footer or an idempotency record (not an event)."""
        if self.footer is not None:
            raise ImportRefused(f"line {lineno}: a line after the export's footer (line {self.footer_line})")
        first, self.started, self.last_line = not self.started, True, lineno
        if first and raw.startswith(_GZIP_MAGIC):
            raise ImportRefused(f"line {lineno}: the file is gzip-compressed: decompress it first (zcat FILE > FILE.jsonl)")
        if raw.startswith(_HEADER_PREFIX):
            if not first:
                raise ImportRefused(f"line {lineno}: an export header that is not the first line")
            self.header = _decode_frame(lineno, raw, _header_decoder)
            if self.header.mnemolog_export > FORMAT:
                raise ImportRefused(f"line {lineno}: export format {self.header.mnemolog_export} is newer than this mnemolog reads ({FORMAT})")
            if (self.header.scope == "tenant") != (self.header.tenant is not None):
                raise ImportRefused(f"line {lineno}: a tenant export names its tenant, a log export none")
            return True
        if raw.startswith(_FOOTER_PREFIX):
            self.footer, self.footer_line = _decode_frame(lineno, raw, _footer_decoder), lineno
            return True
        if raw.startswith(exchange_idempotency.PREFIX):
            self.idempotency.append((lineno, exchange_idempotency.parse(lineno, raw)))
            return True
        return False


def _decode_frame(lineno: int, raw: bytes, decoder: msgspec.json.Decoder):
    try:
        return decoder.decode(raw)
    except msgspec.MsgspecError as exc:
        raise ImportRefused(f"line {lineno}: {exc}") from None


def _chunks(lines: Iterable[bytes], size: int, frame: _Frame, copy: BinaryIO | None = None) -> Iterator[list[_Line]]:
    """Parsed non-blank event lines in lists of ``size``; ``frame`` takes the header and footer; ``copy`` receives every raw line."""
    chunk: list[_Line] = []
    for lineno, raw in enumerate(lines, 1):
        if copy is not None:
            copy.write(raw)
        if not raw.strip() or frame.take(lineno, raw):
            continue
        chunk.append(_parse(lineno, raw))
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def read_export(lines: Iterable[bytes]) -> Iterator[StoredRow]:
    """The rows of an export as stored, in file order, without its header and footer (``ImportRefused`` names a line that does not parse).

    A file cut short is refused once read to its end (``ImportRefused``): an empty one, or one with a header
    and no footer, would pass for a reference holding only the rows left in it. A file without a header (from
    before the header and footer) is read as it is.
    """
    frame, count = _Frame(), 0
    for chunk in _chunks(lines, GROUP_SIZE, frame):
        for line in chunk:
            count += 1
            yield _stored_row(line)
    if frame.header is not None or not frame.started:
        _check_whole(frame)
        _check_count(frame, count)


def _check_whole(frame: _Frame) -> None:
    """The file held something and ended with its footer."""
    if not frame.started:
        raise ImportRefused("the file is empty: not an export")
    if frame.footer is None:
        raise ImportRefused(f"line {frame.last_line}: the file ends without the export's footer: it was cut short")


def _check_count(frame: _Frame, count: int) -> None:
    """The file holds as many events as its footer counts."""
    if frame.footer.events != count:
        raise ImportRefused(f"line {frame.footer_line} (the footer): counts {frame.footer.events} events, the file holds {count}")


def _current_versions(store, stream_ids: set[str]) -> dict[str, int]:
    recorder = store.recorder
    with recorder.reader.connect() as conn:
        return recorder._current_versions(conn, stream_ids)


class _Checker:
    """Pass one: everything that could refuse the file, before anything is written."""

    def __init__(self, store, rehash: bool, frame: _Frame):
        self.store = store
        self.rehash = rehash
        self.frame = frame
        self.runs: list[list[int]] = []  # runs of consecutive positions: [first, last, first line, last line]
        self.previous: _Line | None = None
        self.event_ids: set[str] = set()
        self.versions: dict[str, int] = {}  # stream -> last version seen in the file
        self.continued: set[str] = set()  # streams whose new events have started
        self.tenants: set[str] = set()
        self.read = 0
        self.conflict: ImportRefused | None = None  # the first clash with the store, raised once the file holds
        self.sealed_with: dict[str, _Line] = {}  # key id -> the first line sealed with it
        self.first_sealed: dict[str, Any] = {}  # key id -> that line's event, decoded (unopened)
        self.latest = utc_stamp(datetime.now(timezone.utc) + CLOCK_SKEW)
        self.forgotten: set[str] = set()  # key ids a SubjectForgotten of the file names

    def check_chunk(self, chunk: list[_Line]) -> None:
        for line in chunk:
            self._check_line(line)
        if self.conflict is None:
            try:
                self._check_store(chunk)
            except ImportRefused as exc:
                self.conflict = exc

    def _check_store(self, chunk: list[_Line]) -> None:
        """The chunk against the store: streams must continue where the store has them."""
        existing = self.store.recorder.rows_by_event_id([line.event.event_id for line in chunk])
        first_new: dict[str, _Line] = {}
        for line in chunk:
            stream = line.event.stream_id
            if line.event.event_id in existing:
                differs = _differs(existing[line.event.event_id], line)
                if differs:
                    raise ImportRefused(
                        f"{line.where()}: event {line.event.event_id} is already in this store with another {differs}: "
                        "an event once written is never replaced (an edited event needs an event_id of its own)"
                    )
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
        if event.recorded_at > self.latest:  # recorded times never go back: every later write would take this time
            raise ImportRefused(
                f"{line.where()}: recorded_at {event.recorded_at} is later than this machine's clock allows ({self.latest}):"
                " an edited file, or a clock set wrong here or where it was exported"
            )
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
            self._check_frame(line)
            self._check_chain(line)
        decoded = _check_readable(line)
        for _, key_id in sealed_keys(decoded):
            if key_id not in self.sealed_with:
                self.sealed_with[key_id], self.first_sealed[key_id] = line, decoded
        if event.type == "SubjectForgotten":
            self.forgotten.update(getattr(decoded, "key_ids", ()))
        self.previous = line

    def _check_frame(self, line: _Line) -> None:
        """The line against the header: present, same tenant, and no gap in a full export."""
        header, event = self.frame.header, line.event
        if header is None:
            raise ImportRefused(
                f"line {line.lineno}: no export header before the first event, so nothing shows whether events are missing "
                "(an export from an older mnemolog, or an edited file): import it with --rehash to accept it unchecked"
            )
        if header.scope == "tenant" and event.tenant != header.tenant:
            raise ImportRefused(f"{line.where()}: an event of tenant {event.tenant!r} in an export of tenant {header.tenant!r}")
        previous = self.previous
        if header.scope == "log":
            expected = previous.event.position + 1 if previous is not None else 1
            if event.position > expected:
                raise ImportRefused(f"{line.where()}: {_span(expected, event.position - 1)} missing from this export of the whole log")
        if self.runs and self.runs[-1][1] == event.position - 1:
            self.runs[-1][1], self.runs[-1][3] = event.position, line.lineno
        else:
            self.runs.append([event.position, event.position, line.lineno, line.lineno])

    def finish(self) -> None:
        """After the last line: the footer is there and holds for what was read."""
        if not self.rehash:
            self._check_footer()
        if self.conflict is not None:
            raise self.conflict

    def check_keys(self, keys: list[dict] | None, *, beside: int | None = None) -> None:
        """Every key that sealed an event of the file opens it here or was forgotten: held by this store's key
        store (or a tombstone there), in ``keys`` (the export's key file), or named by a forget of the file.
        Otherwise the import would leave a data directory whose every read of those events fails.

        ``beside``: an import ``--without-keys`` into a log that already holds that many events not from the file, refused all the
        same: the projections of every tenant follow the log in order, so its reads and writes, other tenants'
        too, would stop at the first event no key opens. Such a copy is an auditor's: a new data directory."""
        known = {row["key_id"] for row in keys or ()} | self.forgotten
        missing = self.store.sealer.keys.unknown(set(self.sealed_with) - known)
        if missing:
            line = min((self.sealed_with[key_id] for key_id in missing), key=attrgetter("lineno"))
            key_id = next(k for k in sorted(missing) if self.sealed_with[k] is line)
            more = f" (and {len(missing) - 1} other keys)" if len(missing) > 1 else ""
            given = "the key file given does not hold it" if keys is not None else "no key file was given"
            if beside is not None:
                raise ImportRefused(
                    f"{line.where()}: the event is sealed with key {key_id}{more}, which this data directory's key store does not hold"
                    f" and {given}: --without-keys imports only into a new data directory (an auditor's copy, to check the chain);"
                    f" this one's log holds {beside} event{'s' * (beside != 1)} of its own, and every tenant's reads and writes would stop at that event:"
                    " import the export's key file with --keys KEYFILE, or import into a new data directory"
                )
            raise ImportRefused(
                f"{line.where()}: the event is sealed with key {key_id}{more}, which this data directory's key store does not hold"
                f" and {given}: import the export's key file with --keys KEYFILE (export --with-keys writes it),"
                " or pass --without-keys to import the sealed fields unreadable"
            )
        self._check_key_bytes(keys)

    def _check_key_bytes(self, keys: list[dict] | None) -> None:
        """Each key opens the first event sealed with it: a key of the right id and other bytes (another export's
        key file, or an edited one) was taken, and every read of the log failed from that event on, every tenant's."""
        given = {row["key_id"]: bytes.fromhex(row["key"]) for row in keys or () if row.get("key")}
        for key_id, line in self.sealed_with.items():
            held = self.store.sealer.keys.key(key_id)
            key = held if held is not None else given.get(key_id)
            if key and not opens_with(self.first_sealed[key_id], line.event.event_id, key_id, key):
                where = "this data directory's key store holds" if held is not None else "the key file given holds"
                raise ImportRefused(
                    f"{line.where()}: the event is sealed with key {key_id}, and the key {where} under that id does not open it"
                    " (the key file of another export, or an edited one): import the key file written with this export"
                )

    def _check_footer(self) -> None:
        frame = self.frame
        if frame.started and frame.header is None:
            raise ImportRefused("line 1: no export header: import it with --rehash to accept it unchecked")
        _check_whole(frame)
        footer = frame.footer
        where = f"line {frame.footer_line} (the footer)"
        declared = [list(s) for s in footer.slices]
        for n, run in enumerate(self.runs):
            if n >= len(declared):
                raise ImportRefused(f"line {run[2]} (position {run[0]}): an event the footer does not list (it lists {_describe(declared)})")
            first, last = declared[n]
            if run[0] > last:
                raise ImportRefused(f"line {run[2]} (position {run[0]}): {_span(first, last)} missing (the footer lists it)")
            if run[0] != first:
                what = f"{_span(first, run[0] - 1)} missing" if run[0] > first else f"position {run[0]} is not in the footer's slices"
                raise ImportRefused(f"line {run[2]} (position {run[0]}): {what}")
            if run[1] != last:
                nxt = self.runs[n + 1][2] if n + 1 < len(self.runs) else frame.footer_line
                what = f"{_span(run[1] + 1, last)} missing" if run[1] < last else f"position {last + 1} is not in the footer's slices"
                raise ImportRefused(f"line {nxt}: {what} (after line {run[3]}, position {run[1]})")
        if len(declared) > len(self.runs):
            first, last = declared[len(self.runs)]
            raise ImportRefused(f"{where}: {_span(first, last)} missing (the footer lists it)")
        _check_count(frame, self.read)
        if footer.idempotency_keys != len(frame.idempotency):
            raise ImportRefused(f"{where}: counts {footer.idempotency_keys} idempotency records, the file holds {len(frame.idempotency)}")
        exchange_idempotency.check(frame.idempotency, self.runs)
        if frame.header.scope == "log":
            tip_position, _, tip_hash = footer.digest.partition(":")
            last = self.previous.event if self.previous is not None else None
            if (last.position if last else 0) != int(tip_position) or (last is not None and last.hash != tip_hash):
                raise ImportRefused(f"{where}: the source's digest {footer.digest} is not the last event's: events are missing at the end")

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


def _check_readable(line: _Line):
    """The line's payload, decoded as its type and schema version (through the upcasters), as every read of the log will.

    The log is append-only: an event no reader can decode (a log from a newer
    mnemolog, or an edited file, even with its chain recomputed) would break
    every catch-up and rebuild of the store for good, so it is refused with
    the file, ``rehash`` or not.
    """
    event = line.event
    try:
        return decode_payload(event.type, event.schema_version, line.payload)
    except UnknownEventType as exc:
        raise ImportRefused(f"{line.where()}: {exc} (written by a newer mnemolog?)") from None
    except UpcastError as exc:
        raise ImportRefused(f"{line.where()}: {exc}") from None
    except Exception as exc:  # msgspec's validation, or an upcaster meeting a payload it cannot take
        raise ImportRefused(f"{line.where()}: {event.type} does not decode: {exc}") from None


def _span(first: int, last: int) -> str:
    return f"position {first} is" if first == last else f"positions {first} to {last} are"


def _describe(slices: list[list[int]]) -> str:
    return ", ".join(f"{a} to {b}" for a, b in slices) or "none"


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


_forgotten_decoder = msgspec.json.Decoder(dict)


def _forgotten_keys(lines: list[_Line]) -> list[tuple[str, list[str]]]:
    """``(tenant, key ids)`` of each ``SubjectForgotten`` among ``lines``."""
    return [
        (line.event.tenant, _forgotten_decoder.decode(line.payload).get("key_ids") or [])
        for line in lines
        if line.event.type == "SubjectForgotten"
    ]


def _forget_keys(store, forgotten: list[tuple[str, list[str]]], *, destroy: bool) -> None:
    """A subject forgotten in the source stays forgotten here: its keys become tombstones (destroyed if held;
    only retired without ``destroy``, before the events that name them are appended)."""
    for tenant, key_ids in forgotten:
        store.sealer.keys.tombstone(key_ids, tenant, destroy=destroy)


def import_(
    store,
    lines: BinaryIO,
    *,
    rehash: bool = False,
    progress: Progress | None = None,
    group_size: int = GROUP_SIZE,
    keys: list[dict] | None = None,
    without_keys: bool = False,
) -> ImportReport:
    """Import an export into ``store``; refuses (writing nothing) a file that does not hold.

    ``keys``, the rows of the export's key file, go into the key store once
    the file is accepted and before any event is appended: a refused import
    leaves the key store as it was, and an import killed midway leaves no
    event without its key. A file holding an event sealed with a key that
    neither this store's key store nor ``keys`` holds (and no forget of the
    file names) is refused: imported, every read of that event would fail.
    ``without_keys=True`` imports it anyway, its sealed fields unreadable here
    until the key file is imported (the same import again with ``keys``: the
    events already present are skipped, the keys added).

    ``rehash=True`` accepts lines whose hashes, chain, header or footer do not
    match (an edited file, or one from before the header and footer): the
    store hashes the events into its own chain anyway. Events
    already present by ``event_id`` are skipped. The file's idempotency
    records are recorded at the positions their events have here, after the
    last group (see :mod:`.exchange_idempotency`). ``progress(count, stage)`` is
    called with stage ``"check"`` while the file is checked, then ``"import"``.
    """
    seekable = lines.seekable()
    start = lines.tell() if seekable else 0
    spool = None if seekable else tempfile.TemporaryFile()
    try:
        checker = _Checker(store, rehash, _Frame())
        held = store.last_position() if without_keys else 0
        ours = 0  # of the log's events, those the file holds: all of them, where an import of it was stopped midway
        for chunk in _chunks(lines, group_size, checker.frame, copy=spool):
            checker.check_chunk(chunk)
            if held:
                ours += len(store.recorder.existing_event_ids([line.event.event_id for line in chunk]))
            if progress is not None:
                progress(checker.read, "check")
        checker.finish()
        if not without_keys or ours < held:
            checker.check_keys(keys, beside=held - ours if without_keys else None)
        if keys is not None:
            store.sealer.keys.import_rows(keys)
        source = spool if spool is not None else lines
        source.seek(0 if spool is not None else start)
        imported = skipped = done = 0
        records = [record for _, record in checker.frame.idempotency]
        wanted, event_at = exchange_idempotency.wanted_positions(records), {}
        for chunk in _chunks(source, group_size, _Frame()):
            event_at.update((line.event.position, line.event.event_id) for line in chunk if line.event.position in wanted)
            existing = store.recorder.existing_event_ids([line.event.event_id for line in chunk])
            new = [line for line in chunk if line.event.event_id not in existing]
            skipped += len(chunk) - len(new)
            # As a forget does: the keys retired, the events appended, then the keys destroyed; a kill in between
            # leaves retired keys that the next open of the store destroys (EventStore.finish_forgets).
            forgotten = _forgotten_keys(chunk)
            _forget_keys(store, forgotten, destroy=False)
            if new:
                store.append_records(_writes(new))
                imported += len(new)
            _forget_keys(store, forgotten, destroy=True)
            done += len(chunk)
            if progress is not None:
                progress(done, "import")
        recorded = exchange_idempotency.take_in(store, records, event_at)
    finally:
        if spool is not None:
            spool.close()
    return ImportReport(checker.read, imported, skipped, sorted(checker.tenants), recorded)

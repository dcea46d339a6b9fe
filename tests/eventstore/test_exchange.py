"""Export and import of the log as JSON lines."""

from __future__ import annotations

import io
import json

import msgspec
import pytest

from mnemolog.eventstore import EventStore, ImportRefused, Metadata
from mnemolog.eventstore.chain import GENESIS_HASH
from mnemolog.eventstore.events import DomainEvent
from mnemolog.eventstore.exchange import ImportReport, export, import_
from mnemolog.eventstore.recorder import PendingEvent, PendingWrite


class ExchangeNoted(DomainEvent, frozen=True):
    text: str
    n: int = 0


class ExchangeTagged(DomainEvent, frozen=True):
    tag: str


def fill(store: EventStore) -> None:
    store.append("notes-1", [ExchangeNoted(text="first", n=1), ExchangeNoted(text="second", n=2)], tenant="acme")
    store.append("notes-2", [ExchangeTagged(tag="blue")], tenant="globex", metadata=Metadata(correlation_id="c-1"))
    store.append("notes-1", [ExchangeNoted(text="café ☕", n=3)], tenant="acme")
    store.append("notes-3", [ExchangeTagged(tag="red"), ExchangeTagged(tag="green")], tenant="globex")
    store.append("notes-1", [ExchangeNoted(text="fourth", n=4)], tenant="acme", metadata=Metadata(actor="bob"))


@pytest.fixture
def source(tmp_path):
    with EventStore.open(tmp_path / "source") as store:
        fill(store)
        yield store


@pytest.fixture
def target(tmp_path):
    with EventStore.open(tmp_path / "target") as store:
        yield store


def dump(store, **kwargs) -> bytes:
    out = io.BytesIO()
    export(store, out, **kwargs)
    return out.getvalue()


def test_export_writes_one_envelope_a_line(source):
    data = dump(source)
    lines = data.splitlines()
    assert len(lines) == 1 + 7 + 1 and data.endswith(b"\n")
    assert json.loads(lines[0]) == {"mnemolog_export": 3, "scope": "log", "tenant": None}
    assert json.loads(lines[-1]) == {"mnemolog_export_end": True, "events": 7, "digest": str(source.digest()), "slices": [[1, 7]], "idempotency_keys": 0}
    lines = lines[1:-1]
    first = json.loads(lines[0])
    assert list(first) == [
        "position", "event_id", "stream_id", "stream_version", "type", "schema_version", "tenant",
        "payload", "metadata", "recorded_at", "prev_hash", "hash",
    ]  # fmt: skip
    stored = source.recorder.row_at(1)
    assert first["position"] == 1 and first["prev_hash"] == GENESIS_HASH and first["hash"] == stored.hash
    assert first["payload"] == {"type": "ExchangeNoted", "text": "first", "n": 1}
    assert [json.loads(line)["position"] for line in lines] == list(range(1, 8))


def test_export_counts_and_reports_progress(source):
    seen = []
    out = io.BytesIO()
    assert export(source, out, progress=seen.append, batch_size=3) == 7
    assert seen == [3, 6, 7]


def test_round_trip_into_an_empty_store_keeps_the_chain(source, target):
    report = import_(target, io.BytesIO(dump(source)))
    assert report == ImportReport(read=7, imported=7, skipped_existing=0, tenants=["acme", "globex"])
    # Same events, same recorded times, same order: the same chain, hash for hash.
    assert target.digest() == source.digest()
    assert target.verify().ok
    assert dump(target) == dump(source)
    assert [e.event for e in target.read_stream("notes-1")] == [e.event for e in source.read_stream("notes-1")]
    assert target.read_all(correlation_id="c-1")[0].event == ExchangeTagged(tag="blue")


def test_second_import_is_a_no_op(source, target):
    data = dump(source)
    import_(target, io.BytesIO(data))
    tip = target.digest()
    report = import_(target, io.BytesIO(data))
    assert (report.read, report.imported, report.skipped_existing) == (7, 0, 7)
    assert target.digest() == tip


def test_payload_text_round_trips_byte_for_byte(tmp_path, target):
    payload = '{"type": "ExchangeNoted",  "text": "caf\\u00e9 \\"quoted\\"", "n":  15 }'  # readable, in no encoder's spelling
    metadata = '{ "actor" : "ann" }'
    with EventStore.open(tmp_path / "odd") as odd:
        odd.append_records(
            [PendingWrite("s", 0, [PendingEvent("0190f000-0000-7000-8000-000000000001", "ExchangeNoted", 1, "t", payload, metadata, None)])]
        )
        data = dump(odd)
        assert odd.verify().ok
    assert b'"payload":' + payload.encode() + b',"metadata":' + metadata.encode() in data
    import_(target, io.BytesIO(data))
    row = target.recorder.row_at(1)
    assert row.payload == payload and row.metadata == metadata
    assert target.read_stream("s")[0].event == ExchangeNoted(text='café "quoted"', n=15)
    assert target.verify().ok


def test_tenant_export_and_import(source, target):
    data = dump(source, tenant="globex")
    header, *lines, footer = [json.loads(line) for line in data.splitlines()]
    assert header == {"mnemolog_export": 3, "scope": "tenant", "tenant": "globex"}
    assert footer == {"mnemolog_export_end": True, "events": 3, "digest": str(source.digest()), "slices": [[3, 3], [5, 6]], "idempotency_keys": 0}
    assert [line["position"] for line in lines] == [3, 5, 6]
    assert {line["tenant"] for line in lines} == {"globex"}
    report = import_(target, io.BytesIO(data))
    assert report.imported == 3 and report.tenants == ["globex"]
    assert [e.position for e in target.read_all()] == [1, 2, 3]
    assert [e.event.tag for e in target.read_all()] == ["blue", "red", "green"]
    assert target.verify().ok


def test_import_into_a_store_with_its_own_events(source, tmp_path):
    with EventStore.open(tmp_path / "busy") as busy:
        busy.append("other", [ExchangeTagged(tag="mine")])
        report = import_(busy, io.BytesIO(dump(source)))
        assert report.imported == 7
        assert busy.last_position() == 8 and busy.verify().ok
        assert busy.read_stream("notes-1")[-1].stream_version == 4


def tampered(data: bytes, lineno: int, old: bytes, new: bytes) -> bytes:
    lines = data.splitlines(keepends=True)
    assert old in lines[lineno - 1]
    lines[lineno - 1] = lines[lineno - 1].replace(old, new)
    return b"".join(lines)


def test_a_tampered_line_is_refused_and_nothing_is_written(source, target):
    data = tampered(dump(source), 5, b"\"text\":\"caf", b"\"text\":\"CAF")
    with pytest.raises(ImportRefused, match=r"line 5 \(position 4\).*hash"):
        import_(target, io.BytesIO(data))
    assert target.last_position() == 0


def test_a_broken_link_is_refused(source, target):
    lines = dump(source).splitlines(keepends=True)
    second = json.loads(lines[2])
    second["prev_hash"] = "f" * 64
    lines[2] = json.dumps(second).encode() + b"\n"
    with pytest.raises(ImportRefused, match=r"line 3 \(position 2\)"):
        import_(target, io.BytesIO(b"".join(lines)))
    assert target.last_position() == 0


def test_rehash_accepts_an_edited_file(source, target):
    data = tampered(dump(source), 5, b"\"text\":\"caf", b"\"text\":\"CAF")
    report = import_(target, io.BytesIO(data), rehash=True)
    assert report.imported == 7
    assert target.verify().ok
    assert target.read_stream("notes-1")[2].event.text == "CAFé ☕"


def test_an_edited_event_the_store_holds_is_refused_not_skipped(source, target):
    """An edited event keeps its ``event_id``: imported with --rehash into the store it came from, it was counted as
    already there and left out, so the edit was lost without a word. It is refused, naming the line and the field."""
    data = dump(source)
    import_(target, io.BytesIO(data))
    tip = target.digest()
    edited = tampered(data, 5, b"\"text\":\"caf", b"\"text\":\"CAF")
    with pytest.raises(ImportRefused, match=r"line 5 .*already in this store with another payload"):
        import_(target, io.BytesIO(edited), rehash=True)
    reattributed = tampered(data, 8, b'"bob"', b'"eve"')
    with pytest.raises(ImportRefused, match=r"line 8 .*another metadata"):
        import_(target, io.BytesIO(reattributed), rehash=True)
    assert target.digest() == tip
    respaced = tampered(data, 5, b"\"text\":\"caf", b"\"text\":  \"caf")  # the same event, spelt otherwise
    assert import_(target, io.BytesIO(respaced), rehash=True).skipped_existing == 7


@pytest.mark.parametrize(
    "bad, lineno",
    [
        (b"{not json\n", 3),
        (b'{"position": 3}\n', 3),
        (b"[1, 2, 3]\n", 3),
    ],
)
def test_a_malformed_line_is_refused_with_its_number(source, target, bad, lineno):
    lines = dump(source).splitlines(keepends=True)
    lines[lineno - 1] = bad
    with pytest.raises(ImportRefused, match=rf"^line {lineno}: "):
        import_(target, io.BytesIO(b"".join(lines)), rehash=True)
    assert target.last_position() == 0


@pytest.mark.parametrize("field, value", [("event_id", 'id"with quote'), ("event_id", "back\\slash"), ("type", "Not A Name")])
def test_ids_and_type_names_that_would_need_escaping_are_refused(source, target, field, value):
    lines = dump(source).splitlines(keepends=True)
    line = json.loads(lines[1])
    line[field] = value
    lines[1] = json.dumps(line).encode() + b"\n"
    with pytest.raises(ImportRefused, match=rf"^line 2: .*{field}"):
        import_(target, io.BytesIO(b"".join(lines)), rehash=True)
    assert target.last_position() == 0


@pytest.fixture(params=["sqlite", "postgres"])
def any_target(request, tmp_path):
    """An empty store on each backend."""
    from tests.pg import fresh_database_url

    with EventStore.open(tmp_path / "any" if request.param == "sqlite" else fresh_database_url()) as store:
        yield store


@pytest.mark.parametrize(
    "field, value",
    [("stream_id", "s\x00"), ("tenant", "t\x00"), ("stream_id", "s" * 601), ("tenant", "t" * 256), ("correlation_id", "c\x00"), ("correlation_id", "c" * 256)],
)
def test_names_no_backend_holds_alike_are_refused_before_anything_is_written(source, any_target, field, value):
    """Checked with the rest of the file: on PostgreSQL the first groups went in, then the database refused the line."""
    lines = dump(source).splitlines(keepends=True)
    line = json.loads(lines[7])
    if field == "correlation_id":
        line["metadata"]["correlation_id"] = value
    else:
        line[field] = value
    lines[7] = json.dumps(line).encode() + b"\n"
    with pytest.raises(ImportRefused, match=rf"^line 8: .*{field}"):
        import_(any_target, io.BytesIO(b"".join(lines)), rehash=True, group_size=2)
    assert any_target.last_position() == 0


def test_stream_ids_as_long_as_the_product_makes_travel_between_backends(tmp_path, any_target):
    """``entity-<tenant>/<id>`` reaches 308 characters and ``document-<tenant>/<doc id>`` 520: past PostgreSQL's old 255."""
    stream = "document-" + "t" * 255 + "/" + "d" * 255
    with EventStore.open(tmp_path / "long") as lite:
        lite.append(stream, [ExchangeNoted(text="long")], tenant="t" * 255)
        data, digest = dump(lite), lite.digest()
    assert import_(any_target, io.BytesIO(data)).imported == 1
    assert any_target.digest() == digest and [r.event.text for r in any_target.read_stream(stream)] == ["long"]
    assert dump(any_target) == data


def test_refusal_in_a_later_group_writes_nothing(source, target):
    data = tampered(dump(source), 8, b"fourth", b"FOURTH")
    with pytest.raises(ImportRefused, match="line 8"):
        import_(target, io.BytesIO(data), group_size=2)
    assert target.last_position() == 0


def test_reordered_lines_are_refused(source, target):
    lines = dump(source).splitlines(keepends=True)
    lines[3], lines[4] = lines[4], lines[3]
    with pytest.raises(ImportRefused, match=r"line 4 \(position 4\): position 3 is missing"):
        import_(target, io.BytesIO(b"".join(lines)))


def test_a_conflicting_stream_is_refused_before_writing(source, tmp_path):
    with EventStore.open(tmp_path / "clash") as clash:
        clash.append("notes-3", [ExchangeTagged(tag="already here")])
        with pytest.raises(ImportRefused, match="stream 'notes-3' is at version 1"):
            import_(clash, io.BytesIO(dump(source)))
        assert clash.last_position() == 1


class OneWay(io.RawIOBase):
    """A pipe-like source that cannot seek."""

    def __init__(self, data: bytes):
        self._data = io.BytesIO(data)

    def readable(self):
        return True

    def readinto(self, buffer):
        chunk = self._data.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


def test_import_from_an_unseekable_stream(source, target):
    stream = io.BufferedReader(OneWay(dump(source)))
    assert not stream.seekable()
    stages = []
    report = import_(target, stream, progress=lambda count, stage: stages.append((stage, count)), group_size=4)
    assert report.imported == 7 and target.digest() == source.digest()
    assert stages == [("check", 4), ("check", 7), ("import", 4), ("import", 7)]


def test_blank_lines_are_ignored_and_empty_files_import_nothing(source, target):
    with pytest.raises(ImportRefused, match="empty"):
        import_(target, io.BytesIO(b""))
    assert import_(target, io.BytesIO(b""), rehash=True) == ImportReport(0, 0, 0, [])
    data = dump(source).replace(b"\n", b"\n\n", 1)
    assert import_(target, io.BytesIO(data)).imported == 7


def test_export_line_decodes_with_msgspec(source):
    line = dump(source).splitlines()[1]
    assert msgspec.json.decode(line)["type"] == "ExchangeNoted"


# -- what the header and footer catch -------------------------------------------------------------


@pytest.mark.parametrize("tenant", [None, "globex", "acme"])
def test_any_missing_line_is_refused_naming_a_line(source, tmp_path, tenant):
    lines = dump(source, tenant=tenant).splitlines(keepends=True)
    for n in range(len(lines)):
        with EventStore.open(tmp_path / f"target-{tenant}-{n}") as target:
            with pytest.raises(ImportRefused, match=r"^line \d+"):
                import_(target, io.BytesIO(b"".join(lines[:n] + lines[n + 1 :])))
            assert target.last_position() == 0


def test_an_extra_event_is_refused(source, tmp_path):
    acme = dump(source, tenant="acme").splitlines(keepends=True)
    globex = dump(source, tenant="globex").splitlines(keepends=True)
    mixed = acme[:-1] + [globex[1]] + acme[-1:]
    with EventStore.open(tmp_path / "t") as target:
        with pytest.raises(ImportRefused, match=r"line 6 \(position 3\): an event of tenant 'globex' in an export of tenant 'acme'"):
            import_(target, io.BytesIO(b"".join(mixed)))
    full = dump(source).splitlines(keepends=True)
    duplicated = full[:3] + full[2:]
    with EventStore.open(tmp_path / "u") as target:
        with pytest.raises(ImportRefused, match=r"^line 4 \(position 2\)"):
            import_(target, io.BytesIO(b"".join(duplicated)))


def test_a_footer_that_does_not_hold_is_refused(source, target):
    lines = dump(source).splitlines(keepends=True)
    footer = json.loads(lines[-1])
    for field, value, message in (
        ("events", 6, "counts 6 events, the file holds 7"),
        ("slices", [[1, 8]], "position 8 is missing"),
        ("digest", "7:" + "0" * 64, "is not the last event's"),
    ):
        edited = lines[:-1] + [json.dumps({**footer, field: value}).encode() + b"\n"]
        with pytest.raises(ImportRefused, match=message):
            import_(target, io.BytesIO(b"".join(edited)))
    assert target.last_position() == 0


def test_a_file_without_header_needs_rehash(source, target):
    legacy = b"".join(dump(source).splitlines(keepends=True)[1:-1])  # the format before the header and footer
    with pytest.raises(ImportRefused, match=r"^line 1: no export header.*--rehash"):
        import_(target, io.BytesIO(legacy))
    assert import_(target, io.BytesIO(legacy), rehash=True).imported == 7


@pytest.mark.parametrize(
    "type_, version, payload, message",
    [
        ("ExchangeNoted", 1, '{"type":"ExchangeNoted","n":5}', r"ExchangeNoted does not decode: .*`text`"),
        ("ExchangeNoted", 1, '{"type":"ExchangeNoted","text":7}', r"ExchangeNoted does not decode: .*`\$.text`"),
        ("ExchangeFromLater", 1, '{"type":"ExchangeFromLater"}', "unknown event type 'ExchangeFromLater'"),
        ("ExchangeNoted", 2, '{"type":"ExchangeNoted","text":"from a newer mnemolog"}', "ExchangeNoted is stored at schema version 2, newer than this code's 1"),
    ],
    ids=["missing field", "wrong type", "unknown type", "newer schema"],
)
@pytest.mark.parametrize("rehash", [False, True], ids=["checked", "rehash"])
def test_an_event_this_code_cannot_read_is_refused_whole(tmp_path, target, type_, version, payload, message, rehash):
    """The log is append-only: an event no reader can decode, once imported, broke every catch-up and rebuild of the
    data directory for good (a log from a newer mnemolog, or an edited file whose chain was recomputed)."""
    with EventStore.open(tmp_path / "newer") as newer:
        fill(newer)
        event = PendingEvent("0190f000-0000-7000-8000-000000000009", type_, version, "acme", payload, "{}", None)
        newer.append_records([PendingWrite("notes-9", 0, [event])])
        newer.append("notes-1", [ExchangeNoted(text="after", n=5)], tenant="acme")
        data = dump(newer)
        assert newer.verify().ok  # a chain that holds: only reading the event shows it
    with pytest.raises(ImportRefused, match=rf"^line 9 \(position 8\): {message}"):
        import_(target, io.BytesIO(data), rehash=rehash, group_size=3)
    assert target.last_position() == 0


def test_an_older_schema_version_is_imported_through_its_upcaster(tmp_path, target):
    from mnemolog.eventstore.events import upcaster

    class ExchangeRenamed(DomainEvent, frozen=True):
        schema_version = 2
        label: str

    upcaster("ExchangeRenamed", 1)(lambda data: {"label": data.pop("name")})
    with EventStore.open(tmp_path / "older") as older:
        event = PendingEvent("0190f000-0000-7000-8000-00000000000a", "ExchangeRenamed", 1, "acme", '{"type":"ExchangeRenamed","name":"x"}', "{}", None)
        older.append_records([PendingWrite("renamed-1", 0, [event])])
        data = dump(older)
    assert import_(target, io.BytesIO(data)).imported == 1
    assert target.read_stream("renamed-1")[0].event == ExchangeRenamed(label="x")

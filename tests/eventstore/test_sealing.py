"""Sealed personal fields: stored as ciphertext, read as plaintext while the key exists, erased once it is gone.

``fixtures/plaintext_memories.jsonl`` is an export of a log written without
sealing (memory added and updated, an entity), byte for byte what mnemolog
wrote before sealing existed: a store that seals must still read it.
"""

from __future__ import annotations

import base64
import sqlite3
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from mnemolog.eventstore import EventStore, StreamAppend
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore import catalogue_graph as g
from mnemolog.eventstore import exchange
from mnemolog.eventstore.errors import ImportRefused, KeyMissing, SealBroken
from mnemolog.eventstore.keystore import KeyStore, read_key_file, write_key_file
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.sealing import ERASED_TEXT, TOKEN_MARK, Sealer, encryption_enabled, is_sealed
from mnemolog.eventstore.settings import SettingError, Settings

FIXTURE = Path(__file__).with_name("fixtures") / "plaintext_memories.jsonl"


def _settings(**values) -> Settings:
    return Settings(values, env={})


def _open(path: Path, **values) -> EventStore:
    return EventStore.open(path, settings=_settings(data_dir=str(path), **values))


def _forget(store: EventStore, subject: str, tenant: str = "t") -> None:
    """The subject's keys destroyed and its ``SubjectForgotten`` appended, as a forget does."""
    keys = store.sealer.keys
    ids = keys.retire(tenant, subject)
    keys.forget(ids)
    store.append(f"tenant-{tenant}", [c.SubjectForgotten(subject=subject, key_ids=tuple(ids))], tenant=tenant)


def _added(text: str, subject: str | None = "u-1", memory_id: str = "m-1", **content) -> c.MemoryAdded:
    return c.MemoryAdded(memory_id=memory_id, content=MemoryContent(memory=text, subject=subject, **content), created_at="2026-01-01T00:00:00Z")


def _payloads(path: Path) -> list[str]:
    return [r[0] for r in sqlite3.connect(path / "events.db").execute("SELECT payload FROM events ORDER BY position")]


def test_personal_fields_are_stored_sealed_and_read_in_plaintext(tmp_path):
    with _open(tmp_path, encryption="on") as store:
        event = _added("Zebrafinch sings at dawn", tags=("birds",), background="heard in Lisbon", properties={"where": "Lisbon"}, key="song")
        store.append("memory-1", [event], tenant="t")
        [payload] = _payloads(tmp_path)
        for plain in ("Zebrafinch", "Lisbon", "birds", "song"):
            assert plain not in payload
        assert TOKEN_MARK in payload and '"subject":"u-1"' in payload  # the subject stays readable, the rest is sealed
        [recorded] = store.read_all()
        assert recorded.event == event
        assert store.verify().ok


@pytest.mark.parametrize("batch", [1, 3])
def test_an_append_sealed_with_a_key_another_process_forgot_is_sealed_again_with_a_new_one(tmp_path, batch):
    """The writer's cache still holds the subject's key, and nothing reads between the forget and its append: the
    check in the log's transaction finds the key gone, and the events are sealed again under the subject's new key."""
    with _open(tmp_path, encryption="on") as writer, _open(tmp_path, encryption="on") as other:
        writer.append("memory-0", [_added("Ada lives in Lisbon", memory_id="m-0")], tenant="t")  # caches u-1's key
        _forget(other, "u-1")
        [forgotten] = other.read_all(types=["SubjectForgotten"])
        later = [_added(f"Ada moved to Porto {i}", memory_id=f"m-{i + 1}") for i in range(batch)]
        writer.append("memory-1", later, tenant="t")
        for store in (writer, other):
            events = [r.event for r in store.read_all(types=["MemoryAdded"])]
            assert [e.content.memory for e in events] == [ERASED_TEXT] + [e.content.memory for e in later]
        new_keys = writer.sealer.keys.subject_keys("t", "u-1")
        assert new_keys and not set(new_keys) & set(forgotten.event.key_ids)


def test_entities_and_documents_are_sealed_with_the_tenants_key(tmp_path):
    with _open(tmp_path, encryption="on") as store:
        entity = g.EntityUpserted(entity_id="e1", name="Ada Lovelace", description="mathematician", aliases=("Ada",), properties={"born": "1815"})
        document = g.DocumentImported(doc_id="d1", version=1, title="Ada's notes", content_hash="h", chunk_ids=(), path="/home/ada/notes.md")
        store.append("entity-t/e1", [entity], tenant="t")
        store.append("document-t/d1", [document], tenant="t")
        text = "".join(_payloads(tmp_path))
        assert "Lovelace" not in text and "mathematician" not in text and "/home/ada" not in text and "1815" not in text
        assert [r.event for r in store.read_all()] == [entity, document]
        assert store.sealer.keys.subject_keys("t", None)  # the tenant's own key


def test_with_encryption_off_payloads_are_plaintext_and_a_sealing_store_reads_them(tmp_path):
    event = _added("Plain as day")
    with _open(tmp_path, encryption="off") as store:
        store.append("memory-1", [event], tenant="t")
    assert "Plain as day" in _payloads(tmp_path)[0]
    with _open(tmp_path, encryption="on") as store:
        assert store.read_all()[0].event == event


def test_a_log_written_before_sealing_reads_as_before_and_verifies(tmp_path):
    with _open(tmp_path, encryption="on") as store, open(FIXTURE, "rb") as lines:
        report = exchange.import_(store, lines)
        assert report.imported == 3
        events = [r.event for r in store.read_all()]
        assert events[0].content.memory == "the user prefers green tea" and events[0].content.properties == {"mood": "calm"}
        assert events[1].content.memory == "the user prefers jasmine tea"
        assert events[2].name == "Jasmine Tea" and events[2].aliases == ("jasmine",)
        assert all(e.content.subject is None and not e.content.erased for e in events[:2])
        assert store.verify().ok


def test_a_forgotten_key_reads_as_erased_the_same_way_every_time(tmp_path):
    with _open(tmp_path, encryption="on") as store:
        store.append("memory-1", [_added("Okapi secret", subject="u-1", tags=("zoo",), background="bg")], tenant="t")
        store.append("memory-2", [_added("Other subject", subject="u-2")], tenant="t")
        keys = store.sealer.keys
        keys.forget(keys.retire("t", "u-1"))
        first, second = store.read_all()
        assert first.event.content.memory == ERASED_TEXT and first.event.content.erased
        assert first.event.content.tags == () and first.event.content.background is None and first.event.content.subject == "u-1"
        assert first.event.memory_id == "m-1"  # ids stay
        assert second.event.content.memory == "Other subject"
        assert store.read_all() == [first, second]
        assert store.verify().ok


def test_a_new_key_after_forget_keeps_new_events_readable(tmp_path):
    with _open(tmp_path, encryption="on") as store:
        store.append("memory-1", [_added("before forget")], tenant="t")
        keys = store.sealer.keys
        keys.forget(keys.retire("t", "u-1"))
        store.append("memory-2", [_added("after forget")], tenant="t")
        texts = [r.event.content.memory for r in store.read_all()]
        assert texts == [ERASED_TEXT, "after forget"]


def test_a_key_the_store_never_held_is_an_error_not_an_erasure(tmp_path):
    with _open(tmp_path / "a", encryption="on") as store:
        store.append("memory-1", [_added("needs its key")], tenant="t")
        path = tmp_path / "a" / "export.jsonl"
        with open(path, "wb") as out:
            exchange.export(store, out)
    with _open(tmp_path / "b", encryption="on") as other, open(path, "rb") as lines:
        exchange.import_(other, lines, without_keys=True)
        with pytest.raises(KeyMissing, match="never held"):
            other.read_all()


def test_an_import_of_events_sealed_with_keys_it_cannot_get_is_refused_whole(tmp_path):
    """Without the keys a file's events were sealed with, an import leaves nothing: no event, no key, no key file."""
    with _open(tmp_path / "a", encryption="on") as store:
        store.append("memory-1", [_added("needs its key", subject=None)], tenant="t")
        store.append("memory-2", [_added("needs another key", subject="u-2")], tenant="t")
        export = tmp_path / "log.jsonl"
        with open(export, "wb") as out:
            exchange.export(store, out)
        write_key_file(store.sealer.keys, tmp_path / "log.keys")
    with _open(tmp_path / "b", encryption="on") as other:
        for keys in (None, [row for row in read_key_file(tmp_path / "log.keys") if row["subject"] == "u-2"]):
            with open(export, "rb") as lines, pytest.raises(ImportRefused, match="line 2 .*sealed with key .*--keys.*--without-keys"):
                exchange.import_(other, lines, keys=keys)
            assert other.last_position() == 0 and not (tmp_path / "b" / "keys.db").exists()
        with open(export, "rb") as lines:  # with the key file, whole
            assert exchange.import_(other, lines, keys=read_key_file(tmp_path / "log.keys")).imported == 2
        assert [r.event.content.memory for r in other.read_all()] == ["needs its key", "needs another key"]


def test_an_import_needs_no_key_the_file_itself_forgets(tmp_path):
    """A subject forgotten in the source reads as erased in the copy: its keys are not asked for."""
    with _open(tmp_path / "a", encryption="on") as store:
        store.append("memory-1", [_added("forgotten before the export", subject="u-1")], tenant="t")
        _forget(store, "u-1")
        with open(tmp_path / "log.jsonl", "wb") as out:
            exchange.export(store, out)
    with _open(tmp_path / "b", encryption="on") as other, open(tmp_path / "log.jsonl", "rb") as lines:
        assert exchange.import_(other, lines).imported == 2
        assert other.read_all()[0].event.content.erased and other.verify().ok


def test_a_token_moved_to_another_event_does_not_open(tmp_path):
    sealer = Sealer(KeyStore(tmp_path / "keys.db"), enabled=True)
    sealed = sealer.seal(_added("bound to its event"), "event-a", "t")
    assert sealer.unseal(sealed, "event-a").content.memory == "bound to its event"
    with pytest.raises(SealBroken):
        sealer.unseal(sealed, "event-b")


def test_each_event_of_a_batch_is_bound_to_its_own_id_whatever_the_ids_hold(tmp_path):
    sealer = Sealer(KeyStore(tmp_path / "keys.db"), enabled=True)
    ids = ["event-a", "event\nb", "event-c\n", ""]  # a newline separates the ids as the batch binds them
    sealed = sealer.seal_batch([_added(f"text {i}") for i in range(len(ids))], ids, "t")
    assert [sealer.unseal(event, event_id).content.memory for event, event_id in zip(sealed, ids)] == [f"text {i}" for i in range(len(ids))]
    for event, other in zip(sealed, ["event-b", "event", "event-c", "event-a"]):
        with pytest.raises(SealBroken):
            sealer.unseal(event, other)


def test_keys_travel_only_in_a_marked_key_file_and_make_an_import_readable(tmp_path):
    with _open(tmp_path / "a", encryption="on") as store:
        store.append("memory-1", [_added("Travels with its key")], tenant="t")
        export = tmp_path / "log.jsonl"
        with open(export, "wb") as out:
            exchange.export(store, out)
        assert write_key_file(store.sealer.keys, tmp_path / "log.keys") == 1
    assert "Travels" not in export.read_text()
    key_text = (tmp_path / "log.keys").read_text()
    assert key_text.startswith('{"mnemolog_keys": 1, "warning": "SECRET') and (tmp_path / "log.keys").stat().st_mode & 0o077 == 0
    with _open(tmp_path / "b", encryption="on") as other, open(export, "rb") as lines:
        other.sealer.keys.import_rows(read_key_file(tmp_path / "log.keys"))
        exchange.import_(other, lines)
        assert other.read_all()[0].event.content.memory == "Travels with its key"


def test_an_import_of_a_forget_keeps_the_subject_erased_even_where_the_key_was_held(tmp_path):
    with _open(tmp_path / "a", encryption="on") as store:
        store.append("memory-1", [_added("Forgotten elsewhere")], tenant="t")
        write_key_file(store.sealer.keys, tmp_path / "log.keys")
        _forget(store, "u-1")
        with open(tmp_path / "log.jsonl", "wb") as out:
            exchange.export(store, out)
    with _open(tmp_path / "b", encryption="on") as other, open(tmp_path / "log.jsonl", "rb") as lines:
        other.sealer.keys.import_rows(read_key_file(tmp_path / "log.keys"))  # the key, taken before the forget
        exchange.import_(other, lines)
        assert other.read_all()[0].event.content.erased
        assert other.verify().ok


def test_forgetting_rewrites_the_key_store_without_the_key_bytes(tmp_path):
    keys = KeyStore(tmp_path / "keys.db")
    key_id, key = keys.key_for("t", "u-1")
    keys.key_for("t", "u-2")
    keys.forget(keys.retire("t", "u-1"))
    keys.close()
    for name in ("keys.db", "keys.db-wal"):
        path = tmp_path / name
        if path.exists():
            assert key not in path.read_bytes()
    reopened = KeyStore(tmp_path / "keys.db")
    assert reopened.key(key_id) == b"" and reopened.subject_keys("t", "u-2")


def test_the_encryption_setting(tmp_path):
    assert encryption_enabled(_settings(encryption="auto")) is True  # the crypto extra is installed here
    assert encryption_enabled(_settings(encryption="off")) is False
    postgres = "postgresql+psycopg://u@h/db"
    assert encryption_enabled(_settings(encryption="auto"), postgres) is False  # each server has its own data directory
    assert encryption_enabled(_settings(encryption="auto", key_store=str(tmp_path / "shared.db")), postgres) is True
    assert encryption_enabled(_settings(encryption="on", key_store=str(tmp_path / "keys.db")), postgres) is True
    with pytest.raises(SettingError, match="MNEMOLOG_KEY_STORE"):  # two servers would each seal with keys the other lacks
        encryption_enabled(_settings(encryption="on"), postgres)
    with pytest.raises(SettingError):
        encryption_enabled(_settings(encryption="maybe"))


_text = st.text(min_size=1, max_size=40).filter(str.strip)


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    text=_text,
    tags=st.lists(st.from_regex(r"[a-z]{1,8}", fullmatch=True), max_size=3, unique=True),
    properties=st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=10), st.booleans()), max_size=3),
    background=st.none() | _text,
    subject=st.none() | st.from_regex(r"u-[0-9]{1,3}", fullmatch=True),
)
def test_sealing_round_trips_any_content(tmp_path, text, tags, properties, background, subject):
    sealer = Sealer(KeyStore(tmp_path / "keys.db"), enabled=True)
    event = c.MemoryUpdated(
        memory_id="m1",
        content=MemoryContent(memory=text, tags=tuple(tags), properties=properties, background=background, subject=subject),
        changed=("memory",),
        updated_at="2026-01-01T00:00:00Z",
    )
    sealed = sealer.seal(event, "e1", "t")
    stored = msgspec.json.encode(sealed)
    again = msgspec.json.decode(stored, type=c.MemoryUpdated)  # the stored form still decodes as its Struct
    assert is_sealed(again.content.memory) and again.content.tags == () and again.content.properties == {}
    assert sealer.unseal(again, "e1") == event


V1_FIXTURE = Path(__file__).with_name("fixtures") / "sealed_v1.jsonl"  # written by the first token format, with its keys beside it


def test_events_sealed_in_the_first_token_format_still_open(tmp_path):
    with _open(tmp_path, encryption="on") as store, open(V1_FIXTURE, "rb") as lines:
        store.sealer.keys.import_rows(read_key_file(V1_FIXTURE.with_suffix(".keys")))
        exchange.import_(store, lines)
        assert '"memory":"mnemolog:sealed:v1:' in _payloads(tmp_path)[0]
        memory, tenant_memory, entity, document, edge = [r.event for r in store.read_all()]
        assert memory.content.memory == "Ada Lovelace drinks jasmine tea" and memory.content.properties == {"cup": "blue"}
        assert memory.content.background == "said at breakfast" and memory.content.tags == ("tea",) and memory.content.subject == "u-7"
        assert tenant_memory.content.memory == "the office moved to Porto"
        assert (entity.name, entity.aliases, entity.description) == ("Ada Lovelace", ("Ada",), "mathematician")
        assert (document.title, document.path) == ("Ada's notes", "/home/ada/notes.md")
        assert edge.edge.properties["alias"] == "Ada Lovelace"  # a mention recorded before aliases were sealed: plaintext
        assert store.verify().ok
        keys = store.sealer.keys
        keys.forget(keys.retire("t", "u-7"))
        assert store.read_all()[0].event.content.erased


V2_FIXTURE = Path(__file__).with_name("fixtures") / "sealed_v2.jsonl"  # written by the current token format, with its keys beside it


def test_events_sealed_in_the_current_token_format_open_from_a_stored_file(tmp_path):
    """Stored tokens of the current format (every sealed Struct: a memory's fields, an entity, a document, a mention's
    alias) open as written: a change to the format must keep reading them."""
    with _open(tmp_path, encryption="on") as store, open(V2_FIXTURE, "rb") as lines:
        store.sealer.keys.import_rows(read_key_file(V2_FIXTURE.with_suffix(".keys")))
        exchange.import_(store, lines)
        assert all("Grace" not in payload for payload in _payloads(tmp_path))
        memory, tenant_memory, entity, document, edge = [r.event for r in store.read_all()]
        content = memory.content
        assert (content.memory, content.tags, content.background, content.key) == ("Grace Hopper keeps a nanosecond wire", ("wire",), "told at the lab", "wire")
        assert content.properties == {"length_cm": 30, "big": 2**70} and content.subject == "u-9"
        assert tenant_memory.content.memory == "the lab moved to Arlington"
        assert (entity.name, entity.aliases, entity.description) == ("Grace Hopper", ("Amazing Grace",), "admiral")
        assert (document.title, document.path) == ("Grace's log", "/home/grace/log.md")
        assert edge.edge.properties["alias"] == "Grace Hopper"
        assert store.verify().ok


def test_integers_beyond_64_bits_are_sealed_and_read_back_exactly(tmp_path):
    """JSON allows them in a memory's properties; a sealed plaintext keeps them exact."""
    with _open(tmp_path, encryption="on") as store:
        events = [_added("ordinary", memory_id="m-1", properties={"n": 1}), _added("huge", memory_id="m-2", properties={"n": 2**70, "m": -(2**65)})]
        store.append("memory-1", events, tenant="t")
        assert "huge" not in "".join(_payloads(tmp_path))
        assert [r.event for r in store.read_all()] == events
        assert [r.event for r in store.read_all()][1].content.properties["n"] == 2**70


def _mention(n: int, source: str = "m-1", subject: str | None = "u-1", alias: str = "Quetzalcoatl Smith") -> c.EdgeRecord:
    return c.EdgeRecord(
        edge_id=f"mention:r1:{n}", edge_type=g.MENTIONS, source=source, target=f"e{n}", weight=0.8, subject=subject,
        properties={"alias": alias, "occurrences": 1, "confidence": 0.8, "evidence": [source]},
    )  # fmt: skip


def test_a_mention_alias_is_sealed_under_its_memorys_subject_and_erased_with_it(tmp_path):
    with _open(tmp_path, encryption="on") as store:
        user_edge = c.EdgeRecord(edge_id="user:1", edge_type="RELATED", source="m-1", target="m-2", properties={"why": "same trip"})
        linked = [c.EdgeLinked(edge=_mention(1)), c.EdgeLinked(edge=_mention(2, subject=None, alias="Tenant Alias")), c.EdgeLinked(edge=user_edge)]
        undone = c.NamespaceUndone(prefix="mention:r1:", edges=(_mention(1), _mention(2, subject=None, alias="Tenant Alias")))
        repointed = c.EdgesRepointed(previous=(_mention(1),), current=(_mention(1, source="m-9"),), merged_into="m-9")
        store.append("edges-t", [*linked, undone, repointed, c.EdgeUnlinked(edge=_mention(3), reason="gone")], tenant="t")
        text = "".join(_payloads(tmp_path))
        assert "Quetzalcoatl" not in text and "Tenant Alias" not in text
        assert "same trip" in text  # an explicit link's properties are the caller's, not sealed
        assert [r.event for r in store.read_all()] == [*linked, undone, repointed, c.EdgeUnlinked(edge=_mention(3), reason="gone")]
        keys = store.sealer.keys
        keys.forget(keys.retire("t", "u-1"))
        events = [r.event for r in store.read_all()]
        first, tenants, user, undone_now, repointed_now, unlinked = events
        assert first.edge.erased and first.edge.properties == {} and first.edge.sealed is None and first.edge.target == "e1"
        assert tenants.edge.properties["alias"] == "Tenant Alias" and not tenants.edge.erased
        assert user.edge == user_edge
        assert [e.erased for e in undone_now.edges] == [True, False] and undone_now.edges[1].properties["alias"] == "Tenant Alias"
        assert repointed_now.previous[0].erased and repointed_now.current[0].erased and unlinked.edge.erased
        assert store.verify().ok


def test_a_sealed_edge_moved_to_another_place_in_its_event_does_not_open(tmp_path):
    sealer = Sealer(KeyStore(tmp_path / "keys.db"), enabled=True)
    sealed = sealer.seal(c.NamespaceUndone(prefix="mention:", edges=(_mention(1), _mention(2))), "event-a", "t")
    assert sealer.unseal(sealed, "event-a").edges[1].properties["alias"] == "Quetzalcoatl Smith"
    swapped = msgspec.structs.replace(sealed, edges=(sealed.edges[1], sealed.edges[0]))
    with pytest.raises(SealBroken):
        sealer.unseal(swapped, "event-a")


def test_a_batch_of_new_subjects_makes_their_keys_together_and_seals_every_event(tmp_path):
    with _open(tmp_path, encryption="on") as store:
        events = [_added(f"secret number {i}", subject=f"u-{i % 3}", memory_id=f"m-{i}") for i in range(9)]
        store.append_batch([StreamAppend(f"memory-m-{i}", [e]) for i, e in enumerate(events)], tenant="t")
        assert not any("secret number" in p for p in _payloads(tmp_path))
        assert [r.event for r in store.read_all()] == events
        assert all(store.sealer.keys.subject_keys("t", f"u-{i}") for i in range(3))


def test_reads_hand_unseal_only_the_events_it_can_act_on(tmp_path, monkeypatch):
    """Events of a class without personal fields never reach ``Sealer.unseal``
    (a read passes over them without a call each); sealed memories and
    ``SubjectForgotten`` still do, and read as before."""
    with _open(tmp_path, encryption="on") as store:
        added = _added("Quokka smiles", tags=("zoo",))
        archived = c.MemoryArchived(memory_id="m-1", updated_at="2026-01-02T00:00:00Z", reason="old")
        forgotten = c.SubjectForgotten(subject="u-9", key_ids=(), memory_ids=())
        store.append("memory-1", [added, archived], tenant="t")
        store.append("tenant-t", [forgotten], tenant="t")
        seen: list[str] = []
        unseal = store.sealer.unseal

        def counting(event, event_id):
            seen.append(type(event).__name__)
            return unseal(event, event_id)

        monkeypatch.setattr(store.sealer, "unseal", counting)
        assert [r.event for r in store.read_all()] == [added, archived, forgotten]
        assert [r.event for batch in store.iter_all() for r in batch] == [added, archived, forgotten]
        assert seen == ["MemoryAdded", "SubjectForgotten"] * 2


def test_a_sealed_event_on_a_later_page_is_opened(tmp_path):
    """Pages are checked one by one for events to open: a sealed memory after
    a first page of plain events still reads in plaintext."""
    from mnemolog.eventstore.store import PAGE_ROWS

    with _open(tmp_path, encryption="on") as store:
        plain = [c.MemoryArchived(memory_id=f"m-{i}", updated_at="2026-01-02T00:00:00Z") for i in range(PAGE_ROWS + 3)]
        store.append("memory-0", plain, tenant="t")
        added = _added("Axolotl regrows", tags=("lab",))
        store.append("memory-1", [added], tenant="t")
        assert TOKEN_MARK in _payloads(tmp_path)[-1]
        assert store.read_all()[-1].event == added
        assert store.read_all(after=PAGE_ROWS - 1)[-1].event == added


_mixed_event = st.one_of(
    st.builds(lambda i, s: _added(f"memory {i}", subject=s, memory_id=f"m-{i}"), st.integers(0, 9), st.sampled_from([None, "u-1", "u-2", "new"])),
    st.builds(lambda i: g.EntityUpserted(entity_id=f"e{i}", name=f"Entity {i}"), st.integers(0, 9)),
    st.builds(lambda i, s: c.EdgeLinked(edge=_mention(i, subject=s, alias=f"alias {i}")), st.integers(0, 9), st.sampled_from([None, "u-1", "new"])),
    st.builds(lambda i: c.EdgeLinked(edge=c.EdgeRecord(edge_id=f"user:{i}", edge_type="RELATED", source="a", target="b", properties={"n": i})), st.integers(0, 9)),
    st.builds(lambda i: c.NamespaceUndone(prefix="mention:", edges=(_mention(i), _mention(i + 1, subject="u-2"))), st.integers(0, 9)),
    st.builds(lambda i: c.MemoryArchived(memory_id=f"m-{i}", updated_at="2026-01-02T00:00:00Z", reason="old"), st.integers(0, 9)),
)


def _tokens(value) -> list[str]:
    """Every token in a payload's JSON value."""
    if isinstance(value, str):
        return [value] if value.startswith(TOKEN_MARK) else []
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [token for item in items for token in _tokens(item)]


@hsettings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=st.lists(_mixed_event, min_size=1, max_size=12))
def test_a_mixed_batch_is_sealed_event_by_event_as_each_alone_would_be(tmp_path, events):
    """Events are sealed by class in runs: every event's token opens under its own id to the event
    as given, no two events share a nonce, and a token opens under no other event's id."""
    sealer = Sealer(KeyStore(":memory:"), enabled=True)
    ids = [f"event-{i}" for i in range(len(events))]
    stored = [msgspec.json.decode(p, type=type(e)) for p, e in zip(sealer.payloads(events, ids, "t"), events)]
    assert [sealer.unseal(e, i) for e, i in zip(stored, ids)] == events
    nonces = [base64.b64decode(token)[29:41] for e in stored for token in _tokens(msgspec.to_builtins(e))]  # after magic and key reference
    assert len(set(nonces)) == len(nonces)
    for event, stored_event, event_id in zip(events, stored, ids):
        if stored_event != event and len(events) > 1:
            other = ids[(ids.index(event_id) + 1) % len(ids)]
            with pytest.raises(SealBroken):
                sealer.unseal(stored_event, other)


@hsettings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    subjects=st.lists(st.sampled_from([None, "u-1", "u-2", "u-3"]), min_size=1, max_size=4),
    given_keys=st.sets(st.sampled_from([None, "u-1", "u-2", "u-3"])),
    forgotten=st.sets(st.sampled_from(["u-1", "u-2", "u-3"])),
)
def test_an_import_is_accepted_exactly_when_every_sealed_event_opens_or_is_forgotten(tmp_path_factory, subjects, given_keys, forgotten):
    """Whatever subjects the file's events have, which keys the key file holds and which subjects the file forgets:
    the import goes through exactly when each event's key is in the key file or forgotten in the file, and then
    every event reads (plaintext or erased); refused, it leaves the target as it was."""
    root = tmp_path_factory.mktemp("keys")
    with _open(root / "a", encryption="on") as store:
        for n, subject in enumerate(subjects):
            store.append(f"memory-{n}", [_added(f"text {n}", subject=subject, memory_id=f"m-{n}")], tenant="t")
        keys = store.sealer.keys
        rows = [r for r in keys.export_rows() if (r["subject"] or None) in given_keys]
        for subject in sorted(forgotten & set(subjects)):
            ids = keys.retire("t", subject)
            keys.forget(ids)
            store.append("tenant-t", [c.SubjectForgotten(subject=subject, key_ids=tuple(ids))], tenant="t")
        with open(root / "log.jsonl", "wb") as out:
            exchange.export(store, out)
    readable = all(subject in given_keys or subject in forgotten for subject in subjects)
    with _open(root / "b", encryption="on") as other, open(root / "log.jsonl", "rb") as lines:
        if readable:
            exchange.import_(other, lines, keys=rows)
            events = [r.event for r in other.read_all() if isinstance(r.event, c.MemoryAdded)]
            assert [e.content.erased for e in events] == [s in forgotten for s in subjects]
        else:
            with pytest.raises(ImportRefused, match="--keys"):
                exchange.import_(other, lines, keys=rows)
            assert other.last_position() == 0 and not other.sealer.keys.export_rows()

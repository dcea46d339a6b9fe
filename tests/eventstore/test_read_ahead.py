"""Long reads of the log fetch the next page while the caller decodes this one (``eventstore/read_ahead.py``).

Whatever the batch size, filters or where the walk stops, ``iter_all``
must give exactly what ``read_all`` gives, and the reading thread must
never outlive the walk.
"""

from __future__ import annotations

import threading

import pytest

from mnemolog.eventstore import DomainEvent, EventStore, StreamAppend
from mnemolog.eventstore.read_ahead import DEPTH
from mnemolog.eventstore.store import PAGE_ROWS

THREAD = "mnemolog-log-read-ahead"


class AheadNoted(DomainEvent, frozen=True):
    text: str
    n: int = 0


def readers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD]


@pytest.fixture
def store(tmp_path):
    store = EventStore.open(tmp_path)
    for i in range(0, 1300, 100):  # five pages and a bit, two tenants, streams of 100
        store.append_batch(
            [StreamAppend(f"note-{i // 100 % 4}", [AheadNoted(text=f"note {j}", n=j) for j in range(i, i + 100)])],
            tenant="t1" if i // 100 % 3 else "t2",
        )
    yield store
    store.close()


@pytest.mark.parametrize("batch_size", [1, 100, PAGE_ROWS, 700, 5000])
@pytest.mark.parametrize(
    "filters",
    [{}, {"tenant": "t1"}, {"types": ["AheadNoted"]}, {"stream_id": "note-2"}, {"after": 333}, {"until": 1000}, {"after": 200, "until": 777, "tenant": "t2"}],
)
def test_a_walk_over_many_pages_gives_what_read_all_gives(store, batch_size, filters):
    after = filters.pop("after", 0)
    batches = list(store.iter_all(after, batch_size=batch_size, **filters))
    assert [e for b in batches for e in b] == store.read_all(after, **filters)
    assert all(len(b) == batch_size for b in batches[:-1]) and 0 < len(batches[-1]) <= batch_size
    assert not readers()


def test_stopping_early_stops_the_reading_thread(store):
    walk = store.iter_all(batch_size=10)
    first = [e for _ in range(30) for e in next(walk)]  # into the second page
    assert [e.position for e in first] == list(range(1, 301))
    assert readers(), "a read longer than a page is fetched ahead"
    walk.close()
    assert not readers()


def test_stopping_with_the_hand_over_full_ends_the_reading_thread(store, monkeypatch):
    recorder = store.recorder
    real = recorder.select_event_page
    fetched = []
    blocked = threading.Event()

    def counting(**kwargs):
        page = real(**kwargs)
        fetched.append(kwargs["after"])
        if len(fetched) == 2 + DEPTH + 1:  # the caller's two pages, DEPTH waiting, one more held by the thread
            blocked.set()
        return page

    monkeypatch.setattr(recorder, "select_event_page", counting)
    walk = store.iter_all()
    next(walk), next(walk)  # the first page, then the second handed over by the thread
    assert blocked.wait(10), "the thread fills the hand-over and fetches one more page"
    closing = threading.Thread(target=walk.close)
    closing.start()
    closing.join(10)
    assert not closing.is_alive(), "closing the walk frees the thread's waiting hand-over"
    assert not readers()
    assert fetched == [i * PAGE_ROWS for i in range(2 + DEPTH + 1)], "never more than DEPTH pages waiting"


def test_a_read_of_one_page_starts_no_thread(store):
    seen = []
    for batch in store.iter_all(1300 - PAGE_ROWS + 1):
        seen.extend(batch)
        assert not readers()
    assert len(seen) == PAGE_ROWS - 1


def test_an_error_while_reading_ahead_is_raised_in_the_caller(store, monkeypatch):
    recorder = store.recorder
    real = recorder.select_event_page
    calls = []

    def failing(**kwargs):
        calls.append(kwargs["after"])
        if len(calls) == 3:
            raise RuntimeError("disk gone")
        return real(**kwargs)

    monkeypatch.setattr(recorder, "select_event_page", failing)
    got = []
    with pytest.raises(RuntimeError, match="disk gone"):
        for batch in store.iter_all():
            got.extend(batch)
    assert [e.position for e in got] == list(range(1, 2 * PAGE_ROWS + 1))
    assert not readers()


def test_a_page_refused_by_the_decoder_is_read_again_row_by_row(store, monkeypatch):
    expected = store.read_all()
    pages = store._pages
    real = pages.decode_sealable
    refused = []

    def refusing(page):
        if page.last == 3 * PAGE_ROWS:  # the third page, as if it held a version that needs upcasting
            refused.append(page.last)
            return None, True
        return real(page)

    monkeypatch.setattr(pages, "decode_sealable", refusing)
    assert [e for b in store.iter_all() for e in b] == expected
    assert refused == [3 * PAGE_ROWS]

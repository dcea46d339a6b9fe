"""A page of a memory's history is the same versions, mentions included, as that part of the whole history."""

from __future__ import annotations

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent

CTX = CommandContext(tenant="t")


def test_every_page_is_its_part_of_the_whole_history(svc):
    svc.run(svc.entities.upsert, CTX, "person:ada", name="Ada Lovelace", entity_type="person")
    [memory_id] = svc.run(svc.memories.add, CTX, [MemoryContent(memory="Ada Lovelace wrote the notes")]).memory_ids
    for text in ("Charles wrote the notes", "Ada Lovelace read them again", "nobody wrote anything"):
        svc.run(svc.memories.update, CTX, memory_id, {"memory": text})
    svc.run(svc.memories.archive, CTX, memory_id)
    whole = svc.history("t", memory_id)
    assert [v["mentions"] for v in whole] == [["person:ada"], [], ["person:ada"], [], []]
    for as_of in [None] + [v["position"] for v in whole]:
        then = [v for v in svc.history("t", memory_id, as_of=as_of) if as_of is None or v["position"] <= as_of]
        for after in range(0, 7):
            for limit in (None, 1, 2, 3):
                view = svc.history_view("t", memory_id, as_of, after=after, limit=limit)
                following = [v for v in then if v["version"] > after]
                expected = following if limit is None else following[:limit]
                assert view["versions"] == expected, (as_of, after, limit)
                assert view["more"] == (len(following) > len(expected))
                assert view["next_after"] == (expected[-1]["version"] if expected else after)

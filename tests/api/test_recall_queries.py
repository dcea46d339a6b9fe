"""What recall and search find for a query's text: every query is searched as text, even one of function words only."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("fusion", ["score", "rrf"])
async def test_a_query_of_function_words_only_finds_the_memory_saying_it(client, fusion):
    """Question and function words are dropped from a query; when that left nothing, recall searched nothing
    ("ok", no hits) and said its terms were [], though a memory held the very words."""
    written = await client.add_memories(memories=[{"memory": "To be or not to be"}, {"memory": "The harbour at dawn"}])
    quote = written.memory_ids[0]
    found = await client.recall("to be or not to be", fusion=fusion, min_position=written.positions[-1])
    assert found["terms"] == ["to", "be", "or", "not"]
    assert [h["id"] for h in found["hits"]][:1] == [quote]
    searched = await client.search("to be or not to be", min_position=written.positions[-1])
    assert [h["id"] for h in searched["channels"]["lexical"]][:1] == [quote]

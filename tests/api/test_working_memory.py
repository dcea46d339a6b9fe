"""GET /v1/working-memory over real HTTP: the FIFO, as of a position, after a revert, per tenant."""

from __future__ import annotations

import pytest

from mnemolog.api.client import ApiError


async def test_working_memory_reads_the_fifo_at_the_head_and_as_of_a_position(start):
    api = await start(working_memory_capacity=2)
    client = api.typed_client()
    first = await client.add_memories(memories=[{"memory": "kettle on"}, {"memory": "scratch", "memory_type": "WorkingMemory"}])
    listed = await client.working_memory()
    assert listed.capacity == 2 and listed.as_of is None
    assert [e.memory_id for e in listed.entries] == first.memory_ids
    assert [e.memory.memory for e in listed.entries] == ["kettle on", "scratch"]
    assert [e.entered_at for e in listed.entries] == sorted(e.entered_at for e in listed.entries)

    batch = await client.add_memories({"memory": "door locked"}, correlation_id="batch-1")
    assert [e.memory_id for e in (await client.working_memory()).entries] == [first.memory_ids[1], *batch.memory_ids]
    past = await client.working_memory(as_of=first.positions[-1])
    assert past.as_of == first.positions[-1] and [e.memory_id for e in past.entries] == first.memory_ids

    await client.revert("batch-1")  # the batch leaves, the entry it evicted comes back at its old place
    assert [e.memory_id for e in (await client.working_memory()).entries] == first.memory_ids
    assert (await client.working_memory()).entries[0].memory.status == "activated"

    other = api.typed_client(tenant="other")
    assert (await other.working_memory()).entries == []


@pytest.mark.parametrize("as_of", ["yesterday", "99999999999999999999999"])
async def test_working_memory_refuses_a_bad_as_of(client, as_of):
    with pytest.raises(ApiError) as err:
        await client.working_memory(as_of=as_of)
    assert err.value.status == 422 and err.value.field == "as_of"

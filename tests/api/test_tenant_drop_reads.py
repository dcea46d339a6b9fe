"""A dropped tenant's past over real HTTP: the log's own reads (events, the live tail, the explorer's timeline and
correlation pages) begin with the drop, as every projection does, whichever key reads them."""

from __future__ import annotations

import asyncio

import pytest


@pytest.fixture
async def secured(start):
    return await start(auth=True)


async def test_the_log_reads_of_a_dropped_tenant_begin_with_its_drop(secured):
    """They showed every event from before the drop, memories' text included, to the tenant's keys: to a
    customer given the name again, the whole history of the one that left."""
    admin = secured.client(api_key=secured.key("acme", "read", "write", "admin"))
    globex = secured.client(api_key=secured.key("globex"))
    await admin.add_memories({"memory": "the departing customer's contract terms"}, correlation_id="c1")
    kept = await globex.add_memories({"memory": "globex's own note"}, correlation_id="c1")
    dropped = await admin.drop_tenant("acme")
    newcomer = secured.client(api_key=secured.key("acme"))
    after = await newcomer.add_memories({"memory": "the newcomer's first note"}, correlation_id="c1")

    events = (await newcomer.list_events(limit=1000))["events"]
    assert [e["type"] for e in events] == ["TenantDropped", "MemoryAdded"]
    assert events[0]["position"] == dropped.positions[-1] and "departing" not in str(events)
    assert (await newcomer.list_events(as_of=dropped.positions[-1] - 1))["events"] == []
    page = await newcomer.correlation_events("c1")
    assert [e["position"] for e in page["events"]] == after.positions
    marks = (await newcomer.timeline())["marks"]
    assert [m["position"] for m in marks] == [dropped.positions[-1], after.positions[-1]]

    async with secured.raw.get("/v1/events/stream", headers={"Authorization": f"Bearer {secured.key('acme', 'read')}"}) as response:

        async def first_two() -> list[str]:
            lines: list[str] = []
            while len(lines) < 2:
                line = (await response.content.readline()).decode()
                if line.startswith("data: "):
                    lines.append(line)
            return lines

        tail = await asyncio.wait_for(first_two(), 10)
    assert '"TenantDropped"' in tail[0] and "the newcomer's first note" in tail[1]

    # The other tenant's reads are as they were.
    assert [e["position"] for e in (await globex.list_events())["events"]] == kept.positions
    assert [e["position"] for e in (await globex.correlation_events("c1"))["events"]] == kept.positions
    assert (await newcomer.revert("c1", dry_run=True)).data["would_revert"] == len(after.positions)


async def test_idempotency_keys_used_before_a_drop_are_not_the_tenants_after_it(secured):
    """The tenant given to a newcomer after a drop had the first one's keys: its write under a key the first one
    had used was refused as a conflict, or, with the same body, answered with the first one's memory, nothing written."""
    admin = secured.client(api_key=secured.key("acme", "read", "write", "admin"))
    await admin.add_memories({"memory": "the departing customer's note"}, idempotency_key="1")
    before = await admin.add_memories({"memory": "hello"}, idempotency_key="2")
    dropped = await admin.drop_tenant("acme", reason="account closed", idempotency_key="drop-1")
    again = await admin.drop_tenant("acme", reason="account closed", idempotency_key="drop-1")  # a retry of the drop
    assert again.replayed and again.positions == dropped.positions

    newcomer = secured.client(api_key=secured.key("acme"))
    first = await newcomer.add_memories({"memory": "the newcomer's note"}, idempotency_key="1")
    second = await newcomer.add_memories({"memory": "hello"}, idempotency_key="2")
    assert not first.replayed and not second.replayed and second.memory_ids != before.memory_ids
    assert (await newcomer.get_memory(second.memory_ids[0]))["memory"] == "hello"
    assert (await newcomer.add_memories({"memory": "hello"}, idempotency_key="2")).memory_ids == second.memory_ids  # its own retry
    # The newcomer's drop under the first one's drop key is a drop of its own.
    own = await secured.client(api_key=secured.key("acme", "admin")).drop_tenant("acme", reason="account closed", idempotency_key="drop-1")
    assert not own.replayed and own.positions[0] > dropped.positions[-1]

"""Reads while another process rebuilds the projections (``mnemolog rebuild`` beside ``mnemolog serve``).

The rebuild resets each projection (its tables emptied, its checkpoint at 0)
and replays the log. A server that read those tables as they were would
answer a memory it has just served as not found, and recall without it. It
answers as before instead: a read finds the projections behind the position
this process has served from, and waits while its own catch-up helps the
replay back there.
"""

from __future__ import annotations

from mnemolog.eventstore.settings import Settings
from mnemolog.projections.assembly import default_projectors
from mnemolog.projections.runner import ProjectionRunner


async def test_a_rebuild_in_another_process_never_makes_a_read_go_back(api, client):
    added = await client.add_memories(memories=[{"memory": f"The spare key {i} is under the blue flowerpot"} for i in range(20)])
    memory_id = added.memory_ids[7]
    assert (await client.get_memory(memory_id))["memory"] == "The spare key 7 is under the blue flowerpot"
    before = await client.recall("spare key 7 blue flowerpot", limit=5)
    assert memory_id in [hit["id"] for hit in before["hits"]]

    svc = api.service
    other = ProjectionRunner(svc.store, api.data_dir / "projections.db", default_projectors(Settings({}, env={}), api.data_dir))
    try:
        for name in other.by_name:  # the rebuild's first step, in another process; its replay has not begun
            other.reset(name)
        assert other.position() == 0

        response = await api.raw.get(f"/v1/memories/{memory_id}")
        assert response.status == 200, await response.text()
        assert (await response.json())["memory"] == "The spare key 7 is under the blue flowerpot"
        during = await client.recall("spare key 7 blue flowerpot", limit=5)
        assert [hit["id"] for hit in during["hits"]] == [hit["id"] for hit in before["hits"]]
        history = await client.memory_history(memory_id)
        assert len(history["versions"] if isinstance(history, dict) else history) == 1

        other.rebuild()  # the replay, over what this server has caught up meanwhile: nothing twice
        assert (await client.get_memory(memory_id))["version"] == 1
        after = await client.recall("spare key 7 blue flowerpot", limit=5)
        assert [hit["id"] for hit in after["hits"]] == [hit["id"] for hit in before["hits"]]
    finally:
        other.close()

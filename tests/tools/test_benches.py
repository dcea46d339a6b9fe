"""The bench registry and ``mnemolog bench graph``: what each bench measures is the product's real work."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mnemolog.projections.graph.reads import graph_stats
from mnemolog.projections.service import MemoryService
from mnemolog.tools import bench_graph, cli
from mnemolog.tools.bench_cmds import BENCHES

SMALL_GRAPH = ["--relations", "2000", "--entities", "500", "--queries", "10", "--chunks", "200", "--aliases", "100"]


def test_every_bench_is_in_the_one_registry_and_on_the_command_line():
    assert set(BENCHES) == {"append", "rebuild", "recall", "graph", "mcp", "organize", "ingest", "explorer", "streams"}
    # A fresh interpreter: the commands come from the list, not from what happened to be imported first.
    listing = subprocess.run(
        [sys.executable, "-c", "from mnemolog.tools import cli; cli.main(['bench', '--help'])"],
        capture_output=True, text=True, timeout=60,
    ).stdout
    listed = {line.split()[0] for line in listing.splitlines() if line.startswith("    ") and not line.strip().startswith("-")}
    assert set(BENCHES) <= listed


def test_the_linker_bench_finds_the_surfaces_it_planted():
    figures = bench_graph.bench_linker(n_chunks=200, n_aliases=100)
    # Six surfaces are planted in each chunk (some may overwrite each other): at least one survives.
    assert 200 <= figures["mentions"] <= 6 * 200
    # 20 chunks a document: every one of the 10 documents mentions something.
    assert 10 <= figures["document_mentions"] <= figures["mentions"]
    assert figures["n_entities"] < figures["n_aliases"] == 100
    assert bench_graph.bench_linker(n_chunks=200, n_aliases=100)["mentions"] == figures["mentions"]  # seeded


def test_the_relink_bench_commits_the_edges_it_reports(tmp_path):
    figures = bench_graph.bench_relink(tmp_path, n_chunks=100, n_aliases=60)
    with MemoryService.open(tmp_path) as service:
        service.sync()
        live = graph_stats(service.read_conn(), "bench")["edges"]
    assert figures["added"] == live["MENTIONS"] >= 100  # each chunk mentions an entity, and so does its document


def test_the_relink_bench_over_memories_links_each_memory(tmp_path):
    figures = bench_graph.bench_relink(tmp_path, n_chunks=100, n_aliases=60, memory_type="LongTermMemory")
    with MemoryService.open(tmp_path) as service:
        service.sync()
        live = graph_stats(service.read_conn(), "bench")["edges"]
    assert figures["added"] == live["MENTIONS"] >= 100  # each memory mentions an entity; no document here


def test_the_bfs_bench_reaches_past_the_first_hop():
    figures = bench_graph.bench_bfs(2_000, 500, queries=20)
    # Four relations per entity on average: three hops reach well beyond one node's own relations.
    assert 4 < figures["mean_reached"] < 500
    assert figures["p50_ms"] <= figures["p95_ms"]


def test_bench_graph_ends_with_its_figures_and_with_json_prints_one_object(capsys):
    assert cli.main(["bench", "graph", *SMALL_GRAPH]) == 0
    figures = dict(pair.split("=") for pair in capsys.readouterr().out.strip().splitlines()[-1].split())
    assert list(figures) == ["bfs3_p50_ms", "link_chunks_per_s", "relink_10k_s", "relink_memories_10k_s"]
    assert cli.main(["bench", "graph", *SMALL_GRAPH, "--json"]) == 0
    [line] = capsys.readouterr().out.strip().splitlines()  # the figures' line followed it
    report = json.loads(line)
    assert report["bfs3_p50_ms"] == report["bfs"]["p50_ms"] and report["link_chunks_per_s"] == report["linker"]["chunks_per_s"]
    assert report["relink_10k_s"] == report["relink"]["seconds"] and report["relink_memories_10k_s"] == report["relink_memories"]["seconds"]
    assert report["linker"]["n_chunks"] == report["relink"]["chunks"] == report["relink_memories"]["chunks"] == 200
    assert report["relink_memories"]["added"] >= 200


@pytest.mark.parametrize(
    "argv, named",
    [
        (["--relations", "100", "--entities", "10"], "--relations"),  # more than the 90 pairs of ten entities: looped forever
        (["--aliases", "0"], "--aliases"),  # a traceback
        (["--entities", "1"], "--entities"),
        (["--queries", "0"], "--queries"),
    ],
)
def test_bench_graph_refuses_counts_it_cannot_run_naming_the_option(capsys, argv, named):
    assert cli.main(["bench", "graph", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mnemolog: error: ") and named in err and err.count("\n") == 1, err


def test_bench_ingest_runs_a_real_server_with_and_without_the_organizer(tmp_path):
    """A few seconds of it, in a subprocess as an operator runs it: both rates, the ratio, and the last line."""
    run = subprocess.run(
        [sys.executable, "-m", "mnemolog.tools.cli", "bench", "ingest", "--duration", "2", "--runs", "1", "--catch-up-limit", "60", "--tmp-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().splitlines()
    figures = dict(pair.split("=") for pair in lines[-1].split())
    assert list(figures) == ["sustained_mps", "sustained_mps_no_organizer", "organizer_ratio"]
    on, off, ratio = float(figures["sustained_mps"]), float(figures["sustained_mps_no_organizer"]), float(figures["organizer_ratio"])
    assert on > 0 and off > 0
    assert abs(ratio - on / off) < 0.01
    rows = {line.split("#")[0].strip(): line for line in lines if " #1 " in line}
    assert set(rows) == {"organizer on", "organizer off (reference)"}
    assert "events behind the head" in rows["organizer on"]  # the organizer ran in the server and said where it was
    assert "caught up" in rows["organizer on"] and "not caught up" not in rows["organizer on"]  # ... and finished the work left
    assert list(tmp_path.iterdir()) == []  # the servers' data directories are gone


def test_the_postgres_append_bench_ends_with_its_figures():
    """At a tiny size: appends, then two replica servers on one log against one, ending with the issue's figures."""
    from tests.pg import unavailable

    reason = unavailable()
    if reason:
        pytest.skip(reason)
    tiny = ["--n", "300", "--repeat", "3", "--replica-memories", "200", "--replica-seconds", "0.5", "--replica-writes", "5"]
    run = subprocess.run(
        [sys.executable, "-m", "mnemolog.tools.cli", "bench", "append", "--backend", "postgres", *tiny],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    last = run.stdout.strip().splitlines()[-1].split()
    assert [pair.split("=")[0] for pair in last[-4:]] == ["pg_append_b100_eps", "pg_ratio_b100", "replica_lag_p50_ms", "replicas_qps_ratio"]
    figures = dict(pair.split("=") for pair in last)
    assert int(figures["pg_n"]) == 300 and int(figures["replica_memories"]) == 200
    for key in ("pg_append_b1_eps", "pg_append_b100_eps", "pg_ratio_b100", "replica_one_qps", "replica_two_qps", "replicas_qps_ratio"):
        assert float(figures[key]) > 0, key
    # every probe was read back on the other server, no sooner than its own write was acknowledged
    assert 0 < float(figures["replica_ack_lag_p50_ms"]) <= float(figures["replica_lag_p50_ms"])
    assert "raw psycopg executemany" in run.stdout and "two servers, 8 clients each" in run.stdout


def test_the_recall_bench_puts_a_knowledge_graph_beside_its_memories(tmp_path):
    from mnemolog.projections.recall.searcher import RecallOptions
    from mnemolog.tools import bench_recall

    entities, relations = bench_recall._add_graph(tmp_path, 300)
    assert (entities, relations) == (30, 90)
    service = MemoryService.open(tmp_path)
    try:
        assert service.knowledge.get("default", "e0").name == "Alice"
        named = [q for q in bench_recall.questions(40) if bench_recall.names_an_entity(q)]
        assert named and len(named) < 40  # some questions name an entity, some none
        hits = service.searcher.recall("default", named[0], RecallOptions(strategy="graph-only")).hits
        assert hits and all(h.kind == "entity" for h in hits)
    finally:
        service.close()


def test_listening_sockets_counts_each_worker_socket_on_the_port():
    """``bench recall`` waits until every worker listens before it measures: each binds its own socket (SO_REUSEPORT)."""
    import socket

    from mnemolog.tools.bench_recall import listening_sockets

    first = socket.socket()
    first.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    first.bind(("127.0.0.1", 0))
    port = first.getsockname()[1]
    second = socket.socket()
    second.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    second.bind(("127.0.0.1", port))
    try:
        if listening_sockets(port) is None:
            pytest.skip("no /proc/net/tcp here")
        assert listening_sockets(port) == 0  # bound, not listening yet
        first.listen()
        assert listening_sockets(port) == 1
        second.listen()
        assert listening_sockets(port) == 2
    finally:
        first.close()
        second.close()
    assert listening_sockets(port) == 0


def test_the_sealing_cases_compare_sealed_and_plaintext_appends_at_both_durability_levels(tmp_path):
    from mnemolog.tools.bench_sealing import run_sealing

    seen: list[str] = []
    text, pairs = run_sealing(tmp_path, 300, 100, 3, seen.append)
    figures = dict(pair.split("=") for pair in pairs)
    assert {"seal_append_ratio", "seal_append_ratio_full", "append_on_eps_full", "seal_read_ratio", "seal_total_ratio", "forget_s"} <= set(figures)
    assert 0 < float(figures["seal_append_ratio"]) < 10 and 0 < float(figures["seal_append_ratio_full"]) < 10
    assert 0 < float(figures["seal_single_ratio"]) < 10 and 0 < float(figures["seal_single_ratio_full"]) < 10
    assert "one event a transaction, sealed (FULL)" in text and "one a transaction:" in text
    assert any("synchronous=FULL" in line for line in seen) and any("synchronous=NORMAL" in line for line in seen)
    assert "(sealed, FULL)" in text and "at FULL" in text and "side by side" in text
    assert not list(tmp_path.iterdir())  # every run's directory removed


def test_bench_organize_re_clusters_a_grown_tenant_both_ways(capsys, tmp_path):
    assert cli.main(["bench", "organize", "--n", "600", "--runs", "1", "--tmp-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    figures = dict(pair.split("=") for pair in lines[-1].split())
    rows = {line.split(", ")[1].split(":")[0]: line for line in lines if "re-clustering after adding 30 memories" in line}
    assert set(rows) == {"placed into the live topics (as configured)", "re-partitioned (organizer_refit_share=0)"}
    placed, refit = int(figures["recluster_events"]), int(figures["recluster_events_repartitioned"])
    assert f"{placed:,} events" in rows["placed into the live topics (as configured)"]
    assert 30 <= placed < refit  # at least an edge for each new memory; a fit made afresh moves many more


def test_bench_streams_times_each_write_both_ways(capsys):
    assert cli.main(["bench", "streams", "--n", "64", "--samples", "5"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    figures = {key: float(value) for key, value in (pair.split("=") for pair in lines[-1].split())}
    assert set(figures) == {f"{what}_{how}_ms" for what in ("update", "relation", "history") for how in ("held", "whole")}
    assert all(value > 0 for value in figures.values())
    assert [line.split("  ")[0] for line in lines if line.startswith(("memory update", "relation weight", "history page"))] == [
        "memory update", "relation weight set", "history page (1 version)"
    ]

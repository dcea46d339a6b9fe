"""``mnemolog bench graph``: BFS over entity relations, the entity linker, and a committed relink.

Three measurements on synthetic data from seeded generators, each against
the product's own code:

- :func:`bench_bfs`: p50/p95 of a depth-3 BFS over relations projected in
  memory (only the read is timed);
- :func:`bench_linker`: chunks per second through
  :meth:`~mnemolog.projections.linking.linker.AliasCatalogue.link`;
- :func:`bench_relink`: seconds for a committed relink over stored chunks in a
  fresh data directory (plan, commit and projection timed), and the same
  over memories (which the add links as it goes; stored here as events, so
  that the relink links them all).

Each measurement runs ``--runs`` times (at least 3) and the median run
counts. The last line of output is ``bfs3_p50_ms=… link_chunks_per_s=… relink_10k_s=… relink_memories_10k_s=…``.
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import statistics
import tempfile
import time
from datetime import datetime, timezone
from typing import Any

from mnemolog.eventstore import RecordedEvent
from mnemolog.eventstore import catalogue as c
from mnemolog.eventstore import catalogue_graph as g
from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.commands.context import now_iso
from mnemolog.eventstore.events import Metadata
from mnemolog.eventstore.ids import new_ids
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.store import NO_STREAM, StreamAppend

from .bench_runs import add_runs_arg, check_runs, middle
from .common import CommandError, between, print_json_line

# The product's read side is imported inside each bench, so that the CLI starts
# without loading it.

HELP = "BFS depth 3 over 100k relations, linker throughput, relink of 10k chunks and of 10k memories"


def bench_linker(n_chunks: int = 10_000, n_aliases: int = 5_000, *, seed: int = 1234) -> dict:
    """Time :meth:`AliasCatalogue.link` on synthetic data from a seeded generator.

    ``n_aliases`` distinct surfaces (entity names of one or two words, plus
    one-word aliases) and ``n_chunks`` chunks of 60 pseudo-words, six of which
    are replaced by random surfaces.
    """
    from mnemolog.projections.linking.linker import AliasCatalogue, LinkChunk, LinkEntity

    rng = random.Random(seed)
    syllables = [a + v for a in "bcdfghjklmnprstvwz" for v in "aeiou"]
    words: set[str] = set()
    while len(words) < 4_000 + 2 * n_aliases:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    vocab = sorted(words)
    rng.shuffle(vocab)
    filler, fresh = vocab[:4_000], iter(vocab[4_000:])  # surfaces never share a word
    entities: list[LinkEntity] = []
    surfaces: list[str] = []
    while len(surfaces) < n_aliases:
        name = " ".join(next(fresh) for _ in range(rng.randint(1, 2)))
        aliases = (next(fresh).capitalize(),) if len(surfaces) + 1 < n_aliases else ()
        n = len(entities)
        entities.append(LinkEntity(f"e{n:06d}", name.title(), aliases, (), n))
        surfaces += [name, *aliases]
    chunks = []
    for k in range(n_chunks):
        text = [rng.choice(filler) for _ in range(60)]
        for _ in range(6):
            text[rng.randrange(60)] = rng.choice(surfaces)
        chunks.append(LinkChunk(f"c{k:06d}", f"d{k // 20:05d}", " ".join(text).capitalize() + "."))

    t0 = time.perf_counter()
    catalogue = AliasCatalogue.build(entities)
    t1 = time.perf_counter()
    result = catalogue.link(chunks)
    link_s = time.perf_counter() - t1
    return {
        "n_chunks": n_chunks, "n_aliases": len(catalogue), "n_entities": len(entities),
        "build_s": round(t1 - t0, 4), "link_s": round(link_s, 4),
        "chunks_per_s": round(n_chunks / link_s, 1) if link_s > 0 else float("inf"),
        "mentions": len(result.mentions), "document_mentions": len(result.document_mentions),
    }


def bench_relink(data_dir, n_chunks: int = 10_000, n_aliases: int = 5_000, *, seed: int = 99, memory_type: str = "RawFileMemory") -> dict[str, Any]:
    """Seconds for a committed relink over ``n_chunks`` stored chunks (or memories of ``memory_type``) and ``n_aliases`` aliases (fresh data dir).

    The chunks and entities are appended as events first (not timed); the
    timed part plans, commits and projects the run.
    """
    from mnemolog.projections.service import MemoryService

    rng = random.Random(seed)
    syllables = [a + b for a in "bdfgklmnprstvz" for b in "aeiou"]
    words = sorted({"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(3 * n_aliases + 4000)})
    rng.shuffle(words)
    filler, fresh = words[:3000], iter(words[3000:])
    service = MemoryService.open(data_dir)
    try:
        store, tenant = service.store, "bench"
        surfaces: list[str] = []
        writes = []
        n = 0
        while len(surfaces) < n_aliases:
            name, alias = next(fresh), next(fresh)
            surfaces += [name, alias]
            event = g.EntityUpserted(entity_id=f"e{n}", name=name.title(), aliases=(alias.title(),))
            writes.append(StreamAppend(g.entity_stream(tenant, f"e{n}"), [event], NO_STREAM))
            n += 1
        store.append_batch(writes, tenant=tenant)
        ids, stamp = new_ids(n_chunks), now_iso()
        for start in range(0, n_chunks, 2000):
            batch = []
            for i in range(start, min(start + 2000, n_chunks)):
                text = [rng.choice(filler) for _ in range(60)]
                for _ in range(6):
                    text[rng.randrange(60)] = rng.choice(surfaces)
                content = MemoryContent(memory=" ".join(text).capitalize() + ".", memory_type=memory_type)
                batch.append(StreamAppend(c.memory_stream(ids[i]), [c.MemoryAdded(memory_id=ids[i], content=content, created_at=stamp, origin="import")], NO_STREAM))
            store.append_batch(batch, tenant=tenant)
        service.sync()
        t0 = time.perf_counter()
        report = service.linking.relink(CommandContext(tenant=tenant), commit=True)
        seconds = time.perf_counter() - t0
    finally:
        service.close()
    return {"chunks": n_chunks, "memory_type": memory_type, "aliases": report["catalogue_size"], "added": report["add"], "seconds": round(seconds, 3)}


def bench_bfs(n_relations: int = 100_000, n_entities: int = 20_000, *, depth: int = 3, queries: int = 300, seed: int = 7) -> dict:
    """p50/p95 of :func:`get_related` (``direction="out"``) on a random graph, projected in memory.

    The graph is built by applying ``EntityUpserted`` and ``RelationSet``
    events through :class:`mnemolog.projections.entities.projector.EntityProjector` (no log), so only the read is timed.
    """
    from mnemolog.projections.entities import projector as ents

    rng = random.Random(seed)
    conn = sqlite3.connect(":memory:", isolation_level=None)
    projector = ents.EntityProjector()
    projector.create(conn)
    stamp, meta = datetime.now(timezone.utc), Metadata()
    position = 0

    def recorded(event) -> RecordedEvent:
        nonlocal position
        position += 1
        return RecordedEvent(position, "", "", 1, type(event).__name__, 1, "bench", event, meta, stamp)

    conn.execute("BEGIN")
    projector.apply([recorded(g.EntityUpserted(entity_id=f"e{i}", name=f"entity {i}")) for i in range(n_entities)], conn)
    seen: set[tuple[int, int]] = set()
    batch = []
    while len(seen) < n_relations:
        a, b = rng.randrange(n_entities), rng.randrange(n_entities)
        if a == b or (a, b) in seen:
            continue
        seen.add((a, b))
        batch.append(recorded(g.RelationSet(source_id=f"e{a}", target_id=f"e{b}", relation_type=rng.choice(("KNOWS", "USES", "PART_OF")), weight=round(rng.uniform(0.3, 1.0), 3))))
    projector.apply(batch, conn)
    conn.execute("COMMIT")
    timings, sizes = [], []
    for _ in range(queries):
        start = f"e{rng.randrange(n_entities)}"
        t0 = time.perf_counter()
        found = ents.get_related(conn, "bench", start, depth=depth, direction="out")
        timings.append((time.perf_counter() - t0) * 1000)
        sizes.append(len(found))
    timings.sort()
    conn.close()
    return {
        "relations": n_relations, "entities": n_entities, "depth": depth, "queries": queries,
        "p50_ms": round(statistics.median(timings), 4), "p95_ms": round(timings[int(0.95 * (len(timings) - 1))], 4),
        "mean_reached": round(statistics.mean(sizes), 1),
    }


# -- the command --------------------------------------------------------------------------------


def add_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--relations", type=between(1, 10_000_000), default=100_000, metavar="N", help="relations in the BFS graph (default 100,000)")
    parser.add_argument("--entities", type=between(2, 10_000_000), default=20_000, metavar="N", help="entities in the BFS graph (default 20,000)")
    parser.add_argument("--queries", type=between(1, 1_000_000), default=300, metavar="N", help="BFS queries timed (default 300)")
    parser.add_argument("--chunks", type=between(1, 1_000_000), default=10_000, metavar="N", help="chunks for the linker and relink (default 10,000)")
    parser.add_argument("--aliases", type=between(1, 1_000_000), default=5_000, metavar="N", help="aliases in the catalogue (default 5,000)")
    add_runs_arg(parser)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")


def _relink_run(chunks: int, aliases: int, memory_type: str = "RawFileMemory") -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="mnemolog-bench-graph-") as tmp:
        return bench_relink(tmp, chunks, aliases, memory_type=memory_type)


def run(args: argparse.Namespace) -> int:
    if args.relations > (pairs := args.entities * (args.entities - 1)):  # each relation joins two entities of its own
        raise CommandError(f"--relations: {args.entities:,} entities hold at most {pairs:,} relations, not {args.relations:,}")
    runs = range(check_runs(args.runs))
    bfs = middle([bench_bfs(args.relations, args.entities, depth=3, queries=args.queries) for _ in runs], key=lambda r: r["p50_ms"])
    link = middle([bench_linker(args.chunks, args.aliases) for _ in runs], key=lambda r: r["link_s"])
    rel = middle([_relink_run(args.chunks, args.aliases) for _ in runs], key=lambda r: r["seconds"])
    relm = middle([_relink_run(args.chunks, args.aliases, "LongTermMemory") for _ in runs], key=lambda r: r["seconds"])
    figures = {"bfs3_p50_ms": bfs["p50_ms"], "link_chunks_per_s": link["chunks_per_s"], "relink_10k_s": rel["seconds"], "relink_memories_10k_s": relm["seconds"]}
    if args.json:
        print_json_line({"bfs": bfs, "linker": link, "relink": rel, "relink_memories": relm, **figures})
    rows = [
        ("BFS depth 3", f"{bfs['relations']:,} relations, {bfs['entities']:,} entities", f"p50 {bfs['p50_ms']} ms, p95 {bfs['p95_ms']} ms, {bfs['mean_reached']} reached"),
        ("linker", f"{link['n_chunks']:,} chunks x {link['n_aliases']:,} aliases", f"{link['chunks_per_s']:,} chunks/s ({link['link_s']} s)"),
        ("relink (commit)", f"{rel['chunks']:,} chunks x {rel['aliases']:,} aliases", f"{rel['seconds']} s, {rel['added']:,} edges added"),
        ("relink (commit)", f"{relm['chunks']:,} memories x {relm['aliases']:,} aliases", f"{relm['seconds']} s, {relm['added']:,} edges added"),
    ]
    if args.json:
        return 0
    print(f"median run of {args.runs} per measurement")
    for name, size, result in rows:
        print(f"{name:<16} {size:<40} {result}")
    print(" ".join(f"{k}={v}" for k, v in figures.items()))
    return 0

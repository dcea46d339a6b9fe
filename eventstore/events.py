"""Event types and their codec.

Events are frozen, tagged msgspec Structs: the tag (``type``) is the class
name, set once on :class:`DomainEvent`. Every subclass is registered by name,
with a ``schema_version``. Stored payloads of older versions are brought up to
date at read time by registered upcasters, so a type only ever gains fields
with defaults.
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar

import msgspec

from .errors import UnknownEventType, UpcastError


class DomainEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag=True, gc=False):
    """Base of every event. Subclasses are past-tense facts, never instructions."""

    schema_version: ClassVar[int] = 1
    #: Fields holding personal data, sealed with the subject's key (see :mod:`mnemolog.eventstore.sealing`).
    personal: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        register(cls)


class Metadata(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """Who and what caused an event: stored beside the payload."""

    actor: str | None = None
    correlation_id: str | None = None
    causation_id: str | None = None
    idempotency_key: str | None = None


_TYPES: dict[str, type[DomainEvent]] = {}
_generation = 0  # bumped by every registration: caches keyed on it go stale
_DECODERS: dict[str, msgspec.json.Decoder] = {}
_CURRENT: dict[tuple[str, int], msgspec.json.Decoder] = {}  # (type, current version) -> decoder
_UPCASTERS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}

encoder = msgspec.json.Encoder()
metadata_decoder = msgspec.json.Decoder(Metadata)
_dict_decoder = msgspec.json.Decoder(dict)


def register(cls: type[DomainEvent]) -> type[DomainEvent]:
    name = cls.__name__  # tag=True on the base: the tag is the class name
    existing = _TYPES.get(name)
    if existing is not None and existing is not cls and existing.__module__ != cls.__module__:
        raise ValueError(f"event type {name!r} is defined twice ({existing.__module__} and {cls.__module__})")
    global _generation
    _TYPES[name] = cls
    _generation += 1
    _DECODERS.pop(name, None)
    for key in [k for k in _CURRENT if k[0] == name]:
        del _CURRENT[key]
    return cls


def _decoder(name: str) -> msgspec.json.Decoder:
    # Built on first use: a Struct is not complete inside __init_subclass__.
    decoder = _DECODERS.get(name)
    if decoder is None:
        decoder = _DECODERS[name] = msgspec.json.Decoder(event_class(name))
    return decoder


def type_name(event_or_cls: DomainEvent | type[DomainEvent]) -> str:
    return event_or_cls.__struct_config__.tag


def event_class(name: str) -> type[DomainEvent]:
    try:
        return _TYPES[name]
    except KeyError:
        raise UnknownEventType(f"unknown event type {name!r}") from None


def registered_types() -> dict[str, type[DomainEvent]]:
    return dict(_TYPES)


def registry_generation() -> int:
    """Changes whenever an event type is registered."""
    return _generation


def upcaster(type_name_: str, from_version: int):
    """Register ``fn(payload_dict) -> payload_dict`` turning version N into N+1."""

    def decorate(fn: Callable[[dict[str, Any]], dict[str, Any]]):
        _UPCASTERS[(type_name_, from_version)] = fn
        return fn

    return decorate


def encode_payload(event: DomainEvent) -> bytes:
    return encoder.encode(event)


def decode_payload(type_: str, schema_version: int, payload: bytes | str) -> DomainEvent:
    """Decode a stored payload into the current Struct, upcasting old versions."""
    decoder = _CURRENT.get((type_, schema_version))
    if decoder is not None:
        return decoder.decode(payload)
    cls = event_class(type_)
    if schema_version == cls.schema_version:
        decoder = _CURRENT[(type_, schema_version)] = _decoder(type_)
        return decoder.decode(payload)
    if schema_version > cls.schema_version:
        raise UpcastError(
            f"{type_} is stored at schema version {schema_version}, newer than this code's {cls.schema_version}"
        )
    data = _dict_decoder.decode(payload)
    version = schema_version
    while version < cls.schema_version:
        step = _UPCASTERS.get((type_, version))
        if step is None:
            raise UpcastError(f"no upcaster for {type_} from schema version {version}")
        data = step(data)
        version += 1
    data["type"] = type_
    try:
        return msgspec.convert(data, cls)
    except msgspec.ValidationError as exc:
        raise UpcastError(f"{type_} v{schema_version} does not upcast cleanly: {exc}") from None

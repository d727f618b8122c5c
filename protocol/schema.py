"""Kafka's JSON message schemas, parsed into plain specs the codec compiler works from.

The schemas are Apache Kafka's own (``clients/src/main/resources/common/message``); kafka-python
ships them as package data, so they are read from there at run time rather than copied into
this repository. Messages kafka-python lacks (KIP-848's ConsumerGroupHeartbeat and
ConsumerGroupDescribe) have schema files of our own in ``protocol/schemas/``, written in the
same format from Kafka's documented field layout. Comments (``//``) are stripped, common
structs resolved, names turned into snake_case attribute names.
"""
from __future__ import annotations

import functools
import importlib.resources
import json
import re
from dataclasses import dataclass, field

SCHEMA_PACKAGE = "kafka.protocol.schemas.resources"
OWN_SCHEMAS = "commitgate.protocol.schemas"  # what kafka-python does not ship
NO_VERSION = 1 << 15
_COMMENT = re.compile(r"(?m)^\s*//.*$")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")

PRIMITIVES = frozenset({"bool", "int8", "int16", "uint16", "int32", "uint32", "int64",
                        "float64", "string", "bytes", "records", "uuid"})


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; ``"none"`` is the empty range."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str | None) -> Versions:
        if text is None or text == "none":
            return cls(0, -1)
        if text.endswith("+"):
            return cls(int(text[:-1]), NO_VERSION)
        low, _, high = text.partition("-")
        return cls(int(low), int(high or low))

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high


@dataclass
class FieldSpec:
    name: str  # snake_case attribute name
    type: str  # primitive, struct name, or "[]" + either
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: object
    fields: list[FieldSpec] | None  # for structs and arrays of structs
    flexible: Versions | None  # a field-level override (the header's ClientId)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        return self.element not in PRIMITIVES


@dataclass
class MessageSpec:
    name: str
    kind: str  # request, response, header, data
    api_key: int | None
    valid: Versions
    flexible: Versions
    fields: list[FieldSpec] = field(default_factory=list)


def snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def _default(spec: dict, type_: str, nullable: Versions) -> object:
    raw = spec.get("default")
    if raw == "null":
        return None
    if type_.startswith("[]"):
        return ()  # an empty array; the generated classes give each object a fresh list
    if type_ not in PRIMITIVES:
        return None  # a struct: the encoder writes its defaults when the value is None
    if type_ == "bool":
        return str(raw).lower() == "true"
    if type_ == "string":  # Kafka's brokers send null, not "", for an unset nullable string
        return raw if raw is not None else (None if nullable.high >= 0 else "")
    if type_ in ("bytes", "records"):
        return None if nullable.high >= 0 else b""
    if type_ == "uuid":
        return None  # the zero UUID; codec writes 16 zero bytes
    if type_ == "float64":
        return float(raw or 0)
    return int(str(raw), 0) if raw not in (None, "") else 0


def _field(spec: dict, common: dict[str, list[dict]]) -> FieldSpec:
    type_ = spec["type"]
    nullable = Versions.parse(spec.get("nullableVersions"))
    sub = spec.get("fields")
    element = type_.removeprefix("[]")
    if sub is None and element not in PRIMITIVES:
        sub = common[element]
    flexible = spec.get("flexibleVersions")
    return FieldSpec(
        name=snake(spec["name"]), type=type_, versions=Versions.parse(spec.get("versions")),
        nullable=nullable, tagged=Versions.parse(spec.get("taggedVersions")),
        tag=spec.get("tag"), default=_default(spec, type_, nullable),
        fields=None if sub is None else [_field(f, common) for f in sub],
        flexible=None if flexible is None else Versions.parse(flexible))


def parse(text: str) -> MessageSpec:
    data = json.loads(_COMMENT.sub("", text))
    common = {s["name"]: s["fields"] for s in data.get("commonStructs", [])}
    return MessageSpec(name=data["name"], kind=data["type"], api_key=data.get("apiKey"),
                       valid=Versions.parse(data["validVersions"]),
                       flexible=Versions.parse(data.get("flexibleVersions")),
                       fields=[_field(f, common) for f in data["fields"]])


@functools.cache
def load(name: str) -> MessageSpec:
    """The spec of one message by its schema name, e.g. ``ProduceRequest``."""
    for package in (SCHEMA_PACKAGE, OWN_SCHEMAS):
        path = importlib.resources.files(package).joinpath(name + ".json")
        if path.is_file():
            return parse(path.read_text())
    raise FileNotFoundError(f"no schema named {name}")


@functools.cache
def api_names() -> dict[int, str]:
    """API key -> API name (``ProduceRequest`` -> ``Produce``) for every request schema shipped."""
    names = {}
    entries = [e for package in (SCHEMA_PACKAGE, OWN_SCHEMAS)
               for e in importlib.resources.files(package).iterdir()]
    for entry in entries:
        if entry.name.endswith("Request.json"):
            spec = load(entry.name[:-5])
            if spec.api_key is not None:
                names[spec.api_key] = spec.name[: -len("Request")]
    return names

"""A compiler from message specs to Python classes, decoders and encoders, per version.

For each message it builds one class per struct (plain ``__slots__`` objects with the schema's
defaults) and, per version on demand, a decoder and an encoder as generated Python source, so a
request costs one call per struct and one ``unpack_from`` per field, with no per-field
interpretation of the schema at run time.

``records`` fields are never copied or parsed: a decoder returns them as memoryview slices of
the request buffer; an encoder takes a buffer or a list of buffers and hands them on as
separate chunks, so a Fetch response is a list of buffers written without joining.
"""
from __future__ import annotations

import struct
import uuid
from collections.abc import Callable
from typing import Any

from commitgate.protocol.schema import FieldSpec, MessageSpec, Versions

_NUMBERS = {"int8": "b", "int16": "h", "uint16": "H", "int32": "i", "uint32": "I",
            "int64": "q", "float64": "d"}
_STRUCTS = {name: struct.Struct(">" + code) for name, code in _NUMBERS.items()}
ZERO_UUID = uuid.UUID(int=0)
MAX_SHORT_STRING = 0x7FFF  # bytes a non-compact (int16-prefixed) string can hold
_MISSING = object()  # "argument not given" in generated constructors


class DecodeError(ValueError):
    """The bytes do not form a valid message of the expected type and version."""


class Message:
    """Base of the generated struct classes: equality and a readable repr for tests and logs."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(
            getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __repr__(self) -> str:
        body = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({body})"


# ---- primitive helpers the generated code calls ------------------------------------------------

def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise DecodeError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise DecodeError("varint longer than 5 bytes")


def uvarint(value: int) -> bytes:
    if value < 0x80:
        return _SMALL_VARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_VARINTS = [bytes([i]) for i in range(0x80)]


def _length(buf: memoryview, pos: int, compact: bool, wide: bool) -> tuple[int, int]:
    """A length prefix: -1 means null. ``wide``: int32 (bytes, arrays) rather than int16."""
    if compact:
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    code = _STRUCTS["int32" if wide else "int16"]
    if pos + code.size > len(buf):
        raise DecodeError("truncated length")
    return code.unpack_from(buf, pos)[0], pos + code.size


def _span(buf: memoryview, pos: int, n: int, what: str) -> int:
    end = pos + n
    if n < 0 or end > len(buf):
        raise DecodeError(f"{what} of {n} bytes runs past the end of the message")
    return end


def _read_string(buf: memoryview, pos: int, compact: bool, nullable: bool):
    n, pos = _length(buf, pos, compact, False)
    if n < 0:
        if not nullable:
            raise DecodeError("null in a non-nullable string")
        return None, pos
    end = _span(buf, pos, n, "string")
    try:
        return str(buf[pos:end], "utf-8"), end
    except UnicodeDecodeError as exc:
        raise DecodeError(f"string is not UTF-8: {exc}") from None


def _read_bytes(buf: memoryview, pos: int, compact: bool, nullable: bool, copy: bool):
    n, pos = _length(buf, pos, compact, True)
    if n < 0:
        if not nullable:
            raise DecodeError("null in non-nullable bytes")
        return None, pos
    end = _span(buf, pos, n, "bytes")
    return (bytes(buf[pos:end]) if copy else buf[pos:end]), end


def _read_count(buf: memoryview, pos: int, compact: bool, nullable: bool):
    n, pos = _length(buf, pos, compact, True)
    if n < 0 and not nullable:
        raise DecodeError("null in a non-nullable array")
    if n > len(buf) - pos:
        raise DecodeError(f"array of {n} elements cannot fit in {len(buf) - pos} bytes")
    return n, pos


def _read_uuid(buf: memoryview, pos: int):
    end = _span(buf, pos, 16, "uuid")
    return uuid.UUID(bytes=bytes(buf[pos:end])), end


def _skip_tags(buf: memoryview, pos: int, known: dict[int, Callable]) -> tuple[dict, int]:
    """Read a tagged-field section; returns {tag: decoded value} for the tags we know."""
    count, pos = read_uvarint(buf, pos)
    found = {}
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        end = _span(buf, pos, size, "tagged field")
        if tag in known:
            found[tag] = known[tag](buf[:end], pos)[0]
        pos = end
    return found, pos


def _write_string(buf: bytearray, value: str | None, compact: bool, nullable: bool) -> None:
    if value is None:
        if nullable:
            buf += b"\x00" if compact else b"\xff\xff"
            return
        value = ""  # a field nullable only in later versions
    data = value.encode()
    buf += uvarint(len(data) + 1) if compact else _STRUCTS["int16"].pack(len(data))
    buf += data


def _write_message(buf: bytearray, value: str | None, compact: bool, nullable: bool) -> None:
    """An error text, cut to what an int16 length can carry: messages quote client input, which
    may be that long itself, and one such text must not fail the whole response."""
    if value is not None and not compact:
        data = value.encode()
        if len(data) > MAX_SHORT_STRING:
            value = data[:MAX_SHORT_STRING - 3].decode(errors="ignore") + "..."
    _write_string(buf, value, compact, nullable)


def _write_bytes(buf: bytearray, value, compact: bool) -> None:
    if value is None:
        buf += b"\x00" if compact else b"\xff\xff\xff\xff"
        return
    buf += uvarint(len(value) + 1) if compact else _STRUCTS["int32"].pack(len(value))
    buf += value


def _write_count(buf: bytearray, value, compact: bool) -> None:
    if value is None:
        buf += b"\x00" if compact else b"\xff\xff\xff\xff"
    else:
        buf += uvarint(len(value) + 1) if compact else _STRUCTS["int32"].pack(len(value))


def _write_uuid(buf: bytearray, value: uuid.UUID | None) -> None:
    buf += (value or ZERO_UUID).bytes


class Chunks:
    """Where an encoder puts its output: a list of buffers; record sets go in uncopied."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: list = []

    def records(self, buf: bytearray, value, compact: bool) -> bytearray:
        if value is None:
            buf += b"\x00" if compact else b"\xff\xff\xff\xff"
            return buf
        parts = value if isinstance(value, list) else [value]
        total = sum(map(len, parts))
        buf += uvarint(total + 1) if compact else _STRUCTS["int32"].pack(total)
        if total < 512:  # small sets are cheaper copied than sent as separate buffers
            for part in parts:
                buf += part
            return buf
        self.parts.append(buf)
        self.parts.extend(parts)
        return bytearray()


def _write_tags(buf: bytearray, tags: list[tuple[int, bytearray]]) -> None:
    buf += uvarint(len(tags))
    for tag, data in sorted(tags, key=lambda t: t[0]):
        buf += uvarint(tag)
        buf += uvarint(len(data))
        buf += data


# ---- classes -------------------------------------------------------------------------------------

def _init_source(fields: list[FieldSpec]) -> str:
    """``__init__`` taking every field as a keyword with the schema's default; arrays that
    default to empty get a fresh list per object."""
    if not fields:
        return "def __init__(self):\n    pass"
    args, body = [], []
    for spec in fields:
        fresh_list = spec.is_array and spec.default is not None
        default = "_MISSING" if fresh_list else None if spec.is_struct else repr(spec.default)
        args.append(f"{spec.name}={default}")
        # a sentinel, not None: a nullable array may be set to None explicitly
        value = f"[] if {spec.name} is _MISSING else {spec.name}" if fresh_list else spec.name
        body.append(f"    self.{spec.name} = {value}")
    return f"def __init__(self, *, {', '.join(args)}):\n" + "\n".join(body)


def build_classes(message: MessageSpec) -> type:
    """One class per struct of the message; struct classes hang off the message class."""
    structs: dict[str, type] = {}

    def make(name: str, fields: list[FieldSpec]) -> type:
        for spec in fields:
            if spec.fields is not None and spec.element not in structs:
                make(spec.element, spec.fields)
        namespace: dict[str, Any] = {}
        # the source is generated here from Kafka's schemas, never from input: the schema
        # compiler's design (docs/architecture.md)
        exec(compile(_init_source(fields), f"<{message.name}.{name}>", "exec"),  # noqa: S102
             {"_MISSING": _MISSING}, namespace)
        cls = type(name, (Message,), {"__slots__": tuple(f.name for f in fields),
                                      "__init__": namespace["__init__"]})
        structs[name] = cls
        return cls

    root = make(message.name, message.fields)
    for name, cls in structs.items():
        if cls is not root:
            setattr(root, name, cls)
    root.spec = message
    root.struct_classes = structs
    return root


# ---- code generation -------------------------------------------------------------------------------

class _Generator:
    """Writes the decoder and encoder functions of one message version as Python source."""

    def __init__(self, message: MessageSpec, version: int, classes: dict[str, type]) -> None:
        self.message = message
        self.version = version
        self.classes = classes
        self.lines: list[str] = []
        self.env: dict[str, Any] = {
            "DecodeError": DecodeError, "read_uvarint": read_uvarint, "uvarint": uvarint,
            "_read_string": _read_string, "_read_bytes": _read_bytes,
            "_read_count": _read_count, "_read_uuid": _read_uuid,
            "_skip_tags": _skip_tags, "_write_string": _write_string,
            "_write_bytes": _write_bytes, "_write_count": _write_count,
            "_write_uuid": _write_uuid, "_write_tags": _write_tags, "ZERO_UUID": ZERO_UUID,
            "_write_message": _write_message,
            "_NO_TAGS": {},
        }
        for name, code in _STRUCTS.items():
            self.env[f"S_{name}"] = code
        for name, cls in classes.items():
            self.env[f"C_{name}"] = cls
        self.done: set[str] = set()

    def flexible(self, spec: FieldSpec | None = None) -> bool:
        if spec is not None and spec.flexible is not None:
            return self.version in spec.flexible
        return self.version in self.message.flexible

    def present(self, fields: list[FieldSpec]) -> list[FieldSpec]:
        return [f for f in fields if self.version in f.versions]

    def _begin(self, fn: str, fields: list[FieldSpec], nested: Callable
               ) -> list[FieldSpec] | None:
        """The fields this version has, once the functions of its nested structs exist (made
        by ``nested``); None when ``fn`` was generated already."""
        if fn in self.done:
            return None
        self.done.add(fn)
        present = self.present(fields)
        for spec in present:
            if spec.fields is not None:
                nested(spec.element, spec.fields)
        return present

    # -- decoding

    def decoder(self, name: str, fields: list[FieldSpec]) -> str:
        fn = f"d_{name}"
        present = self._begin(fn, fields, self.decoder)
        if present is None:
            return fn
        flexible = self.flexible()
        out = [f"def {fn}(buf, pos):", f"    o = C_{name}()"]
        for spec in present:
            if flexible and self.version in spec.tagged:
                continue
            out += ["    " + line for line in self.decode_field(spec, "v")]
            out.append(f"    o.{spec.name} = v")
        if flexible:
            tagged = [f for f in present if self.version in f.tagged]
            table = self.tag_table(name, tagged)
            # most structs carry no tagged fields: one byte, read inline
            out += ["    if buf[pos] == 0:", "        pos += 1", "    else:",
                    f"        tags, pos = _skip_tags(buf, pos, {table})"]
            for spec in tagged:
                out.append(f"        if {spec.tag} in tags: o.{spec.name} = tags[{spec.tag}]")
        out.append("    return o, pos")
        self.lines += out
        return fn

    def tag_table(self, owner: str, tagged: list[FieldSpec]) -> str:
        if not tagged:
            return "_NO_TAGS"
        entries = []
        for spec in tagged:
            fn = f"t_{owner}_{spec.name}"
            body = ["    " + line for line in self.decode_field(spec, "v")]
            self.lines += [f"def {fn}(buf, pos):", *body, "    return v, pos"]
            entries.append(f"{spec.tag}: {fn}")
        name = f"TAGS_{owner}"
        self.lines.append(f"{name} = {{{', '.join(entries)}}}")
        return name

    def decode_field(self, spec: FieldSpec, target: str) -> list[str]:
        compact = self.flexible(spec)
        nullable = self.version in spec.nullable
        if spec.is_array:
            item = self.decode_element(spec, "e")
            return [f"n, pos = _read_count(buf, pos, {compact}, {nullable})",
                    f"if n < 0: {target} = None",
                    "else:",
                    f"    {target} = []",
                    "    for _ in range(n):",
                    *["        " + line for line in item],
                    f"        {target}.append(e)"]
        return self.decode_element(spec, target)

    def decode_element(self, spec: FieldSpec, target: str) -> list[str]:
        compact = self.flexible(spec)
        nullable = self.version in spec.nullable and not spec.is_array  # arrays: the array
        kind = spec.element
        if spec.is_struct:
            call = f"{target}, pos = d_{kind}(buf, pos)"
            if nullable:  # a nullable struct is prefixed by an int8 presence marker
                return ["m = S_int8.unpack_from(buf, pos)[0]", "pos += 1",
                        f"if m < 0: {target} = None",
                        f"else: {call}"]
            return [call]
        if kind in _NUMBERS:
            # struct.error on a short buffer becomes DecodeError in MessageCodec.decode
            return [f"{target} = S_{kind}.unpack_from(buf, pos)[0]",
                    f"pos += {_STRUCTS[kind].size}"]
        if kind == "bool":
            return [f"{target} = S_int8.unpack_from(buf, pos)[0] != 0", "pos += 1"]
        if kind == "string":
            return [f"{target}, pos = _read_string(buf, pos, {compact}, {nullable})"]
        if kind in ("bytes", "records"):
            copy = kind == "bytes"
            return [f"{target}, pos = _read_bytes(buf, pos, {compact}, {nullable}, {copy})"]
        if kind == "uuid":
            return [f"{target}, pos = _read_uuid(buf, pos)"]
        raise TypeError(f"{self.message.name}: unknown type {kind}")

    # -- encoding

    def encoder(self, name: str, fields: list[FieldSpec]) -> str:
        fn = f"e_{name}"
        present = self._begin(fn, fields, self.encoder)
        if present is None:
            return fn
        flexible = self.flexible()
        out = [f"def {fn}(o, w, buf):"]
        for spec in present:
            if flexible and self.version in spec.tagged:
                continue
            out += ["    " + line for line in self.encode_field(spec, f"o.{spec.name}")]
        if flexible:
            tagged = [f for f in present if self.version in f.tagged]
            out.append("    tags = []")
            for spec in tagged:
                out += [f"    v = o.{spec.name}",
                        f"    if v is not None and v != {spec.default!r} and v != []:",
                        "        t = bytearray()",
                        *["        " + line for line in
                          self.encode_field(spec, "v", buf="t")],
                        f"        tags.append(({spec.tag}, t))"]
            out.append("    _write_tags(buf, tags)")
        out.append("    return buf")
        self.lines += out
        return fn

    def encode_field(self, spec: FieldSpec, value: str, buf: str = "buf") -> list[str]:
        compact = self.flexible(spec)
        if spec.is_array:
            item = self.encode_element(spec, "e", buf)
            return [f"a = {value}",
                    f"_write_count({buf}, a, {compact})",
                    "if a:",
                    "    for e in a:",
                    *["        " + line for line in item]]
        return self.encode_element(spec, value, buf)

    def encode_element(self, spec: FieldSpec, value: str, buf: str) -> list[str]:
        compact = self.flexible(spec)
        nullable = self.version in spec.nullable and not spec.is_array  # arrays: the array
        kind = spec.element
        if spec.is_struct:
            if nullable:
                return [f"if {value} is None: {buf} += b'\\xff'",
                        "else:",
                        f"    {buf} += b'\\x01'",
                        f"    {buf} = e_{kind}({value}, w, {buf})"]
            return [f"{buf} = e_{kind}({value} if {value} is not None else C_{kind}(), w, {buf})"]
        if kind in _NUMBERS:
            return [f"{buf} += S_{kind}.pack({value})"]
        if kind == "bool":
            return [f"{buf} += b'\\x01' if {value} else b'\\x00'"]
        if kind == "string":
            write = "_write_message" if spec.name.endswith("error_message") else "_write_string"
            return [f"{write}({buf}, {value}, {compact}, {nullable})"]
        if kind == "bytes":
            return [f"_write_bytes({buf}, {value}, {compact})"]
        if kind == "records":
            if buf != "buf":
                raise TypeError(f"{self.message.name}: records inside a tagged field")
            return [f"buf = w.records(buf, {value}, {compact})"]
        if kind == "uuid":
            return [f"_write_uuid({buf}, {value})"]
        raise TypeError(f"{self.message.name}: unknown type {kind}")

    def compile(self) -> tuple[Callable, Callable]:
        root = self.message.name
        self.decoder(root, self.message.fields)
        self.encoder(root, self.message.fields)
        source = "\n".join(self.lines) + "\n"
        label = f"<{self.message.name} v{self.version}>"
        exec(compile(source, label, "exec"), self.env)  # noqa: S102 - generated from schemas
        return self.env[f"d_{root}"], self.env[f"e_{root}"]


class MessageCodec:
    """Classes plus per-version decode/encode functions of one message, compiled on first use."""

    def __init__(self, spec: MessageSpec) -> None:
        self.spec = spec
        self.cls = build_classes(spec)
        self._compiled: dict[int, tuple[Callable, Callable]] = {}

    def _functions(self, version: int) -> tuple[Callable, Callable]:
        found = self._compiled.get(version)
        if found is None:
            if version not in self.spec.valid:
                raise DecodeError(f"{self.spec.name} has no version {version}")
            found = _Generator(self.spec, version, self.cls.struct_classes).compile()
            self._compiled[version] = found
        return found

    def decode(self, buf: memoryview, version: int, pos: int = 0) -> tuple[Any, int]:
        """(message, position after it). Raises DecodeError on malformed input."""
        decode = self._functions(version)[0]
        try:
            return decode(buf, pos)
        except (IndexError, struct.error, TypeError) as exc:  # a malformed buffer, not a bug
            raise DecodeError(f"{self.spec.name} v{version}: {exc}") from None

    def encode_into(self, message: Any, version: int, chunks: Chunks, buf: bytearray
                    ) -> bytearray:
        """Append the encoding to ``buf``; record sets go to ``chunks`` uncopied."""
        return self._functions(version)[1](message, chunks, buf)

    def encode(self, message: Any, version: int) -> bytes:
        """The whole encoding as one bytes object (tools and tests)."""
        chunks = Chunks()
        chunks.parts.append(self.encode_into(message, version, chunks, bytearray()))
        return b"".join(chunks.parts)

    def __repr__(self) -> str:
        return f"MessageCodec({self.spec.name}, versions {self.spec.valid.low}-" \
               f"{min(self.spec.valid.high, 99)})"


def versions_of(spec: MessageSpec) -> range:
    return range(spec.valid.low, min(spec.valid.high, 99) + 1)


__all__ = [
    "Chunks",
    "DecodeError",
    "Message",
    "MessageCodec",
    "Versions",
    "read_uvarint",
    "uvarint",
    "versions_of",
]

"""One module per Kafka API. Each module declares ``API_KEY``, ``VERSIONS`` (the versions it
serves) and ``async def handle(ctx, request)``, which returns the response object (or None when
the client expects no response, as Produce with acks=0); ``unsupported_version()``, where a
module has it, is the answer to a version outside ``VERSIONS`` (ApiVersions: KIP-511's v0
reply), which otherwise closes the connection. Modules are found by scanning this
package, so adding an API is adding a file; two modules declaring one ``API_KEY`` fail the scan
(the broker's start), so one never silently replaces the other.
"""
from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from commitgate.protocol import messages


@dataclass(frozen=True)
class Handler:
    api_key: int
    name: str
    min_version: int
    max_version: int
    advertised_min: int  # what ApiVersions shows; Produce shows 0 (librdkafka, KAFKA-18659)
    handle: Callable[[Any, Any], Awaitable[Any]]
    unsupported_version: Callable[[], Any] | None  # the answer to a version not served, if any

    def accepts(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


@functools.cache
def all_handlers() -> dict[int, Handler]:
    found: dict[int, Handler] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        if not hasattr(module, "API_KEY"):
            continue
        if module.API_KEY in found:
            raise RuntimeError(f"{info.name}: API key {module.API_KEY} is already served by "
                               f"{found[module.API_KEY].handle.__module__}")
        low, high = module.VERSIONS
        spec = messages.request(module.API_KEY).spec
        if low < spec.valid.low or high > spec.valid.high:
            raise RuntimeError(f"{info.name}: versions {low}-{high} outside the schema's "
                               f"{spec.valid.low}-{spec.valid.high}")
        found[module.API_KEY] = Handler(module.API_KEY, messages.api_name(module.API_KEY), low,
                                        high, getattr(module, "ADVERTISED_MIN", low),
                                        module.handle, getattr(module, "unsupported_version", None))
    return found

"""Every Kafka message by name or API key, compiled from the schemas on first use.

``messages.get("ProduceResponse").cls`` is the generated class; ``request(0)`` and
``response(0)`` are the codecs of an API key.
"""
from __future__ import annotations

import functools

from commitgate.protocol import schema
from commitgate.protocol.codec import MessageCodec


@functools.cache
def get(name: str) -> MessageCodec:
    return MessageCodec(schema.load(name))


def request(api_key: int) -> MessageCodec:
    return get(schema.api_names()[api_key] + "Request")


def response(api_key: int) -> MessageCodec:
    return get(schema.api_names()[api_key] + "Response")


def api_name(api_key: int) -> str:
    return schema.api_names().get(api_key, f"api {api_key}")

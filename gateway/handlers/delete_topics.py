"""DeleteTopics (key 20), v1-6: delete topics by name (v1-5) or by name or id (v6), as
Kafka's controller does: deletion is immediate, so the request never waits for its timeout.

``delete.topic.enable=false`` refuses every topic: TOPIC_DELETION_DISABLED (v3+), INVALID_REQUEST
before. Names or ids given twice, entries with both or neither, and a name whose id was also
given are INVALID_REQUEST; an unknown name is UNKNOWN_TOPIC_OR_PARTITION, an unknown id
UNKNOWN_TOPIC_ID. A deleted topic's data is gone for good: re-creating the name gives an empty
topic with a new id (the store ignores entries older than a topic's creation).

Internal topics (``__consumer_offsets``, ``__transaction_state``) are refused with
INVALID_REQUEST and a message naming the topic (v5+ carries it). Kafka 3.9 without an
authorizer deletes them (only its command-line tools refuse, client side), and every group's
committed offsets are then gone; with an authorizer it answers TOPIC_AUTHORIZATION_FAILED,
which here, with no ACLs to change, would send the operator looking for one. The table's
fsync runs off the event loop (``MessageStore.delete_topic_off_loop``).
"""
from __future__ import annotations

import collections
import logging
import uuid

from commitgate.engine import StoreStatus
from commitgate.gateway.broker import STORE_ERRORS
from commitgate.gateway.groups.offsets_topic import internal_refusal, is_internal
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import TOPIC
from commitgate.gateway.security.authorizer import DELETE
from commitgate.protocol import messages
from commitgate.protocol.codec import ZERO_UUID
from commitgate.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

API_KEY = 20
VERSIONS = (1, 6)
UNKNOWN_NAME = "This server does not host this topic-partition."
UNKNOWN_ID = "This server does not host this topic ID."

Response = messages.get("DeleteTopicsResponse").cls
Result = Response.DeletableTopicResult


def _wanted(ctx: RequestContext, request) -> list[tuple[str | None, uuid.UUID]]:
    if ctx.api_version >= 6:
        return [(t.name, t.topic_id or ZERO_UUID) for t in request.topics]
    return [(name, ZERO_UUID) for name in request.topic_names]


def _refusal(name: str | None, topic_id: uuid.UUID, names: collections.Counter,
             ids: collections.Counter) -> tuple[ErrorCode, str] | None:
    """Kafka's checks of one entry before any lookup."""
    if name is None and topic_id == ZERO_UUID:
        return ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified."
    if name is not None and topic_id != ZERO_UUID:
        return ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id."
    if name is not None and names[name] > 1:
        return ErrorCode.INVALID_REQUEST, "Duplicate topic name."
    if name is None and ids[topic_id] > 1:
        return ErrorCode.INVALID_REQUEST, "Duplicate topic id."
    return None


def _resolve(ctx: RequestContext, wanted: list[tuple[str | None, uuid.UUID]]) -> list:
    """One result per distinct entry; the successes are still to be carried out. As in Kafka,
    an id that a name given alongside maps to gets no entry of its own."""
    broker = ctx.broker
    names = collections.Counter(n for n, i in wanted if n is not None and i == ZERO_UUID)
    ids = collections.Counter(i for n, i in wanted if n is None)
    named = (broker.topic(n) for n, count in names.items() if count == 1)
    clashes = {uuid.UUID(r.topic_id) for r in named if r is not None} & set(ids)
    results, seen = [], set()
    for name, topic_id in wanted:
        if (name, topic_id) in seen or (name is None and topic_id in clashes):
            continue
        seen.add((name, topic_id))
        results.append(_result(ctx, name, topic_id, _refusal(name, topic_id, names, ids),
                               clashes))
    return results


def _result(ctx: RequestContext, name: str | None, topic_id: uuid.UUID,
            refusal: tuple[ErrorCode, str] | None, clashes: set[uuid.UUID]) -> object:
    record = None
    if refusal is None:
        record = ctx.broker.topic(name) if name is not None else ctx.broker.topic_by_id(topic_id)
    if refusal is None and record is None:
        refusal = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_NAME) if name is not None \
            else (ErrorCode.UNKNOWN_TOPIC_ID, UNKNOWN_ID)
    if refusal is None and not ctx.allowed(DELETE, TOPIC, record.name):
        refusal = ErrorCode.TOPIC_AUTHORIZATION_FAILED, None
    if refusal is None and is_internal(record.name):
        name = record.name  # named in the answer when asked for by id
        refusal = ErrorCode.INVALID_REQUEST, internal_refusal(record.name, "delete")
    if refusal is None and uuid.UUID(record.topic_id) in clashes:
        topic_id = uuid.UUID(record.topic_id)
        refusal = (ErrorCode.INVALID_REQUEST,
                   "The provided topic name maps to an ID that was already supplied.")
    if refusal is not None:
        return Result(name=name, topic_id=topic_id, error_code=refusal[0],
                      error_message=refusal[1])
    return Result(name=record.name, topic_id=uuid.UUID(record.topic_id),
                  error_code=ErrorCode.NONE, error_message=None)


async def _delete(ctx: RequestContext, result) -> None:
    done = await ctx.broker.store.delete_topic_off_loop(result.name)
    if done.status is not StoreStatus.OK:
        result.error_code, result.error_message = STORE_ERRORS[done.status], done.error
        return
    log.info("deleted topic %s (id %s) for %s", result.name, result.topic_id, ctx.who())


def _disabled(ctx: RequestContext, wanted) -> object:
    code = ErrorCode.TOPIC_DELETION_DISABLED if ctx.api_version >= 3 else ErrorCode.INVALID_REQUEST
    log.info("topic deletion refused for %s: delete.topic.enable is false", ctx.who())
    return Response(throttle_time_ms=0, responses=[
        Result(name=name, topic_id=topic_id, error_code=code) for name, topic_id in wanted])


async def handle(ctx: RequestContext, request) -> object:
    wanted = _wanted(ctx, request)
    if not ctx.broker.config.delete_topic_enable:
        return _disabled(ctx, wanted)
    results = _resolve(ctx, wanted)
    for result in results:
        if result.error_code == ErrorCode.NONE:
            await _delete(ctx, result)
        elif result.error_code == ErrorCode.INVALID_REQUEST and is_internal(result.name or ""):
            log.warning("deleting internal topic %s refused for %s", result.name, ctx.who())
    return Response(throttle_time_ms=0, responses=results)

"""TxnOffsetCommit (key 28): a transactional producer commits a group's offsets inside its
transaction (``sendOffsetsToTransaction``). They are written to ``__consumer_offsets`` at once,
durably, but OffsetFetch sees them only after the transaction commits; an abort drops them
(``OffsetManager.end_txn``, called by EndTxn's markers).

As Kafka's KafkaApis and group coordinator: partitions of unknown topics get
UNKNOWN_TOPIC_OR_PARTITION; an empty group id INVALID_GROUP_ID; then the transaction
coordinator checks the producer (INVALID_PRODUCER_ID_MAPPING, INVALID_PRODUCER_EPOCH for a
fenced one, INVALID_TXN_STATE when AddOffsetsToTxn did not add the group); then the group's
checks: v3+ carry the member id, generation and group.instance.id, checked as OffsetCommit
does (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) but whatever the rebalance
state; v0-2 commits without them are accepted for a classic group. Metadata longer than
``offset.metadata.max.bytes`` gets OFFSET_METADATA_TOO_LARGE. v5 (transactions v2, where this
request also adds the group to the transaction) is not served.
"""
from __future__ import annotations

import logging

from commitgate.gateway.groups.offsets import Commit, CommitRequest
from commitgate.gateway.groups.topics import partition_error
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import GROUP, TOPIC, TRANSACTIONAL_ID
from commitgate.gateway.security.authorizer import READ, WRITE
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

API_KEY = 28
VERSIONS = (0, 4)

Response = messages.get("TxnOffsetCommitResponse").cls


def _group_error(ctx: RequestContext, request) -> ErrorCode:
    """The error of every partition the request may commit, before the group's checks."""
    if not request.group_id:
        return ErrorCode.INVALID_GROUP_ID
    error = ctx.broker.transactions.check_offset_commit(
        request.transactional_id, request.producer_id, request.producer_epoch, request.group_id)
    # Kafka's partition verification answers a fenced producer this way (its clients expect it)
    return ErrorCode.INVALID_PRODUCER_EPOCH if error is ErrorCode.PRODUCER_FENCED else error


async def handle(ctx: RequestContext, request) -> object:
    broker = ctx.broker
    errors: list[list[ErrorCode]] = []  # per topic, per partition
    commits: list[Commit] = []
    places: list[tuple[int, int]] = []  # where each commit's error goes
    refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED \
        if not ctx.allowed(WRITE, TRANSACTIONAL_ID, request.transactional_id) else \
        ErrorCode.GROUP_AUTHORIZATION_FAILED if not ctx.allowed(READ, GROUP, request.group_id) \
        else None
    for ti, topic in enumerate(request.topics):
        denied = refused or (ErrorCode.TOPIC_AUTHORIZATION_FAILED
                             if not ctx.allowed(READ, TOPIC, topic.name) else None)
        errors.append([denied or partition_error(broker, topic.name, p.partition_index, False)
                       for p in topic.partitions])
        for pi, p in enumerate(topic.partitions):
            if errors[ti][pi] is ErrorCode.NONE:
                commits.append(Commit(topic.name, p.partition_index, p.committed_offset,
                                      p.committed_leader_epoch, p.committed_metadata))
                places.append((ti, pi))
    if commits:
        results = await _commit(ctx, request, commits)
        for (ti, pi), error in zip(places, results):
            errors[ti][pi] = error
    return Response(throttle_time_ms=0, topics=[
        Response.TxnOffsetCommitResponseTopic(name=topic.name, partitions=[
            Response.TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                                      error_code=error)
            for p, error in zip(topic.partitions, row)])
        for topic, row in zip(request.topics, errors)])


async def _commit(ctx: RequestContext, request, commits: list[Commit]) -> list[ErrorCode]:
    """One error per commit. No await between the producer's check and the write."""
    error = _group_error(ctx, request)
    if error is not ErrorCode.NONE:
        log.info("TxnOffsetCommit of group %r for transactional id %r (producer %d epoch %d) "
                 "from %s refused: %s", request.group_id, request.transactional_id,
                 request.producer_id, request.producer_epoch, ctx.who(), error.name)
        return [error] * len(commits)
    return await ctx.broker.groups.offsets.txn_commit(
        CommitRequest(request.group_id, request.generation_id, request.member_id,
                      request.group_instance_id, -1, commits, ctx.api_version),
        request.producer_id, request.producer_epoch)

"""ConsumerGroupDescribe (key 69): a KIP-848 group's state, epochs, assignor and members, each
with its subscription, current assignment and target assignment (topics by id and name).

An unknown id, or one held by a classic group, gets GROUP_ID_NOT_FOUND (Kafka's messages); an
empty id INVALID_GROUP_ID. Authorized operations, when asked for, are every group operation
(no authorizer, as Kafka answers without one). v1 adds each
member's MemberType (KIP-1099): always 1, a consumer protocol member, as classic members cannot
join a consumer group here.
"""
from __future__ import annotations

from commitgate.gateway.acls import GROUP_OPERATIONS, OPERATIONS_NOT_REQUESTED
from commitgate.gateway.groups.consumer_group import Assignment, ConsumerGroup
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.security.acl_store import GROUP
from commitgate.gateway.security.authorizer import DESCRIBE
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

API_KEY = 69
VERSIONS = (0, 1)
CONSUMER_MEMBER_TYPE = 1  # MemberType: -1 unknown, 0 classic, 1 consumer

Response = messages.get("ConsumerGroupDescribeResponse").cls


def _assignment(ctx: RequestContext, assignment: Assignment) -> object:
    topics = []
    for topic_id, parts in sorted(assignment.items()):
        record = ctx.broker.topic_by_id(topic_id)
        if record is not None and parts:  # a deleted topic is left out, as Kafka does
            topics.append(Response.TopicPartitions(topic_id=topic_id, topic_name=record.name,
                                                   partitions=sorted(parts)))
    return Response.Assignment(topic_partitions=topics)


def _described(ctx: RequestContext, group: ConsumerGroup, operations: int) -> object:
    assignor = group.preferred_assignor() or ctx.broker.config.consumer_group_assignors[0]
    return Response.DescribedGroup(
        error_code=ErrorCode.NONE, error_message=None, group_id=group.group_id,
        group_state=group.state.value, group_epoch=group.epoch,
        assignment_epoch=group.assignment_epoch, assignor_name=assignor,
        authorized_operations=operations, members=[
            Response.Member(member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                            member_epoch=m.epoch, client_id=m.client_id,
                            client_host=m.client_host, subscribed_topic_names=list(m.subscribed),
                            subscribed_topic_regex=m.regex,
                            assignment=_assignment(ctx, m.assigned),
                            target_assignment=_assignment(ctx, group.target.get(m.member_id, {})),
                            member_type=CONSUMER_MEMBER_TYPE)
            for m in group.members.values()])


def _describe(ctx: RequestContext, group_id: str, operations: int) -> object:
    groups = ctx.broker.groups
    if not group_id:
        return Response.DescribedGroup(group_id=group_id, error_code=ErrorCode.INVALID_GROUP_ID,
                                       error_message="Group id must not be empty.")
    if not ctx.allowed(DESCRIBE, GROUP, group_id):
        return Response.DescribedGroup(group_id=group_id,
                                       error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                       error_message=None)
    group = groups.consumer_groups.get(group_id)
    if group is not None:
        return _described(ctx, group, ctx.operations(GROUP, group_id, operations)
                          if operations != OPERATIONS_NOT_REQUESTED else operations)
    message = f"Group {group_id} is not a consumer group" if group_id in groups.groups \
        else f"Group {group_id} not found."
    return Response.DescribedGroup(group_id=group_id, error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                                   error_message=message)


async def handle(ctx: RequestContext, request) -> object:
    operations = GROUP_OPERATIONS if request.include_authorized_operations \
        else OPERATIONS_NOT_REQUESTED
    return Response(throttle_time_ms=0,
                    groups=[_describe(ctx, g, operations) for g in request.group_ids])

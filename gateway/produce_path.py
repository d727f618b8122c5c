"""The produce path: one partition's record set validated as Kafka's LogValidator does, checked
against its idempotent or transactional producer, appended. The Produce handler
(``handlers/produce.py``) and UDP ingest (``udp_ingest.py``) both append through it.

Batches are checked header first (magic, lengths, CRC-32C, record count, size limit, codec),
then record by record, by the C walk or its Python twin (framing, offset deltas, count, keys on
compacted topics, timestamps within message.timestamp.before/after.max.ms), decompressing in
bounded pieces; then the idempotent producer's epoch and sequence. A bad batch is never stored:
refusals are CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TIMESTAMP or MESSAGE_TOO_LARGE, with
KIP-467 record errors where Kafka gives them. As in Kafka, a batch's maxTimestamp is its newest
record's.
"""
from __future__ import annotations

import logging
import time

from commitgate.engine import StoreStatus
from commitgate.gateway.broker import STORE_ERRORS, Broker
from commitgate.gateway.groups.offsets_topic import is_internal
from commitgate.gateway.request_context import RequestContext
from commitgate.gateway.topic_configs import TOPIC_CONFIGS
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode
from commitgate.protocol.record_batch import (
    CODECS,
    INT64_MAX,
    INT64_MIN,
    RecordProblem,
    RecordRules,
    RecordSetCheck,
    RecordSetStatus,
    set_max_timestamp,
    validate_record_set,
)

log = logging.getLogger(__name__)

# an append answers with a partition's entry of the Produce response, whoever asked
_RESPONSE = messages.get("ProduceResponse").cls
PartitionOut = _RESPONSE.PartitionProduceResponse
RecordErrorOut = _RESPONSE.BatchIndexAndErrorMessage

RECORD_SET_ERRORS = {
    RecordSetStatus.EMPTY: ErrorCode.INVALID_RECORD,
    RecordSetStatus.CORRUPT_MESSAGE: ErrorCode.CORRUPT_MESSAGE,
    RecordSetStatus.UNSUPPORTED_MAGIC: ErrorCode.INVALID_RECORD,
    RecordSetStatus.RECORD_TOO_LARGE: ErrorCode.MESSAGE_TOO_LARGE,
    RecordSetStatus.INVALID_RECORD: ErrorCode.INVALID_RECORD,
    RecordSetStatus.INVALID_TIMESTAMP: ErrorCode.INVALID_TIMESTAMP,
}
TIMESTAMP_TYPE, BEFORE_MAX_MS, AFTER_MAX_MS = (
    "message.timestamp.type", "message.timestamp.before.max.ms", "message.timestamp.after.max.ms")


def fail(out, code: ErrorCode, message: str | None = None):
    out.error_code = code
    out.error_message = message
    return out


def _topic_config(broker: Broker, topic, name: str) -> str:
    value = topic.configs.get(name)
    return value if value is not None else TOPIC_CONFIGS[name].default(broker.config)


def _rules(broker: Broker, topic) -> RecordRules:
    """What the topic asks of each record: a key when compacted; for CreateTime topics a
    timestamp within message.timestamp.before.max.ms / after.max.ms of now (Kafka's
    LogValidator.validateTimestamp; LogAppendTime topics overwrite it)."""
    need_keys = broker.store.compacted(topic.name)
    if _topic_config(broker, topic, TIMESTAMP_TYPE) != "CreateTime":
        return RecordRules(need_keys)
    now = int(time.time() * 1000)
    low = max(INT64_MIN, now - int(_topic_config(broker, topic, BEFORE_MAX_MS)))
    high = min(INT64_MAX, now + int(_topic_config(broker, topic, AFTER_MAX_MS)))
    return RecordRules(need_keys, (low, high))


def _refuse_records(out, check: RecordSetCheck, rules: RecordRules, where: str):
    """A refused record set: with KIP-467 record errors when single records were at fault (a
    missing key, a timestamp out of range), with Kafka's texts; else the batch's fault."""
    if not check.record_error_count:
        return fail(out, RECORD_SET_ERRORS[check.status], f"{check.detail} in topic partition "
                                                           f"{where}")
    low, high = rules.timestamps
    texts = [
        f"Compacted topic cannot accept message without key in topic partition {where}."
        if e.problem is RecordProblem.KEY_MISSING else
        f"Timestamp {e.timestamp} of message with offset {e.index} is out of range. The "
        f"timestamp should be within [{low}, {high}]" for e in check.record_errors]
    out.record_errors = [RecordErrorOut(batch_index=e.index, batch_index_error_message=text)
                         for e, text in zip(check.record_errors, texts)]
    if check.status is RecordSetStatus.INVALID_TIMESTAMP:
        return fail(out, ErrorCode.INVALID_TIMESTAMP,
                     "One or more records have been rejected due to invalid timestamp")
    shown = ", ".join(f"RecordError(batchIndex={e.index}, message='{text}')"
                      for e, text in zip(check.record_errors[:3], texts))
    return fail(out, ErrorCode.INVALID_RECORD, f"One or more records have been rejected due "
                 f"to {check.record_error_count} record errors in total, and only showing the "
                 f"first three errors at most: [{shown}]")


def append_partition(ctx: RequestContext, topic, index: int, records) -> tuple[object, int]:
    """One partition's batch: (response entry, CommitLog end to wait for or -1)."""
    broker: Broker = ctx.broker
    out = PartitionOut(index=index, error_code=ErrorCode.NONE, base_offset=-1,
                       log_append_time_ms=-1, log_start_offset=-1)
    if topic is None or not 0 <= index < topic.partitions:
        return fail(out, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), -1
    name = topic.name
    if is_internal(name):  # only the group coordinator writes there
        return fail(out, ErrorCode.INVALID_TOPIC_EXCEPTION,
                     f"Cannot append to internal topic {name}"), -1
    if records is None:
        return fail(out, ErrorCode.INVALID_RECORD, "the record set is null"), -1
    rules = _rules(broker, topic)
    # a compressed batch's keys, read by the validation, spare the IndexBuilder a decompression
    check = validate_record_set(records, broker.max_message_bytes(topic), rules,
                                broker.store.key_room)
    if check.status is not RecordSetStatus.OK:
        out = _refuse_records(out, check, rules, f"{name}-{index}")
        broker.network.produce_refused += 1  # a client looping on a bad batch: rate-limited
        broker.peer_log.log_at(logging.INFO, ctx.peer.rpartition(":")[0],
                               "produce to %s-%d from %s refused: %s", name, index, ctx.who(),
                               out.error_message)
        return out, -1
    batch = check.headers[0]
    if batch.codec == CODECS["zstd"] and ctx.api_version < 7:
        return fail(out, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                     f"Produce requests with version {ctx.api_version} are not allowed to use "
                     f"ZStandard compression"), -1
    if check.newest[0] != batch.max_timestamp:  # Kafka stores the newest record's, whatever
        set_max_timestamp(records, check.newest[0])  # was sent
        batch = batch._replace(max_timestamp=check.newest[0])
    if batch.is_transactional:  # only inside its producer's transaction (Kafka 3.6+ verifies)
        error = broker.transactions.verify_produce(batch.producer_id, batch.producer_epoch,
                                                   name, index)
        if error is not ErrorCode.NONE:
            log.info("transactional produce to %s-%d from %s (producer %d epoch %d) refused: "
                     "%s", name, index, ctx.who(), batch.producer_id, batch.producer_epoch,
                     error.name)
            if error is ErrorCode.INVALID_PRODUCER_ID_MAPPING:
                error = ErrorCode.INVALID_TXN_STATE  # what Kafka's verification answers
            return fail(out, error, f"the batch of producer {batch.producer_id} is not part "
                                     f"of an ongoing transaction with {name}-{index}"), -1
    verdict = broker.producers.check(topic.topic_id, index, batch)
    if verdict.error is not ErrorCode.NONE:
        log.info("produce to %s-%d from %s refused: %s", name, index, ctx.who(), verdict.message)
        return fail(out, verdict.error, verdict.message), -1
    if verdict.duplicate is not None:  # a retry: Kafka answers with the original's offset and time
        original = verdict.duplicate
        out.base_offset = original.base_offset
        out.log_append_time_ms = original.timestamp
        out.log_start_offset = broker.store.log_start_offset(name, index)
        return out, original.phy_end
    result = broker.store.append(name, index, records, offset_count=batch.offset_count,
                                 max_timestamp=batch.max_timestamp, sys_flag=batch.attributes,
                                 keys=check.keys)
    if result.status is not StoreStatus.OK:
        # the store logs disk errors itself, a full disk once per spell
        level = logging.DEBUG if result.status is StoreStatus.DISK_ERROR else logging.WARNING
        log.log(level, "append to %s-%d from %s failed: %s", name, index, ctx.who(),
                result.error)
        return fail(out, STORE_ERRORS[result.status], result.error or None), -1
    broker.metrics.on_produce(name, len(records), batch.record_count)
    timestamp = batch.max_timestamp if result.log_append_time < 0 else result.log_append_time
    broker.producers.record(topic.topic_id, index, batch, result.base_offset, timestamp,
                            result.phy_end)
    out.base_offset = result.base_offset
    out.log_append_time_ms = result.log_append_time
    out.log_start_offset = broker.store.log_start_offset(name, index)
    return out, result.phy_end

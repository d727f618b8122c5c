"""Option parsing and range arithmetic of the commitgate source (no Spark, no broker)."""
from __future__ import annotations

import itertools

import pytest
from kafka import TopicPartition

from commitgate.pipeline.clients import open_reader
from commitgate.pipeline.kafka_read import (
    READER_DEFAULTS,
    OffsetRange,
    PartitionState,
    offsets_from_json,
    offsets_to_json,
    rate_limit,
    split_ranges,
)
from commitgate.pipeline.options import (
    OptionError,
    batch_bounds,
    parse_read,
    parse_write,
    stream_start,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9"}


def test_spark_option_names_case_insensitive():
    options = parse_read({**BASE, "subscribe": "a, b", "STARTINGOFFSETS": '{"a": {"0": 5}}',
                          "minPartitions": "8", "includeHeaders": "TRUE",
                          "kafka.request.timeout.ms": "5000",
                          "kafka.security.protocol": "PLAINTEXT"})
    assert options.topics == ("a", "b")
    assert options.starting == {("a", 0): 5}
    assert (options.min_partitions, options.include_headers) == (8, True)
    assert options.client == {"request_timeout_ms": 5000, "security_protocol": "PLAINTEXT"}
    assert parse_read({**BASE, "assign": '{"t": [0, 2]}'}).assigned == (("t", 0), ("t", 2))


@pytest.mark.parametrize("options, message", [
    ({"subscribe": "t"}, "'kafka.bootstrap.servers' is required"),
    ({**BASE}, "exactly one of"),
    ({**BASE, "subscribe": "t", "assign": '{"t": [0]}'}, "exactly one of"),
    ({**BASE, "subscribe": "t", "startingOffsets": "{bad"}, "'startingOffsets'"),
    ({**BASE, "subscribe": "t", "endingOffsets": '{"t": {"0": "x"}}'}, "'endingOffsets'"),
    ({**BASE, "assign": '{"t": 0}'}, "'assign'"),
    ({**BASE, "subscribePattern": "("}, "'subscribePattern'"),
    ({**BASE, "subscribe": "t", "minPartitions": "0"}, "'minPartitions'"),
    ({**BASE, "subscribe": "t", "failOnDataLoss": "maybe"}, "'failOnDataLoss'"),
    ({**BASE, "subscribe": "t", "kafka.auto.offset.reset": "earliest"},
     "'kafka.auto.offset.reset'"),
    ({**BASE, "subscribe": "t", "startingOffsetsByTimestamp": '{"t": {"0": -2}}'},
     "'startingOffsetsByTimestamp'"),
    ({**BASE, "subscribe": "t", "subscrbe": "t"}, "unknown option.*'subscrbe'"),
])
def test_bad_options_name_the_option(options, message):
    with pytest.raises(OptionError, match=message):
        parse_read(options)


def test_executor_reader_takes_kafka_settings_by_their_dotted_names():
    options = parse_read({**BASE, "subscribe": "t", "kafka.isolation.level": "read_committed",
                          "kafka.bootstrap.timeout.ms": "2000"})
    # librdkafka takes Spark's strings as they are; kafka-python's own setting stays on the driver
    assert options.reader == {"bootstrap.servers": "127.0.0.1:9",
                              "isolation.level": "read_committed"}
    assert options.client == {"isolation_level": "read_committed", "bootstrap_timeout_ms": 2000}
    with pytest.raises(OptionError, match=r"'kafka.bootstrap.servers' = '127.0.0.1:9'.*"
                                          r"No such configuration property: \"max.poll.recs\""):
        open_reader({**READER_DEFAULTS, **options.reader, "max.poll.recs": "5"})


def test_batch_and_stream_bounds():
    assert batch_bounds(parse_read({**BASE, "subscribe": "t"})) == ("earliest", "latest")
    assert stream_start(parse_read({**BASE, "subscribe": "t"})) == "latest"
    with pytest.raises(OptionError, match=r"'endingOffsets'.*earliest"):
        batch_bounds(parse_read({**BASE, "subscribe": "t", "endingOffsets": '{"t": {"0": -2}}'}))
    with pytest.raises(OptionError, match="'endingOffsets' is not valid for streaming"):
        stream_start(parse_read({**BASE, "subscribe": "t", "endingOffsets": "latest"}))
    assert parse_write({**BASE, "topic": "out", "checkpointLocation": "/x"}).topic == "out"


def test_split_ranges_proportionally_without_gaps():
    ranges = [OffsetRange("t", 0, 100, 1000), OffsetRange("t", 1, 0, 100),
              OffsetRange("u", 0, 5, 6)]
    split = split_ranges(ranges, 10)
    assert len(split) == 11  # 9 + 1 + 1: a range never splits below one part
    for original in ranges:
        parts = [r for r in split if (r.topic, r.partition) == (original.topic, original.partition)]
        assert parts[0].start == original.start and parts[-1].end == original.end
        assert all(a.end == b.start for a, b in itertools.pairwise(parts))
    assert split_ranges(ranges, 2) == ranges


def test_rate_limit_spreads_over_partitions():
    a, b, c = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
    state = PartitionState([a, b, c], {a: 0, b: 0, c: 10}, {a: 300, b: 100, c: 10})
    assert rate_limit(state, {a: 0, b: 0, c: 10}, 40) == {a: 30, b: 10, c: 10}
    assert rate_limit(state, {a: 290, b: 100}, 40) == {a: 300, b: 100, c: 10}  # c: new, empty
    assert offsets_from_json(offsets_to_json({a: 3, c: 4})) == {a: 3, c: 4}
    assert offsets_to_json({a: 3, c: 4}) == {"t": {"0": 3, "2": 4}}


def test_delivery_guarantee():
    assert parse_write({**BASE, "topic": "out"}, streaming=True).exactly_once
    assert not parse_write({**BASE, "topic": "out"}).exactly_once  # batch: Spark's sink
    relaxed = parse_write({**BASE, "deliveryGuarantee": "at-least-once", "markerTopic": "m"},
                          streaming=True)
    assert (relaxed.exactly_once, relaxed.marker_topic) == (False, "m")
    with pytest.raises(OptionError, match="'deliveryGuarantee' = 'exactly-once' is for "
                                          "streaming writes only"):
        parse_write({**BASE, "deliveryGuarantee": "exactly-once"})
    with pytest.raises(OptionError, match="'deliveryGuarantee' must be"):
        parse_write({**BASE, "deliveryGuarantee": "twice"}, streaming=True)

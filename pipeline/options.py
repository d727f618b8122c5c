"""The `commitgate` data source's options, named and checked as Spark's Kafka source does.

Pure parsing, no Spark and no network: the driver turns the user's option map into a
``ReadOptions`` / ``WriteOptions`` and every error names the option involved.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

EARLIEST = -2  # Spark's (and Kafka's ListOffsets') sentinels inside offsets JSON
LATEST = -1
DEFAULT_POLL_TIMEOUT_MS = 120_000  # Spark's kafkaConsumer.pollTimeoutMs default (network timeout)

# kafka.* settings Spark's Kafka source refuses because the source itself owns them
_RESERVED_CLIENT_KEYS = {"auto.offset.reset", "enable.auto.commit", "key.deserializer",
                         "value.deserializer", "key.serializer", "value.serializer",
                         "interceptor.classes"}
_STRATEGIES = ("subscribe", "subscribepattern", "assign")
_READ_KEYS = {*_STRATEGIES, "startingoffsets", "endingoffsets", "minpartitions",
              "includeheaders", "failondataloss", "kafkaconsumer.polltimeoutms",
              "maxoffsetspertrigger", "startingtimestamp", "endingtimestamp",
              "startingoffsetsbytimestamp", "endingoffsetsbytimestamp",
              "startingoffsetsbytimestampstrategy"}
_WRITE_KEYS = {"topic", "deliveryguarantee", "markertopic"}
# kafka.* settings of kafka-python's own (no Java or librdkafka name): they reach the driver's
# kafka-python client only, not the executors' librdkafka readers (see ReadOptions.reader)
_KAFKA_PYTHON_ONLY = {"bootstrap.timeout.ms"}
EXACTLY_ONCE, AT_LEAST_ONCE = "exactly-once", "at-least-once"
# options Spark itself sets or passes through to every source and sink (queryName reaches a
# streaming sink's options)
_SPARK_KEYS = {"path", "checkpointlocation", "queryname"}


class OptionError(ValueError):
    """A bad option value; the message names the option."""


TopicPartition = tuple[str, int]
# a bound is "earliest", "latest" or explicit offsets per partition (-2/-1 allowed inside)
OffsetSpec = str | dict[TopicPartition, int]
# a bound by record time: one timestamp (ms) for every partition, or one per partition
TimeSpec = int | dict[TopicPartition, int]


@dataclass(frozen=True)
class ReadOptions:
    bootstrap: str
    strategy: str  # subscribe | subscribepattern | assign
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: tuple[TopicPartition, ...] = ()
    starting: OffsetSpec | None = None  # defaults differ: earliest for batch, latest for streams
    ending: OffsetSpec | None = None
    # by time, when given, wins over the offsets (Spark's precedence)
    starting_time: TimeSpec | None = None
    ending_time: TimeSpec | None = None
    # startingOffsetsByTimestampStrategy: a partition without a record at or after the time
    # fails the query ("error") or starts at its latest offset ("latest")
    missing_time_latest: bool = False
    min_partitions: int | None = None
    max_offsets_per_trigger: int | None = None  # streams: records per micro-batch, all partitions
    include_headers: bool = False
    fail_on_data_loss: bool = True
    poll_timeout_ms: int = DEFAULT_POLL_TIMEOUT_MS
    client: dict[str, object] = field(default_factory=dict)  # kafka-python: driver planning
    # the same kafka.* settings by their dotted names, for the executors' librdkafka readers
    reader: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class WriteOptions:
    bootstrap: str
    topic: str | None
    client: dict[str, object] = field(default_factory=dict)
    exactly_once: bool = False  # streaming writes only (pipeline/exactly_once.py)
    marker_topic: str | None = None  # default: one per query, named by its id


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    # Spark's data source options are case-insensitive
    return {key.lower(): value for key, value in options.items()}


def client_config(options: dict[str, str]) -> tuple[str, dict[str, object]]:
    """The bootstrap address and the other kafka.* settings as kafka-python keyword arguments."""
    bootstrap = options.get("kafka.bootstrap.servers")
    if not bootstrap:
        raise OptionError("option 'kafka.bootstrap.servers' is required")
    client: dict[str, object] = {}
    for key, value in options.items():
        if not key.startswith("kafka.") or key == "kafka.bootstrap.servers":
            continue
        name = key[len("kafka."):]
        if name in _RESERVED_CLIENT_KEYS:
            raise OptionError(f"option '{key}' is not supported: the commitgate source "
                              f"manages '{name}' itself")
        client[name.replace(".", "_")] = _client_value(value)
    return bootstrap, client


def _reader_config(options: dict[str, str]) -> dict[str, str]:
    # librdkafka takes the Java client's dotted names and string values as Spark passes them
    return {key[len("kafka."):]: value for key, value in options.items()
            if key.startswith("kafka.") and key[len("kafka."):] not in _KAFKA_PYTHON_ONLY}


def _client_value(value: str) -> object:
    # kafka-python wants typed values where Spark passes strings
    if re.fullmatch(r"-?\d+", value):
        return int(value)
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    return value


def _check_unknown(options: dict[str, str], known: set[str]) -> None:
    unknown = sorted(key for key in options if key not in known | _SPARK_KEYS
                     and not key.startswith("kafka."))
    if unknown:
        raise OptionError(f"unknown option(s) {unknown} for the commitgate source")


def _bool(options: dict[str, str], key: str, default: bool) -> bool:
    value = options.get(key.lower())
    if value is None:
        return default
    if value.lower() not in ("true", "false"):
        raise OptionError(f"option '{key}' must be 'true' or 'false', got {value!r}")
    return value.lower() == "true"


def _positive_int(options: dict[str, str], key: str) -> int | None:
    value = options.get(key.lower())
    if value is None:
        return None
    if not value.strip().isdigit() or int(value) < 1:
        raise OptionError(f"option '{key}' must be a positive integer, got {value!r}")
    return int(value)


def parse_offsets(key: str, value: str) -> OffsetSpec:
    """'earliest', 'latest' or Spark's JSON {"topic": {"0": 23, "1": -2}}."""
    text = value.strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option '{key}': expected 'earliest', 'latest' or JSON like "
                          f"{{\"topicA\":{{\"0\":23}}}}, got {value!r} ({exc.msg})") from None
    offsets: dict[TopicPartition, int] = {}
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError(f"option '{key}': expected a JSON object of topics, got {value!r}")
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise OptionError(f"option '{key}': topic {topic!r} must map partitions to offsets")
        for partition, offset in partitions.items():
            if not str(partition).isdigit() or type(offset) is not int or offset < EARLIEST:
                raise OptionError(f"option '{key}': bad offset {offset!r} for partition "
                                  f"{partition!r} of topic {topic!r}")
            offsets[(topic, int(partition))] = offset
    return offsets


def parse_assign(value: str) -> tuple[TopicPartition, ...]:
    """Spark's assign JSON: {"topicA": [0, 1], "topicB": [2]}."""
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise OptionError(f"option 'assign': expected JSON like {{\"topicA\":[0,1]}}, "
                          f"got {value!r} ({exc.msg})") from None
    if not isinstance(parsed, dict) or not parsed:
        raise OptionError(f"option 'assign': expected a JSON object of topics, got {value!r}")
    assigned = []
    for topic, partitions in parsed.items():
        if not isinstance(partitions, list) or not all(type(p) is int and p >= 0
                                                       for p in partitions):
            raise OptionError(f"option 'assign': topic {topic!r} needs a list of partitions")
        assigned += [(topic, partition) for partition in partitions]
    return tuple(assigned)


def parse_read(raw: Mapping[str, str]) -> ReadOptions:
    options = _lower(raw)
    _check_unknown(options, _READ_KEYS)
    bootstrap, client = client_config(options)
    chosen = [key for key in _STRATEGIES if options.get(key)]
    if len(chosen) != 1:
        raise OptionError("exactly one of the options 'subscribe', 'subscribePattern' or "
                          f"'assign' must be given (got {len(chosen)})")
    strategy = chosen[0]
    value = options[strategy]
    topics = tuple(t.strip() for t in value.split(",") if t.strip()) \
        if strategy == "subscribe" else ()
    if strategy == "subscribe" and not topics:
        raise OptionError(f"option 'subscribe' names no topic: {value!r}")
    if strategy == "subscribepattern":
        try:
            re.compile(value)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern': bad pattern {value!r} ({exc})") \
                from None
    starting, ending = options.get("startingoffsets"), options.get("endingoffsets")
    if starting is not None:
        starting = parse_offsets("startingOffsets", starting)
    if ending is not None:
        ending = parse_offsets("endingOffsets", ending)
    poll = _positive_int(options, "kafkaConsumer.pollTimeoutMs") or DEFAULT_POLL_TIMEOUT_MS
    strategy_by_time = options.get("startingoffsetsbytimestampstrategy", "error").lower()
    if strategy_by_time not in ("error", "latest"):
        raise OptionError("option 'startingOffsetsByTimestampStrategy' must be 'error' or "
                          f"'latest', got {strategy_by_time!r}")
    return ReadOptions(bootstrap=bootstrap, strategy=strategy, topics=topics,
                       pattern=value if strategy == "subscribepattern" else "",
                       assigned=parse_assign(value) if strategy == "assign" else (),
                       starting=starting, ending=ending,
                       min_partitions=_positive_int(options, "minPartitions"),
                       max_offsets_per_trigger=_positive_int(options, "maxOffsetsPerTrigger"),
                       include_headers=_bool(options, "includeHeaders", False),
                       fail_on_data_loss=_bool(options, "failOnDataLoss", True),
                       poll_timeout_ms=poll, client=client, reader=_reader_config(options),
                       starting_time=_time_bound(options, "startingTimestamp",
                                                 "startingOffsetsByTimestamp"),
                       ending_time=_time_bound(options, "endingTimestamp",
                                               "endingOffsetsByTimestamp"),
                       missing_time_latest=strategy_by_time == "latest")


def _time_bound(options: dict[str, str], global_key: str, json_key: str) -> TimeSpec | None:
    if options.get(global_key.lower()) is not None:
        value = options[global_key.lower()].strip()
        if not value.isdigit():
            raise OptionError(f"option '{global_key}' must be a timestamp in milliseconds, got "
                              f"{value!r}")
        return int(value)
    if options.get(json_key.lower()) is None:
        return None
    by_partition = parse_offsets(json_key, options[json_key.lower()])
    if not isinstance(by_partition, dict) or min(by_partition.values()) < 0:
        raise OptionError(f"option '{json_key}' must be JSON of timestamps in milliseconds per "
                          f"partition, like {{\"topicA\":{{\"0\":1700000000000}}}}")
    return by_partition


def batch_bounds(options: ReadOptions) -> tuple[OffsetSpec, OffsetSpec]:
    """startingOffsets and endingOffsets of a batch query, refused as Spark's Kafka source does."""
    starting, ending = options.starting or "earliest", options.ending or "latest"
    if starting == "latest" or (isinstance(starting, dict) and LATEST in starting.values()):
        raise OptionError("option 'startingOffsets': 'latest' (-1) is not allowed for batch "
                          "queries")
    if ending == "earliest" or (isinstance(ending, dict) and EARLIEST in ending.values()):
        raise OptionError("option 'endingOffsets': 'earliest' (-2) is not allowed for batch "
                          "queries")
    return starting, ending


def stream_start(options: ReadOptions) -> OffsetSpec:
    """Where a new streaming query (one without a checkpoint) starts."""
    if options.ending is not None:
        raise OptionError("option 'endingOffsets' is not valid for streaming queries")
    return options.starting or "latest"


def parse_write(raw: Mapping[str, str], streaming: bool = False) -> WriteOptions:
    options = _lower(raw)
    _check_unknown(options, _WRITE_KEYS)
    bootstrap, client = client_config(options)
    guarantee = options.get("deliveryguarantee", EXACTLY_ONCE if streaming else AT_LEAST_ONCE)
    if guarantee not in (EXACTLY_ONCE, AT_LEAST_ONCE):
        raise OptionError(f"option 'deliveryGuarantee' must be '{EXACTLY_ONCE}' or "
                          f"'{AT_LEAST_ONCE}', got {guarantee!r}")
    if guarantee == EXACTLY_ONCE and not streaming:
        raise OptionError(f"option 'deliveryGuarantee' = '{EXACTLY_ONCE}' is for streaming "
                          f"writes only: a batch write is at least once, as Spark's Kafka sink")
    return WriteOptions(bootstrap=bootstrap, topic=options.get("topic") or None, client=client,
                        exactly_once=guarantee == EXACTLY_ONCE,
                        marker_topic=options.get("markertopic") or None)

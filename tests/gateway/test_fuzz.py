"""The schema fuzzer (``commitgate fuzz``) against a real broker: 20,000 cases leave the broker
alive, serving a normal client, without tracebacks in its log and with its memory back near
where it started; and the fuzzer's own detectors (a crash, a hang) do fire."""
from __future__ import annotations

import os
import re
import signal
import time
import uuid
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer

from commitgate.compat_tests.fuzz import CaseGenerator, FuzzOptions, api_keys, run_fuzz
from commitgate.compat_tests.wire import WireClient
from commitgate.gateway.handlers import all_handlers
from commitgate.launcher import BrokerProcess
from commitgate.protocol import messages
from commitgate.protocol.errors import ErrorCode

CASES = 20_000
SEED = 21
RSS_SLACK = 1.2  # the bound: back within 20% of the warm start
SETTLE_S = 60.0
CREATE_TOPICS, TOPIC_RESOURCE = 19, 2
# an empty group's first rebalance waits for more members (3 s by default): a fuzz case that
# joins one would only wait out its timeout
NO_JOIN_DELAY = {"group.initial.rebalance.delay.ms": "0"}


def _rss_kib(pid: int, data_dir: Path) -> int:
    """The process's RSS less the pages of the store's own files it maps: those are the page
    cache of the data the fuzz stored (valid Produce cases), shared with the kernel's cache and
    growing with the data, not with the broker's own memory."""
    total = store = 0
    in_store = False
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split()
        if not line[0].isupper() or not fields[0].endswith(":"):  # a mapping's first line
            in_store = len(fields) >= 6 and fields[5].startswith(str(data_dir))
        elif fields[0] == "Rss:":
            total += int(fields[1])
            store += int(fields[1]) if in_store else 0
    return total - store


def _round_trip(bootstrap: str, count: int = 20) -> None:
    """A normal client's produce and group consume on a new topic, everything read back."""
    topic, group = f"fuzz-check-{uuid.uuid4().hex[:8]}", f"fuzz-check-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for i in range(count):
            producer.send(topic, key=b"k%d" % i, value=b"v%d" % i).get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                             auto_offset_reset="earliest", consumer_timeout_ms=30_000)
    try:
        values = [record.value for _, record in zip(range(count), consumer, strict=False)]
        consumer.commit()
    finally:
        consumer.close()
    assert values == [b"v%d" % i for i in range(count)]


def _tracebacks(log: str) -> list[str]:
    """The log line before each traceback: what the broker was doing."""
    lines = log.splitlines()
    return [lines[i - 1] for i, line in enumerate(lines) if i and line.startswith("Traceback")]


@pytest.fixture
def fuzz_broker(tmp_path) -> BrokerProcess:
    process = BrokerProcess(tmp_path / "data", NO_JOIN_DELAY)
    process.start()
    yield process
    process.kill()


def test_fuzz_run_leaves_broker_serving_with_memory_back(fuzz_broker, tmp_path):
    _round_trip(fuzz_broker.bootstrap)
    pid = fuzz_broker.process.pid
    warm = _rss_kib(pid, fuzz_broker.data_dir)
    report = run_fuzz(FuzzOptions(bootstrap=fuzz_broker.bootstrap, cases=CASES, seed=SEED,
                                  dump=tmp_path / "dump", broker_log=fuzz_broker.log_path))

    assert fuzz_broker.process.poll() is None, fuzz_broker.log_tail()
    assert report.cases_run == CASES
    assert report.findings == [], report.findings[:10]
    assert sum(n for (_, outcome), n in report.outcomes.items() if outcome == "answered") > \
        CASES // 3  # most cases reach a handler: the fuzz exercised more than the decoder
    _round_trip(fuzz_broker.bootstrap)
    assert _tracebacks(fuzz_broker.log_path.read_text(errors="replace")) == []

    deadline, rss = time.monotonic() + SETTLE_S, _rss_kib(pid, fuzz_broker.data_dir)
    while rss > warm * RSS_SLACK and time.monotonic() < deadline:
        time.sleep(0.5)
        rss = _rss_kib(pid, fuzz_broker.data_dir)
    assert rss <= warm * RSS_SLACK, f"RSS {rss} KiB after the fuzz, {warm} KiB warm"


def test_a_killed_broker_is_a_crash_finding(fuzz_broker):
    def kill_at_case_300(case, outcome):
        if case.number == 300:
            fuzz_broker.kill()

    report = run_fuzz(FuzzOptions(bootstrap=fuzz_broker.bootstrap, cases=2_000, seed=SEED,
                                  batch=500, health_timeout_s=10), kill_at_case_300)
    assert [f.kind for f in report.findings] == ["crash"]
    assert "after cases 0-499" in report.findings[0].detail
    assert report.cases_run < 2_000  # the run stops at the first batch after the crash


def test_a_stopped_broker_is_a_hang_finding_with_the_cases_dumped(fuzz_broker, tmp_path):
    pid = fuzz_broker.process.pid

    def stop_at_case_20(case, outcome):
        if case.number == 20:
            os.kill(pid, signal.SIGSTOP)

    try:  # the batch ends once both connections timed out in a row; the run at the hang
        report = run_fuzz(FuzzOptions(bootstrap=fuzz_broker.bootstrap, cases=400, seed=SEED,
                                      batch=200, connections=2, case_timeout_s=3,
                                      health_timeout_s=3, dump=tmp_path / "dump"),
                          stop_at_case_20)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert [f.kind for f in report.findings] == ["hang"]
    assert "after cases 0-199" in report.findings[0].detail
    assert report.timed_out, "cases sent to a stopped broker time out"
    advertised = {k: (h.advertised_min, h.max_version) for k, h in all_handlers().items()}
    generator = CaseGenerator(SEED, advertised)
    for number in report.timed_out:
        dumped = tmp_path / "dump" / f"seed{SEED}-case{number}.bin"
        assert dumped.read_bytes() == generator.case(number).data


@pytest.mark.parametrize(("api_key", "version"), [(33, 1), (44, 0)])
def test_fuzz_finding_config_value_too_long_to_quote_is_answered(fuzz_broker, api_key, version):
    """Found by the fuzzer (seed 11): a 32 KiB config value quoted in the INVALID_CONFIG text
    made a message too long for an int16 string; the response failed to encode and the broker
    closed the connection with a traceback."""
    alter, create = messages.request(api_key).cls, messages.request(CREATE_TOPICS).cls
    with WireClient(fuzz_broker.bootstrap) as client:
        created = client.request(CREATE_TOPICS, 5, create(topics=[create.CreatableTopic(
            name="long-value", num_partitions=1, replication_factor=1)]))
        assert created.topics[0].error_code == ErrorCode.NONE
        config = alter.AlterableConfig(name="retention.ms", value="y" * 32_767)
        request = alter(resources=[alter.AlterConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name="long-value", configs=[config])])
        answer = client.request(api_key, version, request).responses[0]
    assert answer.error_code == ErrorCode.INVALID_CONFIG
    message = answer.error_message  # Kafka's text, cut to fit: the value comes before the name
    assert message.startswith("Invalid value yyy") and message.endswith("...")
    assert len(message.encode()) == 0x7FFF
    assert _tracebacks(fuzz_broker.log_path.read_text(errors="replace")) == []


def test_cases_are_a_function_of_seed_and_number():
    advertised = {k: (h.advertised_min, h.max_version) for k, h in all_handlers().items()}
    one, again, other = (CaseGenerator(s, advertised) for s in (1, 1, 2))
    assert [one.case(n).data for n in range(200)] == [again.case(n).data for n in range(200)]
    assert [one.case(n).data for n in range(200)] != [other.case(n).data for n in range(200)]
    kinds = {re.sub(":.*", "", one.case(n).kind) for n in range(200)}
    assert kinds == {"valid", "mutated", "frame"}


def test_api_names_and_keys():
    assert api_keys(["Produce", "fetch", "18"]) == [0, 1, 18]
    assert api_keys(None) is None
    with pytest.raises(ValueError, match="unknown API"):
        api_keys(["NoSuchApi"])

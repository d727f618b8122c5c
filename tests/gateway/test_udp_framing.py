"""The UDP ingest's settings, datagram formats and Kafka's murmur2 partitioner (no broker
needed)."""
from __future__ import annotations

import random

import pytest
from kafka.partitioner.default import murmur2 as kafka_murmur2

from commitgate.gateway.endpoint import Endpoint
from commitgate.gateway.settings import broker_config
from commitgate.gateway.udp_framing import Malformed, key_partition, murmur2, parse_json, parse_tsv


def test_tsv_reads_topic_key_and_the_rest_as_value():
    assert parse_tsv(b"t\tk\tv\twith\ttabs\n") == ("t", b"k", b"v\twith\ttabs\n")
    assert parse_tsv(b"\t\tv") == (None, None, b"v")  # udp.topic, no key


@pytest.mark.parametrize("datagram", [b"no tabs", b"one\ttab", b"\xff\xfe\tk\tv"])
def test_tsv_refuses_what_it_cannot_read(datagram):
    with pytest.raises(Malformed):
        parse_tsv(datagram)


def test_json_reads_topic_key_and_value():
    assert parse_json(b'{"topic": "t", "key": "k", "value": "v\\u00e9"}') == (
        "t", b"k", "vé".encode())
    assert parse_json(b'{"value": {"a": [1, 2]}}') == (None, None, b'{"a":[1,2]}')
    assert parse_json(b'{"value": null, "key": "gone"}') == (None, b"gone", None)


@pytest.mark.parametrize("datagram", [b"not json", b"[1]", b'{"key": "k"}',
                                      b'{"topic": 1, "value": "v"}', b"\xff"])
def test_json_refuses_what_it_cannot_read(datagram):
    with pytest.raises(Malformed):
        parse_json(datagram)


def test_murmur2_matches_kafka_python():
    rng = random.Random(26)
    for length in range(40):
        for _ in range(25):
            key = rng.randbytes(length)
            assert murmur2(key) & 0xFFFFFFFF == kafka_murmur2(key) & 0xFFFFFFFF, key
            assert key_partition(key, 7) == (kafka_murmur2(key) & 0x7FFFFFFF) % 7


def test_udp_settings():
    config = broker_config({"udp.listeners": "udp://[::1]:9093", "udp.format": "json",
                            "udp.linger.ms": "20"})
    assert (config.udp_listener, config.udp_format, config.udp_linger_ms) == (
        Endpoint("::1", 9093), "json", 20)
    assert broker_config({}).udp_listener is None  # off unless set


@pytest.mark.parametrize(("settings", "complaint"), [
    ({"udp.listeners": "udp://127.0.0.1:9093"}, "needs udp.topic"),
    ({"udp.listeners": "127.0.0.1:9093"}, "udp://HOST:PORT"),
    ({"udp.listeners": "udp://a:1,udp://b:2"}, "udp://HOST:PORT"),
    ({"udp.format": "xml"}, "expected one of"),
    ({"udp.batch.bytes": "0"}, "positive"),
])
def test_bad_udp_settings_are_refused(settings, complaint):
    with pytest.raises(ValueError, match=complaint):
        broker_config(settings)

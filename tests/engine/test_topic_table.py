"""TopicTable: Kafka's topic-name rules and atomic persistence."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commitgate.engine.topic_table import TopicRecord, TopicTable, topic_name_error


@pytest.mark.parametrize("name", ["orders", "a.b-c_d", "x" * 249, "..."])
def test_legal_topic_names(name):
    assert topic_name_error(name) is None


@pytest.mark.parametrize("name,reason", [
    ("", "empty"), (".", "cannot be"), ("..", "cannot be"), ("x" * 250, "more than 249"),
    ("a b", "characters"), ("ünï", "characters"), ("a/b", "characters")])
def test_illegal_topic_names(name, reason):
    assert reason in topic_name_error(name)


def test_table_survives_a_reload(tmp_path):
    table = TopicTable(tmp_path / "config" / "topics.json")
    table.topics["t"] = TopicRecord("t", 3, configs={"retention.ms": "1000"},
                                    log_start_offsets={1: 5}, created_phy=77)
    table.save()
    again = TopicTable(tmp_path / "config" / "topics.json")
    again.load()
    assert again.get("t") == table.get("t")
    assert again.by_id(table.get("t").topic_id).name == "t"
    assert not (tmp_path / "config" / "topics.json.tmp").exists()


@given(st.dictionaries(st.text(min_size=1), st.text()), st.dictionaries(
    st.integers(0, 1000), st.integers(0, 2**62)), st.integers(1, 10_000))
def test_topic_record_json_round_trip(configs, starts, partitions):
    import json
    from dataclasses import asdict

    record = TopicRecord("t", partitions, configs=configs, log_start_offsets=starts)
    assert TopicRecord.from_json(json.loads(json.dumps(asdict(record)))) == record

"""The broker's config layers without a broker process: the cluster layer's min.insync.replicas
(KIP-966) is written once, from the static value, and kept as Kafka's metadata log keeps it."""
from __future__ import annotations

import json

from commitgate.gateway.broker_configs import BrokerConfigs, ConfigSource, Synonym
from commitgate.gateway.settings import broker_config


def test_cluster_min_insync_replicas_comes_from_the_first_start(tmp_path):
    path = tmp_path / "broker" / "dynamic_configs.json"
    first = BrokerConfigs(broker_config({"min.insync.replicas": "2"}), path)
    first.load()
    assert first.cluster == {"min.insync.replicas": "2"}
    assert json.loads(path.read_text()) == {"broker": {}, "cluster": {"min.insync.replicas": "2"}}
    assert first.synonyms("min.insync.replicas") == [
        Synonym("min.insync.replicas", "2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        Synonym("min.insync.replicas", "2", ConfigSource.STATIC_BROKER_CONFIG),
        Synonym("min.insync.replicas", "1", ConfigSource.DEFAULT_CONFIG)]
    config = broker_config({})  # a later start without the static value keeps the layer's
    again = BrokerConfigs(config, path)
    again.load()
    assert (again.cluster, config.min_insync_replicas) == ({"min.insync.replicas": "2"}, 2)
    assert again.value("log.retention.ms") is None and again.value("log.retention.hours") == "168"

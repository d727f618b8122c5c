"""Settings from COMMITGATE_* environment variables (what the container image is configured
with): their names, their rank under the properties file and --override, and a broker started
on them alone."""
from __future__ import annotations

import logging
import os
import subprocess
import sys

from commitgate.compat_tests.wire import WireClient
from commitgate.gateway.env_settings import environment_settings, setting_name
from commitgate.gateway.settings import load
from commitgate.launcher import free_port
from commitgate.protocol import messages
from tests.waiting import wait_until

Metadata = messages.get("MetadataRequest").cls
METADATA = 3


def test_variable_names_map_onto_setting_names():
    assert setting_name("COMMITGATE_ADVERTISED_LISTENERS") == "advertised.listeners"
    assert setting_name("COMMITGATE_LOG_DIRS") == "log.dirs"
    environ = {"COMMITGATE_LISTENERS": "PLAINTEXT://0.0.0.0:9092",
               "COMMITGATE_FLUSH_DISK_TYPE": " SYNC_FLUSH ", "KAFKA_LISTENERS": "elsewhere",
               "PATH": "/usr/bin"}
    assert environment_settings(environ) == {"listeners": "PLAINTEXT://0.0.0.0:9092",
                                             "flush.disk.type": "SYNC_FLUSH"}


def test_a_variable_naming_no_setting_is_ignored_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="commitgate"):
        found = environment_settings({"COMMITGATE_LISTENRES": "PLAINTEXT://0.0.0.0:9092"})
    assert found == {}
    assert "COMMITGATE_LISTENRES names no setting (listenres)" in caplog.text


def test_the_file_wins_over_the_environment_and_overrides_over_both(tmp_path):
    properties = tmp_path / "server.properties"
    properties.write_text("num.partitions=2\nmessage.max.bytes=2000\n")
    environment = environment_settings({"COMMITGATE_NUM_PARTITIONS": "3",
                                        "COMMITGATE_MESSAGE_MAX_BYTES": "3000",
                                        "COMMITGATE_NODE_ID": "7"})
    config = load(properties, ["message.max.bytes=1000"], environment)
    assert (config.node_id, config.num_partitions, config.message_max_bytes) == (7, 2, 1000)
    assert load(None, [], environment).num_partitions == 3


def test_serve_takes_its_settings_from_the_environment(tmp_path):
    port = free_port()
    environ = {**os.environ, "COMMITGATE_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
               # the default would advertise "localhost": this one shows the variable was read
               "COMMITGATE_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
               "COMMITGATE_ADMIN_LISTENERS": "", "COMMITGATE_LOG_DIRS": str(tmp_path / "data"),
               "COMMITGATE_NODE_ID": "7", "COMMITGATE_COMMITLOG_SEGMENT_BYTES": str(64 << 20),
               "COMMITGATE_INDEX_HASH_SLOTS": "50000", "COMMITGATE_INDEX_MAX_ENTRIES": "200000"}
    with subprocess.Popen([sys.executable, "-m", "commitgate", "serve"], env=environ, text=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) as broker:
        try:
            with _connect(f"127.0.0.1:{port}", broker) as client:
                brokers = client.request(METADATA, 12, Metadata(
                    topics=[], allow_auto_topic_creation=False)).brokers
            assert [(b.node_id, b.host, b.port) for b in brokers] == [(7, "127.0.0.1", port)]
        finally:
            broker.terminate()
            _, errors = broker.communicate(timeout=60)
    assert broker.returncode == 0, errors
    assert "CommitGate stopped cleanly" in errors


def _connect(bootstrap: str, broker: subprocess.Popen) -> WireClient:
    clients: list[WireClient] = []

    def connected() -> bool:
        assert broker.poll() is None, f"the broker exited with {broker.returncode}"
        try:
            clients.append(WireClient(bootstrap))
        except OSError:
            return False
        return True

    wait_until(connected, f"the broker listening on {bootstrap}")
    return clients[0]

"""The cluster id, kept in ``meta.properties`` of the data directory as Kafka does."""
from __future__ import annotations

import base64
import uuid
from pathlib import Path

from commitgate.engine.topic_table import atomic_write
from commitgate.gateway.settings import parse_properties

META_FILE = "meta.properties"


def cluster_id(data_dir: Path, node_id: int) -> str:
    """The directory's cluster id, created (22 URL-safe base64 characters) at first start."""
    path = data_dir / META_FILE
    if path.exists():
        found = parse_properties(path.read_text()).get("cluster.id")
        if found:
            return found
    new_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    data_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(path, f"version=1\ncluster.id={new_id}\nnode.id={node_id}\n".encode())
    return new_id

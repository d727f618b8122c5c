"""The RocketMQ-style store: one CommitLog, a ConsumeQueue per topic-partition, IndexFiles.

Knows nothing of Kafka framing or sockets; ``MessageStore`` is its only public face.
"""
from commitgate.engine.config import FlushDiskType, StoreConfig
from commitgate.engine.data_directory import StoreLocked, VolumeTooSmall
from commitgate.engine.message_store import MessageStore
from commitgate.engine.status import AppendResult, ReadResult, StoreStatus, TopicResult

__all__ = ["AppendResult", "FlushDiskType", "MessageStore", "ReadResult", "StoreConfig",
           "StoreLocked", "StoreStatus", "TopicResult", "VolumeTooSmall"]

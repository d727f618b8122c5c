"""The RocketMQ-style store: one CommitLog, a ConsumeQueue per topic-partition, IndexFiles.

Knows nothing of Kafka framing or sockets; ``MessageStore`` is its only public face.
"""
from engine.config import FlushDiskType, StoreConfig
from engine.message_store import MessageStore, StoreLocked, VolumeTooSmall
from engine.status import AppendResult, ReadResult, StoreStatus, TopicResult

__all__ = ["AppendResult", "FlushDiskType", "MessageStore", "ReadResult", "StoreConfig",
           "StoreLocked", "StoreStatus", "TopicResult", "VolumeTooSmall"]

"""Runs the broker process: opens the store, serves until SIGINT/SIGTERM, closes cleanly."""
from __future__ import annotations

import logging

from engine import MessageStore, StoreConfig
from protocol.record_batch import KafkaBodyFormat

log = logging.getLogger("commitgate")


async def run_store_only(config: StoreConfig) -> None:
    """Until the Kafka listener lands (docs/skipped_features.md), serve the store's life cycle."""
    from gateway.cli import wait_for_stop_signal

    store = MessageStore(config, KafkaBodyFormat())
    report = await store.open()
    log.info("CommitGate store ready at %s (%s start, %d topics); the Kafka listener is not "
             "implemented yet. Ctrl-C stops.", config.data_dir.resolve(),
             "clean" if report.clean else "unclean", len(store.topics()))
    try:
        await wait_for_stop_signal()
    finally:
        await store.close()

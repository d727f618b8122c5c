"""Runs the broker process: opens the store, serves the admin HTTP API and listens for Kafka
clients until SIGINT/SIGTERM, then stops accepting, lets in-flight requests finish, stops the
admin API, flushes and closes the store cleanly."""
from __future__ import annotations

import asyncio
import logging
import signal

from commitgate.engine import MessageStore
from commitgate.gateway.admin.server import AdminServer
from commitgate.gateway.broker import Broker
from commitgate.gateway.config import BrokerConfig
from commitgate.gateway.handlers import all_handlers
from commitgate.gateway.listener import Listener
from commitgate.gateway.security import listener_security
from commitgate.gateway.udp_ingest import UdpIngest
from commitgate.protocol.record_batch import KafkaBodyFormat

log = logging.getLogger("commitgate")

SHUTDOWN_GRACE_S = 10.0


async def serve(config: BrokerConfig, stop: asyncio.Event) -> None:
    """Serve until ``stop`` is set."""
    all_handlers()  # import every handler now: a broken one fails the start, not a request
    securities = listener_security.prepare(  # before the store: a bad setting refuses the start
        config.listeners, {spec.name: config.security_of(spec.name) for spec in config.listeners})
    admin_tls, admin_tokens = listener_security.prepare_admin(config)
    store = MessageStore(config.store, KafkaBodyFormat())
    report = await store.open()
    broker = Broker(config, store)
    listener = Listener(broker, securities)
    admin = AdminServer(broker, listener, config.admin_listener, admin_tls, admin_tokens) \
        if config.admin_listener else None
    udp = UdpIngest(broker) if config.udp_listener else None
    try:  # the admin API first: once Kafka clients can connect, /metrics is there too
        if admin is not None:
            await admin.start()
        if udp is not None:  # ready before Kafka clients (and a launcher) see the broker up
            await udp.start()
        await listener.start()
    except OSError:
        if udp is not None:
            await udp.stop()
        if admin is not None:
            await admin.stop()
        await store.close()
        raise
    broker.producer_snapshots.start()
    broker.groups.start()
    broker.transactions.load()  # after the groups: completing a transaction may need offsets
    broker.transactions.start()
    log.info("CommitGate listening on %s (advertised as %s), node %d, cluster %s, data in %s "
             "(%s start, %d topics, %s)", ", ".join(map(str, config.listeners)),
             ", ".join(f"{name}://{e}" for name, e in broker.node.endpoints.items()),
             config.node_id, broker.cluster_id, config.store.data_dir.resolve(),
             "clean" if report.clean else "unclean", len(store.topics()),
             config.store.flush_disk_type.value)
    try:
        await stop.wait()
    finally:
        log.info("CommitGate stopping: no new connections, finishing in-flight requests")
        listener.close()
        if udp is not None:  # stops reading and appends what it read (before the store closes)
            await udp.stop()
        broker.fetch_waiters.wake_all()
        await broker.groups.stop()  # answers JoinGroup/SyncGroup still waiting
        await broker.transactions.stop()
        await listener.finish(SHUTDOWN_GRACE_S)
        if admin is not None:
            await admin.stop()
        await broker.producer_snapshots.stop()
        await store.close()
        log.info("CommitGate stopped cleanly")


async def run_until_signal(config: BrokerConfig) -> None:
    await serve(config, stop_event_on_signals())


def stop_event_on_signals() -> asyncio.Event:
    """An event set by SIGINT or SIGTERM (call on the running loop)."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return stop


def run_loop(coro) -> None:
    """Run the broker's event loop: uvloop where installed, asyncio's own otherwise."""
    try:
        import uvloop

        uvloop.run(coro)
    except ImportError:
        asyncio.run(coro)


def configure_logging(level: str) -> None:
    logging.basicConfig(level=level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")

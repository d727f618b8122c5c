"""The transaction coordinator, as Kafka's TransactionCoordinator with transaction version 1.

Each transactional id has a producer id, an epoch and a state (``TxnState``) made durable in
``__transaction_state`` before it is acted on. InitProducerId bumps the epoch, which fences
older producers of the id, and aborts a transaction the previous epoch left open.
AddPartitionsToTxn / AddOffsetsToTxn put partitions into the ongoing transaction; EndTxn logs
PrepareCommit or PrepareAbort, writes the markers into every partition of the transaction
(``markers.py``) and logs CompleteCommit or CompleteAbort. A transaction past its timeout is
aborted with a bumped epoch, so its producer is fenced. A transaction found in a prepare state
at start is completed; one found ongoing stays open until its producer ends it or it times out.

While a transition is being written, other requests for the id get CONCURRENT_TRANSACTIONS
(the clients retry), as Kafka answers during its pending states.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from commitgate.engine import MessageStore, StoreStatus
from commitgate.gateway.config import BrokerConfig
from commitgate.gateway.groups.offsets_topic import OFFSETS_TOPIC
from commitgate.gateway.producer_ids import ProducerIdAllocator
from commitgate.gateway.transactions.txn_log import TransactionLog, TxnRecord, TxnState
from commitgate.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
MAX_EPOCH = 32767 - 1  # Kafka bumps to a new producer id rather than reach Short.MaxValue
TopicPartition = tuple[str, int]
OPEN = (TxnState.ONGOING,)
PREPARED = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)
COMPLETE = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

# writes the markers of a transaction: (transactional id, record, commit) -> all done
MarkerWriter = Callable[[str, TxnRecord, bool], Awaitable[bool]]


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class TxnMetadata:
    transactional_id: str
    record: TxnRecord
    busy: bool = False  # a transition is being logged or its markers written


@dataclass(frozen=True)
class InitResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = -1


class TransactionCoordinator:
    def __init__(self, config: BrokerConfig, store: MessageStore,
                 producer_ids: ProducerIdAllocator, offsets_partition: Callable[[str], int]
                 ) -> None:
        self.config = config
        self.store = store
        self.producer_ids = producer_ids
        self.offsets_partition = offsets_partition  # a group's __consumer_offsets partition
        self.log = TransactionLog(store, config.transaction_state_log_num_partitions)
        self.txns: dict[str, TxnMetadata] = {}
        self.by_producer: dict[int, str] = {}
        self.write_markers: MarkerWriter | None = None  # set by the broker (markers.py)
        self._stop = asyncio.Event()
        self._task: asyncio.Task | None = None

    # ---- start and stop -------------------------------------------------------------------

    def load(self) -> None:
        """Replay ``__transaction_state``: the last state of every transactional id."""
        for txn_id, record in self.log.replay():
            self._forget(txn_id)
            if record is not None:
                self._remember(TxnMetadata(txn_id, record))
        prepared = sum(m.record.state in PREPARED for m in self.txns.values())
        log.info("transactions: %d transactional ids loaded, %d to complete", len(self.txns),
                 prepared)

    def start(self) -> None:
        self._task = self.store.supervisor.spawn("transactions", self._run, stop=self._stop)

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
            self._task = None

    async def _run(self) -> None:
        """Complete what a restart left prepared, then abort timed-out transactions and
        expire idle transactional ids, each on its interval."""
        await self._complete_prepared()
        interval = self.config.transaction_abort_interval_ms / 1000
        next_expiry = time.monotonic()
        while not self._stop.is_set():
            await self.abort_timed_out()
            await self._complete_prepared()  # markers a failed write left behind
            if time.monotonic() >= next_expiry:
                await self.expire_ids()
                next_expiry = time.monotonic() + self.config.transaction_expire_interval_ms / 1000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), interval)

    def _remember(self, meta: TxnMetadata) -> None:
        self.txns[meta.transactional_id] = meta
        self.by_producer[meta.record.producer_id] = meta.transactional_id

    def _forget(self, txn_id: str) -> None:
        meta = self.txns.pop(txn_id, None)
        if meta is not None and self.by_producer.get(meta.record.producer_id) == txn_id:
            del self.by_producer[meta.record.producer_id]

    # ---- logging a transition ---------------------------------------------------------------

    async def _transit(self, meta: TxnMetadata, record: TxnRecord) -> ErrorCode:
        """Make ``record`` the id's state once it is durable in the log."""
        record.last_update_ms = now_ms()
        status = await self.log.write(meta.transactional_id, record)
        if status is not StoreStatus.OK:
            log.warning("transaction state of %r not written: %s", meta.transactional_id, status)
            return (ErrorCode.NOT_COORDINATOR if status in (StoreStatus.DISK_ERROR,
                                                             StoreStatus.STORE_CLOSED)
                    else ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if record.producer_id != meta.record.producer_id:
            self.by_producer.pop(meta.record.producer_id, None)
            self.by_producer[record.producer_id] = meta.transactional_id
        meta.record = record
        return ErrorCode.NONE

    @staticmethod
    def _next(record: TxnRecord, **changes) -> TxnRecord:
        fields = {**record.__dict__, "partitions": set(record.partitions), **changes}
        return TxnRecord(**fields)

    # ---- InitProducerId ----------------------------------------------------------------------

    async def init_producer_id(self, txn_id: str, timeout_ms: int, expected_id: int,
                               expected_epoch: int, fenced: ErrorCode) -> InitResult:
        if not 0 < timeout_ms <= self.config.transaction_max_timeout_ms:
            return InitResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        meta = self.txns.get(txn_id)
        if meta is None:
            pid = self.producer_ids.allocate()
            meta = TxnMetadata(txn_id, TxnRecord(pid, -1, timeout_ms, TxnState.EMPTY))
            self._remember(meta)
            return await self._bump(meta, timeout_ms)
        if meta.busy or meta.record.state in PREPARED:
            return InitResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        current = meta.record
        if expected_id != NO_PRODUCER_ID and (expected_id, expected_epoch) != (
                current.producer_id, current.producer_epoch):
            return InitResult(fenced)  # KIP-360: only the current producer may re-init
        if current.state in OPEN:
            # the previous epoch's transaction is aborted (and its producer fenced) first
            error = await self._end(meta, commit=False, bump=True)
            if error is not ErrorCode.NONE:
                return InitResult(error)
        return await self._bump(meta, timeout_ms)

    async def _bump(self, meta: TxnMetadata, timeout_ms: int) -> InitResult:
        record = meta.record
        pid, epoch = record.producer_id, record.producer_epoch + 1
        if epoch > MAX_EPOCH:
            pid, epoch = self.producer_ids.allocate(), 0
        meta.busy = True
        try:
            error = await self._transit(meta, TxnRecord(pid, epoch, timeout_ms, TxnState.EMPTY))
        finally:
            meta.busy = False
        if error is not ErrorCode.NONE:
            return InitResult(error)
        log.info("transactional id %r: producer id %d epoch %d", meta.transactional_id, pid,
                 epoch)
        return InitResult(ErrorCode.NONE, pid, epoch)

    # ---- checks shared by the transactional APIs ------------------------------------------------

    def _check(self, txn_id: str, pid: int, epoch: int, fenced: ErrorCode
               ) -> tuple[TxnMetadata | None, ErrorCode]:
        meta = self.txns.get(txn_id)
        if meta is None or meta.record.producer_id != pid:
            return None, ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if epoch != meta.record.producer_epoch:
            return None, fenced
        if meta.busy or meta.record.state in PREPARED:
            return None, ErrorCode.CONCURRENT_TRANSACTIONS
        return meta, ErrorCode.NONE

    # ---- AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------

    async def add_partitions(self, txn_id: str, pid: int, epoch: int,
                             partitions: Iterable[TopicPartition], fenced: ErrorCode
                             ) -> ErrorCode:
        meta, error = self._check(txn_id, pid, epoch, fenced)
        if meta is None:
            return error
        record = meta.record
        wanted = set(partitions)
        if record.state in OPEN and wanted <= record.partitions:
            return ErrorCode.NONE
        start = record.start_ms if record.state in OPEN else now_ms()
        meta.busy = True
        try:
            error = await self._transit(meta, self._next(
                record, state=TxnState.ONGOING, partitions=record.partitions | wanted,
                start_ms=start))
        finally:
            meta.busy = False
        return error

    def verify_partitions(self, txn_id: str, pid: int, epoch: int,
                          partitions: Iterable[TopicPartition], fenced: ErrorCode
                          ) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ ``verify_only``: which partitions are in the ongoing
        transaction (INVALID_TXN_STATE for the others), changing nothing."""
        meta, error = self._check(txn_id, pid, epoch, fenced)
        if meta is None:
            return {tp: error for tp in partitions}
        inside = meta.record.partitions if meta.record.state in OPEN else set()
        return {tp: ErrorCode.NONE if tp in inside else ErrorCode.INVALID_TXN_STATE
                for tp in partitions}

    def verify_produce(self, pid: int, epoch: int, topic: str, partition: int) -> ErrorCode:
        """A transactional batch may be appended only inside its producer's ongoing
        transaction, after AddPartitionsToTxn named the partition (Kafka 3.6+ verifies)."""
        txn_id = self.by_producer.get(pid)
        meta = self.txns.get(txn_id) if txn_id is not None else None
        if meta is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if epoch < meta.record.producer_epoch:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if epoch > meta.record.producer_epoch or meta.record.state not in OPEN or \
                (topic, partition) not in meta.record.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    def check_offset_commit(self, txn_id: str, pid: int, epoch: int,
                            group_id: str) -> ErrorCode:
        """TxnOffsetCommit: the producer is current and AddOffsetsToTxn added the group's
        offsets partition to its ongoing transaction."""
        meta = self.txns.get(txn_id)
        if meta is None or meta.record.producer_id != pid:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if epoch != meta.record.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        partition = (OFFSETS_TOPIC, self.offsets_partition(group_id))
        if meta.record.state not in OPEN or partition not in meta.record.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    # ---- EndTxn ---------------------------------------------------------------------------------

    async def end_txn(self, txn_id: str, pid: int, epoch: int, commit: bool,
                      fenced: ErrorCode) -> ErrorCode:
        meta = self.txns.get(txn_id)
        if meta is None or meta.record.producer_id != pid:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if epoch != meta.record.producer_epoch:
            return fenced
        state = meta.record.state
        if meta.busy or state in PREPARED:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if state in OPEN:
            return await self._end(meta, commit, bump=False)
        # a retry of the EndTxn that completed it succeeds; anything else is out of order
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        return ErrorCode.NONE if state is done else ErrorCode.INVALID_TXN_STATE

    async def _end(self, meta: TxnMetadata, commit: bool, bump: bool) -> ErrorCode:
        """Prepare, write the markers, complete. ``bump``: fence the producer first (a
        timeout, or a new producer of the id), so its markers carry the new epoch."""
        record = meta.record
        epoch = record.producer_epoch + 1 if bump else record.producer_epoch
        state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        meta.busy = True
        try:
            error = await self._transit(meta, self._next(record, state=state,
                                                         producer_epoch=epoch))
            if error is ErrorCode.NONE:
                error = await self._complete(meta)
        finally:
            meta.busy = False
        return error

    async def _complete(self, meta: TxnMetadata) -> ErrorCode:
        """Markers for a prepared transaction, then its Complete state. If the markers cannot
        all be written (store offline), the transaction stays prepared and the background
        task tries again; the client's EndTxn still succeeded, as in Kafka."""
        record = meta.record
        commit = record.state is TxnState.PREPARE_COMMIT
        if self.write_markers is None or not await self.write_markers(
                meta.transactional_id, record, commit):
            log.warning("transaction %r: markers not all written; will retry",
                        meta.transactional_id)
            return ErrorCode.NONE
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        error = await self._transit(meta, self._next(record, state=done, partitions=set()))
        if error is ErrorCode.NONE:
            log.info("transaction %r (producer %d epoch %d) %s", meta.transactional_id,
                     record.producer_id, record.producer_epoch,
                     "committed" if commit else "aborted")
        return error

    async def _complete_prepared(self) -> None:
        for meta in [m for m in self.txns.values() if m.record.state in PREPARED and not m.busy]:
            meta.busy = True
            try:
                await self._complete(meta)
            finally:
                meta.busy = False

    # ---- background: timeouts and expiry ------------------------------------------------------

    async def abort_timed_out(self) -> int:
        """Abort ongoing transactions past their timeout, fencing their producers."""
        now = now_ms()
        late = [m for m in self.txns.values() if m.record.state in OPEN and not m.busy
                and m.record.start_ms + m.record.timeout_ms <= now]
        for meta in late:
            log.info("transaction %r (producer %d) timed out after %d ms: aborting",
                     meta.transactional_id, meta.record.producer_id, meta.record.timeout_ms)
            await self._end(meta, commit=False, bump=True)
        return len(late)

    async def expire_ids(self) -> int:
        """Forget transactional ids idle past transactional.id.expiration.ms (a tombstone)."""
        cutoff = now_ms() - self.config.transactional_id_expiration_ms
        idle = [m for m in self.txns.values() if m.record.state in COMPLETE and not m.busy
                and m.record.last_update_ms <= cutoff]
        for meta in idle:
            if await self.log.write(meta.transactional_id, None) is StoreStatus.OK:
                self._forget(meta.transactional_id)
        return len(idle)

    # ---- DescribeTransactions / ListTransactions --------------------------------------------------

    def describe(self, txn_id: str) -> TxnMetadata | None:
        return self.txns.get(txn_id)

    def listed(self) -> list[TxnMetadata]:
        return list(self.txns.values())

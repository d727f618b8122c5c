"""The fencing error a transactional API answers, by request version (KIP-588)."""
from __future__ import annotations

from commitgate.protocol.errors import ErrorCode


def fenced(api_version: int, since: int) -> ErrorCode:
    """PRODUCER_FENCED from the version that knows it, INVALID_PRODUCER_EPOCH before."""
    return ErrorCode.PRODUCER_FENCED if api_version >= since else ErrorCode.INVALID_PRODUCER_EPOCH

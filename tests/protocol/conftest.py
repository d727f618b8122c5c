"""The record walk in C and in Python: ``walker`` runs a test with each."""
from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

from commitgate.protocol import record_batch, record_walk
from tests.c_and_python import IMPLEMENTATIONS, c_helper


# module scope: hypothesis tests may take it (it is the same for each of their examples)
@pytest.fixture(scope="module", params=IMPLEMENTATIONS)
def walker(request: pytest.FixtureRequest) -> Iterator[ModuleType]:
    """``protocol._record_keys`` or ``protocol.record_walk``, also the one that
    validate_record_set and KafkaBodyFormat.keys use during the test."""
    module = c_helper("protocol._record_keys") if request.param == "c" else record_walk
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record_batch, "walker", module)
        yield module

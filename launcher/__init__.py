"""Start CommitGate brokers as subprocesses: for tests, the compatibility matrix, benchmarks and
the pipeline demo.

It stands outside the broker's package (``gateway/``): it starts ``python -m commitgate serve``,
the command, so the broker itself never needs the CLI. Every child it starts dies with the
process that started it.
"""
from commitgate.launcher.broker_process import (
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    BrokerProcess,
    free_port,
)
from commitgate.launcher.children import child_options, parent_death_signal, signal_group

__all__ = ["START_TIMEOUT_S", "STOP_TIMEOUT_S", "BrokerProcess", "child_options", "free_port",
           "parent_death_signal", "signal_group"]

"""CommitGate: a Kafka-wire-protocol broker over a RocketMQ-style CommitLog / ConsumeQueue store.

The one import root of the project. Its subpackages are the repository's top-level folders,
mapped under this name at build time (setup.py): ``commitgate.engine`` (the store),
``commitgate.protocol`` (wire codecs), ``commitgate.gateway`` (the broker),
``commitgate.pipeline`` (the Spark data source), ``commitgate.bench``, ``commitgate.cli`` and
``commitgate.compat_tests``. ``python -m commitgate`` is the ``commitgate`` command.
"""

"""The broker subprocess fixtures of tests/gateway (``broker`` per module, ``fresh_broker``)."""
from tests.gateway.conftest import broker, fresh_broker  # noqa: F401

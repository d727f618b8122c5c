"""The image's HEALTHCHECK: the broker's admin ``/readyz`` answers 200 (store open and writable,
Kafka listener accepting, no background task failed). The admin listener is the one the broker
reads from ``COMMITGATE_ADMIN_LISTENERS``; a wildcard host is asked on loopback. With the admin
API off (``COMMITGATE_ADMIN_LISTENERS=``), the Kafka listener accepting a connection is the test.
Settings given as ``--override`` are not seen here: set these two as variables.
Exit 0: healthy, 1: not (the reason on stdout, which ``podman inspect`` keeps)."""
from __future__ import annotations

import os
import socket
import ssl
import sys
import urllib.error
import urllib.request

from commitgate.gateway.endpoint import Endpoint
from commitgate.gateway.env_settings import environment_settings
from commitgate.gateway.settings import broker_config

TIMEOUT_S = 4.0


def on_loopback(endpoint: Endpoint) -> Endpoint:
    """A wildcard listener is asked on loopback."""
    return Endpoint("127.0.0.1", endpoint.port) if endpoint.host in ("", "0.0.0.0", "::") \
        else endpoint


def _own_broker() -> ssl.SSLContext:
    """https to the container's own broker on loopback: its certificate names the outside
    names, not 127.0.0.1, and a liveness probe proves nothing by checking it."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def check() -> str:
    """What failed, or "" when the broker is ready."""
    config = broker_config(environment_settings(os.environ))
    try:
        if config.admin_listener is None:
            kafka = on_loopback(config.listener)
            socket.create_connection((kafka.host, kafka.port), TIMEOUT_S).close()
            return ""
        admin = on_loopback(config.admin_listener)
        scheme = "https" if config.admin_https else "http"
        url = f"{scheme}://{admin.host}:{admin.port}/readyz"
        with urllib.request.urlopen(url, timeout=TIMEOUT_S, context=_own_broker()):
            return ""
    except urllib.error.HTTPError as exc:  # 503: the reasons in the body
        return f"{exc.url}: {exc.code} {exc.read().decode(errors='replace')}"
    except OSError as exc:
        return f"not answering: {exc}"


if __name__ == "__main__":
    reason = check()
    print(reason or "ready")
    sys.exit(1 if reason else 0)

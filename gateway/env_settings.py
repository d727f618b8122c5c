"""Broker settings from ``COMMITGATE_*`` environment variables, as Kafka's container image maps
``KAFKA_*`` variables onto server.properties: ``COMMITGATE_`` and the setting's name in capitals
with its dots as underscores (``COMMITGATE_ADVERTISED_LISTENERS`` is ``advertised.listeners``,
``COMMITGATE_LOG_DIRS`` is ``log.dirs``).

They rank below the ``--config`` file and ``--override``, so an image's defaults give way to
whatever the user passes. A variable that names no setting is left alone with a warning: other
``COMMITGATE_*`` variables exist (the tests' own), and a typo still does not pass silently.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping

from commitgate.gateway.settings import SETTINGS

PREFIX = "COMMITGATE_"

log = logging.getLogger("commitgate")


def setting_name(variable: str) -> str:
    """``COMMITGATE_LOG_DIRS`` -> ``log.dirs``."""
    return variable.removeprefix(PREFIX).lower().replace("_", ".")


def environment_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The settings that ``COMMITGATE_*`` variables of ``environ`` name, as properties."""
    properties = {}
    for variable, value in sorted(environ.items()):
        if not variable.startswith(PREFIX):
            continue
        name = setting_name(variable)
        if name in SETTINGS:
            properties[name] = value.strip()
        else:
            log.warning("environment variable %s names no setting (%s); ignored", variable, name)
    return properties

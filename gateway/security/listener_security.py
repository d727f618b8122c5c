"""What each listener needs to secure its connections, built before the store opens so that a
setting asking for security that cannot be provided refuses the start (SecurityError naming
it): the TLS context, OAUTHBEARER's token validator, the listener's ssl.*/sasl.* settings."""
from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass

from commitgate.gateway.security.config import SecurityConfig
from commitgate.gateway.security.listeners import ListenerSpec
from commitgate.gateway.security.oauth_tokens import TokenValidator
from commitgate.gateway.security.tls import server_context

log = logging.getLogger(__name__)


@dataclass
class ListenerSecurity:
    spec: ListenerSpec
    config: SecurityConfig
    tls: ssl.SSLContext | None = None
    oauth: TokenValidator | None = None


def prepare(listeners: tuple[ListenerSpec, ...],
            security_of: dict[str, SecurityConfig]) -> list[ListenerSecurity]:
    prepared = []
    for spec in listeners:
        config = security_of[spec.name]
        tls = server_context(config, spec.name) if spec.protocol.tls else None
        oauth = TokenValidator(config, spec.name) if spec.protocol.sasl and \
            "OAUTHBEARER" in config.sasl_enabled_mechanisms else None
        prepared.append(ListenerSecurity(spec, config, tls, oauth))
    open_to_all = [str(s.spec) for s in prepared if s.spec.protocol.name == "PLAINTEXT"]
    if open_to_all:
        log.info("listener %s: plaintext, no authentication (every client is "
                 "User:ANONYMOUS)", ", ".join(open_to_all))
    return prepared

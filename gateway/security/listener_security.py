"""What each listener needs to secure its connections, built before the store opens so that a
setting asking for security that cannot be provided refuses the start (SecurityError naming
it): the TLS context, OAUTHBEARER's token validator, the listener's ssl.*/sasl.* settings."""
from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from commitgate.gateway.security.config import SecurityConfig
from commitgate.gateway.security.listeners import ListenerSpec
from commitgate.gateway.security.oauth_tokens import TokenValidator
from commitgate.gateway.security.tls import server_context

if TYPE_CHECKING:
    from commitgate.gateway.config import BrokerConfig

log = logging.getLogger(__name__)


@dataclass
class ListenerSecurity:
    spec: ListenerSpec
    config: SecurityConfig
    tls: ssl.SSLContext | None = None
    oauth: TokenValidator | None = None


def prepare_admin(config: BrokerConfig) -> tuple[ssl.SSLContext | None, TokenValidator | None]:
    """The admin HTTP listener's TLS context (https) and bearer token validator, if asked."""
    if config.admin_listener is None:
        return None, None
    tls = server_context(replace(config.security, ssl_client_auth="none"), "admin") \
        if config.admin_https else None
    tokens = TokenValidator(config.security, "admin") \
        if config.admin_authentication == "bearer" else None
    if config.admin_authentication == "none" and not config.admin_listener.on_loopback:
        log.warning("the admin HTTP API on %s answers anyone (admin.authentication=none)",
                    config.admin_listener)
    return tls, tokens


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

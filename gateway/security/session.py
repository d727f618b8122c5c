"""A connection's security session: who the client is, and on a SASL listener the state of its
authentication (Kafka's SaslServerAuthenticator). Before a client is authenticated it may send
ApiVersions, then SaslHandshake, then SaslAuthenticate until the mechanism completes; anything
else closes the connection. SaslHandshake v0 means the tokens that follow come as bare frames
(Kafka's original framing). With ``connections.max.reauth.ms`` a session expires: the client
re-authenticates (KIP-368) on the same connection, as the same principal, before its next
request, or the connection closes."""
from __future__ import annotations

import collections
import enum
import time
from dataclasses import dataclass

from commitgate.gateway.security.config import SecurityConfig
from commitgate.gateway.security.listeners import ListenerSpec
from commitgate.gateway.security.oauth_tokens import TokenValidator
from commitgate.gateway.security.sasl_errors import AuthenticationFailed
from commitgate.gateway.security.sasl_mechanisms import (
    MechanismServer,
    OAuthBearerServer,
    PlainServer,
    ScramServer,
)
from commitgate.gateway.security.scram_store import ScramStore
from commitgate.gateway.security.tls import ANONYMOUS

SASL_HANDSHAKE, API_VERSIONS, SASL_AUTHENTICATE = 17, 18, 36
FAILURE_MEMORY = 10_000  # addresses whose recent failures are remembered
FAILURE_WINDOW_S = 60.0
MAX_DELAY_DOUBLINGS = 6  # an address failing again and again waits up to 64x the delay


class State(enum.Enum):
    HANDSHAKE = "handshake"  # ApiVersions or SaslHandshake expected
    AUTHENTICATE = "authenticate"  # the mechanism's tokens expected
    COMPLETE = "complete"
    FAILED = "failed"


class FailedLogins:
    """Recent failed authentications by address: each answers later than the one before, up
    to 64 times ``connection.failed.authentication.delay.ms`` (bounded memory: the oldest
    addresses are forgotten first)."""

    def __init__(self) -> None:
        self._recent: collections.OrderedDict[str, tuple[int, float]] = collections.OrderedDict()

    def failed(self, host: str, base_ms: int) -> float:
        """Count a failure; the seconds to wait before answering it."""
        now = time.monotonic()
        count, since = self._recent.pop(host, (0, now))
        if now - since > FAILURE_WINDOW_S:
            count, since = 0, now
        self._recent[host] = (count + 1, since)
        while len(self._recent) > FAILURE_MEMORY:
            self._recent.popitem(last=False)
        return base_ms * (1 << min(count, MAX_DELAY_DOUBLINGS)) / 1000


@dataclass
class SaslSettings:
    """What a SASL listener's sessions share."""

    security: SecurityConfig
    store: ScramStore
    oauth: TokenValidator | None
    failures: FailedLogins

    def server(self, mechanism: str) -> MechanismServer:
        if mechanism == "PLAIN":
            return PlainServer(self.store)
        if mechanism == "OAUTHBEARER":
            assert self.oauth is not None  # enabled mechanisms were checked at start
            return OAuthBearerServer(self.oauth)
        return ScramServer(self.store, mechanism)


class ClientSession:
    def __init__(self, listener: ListenerSpec, sasl: SaslSettings | None,
                 principal: str = ANONYMOUS) -> None:
        self.listener = listener
        self.sasl = sasl
        self.principal = principal
        self.state = State.HANDSHAKE if sasl is not None else State.COMPLETE
        self.raw_tokens = False  # after SaslHandshake v0
        self.close_after_reply = False  # a refused handshake or authentication
        self.mechanism = ""
        self.expires_at: float | None = None  # monotonic; re-authenticate before it
        self._server: MechanismServer | None = None
        self._reauthenticating = False
        self._handshake_admitted = False

    @property
    def user(self) -> str:
        """The principal's name (client quotas' user entity)."""
        return self.principal.partition(":")[2]

    @property
    def authenticated(self) -> bool:
        return self.state is State.COMPLETE

    def refusal(self, api_key: int, now: float) -> str | None:
        """Why a request of ``api_key`` closes the connection now, or None to serve it."""
        if self.state is State.COMPLETE:
            if self.expires_at is not None and now > self.expires_at and \
                    api_key != SASL_HANDSHAKE:
                return "its SASL session expired (connections.max.reauth.ms) and it did not " \
                       "re-authenticate"
            return None
        if self.state is State.HANDSHAKE and api_key in (API_VERSIONS, SASL_HANDSHAKE):
            # the tokens may come right behind the handshake, before it is answered
            self._handshake_admitted |= api_key == SASL_HANDSHAKE
            return None
        if api_key == SASL_AUTHENTICATE and (self.state is State.AUTHENTICATE or
                                             self._handshake_admitted):
            return None
        return f"it sent api key {api_key} before completing SASL authentication"

    def handshake(self, mechanism: str, version: int) -> bool:
        """Start ``mechanism``; False when this listener does not enable it."""
        assert self.sasl is not None
        reauth = self.state is State.COMPLETE
        if mechanism not in self.sasl.security.sasl_enabled_mechanisms or \
                reauth and mechanism != self.mechanism:
            self.state = State.FAILED
            return False
        self._reauthenticating = reauth
        self.mechanism = mechanism
        self._server = self.sasl.server(mechanism)
        self.raw_tokens = version == 0
        self.state = State.AUTHENTICATE
        return True

    def authenticate(self, token: bytes) -> tuple[bytes, int]:
        """One token of the exchange: the challenge to send and, once complete, the session's
        lifetime in ms (0: unbounded). AuthenticationFailed ends the session."""
        assert self.sasl is not None
        try:
            if self._server is None:  # its handshake was refused: the connection is closing
                raise AuthenticationFailed("Unexpected SaslAuthenticate: no mechanism was "
                                           "accepted")
            if len(token) > self.sasl.security.sasl_server_max_receive_size:
                raise AuthenticationFailed(f"SASL token of {len(token)} bytes is larger than "
                                           f"sasl.server.max.receive.size")
            challenge = self._server.step(token)
            if not self._server.complete:
                return challenge, 0
            user = "User:" + self._server.user
            if self._reauthenticating and user != self.principal:
                raise AuthenticationFailed(f"Cannot change principals during "
                                           f"re-authentication from {self.principal}: {user}")
        except AuthenticationFailed:
            self.state = State.FAILED
            raise
        self.principal, self.state = user, State.COMPLETE
        lifetime = self._lifetime_ms(self._server.lifetime_ms)
        self.expires_at = time.monotonic() + lifetime / 1000 if lifetime else None
        self._server = None
        return challenge, lifetime

    def _lifetime_ms(self, credential_ms: int | None) -> int:
        """KIP-368: only with connections.max.reauth.ms, bounded by the credential's own."""
        reauth = self.sasl.security.connections_max_reauth_ms if self.sasl else 0
        if not reauth:
            return 0
        return max(min(reauth, credential_ms), 1) if credential_ms is not None else reauth

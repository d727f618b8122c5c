"""The server side of each SASL mechanism: tokens in, challenges out, a user name once done.

PLAIN (RFC 4616) checks the password against the SCRAM credentials; SCRAM-SHA-256/512 (RFC
5802/7677) runs ``scram_exchange``; OAUTHBEARER (RFC 7628) validates the bearer token as a JWT
(``oauth_tokens``). A failure raises AuthenticationFailed with the words the client is told
(Kafka's, where it has them)."""
from __future__ import annotations

import logging
from typing import Protocol

from commitgate.gateway.security.oauth_tokens import TokenValidator
from commitgate.gateway.security.sasl_errors import AuthenticationFailed
from commitgate.gateway.security.scram_exchange import ScramExchange, ScramRefused
from commitgate.gateway.security.scram_store import ScramStore

INVALID_CREDENTIALS = "Authentication failed: Invalid username or password"
log = logging.getLogger(__name__)


class MechanismServer(Protocol):
    complete: bool
    user: str  # set once complete
    lifetime_ms: int | None  # how long the credential stays valid (a token's exp), if bounded

    def step(self, token: bytes) -> bytes: ...


class PlainServer:
    def __init__(self, store: ScramStore) -> None:
        self.store = store
        self.complete = False
        self.user = ""
        self.lifetime_ms = None

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode() for p in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user or not password:
            raise AuthenticationFailed("Authentication failed: username or password not "
                                       "specified")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an "
                                       "authorization id that is different from username")
        if not self.store.check_password(user, password):
            raise AuthenticationFailed(INVALID_CREDENTIALS)
        self.user, self.complete = user, True
        return b""


class ScramServer:
    def __init__(self, store: ScramStore, mechanism: str) -> None:
        self.store = store
        self.mechanism = mechanism
        self.complete = False
        self.user = ""
        self.lifetime_ms = None
        self._exchange = ScramExchange(mechanism)
        self._round = 0

    def step(self, token: bytes) -> bytes:
        try:
            text = token.decode()
            self._round += 1
            if self._round == 1:
                return self._exchange.client_first(
                    text, lambda user: self.store.get(user, self.mechanism)).encode()
            final = self._exchange.client_final(text)
        except (ScramRefused, UnicodeDecodeError) as exc:  # the reason stays in the log
            log.debug("SCRAM %s exchange with %r refused: %s", self.mechanism,
                      self._exchange.user, exc)
            raise AuthenticationFailed(
                f"Authentication failed during authentication due to invalid credentials "
                f"with SASL mechanism {self.mechanism}") from None
        self.user, self.complete = self._exchange.user, True
        return final.encode()


class OAuthBearerServer:
    def __init__(self, validator: TokenValidator) -> None:
        self.validator = validator
        self.complete = False
        self.user = ""
        self.lifetime_ms = None

    def step(self, token: bytes) -> bytes:
        """The client's first (and only) message: ``n,,\\x01auth=Bearer TOKEN\\x01...\\x01``."""
        fields = token.split(b"\x01")
        if len(fields) < 3 or not fields[0].startswith(b"n,") or fields[-2:] != [b"", b""]:
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message")
        pairs = dict(f.split(b"=", 1) for f in fields[1:-2] if b"=" in f)
        scheme, _, bearer = pairs.get(b"auth", b"").decode(errors="replace").partition(" ")
        if scheme.lower() != "bearer" or not bearer:
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message: no bearer "
                                       "token")
        self.user, self.lifetime_ms = self.validator.validate(bearer)
        self.complete = True
        return b""

"""OAUTHBEARER's tokens: JWTs checked with PyJWT against the issuer's signing keys
(``sasl.oauthbearer.jwks.endpoint.url``, a ``file://`` URL read at start: a JWKS document, or the
issuer's one public key in PEM), the expected audience and issuer, with
``sasl.oauthbearer.clock.skew.seconds`` of leeway. The principal is the claim
``sasl.oauthbearer.sub.claim.name`` names."""
from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import unquote, urlparse

import jwt
from cryptography.hazmat.primitives import serialization

from commitgate.gateway.security.config import SecurityConfig
from commitgate.gateway.security.sasl_errors import AuthenticationFailed
from commitgate.gateway.security.tls import SecurityError

ALGORITHMS = ["RS256", "RS384", "RS512", "ES256", "ES384", "ES512", "PS256", "PS384", "PS512"]


class TokenValidator:
    def __init__(self, security: SecurityConfig, listener: str) -> None:
        self.security = security
        # (key id or None, key): a JWKS's keys, or one issuer key with no id
        self.keys = _keys(security.sasl_oauthbearer_jwks_endpoint_url, listener)

    def validate(self, token: str) -> tuple[str, int]:
        """The user the token names and its remaining lifetime in ms; AuthenticationFailed
        says why a token is refused."""
        s = self.security
        try:
            kid = jwt.get_unverified_header(token).get("kid")
            key = self._key(kid)
            claims = jwt.decode(
                token, key, algorithms=ALGORITHMS,
                audience=list(s.sasl_oauthbearer_expected_audience) or None,
                issuer=s.sasl_oauthbearer_expected_issuer or None,
                leeway=s.sasl_oauthbearer_clock_skew_seconds,
                options={"require": ["exp", "iat", s.sasl_oauthbearer_sub_claim_name],
                         "verify_aud": bool(s.sasl_oauthbearer_expected_audience)})
        except jwt.PyJWTError as exc:
            raise AuthenticationFailed(f"Authentication failed: the bearer token was refused: "
                                       f"{exc}") from None
        user = claims[s.sasl_oauthbearer_sub_claim_name]
        if not isinstance(user, str) or not user:
            raise AuthenticationFailed(f"Authentication failed: the token's "
                                       f"{s.sasl_oauthbearer_sub_claim_name} claim is no name")
        return user, max(int((claims["exp"] - time.time()) * 1000), 0)

    def _key(self, kid: str | None) -> object:
        if len(self.keys) == 1 and self.keys[0][0] is None:  # the issuer's one key
            return self.keys[0][1]
        if kid is not None:
            for key_id, key in self.keys:
                if key_id == kid:
                    return key
            raise jwt.InvalidKeyError(f"no key {kid!r} in the JWKS")
        if len(self.keys) != 1:
            raise jwt.InvalidKeyError("the token names no key (kid) and the JWKS has several")
        return self.keys[0][1]


def _keys(url: str, listener: str) -> list[tuple[str | None, object]]:
    setting = "sasl.oauthbearer.jwks.endpoint.url"
    if not url:
        raise SecurityError(f"listener {listener} enables OAUTHBEARER: set {setting} (a "
                            f"file:// URL of the issuer's JWKS or public key)")
    parsed = urlparse(url)
    if parsed.scheme != "file":
        raise SecurityError(f"{setting}={url!r}: CommitGate reads the keys from a file:// URL")
    try:
        text = Path(unquote(parsed.path)).read_bytes()
        if text.lstrip().startswith(b"-----BEGIN PUBLIC KEY-----"):
            return [(None, serialization.load_pem_public_key(text))]
        keys = jwt.PyJWKSet.from_dict(json.loads(text)).keys
        return [(key.key_id, key) for key in keys]
    except (OSError, ValueError, TypeError, jwt.PyJWTError) as exc:
        raise SecurityError(f"{setting}={url!r}: not a readable JWKS document or PEM public "
                            f"key: {exc}") from None

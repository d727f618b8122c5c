"""The ssl.* and sasl.* settings with Kafka's names and defaults, broker-wide or for one listener
(``listener.name.NAME.SETTING``, the listener's name in lower case as Kafka writes it)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, "OAUTHBEARER")  # what CommitGate serves
CLIENT_AUTH = ("none", "requested", "required")
TLS_VERSIONS = ("TLSv1.2", "TLSv1.3")
KEYSTORE_TYPES = ("PEM", "PKCS12")


@dataclass(frozen=True)
class SecurityConfig:
    ssl_keystore_type: str = "PEM"
    ssl_keystore_location: str = ""  # PEM: the private key and its certificate chain
    ssl_keystore_password: str = ""  # PKCS12's password; PEM: the key's, if it is encrypted
    ssl_key_password: str = ""  # the key's password (wins over the keystore's)
    ssl_keystore_certificate_chain: str = ""  # PEM text instead of a file
    ssl_keystore_key: str = ""
    ssl_truststore_type: str = "PEM"
    ssl_truststore_location: str = ""
    ssl_truststore_password: str = ""
    ssl_truststore_certificates: str = ""  # PEM text instead of a file
    ssl_client_auth: str = "none"
    ssl_enabled_protocols: tuple[str, ...] = TLS_VERSIONS
    ssl_cipher_suites: tuple[str, ...] = ()  # empty: OpenSSL's defaults
    ssl_principal_mapping_rules: str = "DEFAULT"
    sasl_enabled_mechanisms: tuple[str, ...] = ("GSSAPI",)  # Kafka's default, not served
    connections_max_reauth_ms: int = 0  # 0: sessions do not expire (KIP-368)
    sasl_server_max_receive_size: int = 524_288
    connection_failed_authentication_delay_ms: int = 100
    sasl_oauthbearer_jwks_endpoint_url: str = ""
    sasl_oauthbearer_expected_audience: tuple[str, ...] = ()
    sasl_oauthbearer_expected_issuer: str = ""
    sasl_oauthbearer_clock_skew_seconds: int = 30
    sasl_oauthbearer_sub_claim_name: str = "sub"


def _list(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _choice(choices: tuple[str, ...], fold: Callable[[str], str] = str) -> Callable:
    def parse(text: str) -> str:
        value = fold(text.strip())
        if value not in choices:
            raise ValueError(f"expected one of {list(choices)}")
        return value
    return parse


def _tls_versions(text: str) -> tuple[str, ...]:
    versions = _list(text)
    unknown = [v for v in versions if v not in TLS_VERSIONS]
    if not versions or unknown:
        raise ValueError(f"CommitGate serves {list(TLS_VERSIONS)}, got {text!r}")
    return versions


def _mechanisms(text: str) -> tuple[str, ...]:
    return tuple(m.upper() for m in _list(text))


def _non_negative(text: str) -> int:
    if int(text) < 0:
        raise ValueError("expected 0 or more")
    return int(text)


# Kafka's name: (field, parser, help)
SECURITY_SETTINGS: dict[str, tuple[str, Callable[[str], object], str]] = {
    "ssl.keystore.type": ("ssl_keystore_type", _choice(KEYSTORE_TYPES, str.upper),
                          "PEM (the default) or PKCS12; JKS cannot be read: convert it"),
    "ssl.keystore.location": ("ssl_keystore_location", str,
                              ("the listener's private key and certificate chain (a PEM file "
                              "with both, or a PKCS12 file)")),
    "ssl.keystore.password": ("ssl_keystore_password", str,
                              "PKCS12's password; for PEM, the key's if it is encrypted"),
    "ssl.key.password": ("ssl_key_password", str, "the private key's password"),
    "ssl.keystore.certificate.chain": ("ssl_keystore_certificate_chain", str,
                                       "the certificate chain as PEM text"),
    "ssl.keystore.key": ("ssl_keystore_key", str, "the private key as PEM text"),
    "ssl.truststore.type": ("ssl_truststore_type", _choice(KEYSTORE_TYPES, str.upper),
                            "PEM (the default) or PKCS12"),
    "ssl.truststore.location": ("ssl_truststore_location", str,
                                "the CA certificates client certificates are checked against"),
    "ssl.truststore.password": ("ssl_truststore_password", str, "PKCS12's password"),
    "ssl.truststore.certificates": ("ssl_truststore_certificates", str,
                                    "the CA certificates as PEM text"),
    "ssl.client.auth": ("ssl_client_auth", _choice(CLIENT_AUTH, str.lower),
                        "none (the default), requested or required: client certificates"),
    "ssl.enabled.protocols": ("ssl_enabled_protocols", _tls_versions,
                              "TLS versions served (TLSv1.2,TLSv1.3)"),
    "ssl.cipher.suites": ("ssl_cipher_suites", _list,
                          "TLS 1.2 cipher suites by OpenSSL's names (OpenSSL's defaults)"),
    "ssl.principal.mapping.rules": ("ssl_principal_mapping_rules", str,
                                    ("RULE:pattern/replacement/[LU] entries and DEFAULT: a "
                                    "client certificate's subject to a user name")),
    "sasl.enabled.mechanisms": ("sasl_enabled_mechanisms", _mechanisms,
                                ("PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER (Kafka's "
                                "default GSSAPI is not served: set it for a SASL listener)")),
    "connections.max.reauth.ms": ("connections_max_reauth_ms", _non_negative,
                                  ("SASL sessions last at most this long, then the client "
                                  "re-authenticates (0: no limit)")),
    "sasl.server.max.receive.size": ("sasl_server_max_receive_size", _non_negative,
                                     "largest SASL token before authentication (524288)"),
    "connection.failed.authentication.delay.ms": (
        "connection_failed_authentication_delay_ms", _non_negative,
        ("a failed authentication is answered after this long, longer for an address that "
        "keeps failing (100)")),
    "sasl.oauthbearer.jwks.endpoint.url": ("sasl_oauthbearer_jwks_endpoint_url", str,
                                           ("OAUTHBEARER: the signing keys, a file:// URL of "
                                           "a JWKS document")),
    "sasl.oauthbearer.expected.audience": ("sasl_oauthbearer_expected_audience", _list,
                                           "OAUTHBEARER: a token's aud must hold one of these"),
    "sasl.oauthbearer.expected.issuer": ("sasl_oauthbearer_expected_issuer", str,
                                         "OAUTHBEARER: a token's iss must be this"),
    "sasl.oauthbearer.clock.skew.seconds": ("sasl_oauthbearer_clock_skew_seconds",
                                            _non_negative,
                                            "OAUTHBEARER: leeway on exp, nbf and iat (30)"),
    "sasl.oauthbearer.sub.claim.name": ("sasl_oauthbearer_sub_claim_name", str,
                                        "OAUTHBEARER: the claim naming the principal (sub)"),
}

LISTENER_PREFIX = "listener.name."


def split_listener_key(key: str) -> tuple[str, str] | None:
    """``listener.name.NAME.SETTING`` as (NAME upper case, SETTING), if it is one."""
    if not key.startswith(LISTENER_PREFIX):
        return None
    name, _, setting = key[len(LISTENER_PREFIX):].partition(".")
    if not name or setting not in SECURITY_SETTINGS:
        raise ValueError(f"unknown setting {key!r}: listener.name.NAME. takes one of the "
                         f"ssl.* and sasl.* settings")
    return name.upper(), setting

"""TLS for the SSL and SASL_SSL listeners, from Kafka's ssl.* settings, with Python's ``ssl``.

The keystore is PEM (a file holding the key and its chain, or the two as text) or PKCS12;
the truststore is PEM or PKCS12. A PKCS12 keystore is handed to OpenSSL through an anonymous
in-memory file, never written to disk. Whatever cannot be loaded refuses the start, naming the
setting: a listener never falls back to plaintext.
"""
from __future__ import annotations

import os
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from commitgate.gateway.security.config import SecurityConfig
from commitgate.gateway.security.principal_rules import map_name, parse_rules

ANONYMOUS = "User:ANONYMOUS"
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}


class SecurityError(ValueError):
    """A setting asks for security that cannot be provided; the broker does not start."""


def server_context(security: SecurityConfig, listener: str) -> ssl.SSLContext:
    """The TLS context of ``listener``; SecurityError names the setting at fault."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_VERSIONS[v] for v in security.ssl_enabled_protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    context.options |= ssl.OP_NO_RENEGOTIATION
    _load_keystore(context, security, listener)
    _load_truststore(context, security, listener)
    context.verify_mode = _CLIENT_AUTH[security.ssl_client_auth]
    if context.verify_mode != ssl.CERT_NONE and not context.get_ca_certs():
        raise SecurityError(f"ssl.client.auth={security.ssl_client_auth} on listener "
                            f"{listener} needs ssl.truststore.location or "
                            f"ssl.truststore.certificates: client certificates are checked "
                            f"against it")
    if security.ssl_cipher_suites:
        try:
            context.set_ciphers(":".join(security.ssl_cipher_suites))
        except ssl.SSLError:
            raise SecurityError(f"ssl.cipher.suites on listener {listener}: none of "
                                f"{list(security.ssl_cipher_suites)} is a cipher suite OpenSSL "
                                f"knows (OpenSSL names, e.g. ECDHE-RSA-AES128-GCM-SHA256)") \
                from None
    parse_rules(security.ssl_principal_mapping_rules)  # refused now, not at the first client
    return context


def _load_keystore(context: ssl.SSLContext, security: SecurityConfig, listener: str) -> None:
    password = security.ssl_key_password or security.ssl_keystore_password or None
    if security.ssl_keystore_certificate_chain or security.ssl_keystore_key:
        if not (security.ssl_keystore_certificate_chain and security.ssl_keystore_key):
            raise SecurityError(f"listener {listener}: ssl.keystore.certificate.chain and "
                                f"ssl.keystore.key go together")
        pem = (security.ssl_keystore_key.strip() + "\n" +
               security.ssl_keystore_certificate_chain.strip() + "\n").encode()
        _load_pem_chain(context, pem, password, "ssl.keystore.key", listener)
        return
    location = security.ssl_keystore_location
    if not location:
        raise SecurityError(f"listener {listener} serves TLS: set ssl.keystore.location (or "
                            f"ssl.keystore.certificate.chain and ssl.keystore.key)")
    data = _read(location, "ssl.keystore.location", listener)
    if security.ssl_keystore_type == "PKCS12":
        data = _pkcs12_as_pem(data, security.ssl_keystore_password, location, listener)
        password = None
    _load_pem_chain(context, data, password, "ssl.keystore.location", listener)


def _pkcs12_as_pem(data: bytes, password: str, location: str, listener: str) -> bytes:
    try:
        key, certificate, chain = pkcs12.load_key_and_certificates(
            data, password.encode() if password else None)
    except ValueError as exc:
        raise SecurityError(f"ssl.keystore.location {location} (listener {listener}): not a "
                            f"PKCS12 keystore this password opens: {exc}") from None
    if key is None or certificate is None:
        raise SecurityError(f"ssl.keystore.location {location} (listener {listener}): the "
                            f"PKCS12 keystore holds no private key and certificate")
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    for cert in (certificate, *chain):
        pem += cert.public_bytes(serialization.Encoding.PEM)
    return pem


def _load_pem_chain(context: ssl.SSLContext, pem: bytes, password: str | None, setting: str,
                    listener: str) -> None:
    """OpenSSL reads the key and chain from a file: an anonymous in-memory one."""
    fd = os.memfd_create("commitgate-keystore", os.MFD_CLOEXEC)
    try:
        os.write(fd, pem)
        path = f"/proc/self/fd/{fd}"
        context.load_cert_chain(path, path, password=password)
    except ssl.SSLError as exc:
        raise SecurityError(f"{setting} (listener {listener}): not a PEM private key with its "
                            f"certificate chain, or the key's password (ssl.key.password) is "
                            f"wrong: {exc.reason or exc}") from None
    finally:
        os.close(fd)


def _load_truststore(context: ssl.SSLContext, security: SecurityConfig, listener: str) -> None:
    if security.ssl_truststore_certificates:
        _load_cas(context, security.ssl_truststore_certificates, "ssl.truststore.certificates",
                  listener)
        return
    location = security.ssl_truststore_location
    if not location:
        return
    data = _read(location, "ssl.truststore.location", listener)
    if security.ssl_truststore_type == "PKCS12":
        password = security.ssl_truststore_password.encode() or None
        try:
            certificates = pkcs12.load_pkcs12(data, password).additional_certs
        except ValueError as exc:
            raise SecurityError(f"ssl.truststore.location {location} (listener {listener}): "
                                f"not a PKCS12 truststore this password opens: {exc}") from None
        text = "".join(c.certificate.public_bytes(serialization.Encoding.PEM).decode()
                       for c in certificates)
    else:
        text = data.decode(errors="replace")
    _load_cas(context, text, "ssl.truststore.location", listener)


def _load_cas(context: ssl.SSLContext, pem: str, setting: str, listener: str) -> None:
    try:
        context.load_verify_locations(cadata=pem)
    except (ssl.SSLError, ValueError) as exc:
        raise SecurityError(f"{setting} (listener {listener}): no PEM certificates: "
                            f"{exc}") from None


def _read(location: str, setting: str, listener: str) -> bytes:
    try:
        return Path(location).read_bytes()
    except OSError as exc:
        raise SecurityError(f"{setting} (listener {listener}): cannot read {location}: "
                            f"{exc.strerror}") from None


def certificate_principal(der: bytes | None, security: SecurityConfig) -> str:
    """``User:NAME`` of a client certificate's subject mapped by the rules; ANONYMOUS without
    one. PermissionError when no rule matches (the connection is refused)."""
    if not der:
        return ANONYMOUS
    subject = x509.load_der_x509_certificate(der).subject.rfc4514_string()
    return "User:" + map_name(parse_rules(security.ssl_principal_mapping_rules), subject)

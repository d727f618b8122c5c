"""The server side of a SCRAM exchange (RFC 5802, RFC 7677), as Kafka's ScramSaslServer runs it.

client-first ``n,,n=USER,r=CNONCE`` -> server-first ``r=CNONCE+SNONCE,s=SALT,i=ITERATIONS``;
client-final ``c=biws,r=NONCE,p=PROOF`` -> server-final ``v=SERVER_SIGNATURE``. As Kafka, the
final nonce must end with the server-first nonce (librdkafka 2.0, Debian's kcat, sends its own
nonce again in front, which scramp, the library first used here, refused), channel binding and
extensions (delegation tokens' ``tokenauth``) are refused, and the proof is checked against the
stored keys only. Written here rather than taken from scramp for that nonce rule; the tests
drive it with scramp's client.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass

from commitgate.gateway.security.scram_store import HASHES, ScramCredential

SERVER_NONCE_BYTES = 17  # 136 random bits (Kafka's: 130)
GS2_HEADER = "n,,"  # no channel binding, no authorization id


class ScramRefused(Exception):
    """Why the exchange failed (for the log; the client is told only that it failed)."""


@dataclass
class ScramExchange:
    mechanism: str
    nonce: str = ""
    first_bare: str = ""
    server_first: str = ""
    user: str = ""
    credential: ScramCredential | None = None

    def client_first(self, message: str, lookup) -> str:
        """The server-first message; ``lookup(user)`` gives the user's credential or None."""
        if not message.startswith(GS2_HEADER):
            raise ScramRefused(f"unsupported GS2 header in {message[:8]!r} (channel binding and "
                               f"authorization ids are not served)")
        self.first_bare = message[len(GS2_HEADER):]
        fields = _fields(self.first_bare)
        if list(fields) != ["n", "r"]:
            raise ScramRefused(f"client-first attributes {list(fields)}: expected n and r only "
                               f"(no extensions)")
        self.user = _unescape(fields["n"])
        self.credential = lookup(self.user)
        if self.credential is None:
            raise ScramRefused(f"no {self.mechanism} credential for {self.user!r}")
        self.nonce = fields["r"] + secrets.token_hex(SERVER_NONCE_BYTES)
        self.server_first = (f"r={self.nonce},s={base64.b64encode(self.credential.salt).decode()}"
                             f",i={self.credential.iterations}")
        return self.server_first

    def client_final(self, message: str) -> str:
        """The server-final message once the client's proof checks out."""
        without_proof, sep, proof_field = message.rpartition(",p=")
        fields = _fields(without_proof)
        if not sep or list(fields) != ["c", "r"]:
            raise ScramRefused("client-final must be c=...,r=...,p=...")
        if fields["c"] != base64.b64encode(GS2_HEADER.encode()).decode():
            raise ScramRefused("channel binding data differs from the GS2 header sent")
        if not fields["r"].endswith(self.nonce):  # Kafka's rule
            raise ScramRefused("the final nonce does not end with the server-first nonce")
        try:
            proof = base64.b64decode(proof_field, validate=True)
        except binascii.Error:
            raise ScramRefused("the proof is not base64") from None
        assert self.credential is not None
        digest = HASHES[self.mechanism]
        auth_message = f"{self.first_bare},{self.server_first},{without_proof}".encode()
        signature = hmac.digest(self.credential.stored_key, auth_message, digest)
        if len(proof) != len(signature):
            raise ScramRefused("the proof has the wrong length")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(digest, client_key).digest(),
                                   self.credential.stored_key):
            raise ScramRefused("the proof does not match the stored key")
        server_signature = hmac.digest(self.credential.server_key, auth_message, digest)
        return "v=" + base64.b64encode(server_signature).decode()


def _fields(message: str) -> dict[str, str]:
    """``k=v`` attributes in order; a malformed one is refused."""
    fields: dict[str, str] = {}
    for item in message.split(","):
        key, sep, value = item.partition("=")
        if not sep or len(key) != 1 or not value or key in fields:
            raise ScramRefused(f"malformed SCRAM attribute {item[:20]!r}")
        fields[key] = value
    return fields


def _unescape(name: str) -> str:
    """RFC 5802's user names: ``=2C`` is a comma, ``=3D`` an equals sign, no other ``=``."""
    if name.replace("=2C", "").replace("=3D", "").count("="):
        raise ScramRefused("a user name may hold '=' only as =2C or =3D")
    return name.replace("=2C", ",").replace("=3D", "=")

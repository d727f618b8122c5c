"""The SCRAM credentials (RFC 5802 / 7677) that SASL checks: per user and mechanism, the salt,
the iteration count, StoredKey and ServerKey. No password is stored, in any form it could be
read back from: PLAIN logins are checked by salting the password given against the same
credentials. AlterUserScramCredentials changes them (Kafka's rules and messages, as its
ScramControlManager), ``commitgate user add`` writes the first before the broker starts; the
table is atomically replaced in ``<data>/broker/scram_credentials.json`` (mode 0600)."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from commitgate.engine.topic_table import atomic_write
from commitgate.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

FILE_NAME = "scram_credentials.json"
# the wire's ScramMechanism codes, the hash of each, and Kafka's iteration bounds
MECHANISM_CODES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
CODES = {name: code for code, name in MECHANISM_CODES.items()}
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 8192


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted(cls, mechanism: str, salt: bytes, salted_password: bytes,
                    iterations: int) -> ScramCredential:
        digest = HASHES[mechanism]
        client_key = hmac.digest(salted_password, b"Client Key", digest)
        return cls(salt, hashlib.new(digest, client_key).digest(),
                   hmac.digest(salted_password, b"Server Key", digest), iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str,
                      iterations: int = DEFAULT_ITERATIONS) -> ScramCredential:
        salt = os.urandom(32)
        return cls.from_salted(mechanism, salt, salt_password(mechanism, password, salt,
                                                              iterations), iterations)

    def matches(self, mechanism: str, password: str) -> bool:
        """Whether ``password`` is the one these keys were made from."""
        again = ScramCredential.from_salted(mechanism, self.salt, salt_password(
            mechanism, password, self.salt, self.iterations), self.iterations)
        return hmac.compare_digest(again.stored_key, self.stored_key)

    def to_json(self) -> dict:
        return {"salt": _b64(self.salt), "stored_key": _b64(self.stored_key),
                "server_key": _b64(self.server_key), "iterations": self.iterations}

    @classmethod
    def from_json(cls, body: dict) -> ScramCredential:
        return cls(base64.b64decode(body["salt"]), base64.b64decode(body["stored_key"]),
                   base64.b64decode(body["server_key"]), int(body["iterations"]))


def salt_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(HASHES[mechanism], password.encode(), salt, iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass(frozen=True)
class Upsertion:
    user: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


class ScramStore:
    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME
        self.users: dict[str, dict[str, ScramCredential]] = {}
        if self.path.exists():
            body = json.loads(self.path.read_text())
            self.users = {user: {m: ScramCredential.from_json(c) for m, c in creds.items()}
                          for user, creds in body["users"].items()}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.users.get(user, {}).get(mechanism)

    def check_password(self, user: str, password: str) -> bool:
        """PLAIN: the password against the user's strongest SCRAM credential."""
        for mechanism in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            credential = self.get(user, mechanism)
            if credential is not None:
                return credential.matches(mechanism, password)
        return False

    def put(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        """Set one credential and save (``commitgate user add``)."""
        self.users.setdefault(user, {})[mechanism] = credential
        self._save()

    def describe(self, users: list[str] | None) -> list[tuple[str, ErrorCode, str | None,
                                                              dict[str, int]]]:
        """(user, error, message, {mechanism: iterations}) for the users asked (all: None)."""
        if users is None:
            return [(u, ErrorCode.NONE, None, self._infos(u)) for u in sorted(self.users)]
        counts = {u: users.count(u) for u in users}
        results = []
        for user in dict.fromkeys(users):
            if counts[user] > 1:
                results.append((user, ErrorCode.DUPLICATE_RESOURCE,
                                (f"Cannot describe SCRAM credentials for the same user twice in "
                                f"a single request: {user}"), {}))
            elif user not in self.users:
                results.append((user, ErrorCode.RESOURCE_NOT_FOUND,
                                (f"Attempt to describe a user credential that does not exist: "
                                f"{user}"), {}))
            else:
                results.append((user, ErrorCode.NONE, None, self._infos(user)))
        return results

    def _infos(self, user: str) -> dict[str, int]:
        return {m: c.iterations for m, c in sorted(self.users[user].items())}

    def alter(self, deletions: list[tuple[str, int]], upsertions: list[Upsertion]
              ) -> dict[str, tuple[ErrorCode, str | None]]:
        """Apply what passes Kafka's checks, save once; each user's result."""
        results: dict[str, tuple[ErrorCode, str | None]] = {}
        seen: dict[tuple[str, int], int] = {}
        for key in [*deletions, *((u.user, u.mechanism) for u in upsertions)]:
            seen[key] = seen.get(key, 0) + 1
        changed = False
        for user, code in deletions:
            error = self._check(user, code, seen) or self._check_delete(user, code)
            if error is None:
                del self.users[user][MECHANISM_CODES[code]]
                if not self.users[user]:
                    del self.users[user]
                changed = True
            results.setdefault(user, error or (ErrorCode.NONE, None))
        for up in upsertions:
            error = self._check(up.user, up.mechanism, seen) or _check_upsert(up)
            if error is None:
                name = MECHANISM_CODES[up.mechanism]
                self.users.setdefault(up.user, {})[name] = ScramCredential.from_salted(
                    name, up.salt, up.salted_password, up.iterations)
                changed = True
            results.setdefault(up.user, error or (ErrorCode.NONE, None))
        if changed:
            self._save()
            log.info("SCRAM credentials altered for %s", sorted(results))
        return results

    @staticmethod
    def _check(user: str, code: int, seen: dict) -> tuple[ErrorCode, str] | None:
        if not user:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
        if code not in MECHANISM_CODES:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
        if seen[(user, code)] > 1:
            return (ErrorCode.DUPLICATE_RESOURCE, ("A user credential cannot be altered twice "
                                                  "in the same request"))
        return None

    def _check_delete(self, user: str, code: int) -> tuple[ErrorCode, str] | None:
        if self.get(user, MECHANISM_CODES[code]) is None:
            return (ErrorCode.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist")
        return None

    def _save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = {"version": 1, "users": {u: {m: c.to_json() for m, c in creds.items()}
                                        for u, creds in self.users.items()}}
        atomic_write(self.path, json.dumps(body, sort_keys=True).encode(), mode=0o600)


def _check_upsert(up: Upsertion) -> tuple[ErrorCode, str] | None:
    if up.iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if up.iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if not up.salt or not up.salted_password:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "The salt and salted password must be set"
    return None

"""The admin HTTP listener secured: https with the broker's keystore, HTTP basic against the SCRAM
users, bearer JWTs checked as OAUTHBEARER's; health probes never ask; a listener beyond loopback
with no authentication is refused unless asked for by name."""
from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.error
import urllib.request

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from commitgate.gateway.settings import load
from commitgate.launcher import BrokerProcess
from commitgate.launcher.broker_process import free_port
from tests.security.conftest import USERS, add_users

TIMEOUT_S = 30


def _get(url: str, ca_file, authorization: str | None = None) -> tuple[int, dict, str]:
    request = urllib.request.Request(url, headers={"Authorization": authorization}
                                     if authorization else {})
    context = ssl.create_default_context(cafile=str(ca_file)) if url.startswith("https") \
        else None
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S, context=context) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture(scope="module")
def https_basic(tmp_path_factory, pki):
    data = tmp_path_factory.mktemp("admin-basic") / "data"
    add_users(data, USERS)
    port = free_port()
    overrides = {"admin.listeners": f"https://127.0.0.1:{port}", "admin.authentication": "basic",
                 "ssl.keystore.location": str(pki.server_pem)}
    with BrokerProcess(data, overrides):
        yield f"https://localhost:{port}"


def test_https_with_basic_authentication(https_basic, pki):
    status, headers, _ = _get(https_basic + "/metrics", pki.ca_file)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    assert _get(https_basic + "/metrics", pki.ca_file, _basic("alice", "wrong"))[0] == 401
    assert _get(https_basic + "/metrics", pki.ca_file, _basic("nobody", "x"))[0] == 401
    assert _get(https_basic + "/metrics", pki.ca_file, "Basic !!!not-base64")[0] == 401
    status, _, body = _get(https_basic + "/metrics", pki.ca_file,
                           _basic("alice", USERS["alice"][1]))
    assert status == 200 and "commitgate_connections_open" in body
    assert _get(https_basic + "/v1/topics", pki.ca_file, _basic("bob", USERS["bob"][1]))[0] == 200


def test_health_probes_never_ask_and_plain_http_is_refused(https_basic, pki):
    assert _get(https_basic + "/healthz", pki.ca_file)[0] == 200
    assert _get(https_basic + "/readyz", pki.ca_file)[0] == 200
    with pytest.raises(OSError):  # the TLS listener closes on a plaintext request
        urllib.request.urlopen(https_basic.replace("https://", "http://") + "/healthz",
                               timeout=TIMEOUT_S)


def test_bearer_tokens_are_checked_as_oauthbearers(tmp_path):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    (tmp_path / "jwks.json").write_text(json.dumps({"keys": [{**jwk, "kid": "a"}]}))
    port = free_port()
    overrides = {"admin.listeners": f"http://127.0.0.1:{port}", "admin.authentication": "bearer",
                 "sasl.oauthbearer.jwks.endpoint.url": f"file://{tmp_path / 'jwks.json'}"}
    now = int(time.time())
    good = jwt.encode({"sub": "ops", "iat": now, "exp": now + 300}, key, algorithm="RS256",
                      headers={"kid": "a"})
    old = jwt.encode({"sub": "ops", "iat": now - 900, "exp": now - 600}, key, algorithm="RS256",
                     headers={"kid": "a"})
    with BrokerProcess(tmp_path / "data", overrides):
        url = f"http://127.0.0.1:{port}/metrics"
        assert _get(url, None, "Bearer " + good)[0] == 200
        status, headers, _ = _get(url, None, "Bearer " + old)
        assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
        assert _get(url, None, _basic("ops", "x"))[0] == 401


def test_an_admin_api_beyond_loopback_needs_authentication_or_none_by_name():
    with pytest.raises(ValueError, match="listens beyond loopback: set admin.authentication"):
        load(None, ["admin.listeners=http://0.0.0.0:9644"])
    assert load(None, ["admin.listeners=http://0.0.0.0:9644",
                       "admin.authentication=none"]).admin_authentication == "none"
    assert load(None, ["admin.listeners=https://0.0.0.0:9644", "admin.authentication=basic"]
                ).admin_https

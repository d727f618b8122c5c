"""The container image (docker/Dockerfile) built and run with podman and runc.

No image registry is reachable here, so the base image is made from Debian's packages with
mmdebstrap and ``podman import`` (Debian's own Python 3.11, as the Dockerfile must take a plain
Debian base as well as the official Python image). The base carries this machine's CA bundle and
a pip.conf naming it, as a site's base image would: pip reaches PyPI through it during the build.
It is tagged by a hash of its recipe and kept, so a later run on the same machine reuses it; the
image, containers and volumes a run makes are removed.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer

from commitgate.launcher import free_port
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
TOOLS = ("podman", "runc", "mmdebstrap")
PODMAN = ["podman", "--runtime", "runc"]
# podman's defaults (nofile 1048576) exceed what this machine lets a container set
ULIMITS = ["--ulimit", "nofile=20000:20000", "--ulimit", "nproc=1024:1024"]
BASE_PACKAGES = "python3,python3-venv,gcc,libc6-dev,libpython3-dev,ca-certificates"
SITE_CA = Path(os.environ.get("PIP_CERT", "/etc/ssl/certs/ca-certificates.crt"))
# small store files: the default 1 GiB CommitLog segment and 420 MB IndexFile are not needed
STORE_ENV = {"COMMITGATE_COMMITLOG_SEGMENT_BYTES": str(64 << 20),
             "COMMITGATE_INDEX_HASH_SLOTS": "50000", "COMMITGATE_INDEX_MAX_ENTRIES": "200000"}
CLEAN_STOP = "CommitGate stopped cleanly"
RECORDS = 200
NODE_ID = 7

missing = [tool for tool in TOOLS if shutil.which(tool) is None]
# minutes on a machine without the base image (mmdebstrap), under one with it
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    bool(missing), reason=f"{', '.join(missing)} not installed: the image is built and run with "
    "podman and runc on a base made by mmdebstrap (.ci/run installs them as root)")]


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([*PODMAN, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, check=False)
    assert done.returncode == 0 or not check, \
        f"podman {' '.join(args)} exited {done.returncode}:\n{(done.stdout + done.stderr)[-3000:]}"
    return done


def _mmdebstrap_command() -> list[str]:
    customize = ""
    if SITE_CA.is_file():
        customize = (f'cp {SITE_CA} "$1/etc/ssl/certs/site-ca.crt" && printf "[global]\\n'
                     'cert = /etc/ssl/certs/site-ca.crt\\n" > "$1/etc/pip.conf"')
    command = ["mmdebstrap", "--quiet", "--variant=minbase", f"--include={BASE_PACKAGES}",
               "--hook-dir=/usr/share/mmdebstrap/hooks/eatmydata",
               *(f"--dpkgopt=path-exclude=/usr/share/{d}/*" for d in ("doc", "man", "locale"))]
    if customize:
        command.append(f"--customize-hook={customize}")
    return [*command, "bookworm", "-"]


def _base_tag(command: list[str]) -> str:
    recipe = hashlib.sha256("\0".join(command).encode())
    if SITE_CA.is_file():
        recipe.update(SITE_CA.read_bytes())
    return f"localhost/commitgate-test-base:bookworm-{recipe.hexdigest()[:12]}"


@pytest.fixture(scope="session")
def base_image() -> str:
    """Debian bookworm with Python, made once per machine (about 1-2 minutes) and kept."""
    command = _mmdebstrap_command()
    tag = _base_tag(command)
    if podman("image", "exists", tag, check=False).returncode == 0:
        return tag
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as debootstrap:
        imported = subprocess.run([*PODMAN, "import", "-", tag], stdin=debootstrap.stdout,
                                  capture_output=True, text=True, timeout=900, check=False)
        debootstrap.stdout.close()
        errors = debootstrap.stderr.read().decode(errors="replace")
    if debootstrap.returncode != 0:  # never keep an image of a half-made tree
        podman("rmi", "--force", tag, check=False)
    assert debootstrap.returncode == 0, f"mmdebstrap exited {debootstrap.returncode}:\n{errors}"
    assert imported.returncode == 0, f"podman import failed:\n{imported.stderr}"
    return tag


@pytest.fixture(scope="module")
def image(base_image: str) -> Iterator[str]:
    tag = f"localhost/commitgate-test:{uuid.uuid4().hex[:12]}"
    # docker format keeps the HEALTHCHECK; the host's network reaches PyPI for pip; no layer
    # cache, so removing the image leaves nothing of the build behind
    podman("build", "--pull=never", "--network=host", "--format=docker", "--layers=false",
           *ULIMITS, f"--build-arg=BASE={base_image}", "-f", "docker/Dockerfile", "-t", tag, ".",
           timeout=900)
    yield tag
    podman("rmi", "--force", tag, check=False)


@dataclass
class Container:
    """One container of the image: the Kafka port published on loopback, /data on a volume."""
    image: str
    name: str = field(default_factory=lambda: f"commitgate-test-{uuid.uuid4().hex[:12]}")
    port: int = field(default_factory=free_port)

    @property
    def volume(self) -> str:
        return f"{self.name}-data"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def run(self) -> None:
        env = {**STORE_ENV, "COMMITGATE_ADVERTISED_LISTENERS": f"PLAINTEXT://{self.bootstrap}"}
        podman("run", "--detach", "--name", self.name, *ULIMITS, "-v", f"{self.volume}:/data",
               "-p", f"{self.bootstrap}:9092",
               *(f"--env={key}={value}" for key, value in env.items()), self.image,
               "--override", f"node.id={NODE_ID}")  # arguments of `commitgate serve`
        self.wait_healthy()

    def wait_healthy(self) -> None:
        """The image's HEALTHCHECK (the admin /readyz) passes."""
        wait_until(lambda: self.state() != "running"
                   or podman("healthcheck", "run", self.name, check=False).returncode == 0,
                   f"container {self.name} healthy", interval_s=0.5)
        assert self.state() == "running", f"container {self.name} exited:\n{self.logs()}"

    def state(self) -> str:
        return self.inspect("{{.State.Status}}")

    def inspect(self, template: str) -> str:
        return podman("inspect", "--format", template, self.name).stdout.strip()

    def logs(self) -> str:
        done = podman("logs", self.name)
        return done.stdout + done.stderr

    def remove(self) -> None:
        podman("rm", "--force", "--time", "0", self.name, check=False)
        podman("volume", "rm", "--force", self.volume, check=False)


@pytest.fixture
def container(image: str) -> Iterator[Container]:
    running = Container(image)
    yield running
    running.remove()


def _produce(bootstrap: str, topic: str) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for i in range(RECORDS):
            producer.send(topic, key=b"k%d" % i, value=b"v%d" % i)
        producer.flush(timeout=60)
    finally:
        producer.close()


def _consume(bootstrap: str, topic: str) -> list[bytes]:
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=60_000)
    try:
        values = []
        for record in consumer:
            values.append(record.value)
            if len(values) == RECORDS:
                break
        return values
    finally:
        consumer.close()


def test_produce_restart_consume_through_published_port(container: Container) -> None:
    container.run()
    _produce(container.bootstrap, "through-the-port")
    expected = [b"v%d" % i for i in range(RECORDS)]
    assert _consume(container.bootstrap, "through-the-port") == expected

    podman("restart", "--time", "30", container.name)
    container.wait_healthy()
    assert _consume(container.bootstrap, "through-the-port") == expected
    logs = container.logs()
    assert CLEAN_STOP in logs, logs
    starts = [line for line in logs.splitlines() if "CommitGate listening" in line]
    assert len(starts) == 2 and "clean start" in starts[1], logs
    # listening on the container's every address, advertising the published port (a variable),
    # node id from --override
    assert f"on PLAINTEXT://0.0.0.0:9092 (advertised as PLAINTEXT://{container.bootstrap}), " \
           f"node {NODE_ID}," in starts[0]


def test_runs_as_non_root_and_stops_cleanly_on_sigterm(container: Container) -> None:
    container.run()
    uid = podman("exec", container.name, "id", "-u").stdout.strip()
    assert uid != "0" and uid.isdigit(), f"the broker runs as uid {uid}"
    assert container.inspect("{{.Config.User}}") == "commitgate"

    # the broker is PID 1 itself, so SIGTERM reaches its handler and not a shell
    assert "serve" in podman("exec", container.name, "cat", "/proc/1/cmdline").stdout

    podman("stop", "--time", "30", container.name)  # SIGTERM; SIGKILL only after 30 s
    assert container.inspect("{{.State.ExitCode}}") == "0", container.logs()
    assert CLEAN_STOP in container.logs()

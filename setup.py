"""Build CommitGate under one import root; everything else lives in pyproject.toml.

The repository's top-level folders (engine/, protocol/, gateway/, ...) are the subpackages of
``commitgate``: they are mapped under that name here, so the layout stays flat while the wheel
installs one top-level import name (``commitgate.engine``, ``commitgate.gateway``, ...).

The C extensions are optional: without a C compiler the install still succeeds and the
pure-Python fallbacks run, with the same checks and answers (``COMMITGATE_NO_C=1`` forces them
where the helpers are built).
"""
from setuptools import Extension, find_packages, setup

ROOT = "commitgate"
SUBPACKAGES = ("native", "engine", "protocol", "gateway", "launcher", "pipeline", "bench", "cli",
               "compat_tests")
INCLUDE = ["native"]  # the C headers the helpers share


def packages() -> list[str]:
    found = find_packages(include=[f"{name}*" for name in SUBPACKAGES])
    return [ROOT, *(f"{ROOT}.{name}" for name in found)]


def extension(name: str, source: str, depends: list[str]) -> Extension:
    return Extension(f"{ROOT}.{name}", [source], include_dirs=INCLUDE, depends=depends,
                     optional=True)


setup(
    packages=packages(),
    package_dir={ROOT: ROOT, **{f"{ROOT}.{name}": name for name in SUBPACKAGES}},
    package_data={f"{ROOT}.protocol": ["schemas/*.json"],
                  # the compatibility matrix's drivers in other languages, run from the package
                  f"{ROOT}.compat_tests": ["drivers/java/*.java", "drivers/*/*.js",
                                            "drivers/*/package.json",
                                            "drivers/*/package-lock.json"]},
    ext_modules=[
        extension("protocol._record_keys", "protocol/_record_keys.c",
                  ["native/body_scanner.h", "native/big_endian.h"]),
        extension("engine._commit_log", "engine/_commit_log.c",
                  ["native/body_scanner.h", "native/big_endian.h"]),
        extension("engine._queue_core", "engine/_queue_core.c", ["native/big_endian.h"]),
    ],
)

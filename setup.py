"""Build the C helpers; everything else lives in pyproject.toml.

The extensions are optional: without a C compiler the install still succeeds,
``protocol.record_batch`` falls back to aiokafka's compiled record reader, the IndexBuilder
walks the CommitLog in Python and ConsumeQueue units are packed by engine/queue_core.py
(correct, slower).
"""
from setuptools import Extension, setup

INCLUDE = ["."]  # engine/body_scanner.h (the interface between the first two), big_endian.h

setup(ext_modules=[
    Extension("protocol._record_keys", ["protocol/_record_keys.c"], include_dirs=INCLUDE,
              depends=["engine/body_scanner.h"], optional=True),
    Extension("engine._commit_log", ["engine/_commit_log.c"], include_dirs=INCLUDE,
              depends=["engine/body_scanner.h", "engine/big_endian.h"], optional=True),
    Extension("engine._queue_core", ["engine/_queue_core.c"], include_dirs=INCLUDE,
              depends=["engine/big_endian.h"], optional=True),
])

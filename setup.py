"""Build the one C helper; everything else lives in pyproject.toml.

The extension is optional: without a C compiler the install still succeeds and
``protocol.record_batch`` falls back to aiokafka's compiled record reader (correct, slower).
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension("protocol._record_keys", ["protocol/_record_keys.c"], optional=True)])

"""The handler registry (gateway/handlers/__init__.py): the scan that fills the route table."""
import sys

import pytest

from commitgate.gateway import handlers

SECOND = "zz_second_api_versions"
DUPLICATE = '''
API_KEY = 18  # ApiVersions, which handlers/api_versions.py serves
VERSIONS = (0, 4)


async def handle(ctx, request):
    return None
'''


def test_registry_second_module_for_one_api_key_fails_the_scan(tmp_path, monkeypatch):
    (tmp_path / f"{SECOND}.py").write_text(DUPLICATE)
    monkeypatch.setattr(handlers, "__path__", [*handlers.__path__, str(tmp_path)])
    try:
        with pytest.raises(RuntimeError, match=f"{SECOND}: API key 18 is already served by "
                                               r".*\.handlers\.api_versions"):
            handlers.all_handlers.__wrapped__()  # the scan itself, not the start's cached table
    finally:
        sys.modules.pop(f"{handlers.__name__}.{SECOND}", None)

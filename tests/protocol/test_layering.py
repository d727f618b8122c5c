"""protocol/ reaches nothing of engine/: no Python module imports it and no C helper includes
its files (the headers both share live in include/)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

PROTOCOL = Path(__file__).resolve().parents[2] / "protocol"


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_no_protocol_module_imports_the_engine() -> None:
    found = {path.name: name for path in PROTOCOL.rglob("*.py") for name in _imports(path)
             if name.split(".")[:2] == ["commitgate", "engine"] or name.startswith("engine")}
    assert found == {}


def test_no_protocol_c_helper_includes_an_engine_file() -> None:
    includes = {path.name: re.findall(r'#include\s+"([^"]+)"', path.read_text())
                for path in PROTOCOL.glob("*.c")}
    assert includes and all(includes.values())
    assert not [name for names in includes.values() for name in names
                if "engine" in name or not (PROTOCOL.parent / "include" / name).is_file()]

"""The house's structure, read from the code's own imports (``TYPE_CHECKING`` ones included):
each package imports only the packages below it, no modules import each other in a circle, and
``protocol/`` includes nothing of ``engine/`` in C either (the headers both share live in
``native/``)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# what each of commitgate's subpackages may import, besides itself: the layers, bottom up
MAY_IMPORT: dict[str, set[str]] = {
    "native": set(),
    "engine": {"native"},
    "protocol": {"native"},
    "gateway": {"native", "engine", "protocol"},
    "launcher": set(),
    "pipeline": {"launcher"},
    "compat_tests": {"protocol", "launcher"},
    "bench": {"native", "engine", "protocol", "gateway", "launcher", "pipeline"},
    "cli": {"native", "engine", "protocol", "gateway", "launcher", "pipeline", "bench",
            "compat_tests"},
    "commitgate": {"cli"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["commitgate", *parts[1:]] if parts[0] == "commitgate" else
                    ["commitgate", *parts])


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The commitgate modules one file imports: ``from pkg import module`` names the module,
    ``from pkg import name`` the package."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update(f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules
                         else node.module for alias in node.names)
    return found & modules


def _graph() -> dict[str, set[str]]:
    files = [path for package in MAY_IMPORT for path in (ROOT / package).rglob("*.py")]
    modules = {_module_name(path): path for path in files}
    return {name: _imports(path, set(modules)) - {name} for name, path in modules.items()}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in MAY_IMPORT else "commitgate"


def test_every_package_imports_only_the_layers_below_it() -> None:
    upward = sorted(f"{source} -> {target}" for source, targets in _graph().items()
                    for target in targets
                    if _package(target) != _package(source)
                    and _package(target) not in MAY_IMPORT[_package(source)])
    assert upward == []


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root, targets in graph.items():
        if root in index:
            continue
        work = [(root, iter(sorted(targets)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_no_modules_import_each_other_in_a_circle() -> None:
    assert _circles(_graph()) == []


def test_the_circle_finder_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_protocol_c_helper_includes_an_engine_file() -> None:
    protocol = ROOT / "protocol"
    includes = {path.name: re.findall(r'#include\s+"([^"]+)"', path.read_text())
                for path in protocol.glob("*.c")}
    assert includes and all(includes.values())
    assert not [name for names in includes.values() for name in names
                if "engine" in name or not (ROOT / "native" / name).is_file()]

"""The wheel built from the checkout installs one top-level import name, ``commitgate``, with the
repository's top-level folders as its subpackages and the C helpers under them."""
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SUBPACKAGES = ("native", "engine", "protocol", "gateway", "launcher", "pipeline", "bench", "cli",
               "compat_tests")


def _checkout_copy(target: Path) -> Path:
    """The files git knows (committed or not), so the build sees no local build products."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, text=True, check=True).stdout
    for name in listed.splitlines():
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    return target


def test_wheel_has_one_top_level_import_name(tmp_path: Path) -> None:
    source = _checkout_copy(tmp_path / "src")
    out = tmp_path / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                    str(source)], check=True, timeout=600)
    (wheel,) = out.glob("commitgate-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")
            } == {"commitgate"}
    # every source file of the mapped folders, each folder a package (none left out as a
    # namespace package without __init__.py)
    sources = [path.relative_to(source) for folder in SUBPACKAGES
               for path in (source / folder).rglob("*") if path.suffix in (".py", ".java", ".js")
               and "node_modules" not in path.parts]
    assert sources and [str(path) for path in sources
                        if f"commitgate/{path}" not in names] == []
    assert [str(path.parent) for path in sources if path.suffix == ".py"
            and f"commitgate/{path.parent}/__init__.py" not in names] == []
    assert "commitgate/__main__.py" in names
    assert {"commitgate/engine/_commit_log", "commitgate/engine/_queue_core",
            "commitgate/protocol/_record_keys"} <= {name.split(".")[0] for name in names
                                                    if name.endswith(".so")}
    assert "commitgate/protocol/schemas/ConsumerGroupDescribeRequest.json" in names
    top_level = next(n for n in names if n.endswith(".dist-info/top_level.txt"))
    assert zipfile.ZipFile(wheel).read(top_level).decode().split() == ["commitgate"]

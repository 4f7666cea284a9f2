"""The shape of dpcore (docs/guides/architecture.md): no import cycle, no module over 800 lines, and
the mechanisms, the noise, the release and its decoding written once for every engine.

Static analysis of the source (nothing is imported): every ``import`` statement of a module counts,
at the top of the file or inside a function ("deferred" imports included: a function-level import is
still a dependency, and a cycle through one is a cycle in the design that only happens to load);
imports under ``if TYPE_CHECKING:`` do not (they never run: annotations only).
"""

from __future__ import annotations

import ast
import graphlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "dpcore"
#: the largest module allowed, in lines
MAX_LINES = 800
#: what a module that must not know the engine may not name (case-insensitive)
ENGINE_NAMES = re.compile(r"dask_engine|is_lazy|dask", re.IGNORECASE)


def _modules() -> dict[str, Path]:
    """``dpcore.x.y`` -> its file, for every module of the package (a package is its ``__init__``)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The dpcore modules ``name`` imports: ``from A import b`` is module ``A.b`` when that is a module,
    else ``A``; relative imports resolved from ``name``'s package."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking_only(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def test_the_import_graph_is_read_as_python_reads_it():
    """The analysis sees top-level, function-level and relative imports, and skips TYPE_CHECKING."""
    graph = import_graph()
    assert "dpcore.noise" in graph["dpcore.mechanisms.base"]  # top level
    assert "dpcore.noise.streams" in graph["dpcore.noise.grid"]  # within a package
    assert "dpcore.dask_engine" in graph["dpcore.engines"]  # inside a function
    assert "dpcore.dask_engine.kernels" in graph["dpcore.dask_engine.engine"]  # a package's module
    assert "dpcore.release" not in graph["dpcore.table"]  # only under TYPE_CHECKING there


def test_no_import_cycle_in_dpcore():
    graph = import_graph()
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle in dpcore: {' -> '.join(exc.args[1])}") from None


def test_the_cycle_check_catches_a_deferred_cycle():
    """A function-level import closing a loop is reported (the check is not vacuous)."""
    graph = import_graph()
    graph["dpcore.noise"] = graph["dpcore.noise"] | {"dpcore.release"}
    graph["dpcore.release"] = graph["dpcore.release"] | {"dpcore.noise"}
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError:
        return
    raise AssertionError("a cycle noise -> release -> noise was not found")


def test_no_module_over_800_lines():
    sizes = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in _modules().items()}
    assert len(sizes) > 80
    over = {name: n for name, n in sizes.items() if n > MAX_LINES}
    assert not over, f"modules over {MAX_LINES} lines (split them along their seams): {over}"


def test_mechanisms_noise_release_and_decode_name_no_engine():
    """Written once for every engine: they call the table protocol (dpcore.table), never an engine."""
    files = [*sorted((PACKAGE / "mechanisms").rglob("*.py")), *sorted((PACKAGE / "noise").rglob("*.py")),
             PACKAGE / "release.py", PACKAGE / "decode.py"]
    assert len(files) > 25
    hits = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
            for path in files for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if ENGINE_NAMES.search(line)]
    assert not hits, "engine names where the code must not know the engine:\n" + "\n".join(hits)

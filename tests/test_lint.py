"""The code base stays ruff-clean (rules and line length in pyproject.toml)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_clean():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (it is in the [test] extra)")
    proc = subprocess.run([ruff, "check", str(ROOT)], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_dpcore_never_imports_streamlit():
    code = (
        "import importlib, pkgutil, sys, dpcore\n"
        "for m in pkgutil.walk_packages(dpcore.__path__, 'dpcore.'):\n"
        "    importlib.import_module(m.name)\n"
        "print('streamlit' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def _imported_modules(path: Path) -> set[str]:
    import ast

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_no_mechanism_module_imports_another():
    # One floor: a mechanism module may use base.py and the private shared modules (_*.py) beside it,
    # never another mechanism's module; shared code moves into a private module instead.
    folder = ROOT / "dpcore" / "mechanisms"
    mechanisms = {p.stem for p in folder.glob("*.py") if not p.stem.startswith("_") and p.stem != "base"}
    assert {"ron_gauss", "pca_gauss", "jl_laplace", "dppro", "dpmix", "local_gaussian", "modips",
            "identity_laplace", "pca_identity", "rp_gaussian"} <= mechanisms
    offenders = {}
    for path in folder.glob("*.py"):
        if path.stem == "__init__":
            continue
        imported = _imported_modules(path)
        bad = sorted(m for m in mechanisms - {path.stem} if f"dpcore.mechanisms.{m}" in imported)
        if bad:
            offenders[path.name] = bad
    assert not offenders, offenders

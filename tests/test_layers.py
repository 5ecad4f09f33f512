"""Layers import downwards only: every import in the package (at module level or inside a
function; ``if TYPE_CHECKING:`` blocks are annotations, not imports) is checked against what
its layer may use."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "colonnade"

#: What each package may import from the project (besides itself). Presentation (the notebook's
#: HTML views) is reached only by ``_repr_html_`` methods, which notebooks call.
BASE = {"errors", "config", "faults", "_lazy", "__version__", "sqlnames"}
ALLOWED = {
    "encoding": BASE,
    "schema": BASE | {"encoding", "expressions"},
    "expressions": BASE | {"encoding", "schema"},
    "storage": BASE | {"encoding"},
    "table": BASE | {"encoding", "schema", "storage", "expressions", "notebook"},
    "query": BASE | {"encoding", "schema", "storage", "expressions", "table", "notebook"},
    "ingest": BASE | {"encoding", "schema", "storage", "expressions", "table"},
    "stream": BASE | {"encoding", "schema", "storage", "expressions", "table"},
    "geo": BASE | {"encoding", "schema", "storage", "expressions", "table"},
}
#: Packages the library never imports (the command line renders what the library reports).
NEVER_IN_LIBRARY = {"cli"}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, top-level project package) of every import outside ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] == "colonnade" and len(parts) > 1:
                found.append((node.lineno, parts[1]))
            elif parts == ["colonnade"]:
                found.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "colonnade" and len(parts) > 1:
                    found.append((node.lineno, parts[1]))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _modules(package: str) -> list[Path]:
    return sorted((SRC / package).rglob("*.py"))


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_layer_imports_only_the_layers_below_it(package: str) -> None:
    wrong = [f"{path.relative_to(SRC)}:{line} imports colonnade.{target}"
             for path in _modules(package) for line, target in _imports(path)
             if target != package and target not in ALLOWED[package]]
    assert not wrong, "\n".join(wrong)


def test_the_library_never_imports_the_command_line() -> None:
    library = [p for p in SRC.rglob("*.py") if p.relative_to(SRC).parts[0] not in ("cli", "bench")]
    wrong = [f"{path.relative_to(SRC)}:{line} imports colonnade.{target}"
             for path in library for line, target in _imports(path) if target in NEVER_IN_LIBRARY]
    assert not wrong, "\n".join(wrong)


def test_the_checker_sees_imports_inside_functions_and_skips_annotations(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from colonnade.cli import x\n"
                      "def f():\n    from colonnade.ingest.pipeline import ingest\n    import colonnade.query.adapter\n")
    assert _imports(module) == [(5, "ingest"), (6, "query")]

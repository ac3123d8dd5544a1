"""DESIGN.md: imports only go down. codec -> remoting -> store -> namesrv/broker -> client -> admin/cli/spark.

store and remoting are siblings: neither imports the other. codec is sans-I/O. config is the
framework every layer declares its own config dataclass with, so it sits below them all.
filter (the SQL92 expression parser and evaluator, DESIGN.md's "SQL92 filter" row) is sans-I/O
too and sits just above codec: the broker filters pulls with it and the client parses
subscriptions with it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "rocketq"

# What each layer may import from inside rocketq (besides itself and the shared leaves).
# configfile: the data-dir JSON tables' atomic writes and single writer, used by namesrv and broker.
SHARED = {"errors", "codec", "config", "configfile", "acl"}
ALLOWED: dict[str, set[str]] = {
    # acl: RocketMQ's ACL 1.0 (signatures, permissions, plain_acl.yml), sans-I/O but for its file.
    "acl": {"errors", "codec"},
    "config": {"errors"},
    "codec": {"errors"},
    "filter": {"errors", "codec"},
    "remoting": {"errors", "codec", "config"},
    "store": {"errors", "codec", "config"},
    "namesrv": SHARED | {"remoting"},
    "controller": SHARED | {"remoting"},  # RocketMQ 5's controller: a server beside the name server
    "broker": SHARED | {"filter", "remoting", "store"},
    "client": SHARED | {"filter", "remoting"},
    "admin": SHARED | {"filter", "remoting", "client"},
    "spark": SHARED | {"filter", "remoting", "store", "client", "admin"},
    "cli": SHARED | {"filter", "remoting", "store", "namesrv", "broker", "client", "admin", "spark",
                     "dashboard", "controller"},
    "dashboard": SHARED | {"filter", "remoting", "client", "admin"},
}
SANS_IO_FORBIDDEN = {"asyncio", "socket", "selectors", "uvloop", "mmap"}
# rocketq.config still offers BrokerConfig and NamesrvConfig (their old import path) by resolving
# them from their layers on first use: a module __getattr__ and TYPE_CHECKING, never at import time.
LAZY_REEXPORTS: dict[str, set[str]] = {"config/__init__.py": {"broker", "namesrv"}}


def _eager_nodes(tree: ast.AST) -> list[ast.AST]:
    """Nodes that run at import time: not inside a function nor under ``if TYPE_CHECKING``."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        for child in ast.iter_child_nodes(node):
            lazy = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) or (
                isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test))
            if not lazy:
                todo.append(child)
    return out


def _rocketq_imports(path: Path, *, eager_only: bool = False) -> tuple[set[str], set[str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    layers: set[str] = set()
    stdlib: set[str] = set()
    for node in _eager_nodes(tree) if eager_only else ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "rocketq" and len(parts) > 1:
                    layers.add(parts[1])
                stdlib.add(parts[0])
        elif isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if node.level == 0 and parts[0] == "rocketq":
                if len(parts) > 1:
                    layers.add(parts[1])
            elif node.level == 0:
                stdlib.add(parts[0])
    return layers, stdlib


def _modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC)
        if len(rel.parts) > 1:
            out.append((rel.parts[0], path))
    return out


@pytest.mark.parametrize(("layer", "path"), _modules(), ids=lambda v: str(v).split("rocketq/")[-1])
def test_imports_go_down(layer: str, path: Path) -> None:
    if layer not in ALLOWED:
        pytest.fail(f"{layer}/ is not a layer DESIGN.md knows: add it to the map and to ALLOWED")
    layers, stdlib = _rocketq_imports(path)
    lazy_ok = LAZY_REEXPORTS.get(path.relative_to(SRC).as_posix(), set())
    if lazy_ok:
        eager, _ = _rocketq_imports(path, eager_only=True)
        assert not eager & lazy_ok, f"{path.name} imports {sorted(eager & lazy_ok)} at import time"
    allowed = ALLOWED[layer] | lazy_ok | {"__init__"}
    wrong = {name for name in layers - {layer} if name not in allowed}
    assert not wrong, f"{path.name} ({layer}) imports {sorted(wrong)}, which sit above it"
    if layer in ("codec", "filter", "acl"):
        io = stdlib & SANS_IO_FORBIDDEN
        assert not io, f"codec must stay sans-I/O: {path.name} imports {io}"

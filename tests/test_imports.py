"""The package's shape: no import cycle (lazy imports included), layers that import one way,
the command line a leaf, and rooms small enough to hold in one's head (ARCHITECTURE.md)."""

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import firewall

PACKAGE = Path(firewall.__file__).parent


def imported_modules(source: str, module: str, modules: set[str] | None = None) -> set[str]:
    """Absolute names of every module the source of ``module`` imports, at its top or inside a
    function (a lazy import is still an import)."""
    package = module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            if modules is None:
                found |= {name} | {f"{name}.{alias.name}" for alias in node.names}
            else:  # ``from .x import y``: the module ``x.y`` if there is one, else ``x``
                found |= {f"{name}.{a.name}" if f"{name}.{a.name}" in modules else name
                          for a in node.names}
    return found


def library_modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name != "firewall.cli" and not name.startswith("firewall.cli."):
            # a package's __init__ imports relative to itself
            yield (name + ".__init__" if parts[-1] == "__init__" else name), path


def test_no_library_module_imports_the_command_line():
    offenders = [name for name, path in library_modules()
                 if any(m == "firewall.cli" or m.startswith("firewall.cli.")
                        for m in imported_modules(path.read_text(encoding="utf-8"), name))]
    assert offenders == []


def test_the_scan_sees_relative_and_lazy_imports():
    lazy = "def main():\n    from ..cli import main as cli_main\n    return cli_main()\n"
    assert "firewall.cli" in imported_modules(lazy, "firewall.formats.native")
    assert "firewall.cli" in imported_modules("from . import cli\n", "firewall.evaluate")
    assert "firewall.cli" in imported_modules("import firewall.cli\n", "firewall.evaluate")
    assert "firewall.cli" not in imported_modules("from .options import x\n", "firewall.evaluate")


def import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports (``from .x import y``
    counts ``x.y`` when ``y`` is a module, else ``x``)."""
    modules = {name.removesuffix(".__init__"): path for name, path in all_modules()}
    graph = {}
    for name, path in all_modules():
        found = imported_modules(path.read_text(encoding="utf-8"), name, set(modules))
        graph[name.removesuffix(".__init__")] = {
            m for m in found if m in modules and m != name.removesuffix(".__init__")}
    return graph


def all_modules() -> Iterator[tuple[str, Path]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        yield (name + ".__init__" if parts[-1] == "__init__" else name), path


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
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
                    work.append((child, iter(sorted(graph.get(child, ())))))
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
                    found.append(sorted(component))
    return found


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_lazy_cycle():
    graph = {"firewall.a": {"firewall.b"}, "firewall.b": {"firewall.c"},
             "firewall.c": {"firewall.a"}, "firewall.d": {"firewall.a"}}
    assert cycles(graph) == [["firewall.a", "firewall.b", "firewall.c"]]
    lazy = "def f():\n    from .a import x\n"
    assert "firewall.a" in imported_modules(lazy, "firewall.c")


# Which way imports go (ARCHITECTURE.md): a layer imports only the layers listed for it, and the
# shared vocabulary at the top (turns, literals, errors, tokens, JSON walks, extras).
SHARED = {"firewall", "firewall.errors", "firewall.turns", "firewall.literals", "firewall.tokens",
          "firewall.json_values", "firewall.extras", "firewall.spellings",
          "firewall.private_files"}
LAYERS = {
    "extraction": set(),
    "summarizers": {"compaction.validate"},
    "formats": set(),
    "audit": set(),
    "compaction": {"extraction", "formats", "summarizers", "audit"},
    "authoring": {"extraction", "evaluation", "options", "inputs"},
    "evaluation": {"extraction", "formats", "summarizers", "audit", "compaction", "integrations",
                   "options", "inputs"},
    "integrations": {"extraction", "formats", "summarizers", "audit", "compaction", "options"},
}


def layer(module: str) -> str:
    return module.split(".")[1] if module.count(".") else module


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_each_layer_imports_only_the_layers_below_it(name):
    allowed = LAYERS[name] | {name}
    wrong = sorted(f"{m} -> {d}" for m, deps in import_graph().items() if layer(m) == name
                   for d in deps - SHARED
                   if layer(d) not in allowed and d.removeprefix("firewall.") not in allowed)
    assert wrong == []


def test_few_modules_at_the_top_and_none_too_big():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= 12, top
    big = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > 700}
    assert big == {}

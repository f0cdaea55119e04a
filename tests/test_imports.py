"""Layering: the command line sits on the library; no library module imports it."""

import ast
from pathlib import Path

import firewall

PACKAGE = Path(firewall.__file__).parent


def imported_modules(source: str, module: str) -> set[str]:
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
            found |= {name} | {f"{name}.{alias.name}" for alias in node.names}
    return found


def library_modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        if name != "firewall.cli":
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
    assert "firewall.cli" in imported_modules("from . import cli\n", "firewall.evaluation.evaluate")
    assert "firewall.cli" in imported_modules("import firewall.cli\n", "firewall.evaluation.evaluate")
    assert "firewall.cli" not in imported_modules("from .options import x\n", "firewall.evaluation.evaluate")

"""Optional SDKs (the package's extras): imported only when something that needs one is used,
so ``import firewall`` stays fast and a plain install small."""

from __future__ import annotations

import importlib
from types import ModuleType


def import_extra(module: str, user: str, error: type[Exception],
                 extra: str | None = None) -> ModuleType:
    """The SDK ``module``, or ``error`` naming ``user`` and the extra that installs it
    (``extra``, when its name is not the module's)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise error(f"{user} needs the {module} SDK: "
                    f"pip install 'literal-firewall[{extra or module}]'") from exc

"""JSON Schemas generated from the pydantic models: ``python -m firewall.schemas [DIR]``.

The committed files in ``schemas/`` are checked against the models by the test suite, so an
editor validating a rule pack, ledger or audit record always sees the current shape.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def schemas() -> dict[str, dict[str, Any]]:
    from .audit import AuditRecord
    from .compaction.ledger import Ledger
    from .extraction.packs import PackSpec

    return {"rulepack.schema.json": PackSpec.model_json_schema(),
            "ledger.schema.json": Ledger.model_json_schema(),
            "audit.schema.json": AuditRecord.model_json_schema()}


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    target = Path((argv or sys.argv[1:] or ["schemas"])[0])
    target.mkdir(parents=True, exist_ok=True)
    for name, schema in schemas().items():
        (target / name).write_text(render(schema), encoding="utf-8")
        print(target / name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Fuzz the rule-pack loader: any bytes → ``parse_pack`` → compile → run the pack's examples.

The contract under test: loading a pack fails only with ``PackError`` (which names the pack, the
rule, the field and the line); nothing else (``RecursionError``, ``regex.error``, ``TypeError``...)
may escape, whatever the YAML says.

    python fuzz/fuzz_packs.py -max_total_time=60            # needs atheris
    python fuzz/fuzz_packs.py fuzz/corpus/packs -runs=100000

Without atheris the module still imports, so tests can drive ``TestOneInput`` directly.
"""

from __future__ import annotations

import contextlib

try:
    import atheris
except ImportError:  # pragma: no cover - the pytest corpus run does not need it
    atheris = None

_FUZZING = __name__ == "__main__" and atheris is not None

with (atheris.instrument_imports(include=["firewall", "yaml"]) if _FUZZING
      else contextlib.nullcontext()):
    from firewall.errors import PackError
    from firewall.extraction.examples import failures
    from firewall.extraction.extract import Extractor
    from firewall.extraction.packs import Pack, parse_pack

# Seeds for a corpus: a valid pack using every kind, and fragments the mutator can splice in.
SEED_PACKS = [
    """name: seed
version: "1"
description: every kind
defaults:
  priority: 70
rules:
  - id: invoice
    kind: regex
    pattern: '\\b(?P<literal>INV-\\d{4}-\\d{2}-\\d{5})\\b'
    keywords: [inv]
    flags: [ignorecase]
    examples:
      match:
        - text: 'see INV-2025-08-44719 now'
          literals: ['INV-2025-08-44719']
      no_match: ['INV-25-17']
  - id: card
    kind: regex
    pattern: |
      \\b\\d{4}(?: ?\\d{4}){3}\\b
    checksum: luhn
    sensitive: true
  - id: order
    kind: json_key
    keys: ['order_id', '*_ids']
    value_pattern: '[#\\w-]+'
    allowlist:
      values: [none]
      patterns: ['x+']
  - id: product
    kind: terms
    terms: [Widget Pro, Gizmo]
    ignore_case: true
  - id: people
    kind: entity
    labels: [PERSON]
    optional: true
""",
    "name: child\nversion: '2'\nextends: [core, {pack: billing, disable: [x]}]\nrules: []\n",
    "name: bad\nversion: 1\nrules:\n  - id: r1\n    kind: regex\n    pattern: \"\\bINV #\\d+\"\n",
]


def load_text(text: str) -> Pack | None:
    """Parse, build, compile and run the examples of one pack's text (``extends`` is parsed but
    not followed: that needs files). Returns the pack, or raises ``PackError``."""
    spec = parse_pack(text, "<fuzz>")
    pack = Pack(name=spec.name, version=spec.version, description=spec.description,
                rules=tuple(spec.rules), owners=tuple(spec.name for _ in spec.rules))
    Extractor([pack], timeout=0.05)  # compiles every rule
    failures([pack])  # the examples, through the whole engine
    return pack


def TestOneInput(data: bytes) -> None:  # noqa: N802 - the name atheris and libFuzzer expect
    text = data.decode("utf-8", errors="replace")
    try:
        load_text(text)
    except PackError:
        pass  # the one documented failure


def main() -> None:
    from _fuzz_main import fuzz_main  # beside this file: on sys.path when run as a script

    fuzz_main(TestOneInput, [seed.encode() for seed in SEED_PACKS])


if __name__ == "__main__":
    main()

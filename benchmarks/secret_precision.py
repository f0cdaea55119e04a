"""Sensitivity precision of the built-in packs on ``tests/fixtures/secret_precision.yaml``.

Lines in the style of a secret scanner's own false-positive tests (names that say key /
secret / password, references, placeholders, identifiers, ids beside key-ish names) must not be
flagged sensitive; lines holding a secret (filled from a fixed seed) must stay flagged. Each
line is scanned as user text, as tool output and as a tool-call argument.

    PYTHONPATH=. python benchmarks/secret_precision.py [--rules PACK_OR_PATH ...] [--show]

``--rules`` loads those packs instead of the built-in ones (for example the ``secrets`` pack of
an earlier commit: ``git show COMMIT:rules/secrets.yaml > /tmp/old.yaml`` then ``--rules core
--rules coding --rules commerce --rules billing --rules cloud --rules /tmp/old.yaml``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", action="append", help="packs to load instead of the built-in")
    parser.add_argument("--show", action="store_true", help="print each flagged line and miss")
    args = parser.parse_args(argv)
    sys.path[:0] = [str(REPO), str(REPO / "tests")]
    from secret_precision import measure

    from firewall.extraction.extract import Extractor
    from firewall.extraction.packs import load_packs

    result = measure(Extractor(load_packs(*(args.rules or ()))))
    if args.show:
        for line, found in result.flagged:
            print(f"flagged: {line!r} {found}")
        for line in result.missed:
            print(f"missed: {line}")
    print(f"negatives flagged sensitive: {len(result.flagged)} of {result.negatives} "
          f"({result.false_positive_share:.1%}); positives flagged: "
          f"{result.positives - len(result.missed)} of {result.positives} "
          f"({result.true_positive_share:.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

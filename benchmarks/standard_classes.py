"""Share of expected spans the built-in packs extract exactly, per standard literal class.

Runs the table of tests/fixtures/standard_classes.yaml (cases written from the standards, see
its header) through the built-in packs, one single-turn conversation per case, and counts an
expected span as found when a literal has exactly its bytes at exactly its offset. Look-alikes
(`negatives`) count as false positives when one of the class's own rules extracts them.

    PYTHONPATH=. python benchmarks/standard_classes.py
"""

from __future__ import annotations

from pathlib import Path

import yaml

from firewall.extraction.extract import Extractor
from firewall.extraction.packs import load_packs
from firewall.turns import Turn

TABLE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "standard_classes.yaml"


def main() -> None:
    table = yaml.safe_load(TABLE.read_text(encoding="utf-8"))
    extractor = Extractor(load_packs())

    def scan(text: str):
        return extractor.scan([Turn("user", text)]).literals

    print("| class | expected spans | extracted exactly | share | look-alikes | extracted by "
          "the class's rules |")
    print("|---|---:|---:|---:|---:|---:|")
    for cls, rows in table["cases"].items():
        expected = found = 0
        for row in rows:
            got = {(lit.value, lit.start) for lit in scan(row["text"])}
            for span in row["spans"]:
                expected += 1
                found += (span, row["text"].index(span)) in got
        negatives = [absent for row in table["negatives"].get(cls, [])
                     for absent in row["absent"]]
        flagged = 0
        for row in table["negatives"].get(cls, []):
            values = {lit.value for lit in scan(row["text"]) if lit.rule in table["rules"][cls]}
            flagged += len(values & set(row["absent"]))
        print(f"| {cls} | {expected} | {found} | {100 * found / expected:.1f} % | "
              f"{len(negatives)} | {flagged} |")


if __name__ == "__main__":
    main()

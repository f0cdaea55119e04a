"""Sensitivity precision on ``tests/fixtures/secret_precision.yaml``: the share of lines holding
no secret that the packs flag sensitive (any sensitive literal), and the share of lines holding
one whose secret stays flagged. Used by ``test_secrets_pack.py`` and
``benchmarks/secret_precision.py``."""

from __future__ import annotations

import random
import re
import string
from dataclasses import dataclass
from pathlib import Path

import yaml

from firewall.extraction.extract import Extractor
from firewall.turns import ToolCall, Turn

FIXTURE = Path(__file__).parent / "fixtures" / "secret_precision.yaml"
ALPHABETS = {"alnum": string.ascii_letters + string.digits, "hex": "0123456789abcdef",
             "upper": string.ascii_uppercase + "234567", "lower": string.ascii_lowercase,
             "digits": string.digits, "b64": string.ascii_letters + string.digits + "+/"}
_TEMPLATE = re.compile(r"\{(" + "|".join(ALPHABETS) + r"):(\d+)\}")


def fill(template: str, rng: random.Random) -> tuple[str, list[tuple[int, int]]]:
    """The line with each ``{kind:N}`` filled, and where the filled parts are. A filled part
    holds a digit and a letter, as a generated secret does."""
    out, spans, at = [], [], 0
    for m in _TEMPLATE.finditer(template):
        out.append(template[at:m.start()])
        alphabet, n = ALPHABETS[m.group(1)], int(m.group(2))
        while True:
            value = "".join(rng.choice(alphabet) for _ in range(n))
            if m.group(1) in ("digits", "lower", "upper") or (
                    re.search(r"\d", value) and re.search(r"[A-Za-z]", value)):
                break
        start = sum(map(len, out))
        out.append(value)
        spans.append((start, start + n))
        at = m.end()
    out.append(template[at:])
    return "".join(out), spans


def turns(line: str) -> list[Turn]:
    """The line as the firewall meets it: typed by the user, printed by a tool, and passed as
    a tool-call argument."""
    return [Turn(role="user", text=line), Turn(role="tool", text=line, tool_name="bash"),
            Turn(role="assistant", text="", tool_calls=(ToolCall("bash", {"command": line}),))]


@dataclass
class Precision:
    negatives: int
    flagged: list[tuple[str, list[tuple[str, str]]]]  # line, (rule, value) of its secrets
    positives: int
    missed: list[str]

    @property
    def false_positive_share(self) -> float:
        return len(self.flagged) / self.negatives

    @property
    def true_positive_share(self) -> float:
        return 1 - len(self.missed) / self.positives


def measure(extractor: Extractor, seed: int = 28) -> Precision:
    cases = yaml.safe_load(FIXTURE.read_text("utf-8"))
    flagged = []
    for line in cases["negatives"]:
        found = [(lit.rule, lit.value) for turn in turns(line)
                 for lit in extractor.scan([turn]).literals if lit.sensitive]
        if found:
            flagged.append((line, sorted(set(found))))
    rng, missed = random.Random(seed), []
    for template in cases["positives"]:
        line, spans = fill(template, rng)
        for turn in turns(line):
            literals = extractor.scan([turn]).literals
            text = turn.text or line  # an argument's offsets are within the argument: the line
            hit = any(lit.sensitive and any(text[s:e] in lit.value or lit.value in text[s:e]
                                            for s, e in spans) for lit in literals)
            if not hit:
                missed.append(f"{turn.role}: {line}")
    return Precision(len(cases["negatives"]), flagged, 3 * len(cases["positives"]), missed)

"""Fuzz whole compactions in placeholder mode: any bytes → a conversation assembled from
secrets, overlapping secrets, placeholder look-alikes, lone surrogates, JSON integers and keys
in tool-call arguments → ``Firewall.compact`` with a hostile summarizer.

The bytes choose the pieces, the roles, where arguments go and how the summarizer answers (it
echoes the masked transcript, damages placeholders, invents look-alikes, fails, or returns no
text). The contract under test:

- ``compact`` raises nothing (a failing summarizer leaves the conversation uncompacted);
- no secret the firewall found in the compacted span (a sensitive literal of 8+ characters)
  appears in any request a summarizer received: turns, tool-call arguments, required list,
  instructions, re-ask feedback, previous reply;
- no such secret appears in the audit record.

    python fuzz/fuzz_compaction.py -max_total_time=60     # needs atheris

Without atheris the module still imports, so tests can drive ``TestOneInput`` directly.
Secrets are assembled at run time so that the source holds no credential-shaped string.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

try:
    import atheris
except ImportError:  # pragma: no cover
    atheris = None

_FUZZING = __name__ == "__main__" and atheris is not None

with (atheris.instrument_imports(include=["firewall"]) if _FUZZING
      else contextlib.nullcontext()):
    from firewall.audit import MemoryAuditLog
    from firewall.extraction.extract import Extractor
    from firewall.compaction.guard import Firewall
    from firewall.extraction.packs import load_packs
    from firewall.summarizers.base import Summary, SummaryRequest

GITHUB = "ghp_" + "FAKEu8jzPde0IgxLd6GncfBAepfJBd0Kh8oO"
AWS_SECRET = "WG2x9aJTFMP9/2kUtMXhk" + "PrSbbAjLGmsDx5StAZv"
STRIPE = "sk_" + "live_" + "51HxFAKEbCdEfGhIjKlMnOpQr"
EMAILED = "Zq7!" + "vB9xkLm2"
ASSIGNED = "hunter2" + "secret!"
CARD = "4111 1111 " + "1111 1111"
CARD_INT = int("5555" + "555555554444")

# what the bytes pick from: secrets alone and overlapping, look-alikes, hostile characters
PIECES = [
    f"GITHUB_TOKEN={GITHUB}", f"aws_secret_access_key = {AWS_SECRET}", STRIPE,
    f"https://admin:{EMAILED}@example.com/x", f"password: {ASSIGNED}", f"card {CARD}",
    "postgres://u:p@h/db", f"Bearer {GITHUB}", f"{GITHUB}{STRIPE}", f"password={STRIPE}",
    "[[SECRET_1]]", "[[SECRET_deadbeef_1]]", "SECRET_2", "[[secret_3]]", "secret 12",
    "[[SECRET_", "]]", "\ud800", "\udfff", "INV-2025-08-44719", "src/auth/handler.ts",
    " ", "\n", "{", '"', "!", "@", ":", "/", "p", "é", "\u202e",
]
KEYS = ["path", "card", "token", GITHUB, "order_id", "[[SECRET_1]]", "\ud800"]
SCALARS: list[Any] = [CARD_INT, 3, "INV-2025-08-44719", STRIPE, 1.5, None, True, "SECRET_1"]

SEED_INPUTS = [bytes(range(0, 96, 3)), bytes([7, 1, 4, 2, 9, 3, 0, 5, 8]) * 6, b"\x00" * 40,
               bytes(range(255, 0, -5))]

# A rule's time budget: short for fuzzing speed. The check below re-scans the span as its
# oracle; when a loaded machine makes the compaction's scan time out but not the oracle's, the
# oracle knows secrets the compaction could not (it kept those turns verbatim: fail closed), so
# a run that must be deterministic (the test suite) sets a budget no small input reaches.
TIMEOUT = 0.05
_FIREWALL: Firewall | None = None
_ISSUED = re.compile(r"\[\[SECRET_[0-9a-f]{8}_\d+\]\]")


def firewall() -> Firewall:
    global _FIREWALL
    if _FIREWALL is None:
        packs = load_packs()
        _FIREWALL = Firewall(packs, placeholders=True, max_retries=1)
        _FIREWALL.extractor = Extractor(packs, timeout=TIMEOUT)
    return _FIREWALL


class Choices:
    """Bytes read as a stream of small choices; zeros once they run out."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def pick(self, n: int) -> int:
        if self.at >= len(self.data):
            return 0
        self.at += 1
        return self.data[self.at - 1] % n

    def text(self) -> str:
        return "".join(PIECES[self.pick(len(PIECES))] for _ in range(1 + self.pick(6)))

    def arguments(self, depth: int = 0) -> Any:
        kind = self.pick(4) if depth < 6 else 0
        if kind == 0:
            return SCALARS[self.pick(len(SCALARS))]
        if kind == 1:
            return self.text()
        if kind == 2:
            return [self.arguments(depth + 1) for _ in range(self.pick(3))]
        return {KEYS[self.pick(len(KEYS))]: self.arguments(depth + 1)
                for _ in range(1 + self.pick(3))}


def conversation(choices: Choices) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "an agent"}]
    for n in range(2 + choices.pick(6)):
        role = ("user", "assistant", "tool")[choices.pick(3)]
        if role == "tool":
            messages.append({"role": "assistant", "content": choices.text(), "tool_calls": [
                {"id": f"c{n}", "type": "function", "function": {
                    "name": "act", "arguments": json.dumps(choices.arguments())}}]})
            messages.append({"role": "tool", "tool_call_id": f"c{n}", "content": choices.text()})
        else:
            messages.append({"role": role, "content": choices.text()})
    return messages


class Hostile:
    """A summarizer whose every answer the bytes chose; it records each request."""

    def __init__(self, choices: Choices) -> None:
        self.modes = [choices.pick(5) for _ in range(3)]
        self.requests: list[SummaryRequest] = []
        self.wrote = ""  # what it answered: a re-ask may quote it back

    def summarize(self, request: SummaryRequest) -> Any:
        self.requests.append(request)
        answer = self._answer(request, self.modes[min(request.attempt, len(self.modes)) - 1])
        self.wrote += f"\n{answer}"
        return answer

    def _answer(self, request: SummaryRequest, mode: int) -> Any:
        echo = "\n".join(t.text for t in request.turns)
        if mode == 0:  # a faithful copy of what it was shown, required values included
            return echo + "\n" + "\n".join(r.value for r in request.required)
        if mode == 1:  # placeholders damaged, look-alikes invented
            return echo.replace("[[", "[").replace("_", " ") + " [[SECRET_1]] SECRET_2"
        if mode == 2:
            raise RuntimeError("the vendor is down")
        if mode == 3:
            return Summary(text=None)  # type: ignore[arg-type]  # no text: a failed attempt
        return request.previous or "short"


def _sent(request: SummaryRequest) -> str:
    parts = [request.instructions, request.feedback or "", request.previous or ""]
    for turn in request.turns:
        parts.append(turn.text)
        parts += [json.dumps(c.arguments, ensure_ascii=False) for c in turn.tool_calls]
    parts += [r.value + "\n" + r.snippet for r in request.required]
    return "\n".join(parts)


def TestOneInput(data: bytes) -> None:  # noqa: N802
    choices = Choices(data)
    messages = conversation(choices)
    keep_last = choices.pick(4)
    hostile = Hostile(choices)
    fw = firewall()
    fw.audit = MemoryAuditLog(key=b"fuzz")
    result = fw.compact(messages, summarizer=hostile, keep_last=keep_last,
                        compaction=1)  # any exception here is a crash
    if result.record.span is None:
        return
    first, last = result.record.span
    turns = fw.conversation(messages).turns[first:last + 1]
    found = fw.extractor.scan(turns)
    withheld = found.verbatim_turns
    secrets = {l.value for l in found.literals if l.sensitive and len(l.value) >= 8}
    for request in hostile.requests:
        sent = _ISSUED.sub(" ", _sent(request))  # a placeholder's syntax is no one's secret
        for secret in secrets:  # (text the summarizer wrote itself may be quoted back to it)
            if secret in sent and secret not in hostile.wrote:
                at = sent.find(secret)
                raise AssertionError(f"a secret reached the summarizer: {secret!r} in "
                                     f"{sent[max(0, at - 80):at + len(secret) + 20]!a}")
    if not withheld:  # a turn scanned in full: the record names no secret in clear
        record = repr(fw.audit.records[0].model_dump())
        for secret in secrets:
            if repr(secret)[1:-1] in record and secret not in hostile.wrote:
                raise AssertionError(f"a secret reached the audit record: {secret!r}")


def main() -> None:
    from _fuzz_main import fuzz_main  # beside this file: on sys.path when run as a script

    fuzz_main(TestOneInput, SEED_INPUTS)


if __name__ == "__main__":
    main()

"""Fuzz the conversation loaders: any bytes → ``read_conversations`` (as a file) and
``parse_messages`` (every format) → extraction with the built-in packs.

The contract under test: a malformed conversation fails only with ``ConversationError`` (which
names the line and the field); a conversation that loads can always be scanned (extraction
never raises).

    python fuzz/fuzz_conversations.py -max_total_time=60     # needs atheris

Without atheris the module still imports, so tests can drive ``TestOneInput`` directly.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import tempfile

try:
    import atheris
except ImportError:  # pragma: no cover
    atheris = None

_FUZZING = __name__ == "__main__" and atheris is not None

with (atheris.instrument_imports(include=["firewall"]) if _FUZZING
      else contextlib.nullcontext()):
    from firewall.errors import ConversationError
    from firewall.extraction.extract import Extractor
    from firewall.formats import FORMATS, parse_messages, read_conversations
    from firewall.extraction.packs import load_packs

SEED_CONVERSATIONS = [
    b'{"id": "c1", "messages": [{"role": "user", "content": "invoice INV-2025-08-44719"}, '
    b'{"role": "assistant", "content": null, "tool_calls": [{"id": "t1", "type": "function", '
    b'"function": {"name": "get", "arguments": "{\\"order_id\\": \\"#W77\\"}"}}]}, '
    b'{"role": "tool", "tool_call_id": "t1", "content": "{\\"order_id\\": \\"#W77\\"}"}]}\n',
    b'[{"role": "user", "content": [{"type": "text", "text": "hi"}]}, {"role": "assistant", '
    b'"content": [{"type": "tool_use", "id": "u1", "name": "read", "input": {"path": "a.ts"}}]}, '
    b'{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u1", '
    b'"content": [{"type": "text", "text": "ok"}]}]}]',
    b'{"messages": [{"role": "assistant", "tool_calls": [{"name": "f", "arguments": {"a": 1}}]},'
    b' {"role": "tool", "name": "f", "content": "done"}], "system": "be brief"}\n{"messages": []}\n',
]

_DIR = tempfile.mkdtemp(prefix="fuzz-conv-")
atexit.register(shutil.rmtree, _DIR, True)
_PATH = os.path.join(_DIR, "input.jsonl")
_EXTRACTOR: Extractor | None = None


def extractor() -> Extractor:
    global _EXTRACTOR
    if _EXTRACTOR is None:
        _EXTRACTOR = Extractor(load_packs(), timeout=0.05)
    return _EXTRACTOR


def TestOneInput(data: bytes) -> None:  # noqa: N802
    with open(_PATH, "wb") as handle:
        handle.write(data)
    conversations = []
    try:
        conversations.extend(read_conversations(_PATH))
    except ConversationError:
        pass
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError):
        doc = None  # not the loaders' business: read_conversations above had to cope
    if isinstance(doc, dict):
        doc = doc.get("messages")
    if doc is not None:
        for fmt in (None, *FORMATS):
            try:
                conversations.append(parse_messages(doc, format=fmt))
            except ConversationError:
                pass
    for conversation in conversations:
        extractor().scan(conversation)  # any exception here is a crash


def main() -> None:
    from _fuzz_main import fuzz_main  # beside this file: on sys.path when run as a script

    fuzz_main(TestOneInput, SEED_CONVERSATIONS)


if __name__ == "__main__":
    main()

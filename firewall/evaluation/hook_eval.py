"""``firewall eval`` through the hooks: at each compaction a coding agent made in a session file,
the pre-compact / post-compact / session-start handlers are driven as the agent fires them, and
what they give the agent (its summary and the hooks' ``additionalContext`` block) is scored
beside the ledger ``eval`` computes at the same point.

The handlers read the session file itself, cut where the agent cut it: ``pre-compact`` on the
file as it stood before the compaction's boundary line, ``post-compact`` (with the summary) and
``session-start`` (``source: compact``) on the file holding the boundary and the summary. One
session state carries over from one compaction to the next, in a temporary state directory (the
user's own hook state is never touched) and a memory audit log. The hooks' budget is the
firewall's (eval's ``--budget`` applies to its own ledger columns only).
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HOOKS = "hooks"  # the context's name in eval's tallies: summary + the hooks' block


def through_hooks(conversation: Any, firewall: Any) -> dict[int, tuple[str, int, str]]:
    """``{boundary: (text, tokens, block)}`` for each compaction of a session file
    (``meta["cuts"]``): the text the agent had after it (summary, the block, and the values the
    block writes escaped, decoded as the model reads them), the tokens of summary and block,
    and the block alone. Empty for a conversation that is not a session file."""
    from ..audit import MemoryAuditLog
    from ..integrations.hooks import state_in

    meta = conversation.meta
    path, cuts = meta.get("path"), meta.get("cuts") or ()
    if not path or not cuts or len(cuts) != len(meta.get("boundaries", ())):
        return {}
    agent = meta.get("agent") or "claude-code"
    data = Path(path).read_bytes()
    out: dict[int, tuple[str, int, str]] = {}
    # the hooks' own stderr notes (bad lines, rule timeouts) repeat what eval reports itself
    with tempfile.TemporaryDirectory(prefix="firewall-hooks-") as tmp, state_in(tmp), \
            contextlib.redirect_stderr(io.StringIO()):
        transcript = Path(tmp) / "transcript.jsonl"
        # the conversation's id as the session's: the firewall resumes eval's scan of the span
        log = MemoryAuditLog()
        for boundary, summary, (start, end) in zip(meta["boundaries"], meta["summaries"], cuts):
            block = _fire(transcript, conversation.id, firewall, agent, data[:start],
                          data[:end], summary, log)
            out[boundary] = (*_given(conversation.id, summary, block), block)
    return out


def _fire(transcript: Path, session: str, firewall: Any, agent: str, before: bytes,
          after: bytes, summary: str, log: Any) -> str:
    """Fire the three handlers of one compaction as the agent does (the state directory set by
    the caller): ``pre-compact`` on the transcript as it stood before the boundary
    (``before``), ``post-compact`` (with the summary) and ``session-start`` (``source:
    compact``) on the transcript holding the boundary and the summary (``after``). Returns the
    block ``session-start`` gives the agent."""
    from ..integrations.hooks import post_compact, pre_compact, session_start

    event = {"session_id": session, "transcript_path": str(transcript)}
    transcript.write_bytes(before)  # as it stood when PreCompact fired
    pre_compact(event, firewall, agent)
    transcript.write_bytes(after)  # the boundary and the agent's summary
    post = dict(event, compact_summary=summary) if agent == "claude-code" else event
    post_compact(post, firewall, agent, audit=log)
    answer = session_start(dict(event, source="compact"), None, agent) or {}
    return answer.get("hookSpecificOutput", {}).get("additionalContext", "")


def _given(session: str, summary: str, block: str) -> tuple[str, int]:
    """The text the agent has after a compaction (its summary, the block, and the values the
    block writes escaped, decoded as the model reads them) and the tokens of summary and
    block: scored by the caller, inside the hooks' state directory."""
    from .gold import decoded_values
    from ..integrations.hooks import load_state
    from ..tokens import count_tokens

    decoded = decoded_values(load_state(session).ledger) if block else ""
    text = "\n".join(p for p in (summary, block, decoded) if p)
    return text, count_tokens(summary) + count_tokens(block)


def add_hook_contexts(cuts: Sequence[Any], conversation: Any, firewall: Any) -> None:
    """Add the ``hooks`` context to the cuts of ``conversation`` made at the agent's own
    compactions (``frac == AGENT``), in place."""
    from .gold import AGENT

    mine = [cut for cut in cuts if cut.frac == AGENT]
    if not mine:
        return
    contexts = through_hooks(conversation, firewall)
    for cut in mine:
        if cut.k + 1 in contexts:
            text, tokens, _ = contexts[cut.k + 1]
            cut.contexts[HOOKS] = (text, tokens)


# ── replay: the hooks at the compactions a replay makes ───────────────────────────────────────

BOUNDARY_CONTENT = "Conversation compacted"


class ReplayedSession:
    """A Claude Code session file written again as Claude Code would have written it had it
    compacted where ``firewall replay`` does, the three handlers fired at each compaction.

    At a compaction that covered the recorded messages up to ``k`` and kept those up to
    ``last`` verbatim: ``pre-compact`` fires on the file's lines up to ``k``'s (after what
    earlier compactions wrote); ``post-compact`` and ``session-start`` on the same lines, then
    a ``compact_boundary`` system record and the summary as an ``isCompactSummary`` user entry
    (the shapes ``formats.transcripts`` reads), then the kept messages' lines, which the agent
    has after the summary as in the replay. The session's own ``compact_boundary`` records are
    left out: the replay compacts where it does, and reads the agent's summaries as messages.
    One session state (a temporary state directory, the user's never touched) carries over
    from one compaction to the next; ``close`` removes the directory (the finalizer does, if
    never called)."""

    def __init__(self, conversation: Any, firewall: Any) -> None:
        from ..audit import MemoryAuditLog
        from ..errors import FirewallError
        from ..formats.transcripts import read_transcript

        self.session, self.firewall = conversation.id, firewall
        path = conversation.meta["path"]
        self.data = Path(path).read_bytes()
        chunk = read_transcript(path)
        if len(chunk.ends) != len(conversation.turns):
            raise FirewallError(f"{path}: the session file changed since it was read")
        self.ends = chunk.ends
        self.written = b""  # the transcript as it stands after the last compaction
        self.copied = 0  # the bytes of the session file it holds
        self.log = MemoryAuditLog()
        self.compactions = 0
        self._dir = tempfile.TemporaryDirectory(prefix="firewall-hooks-")

    @classmethod
    def of(cls, conversation: Any, firewall: Any) -> ReplayedSession | None:
        """The replayed session of a Claude Code session file; None for anything else."""
        meta = conversation.meta
        if not meta.get("path") or meta.get("agent") != "claude-code":
            return None
        return cls(conversation, firewall)

    def compacted(self, k: int, summary: str, *, last: int | None = None,
                  tokens_before: int = 0) -> tuple[str, int, str]:
        """The compaction that covered the recorded messages up to ``k`` with ``summary`` and
        kept those up to ``last`` (default ``k``: none), through the hooks: ``(text, tokens,
        block)`` as ``through_hooks`` gives them."""
        from ..integrations.hooks import state_in

        self.compactions += 1
        # a span never ends before what the transcript holds already (see replay's k)
        cut = max(self.ends[k], self.copied)
        kept = max(self.ends[last if last is not None else k], cut)
        before = self.written + self._lines(self.copied, cut)
        boundary = f"{self.session}-replay-boundary-{self.compactions}"
        records = [{"parentUuid": None, "logicalParentUuid": None, "isSidechain": False,
                    "type": "system", "subtype": "compact_boundary",
                    "content": BOUNDARY_CONTENT, "isMeta": False, "level": "info",
                    "compactMetadata": {"trigger": "auto", "preTokens": tokens_before},
                    "sessionId": self.session, "uuid": boundary},
                   {"parentUuid": boundary, "isSidechain": False, "type": "user",
                    "message": {"role": "user", "content": summary},
                    "isCompactSummary": True, "isVisibleInTranscriptOnly": True,
                    "sessionId": self.session,
                    "uuid": f"{self.session}-replay-summary-{self.compactions}"}]
        # ASCII JSON: a lone surrogate of the summary is read back as written
        after = before + b"".join(json.dumps(r).encode() + b"\n" for r in records) + \
            self._lines(cut, kept)
        with state_in(self._dir.name), contextlib.redirect_stderr(io.StringIO()):
            transcript = Path(self._dir.name) / "transcript.jsonl"
            block = _fire(transcript, self.session, self.firewall, "claude-code", before,
                          after, summary, self.log)
            text, tokens = _given(self.session, summary, block)
        self.written, self.copied = after, kept
        return text, tokens, block

    def _lines(self, start: int, end: int) -> bytes:
        """The session file's lines in bytes ``start..end``, without its compact_boundary
        records."""
        lines = self.data[start:end].splitlines(keepends=True)
        return b"".join(line for line in lines if b"compact_boundary" not in line
                        or not _is_boundary(line))

    def close(self) -> None:
        self._dir.cleanup()


def _is_boundary(line: bytes) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and record.get("type") == "system" and \
        record.get("subtype") == "compact_boundary"

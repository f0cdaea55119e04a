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
    from .audit import MemoryAuditLog
    from .evaluate import decoded_values
    from .hooks import load_state, post_compact, pre_compact, session_start, state_in
    from .tokens import count_tokens

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
        session = conversation.id
        event = {"session_id": session, "transcript_path": str(transcript)}
        log = MemoryAuditLog()
        for boundary, summary, (start, end) in zip(meta["boundaries"], meta["summaries"], cuts):
            transcript.write_bytes(data[:start])  # as it stood when PreCompact fired
            pre_compact(event, firewall, agent)
            transcript.write_bytes(data[:end])  # the boundary and the agent's summary
            post = dict(event, compact_summary=summary) if agent == "claude-code" else event
            post_compact(post, firewall, agent, audit=log)
            start_event = dict(event, source="compact")
            answer = session_start(start_event, None, agent) or {}
            block = answer.get("hookSpecificOutput", {}).get("additionalContext", "")
            decoded = decoded_values(load_state(session).ledger) if block else ""
            text = "\n".join(p for p in (summary, block, decoded) if p)
            out[boundary] = (text, count_tokens(summary) + count_tokens(block), block)
    return out


def add_hook_contexts(cuts: Sequence[Any], conversation: Any, firewall: Any) -> None:
    """Add the ``hooks`` context to the cuts of ``conversation`` made at the agent's own
    compactions (``frac == AGENT``), in place."""
    from .evaluate import AGENT

    mine = [cut for cut in cuts if cut.frac == AGENT]
    if not mine:
        return
    contexts = through_hooks(conversation, firewall)
    for cut in mine:
        if cut.k + 1 in contexts:
            text, tokens, _ = contexts[cut.k + 1]
            cut.contexts[HOOKS] = (text, tokens)

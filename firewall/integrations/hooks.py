"""Coding-agent hooks: Claude Code and Codex CLI compact their context themselves; the firewall
pins literals before, checks the summary after, and re-injects the ledger into the new context.

    firewall hooks claude-code --print              the settings.json "hooks" block
    firewall hooks claude-code --install PATH       merged into a settings file (idempotent)
    firewall hooks codex --install PATH             the same for Codex's hooks.json
    firewall hooks run EVENT [--agent codex]        a hook command: event JSON on stdin

Events:

``pre-compact``
    Reads the new lines of the transcript JSONL (Claude Code session file or Codex rollout),
    extracts literals and updates the session's ledger; marks it for re-injection.
``post-compact``
    Does the same (so a skipped PreCompact loses nothing), then builds the ledger of the
    compaction exactly as ``compact`` and ``firewall eval`` build it (``Firewall.pin`` over the
    transcript's turns before the compaction, read by the same reader as the batch commands):
    the budget is the span's, entries ranked by their uses in it, the values the summary (and
    any turn the transcript holds after it) holds costing nothing (they stay pinned, but the
    block will not repeat them). The summary is Claude Code's ``compact_summary``, or the
    latest Codex ``compacted`` item (remote compaction leaves it empty: opaque); it is
    validated against the ledger. Writes an audit record, and every literal the compacted span
    held into the log's archive (``firewall recall``); warns via ``systemMessage`` when a
    required literal is missing or
    altered. Both clients fire ``PostCompact`` only after a compaction succeeded, so every
    record says ``compacted``; a failed compaction leaves no record.

The events carry only the fields the clients publish (Claude Code's hooks reference; Codex's
generated hook input schemas, which close the object): ``session_id``, ``transcript_path``,
``compact_summary`` (Claude Code ``PostCompact``) and ``source`` (``SessionStart``). The test
fixtures in ``tests/fixtures/hooks`` are validated against those field lists.
``session-start``
    With ``source == "compact"``: prints the rendered ledger as ``additionalContext``: the
    pinned values the summary does not hold (when no ``post-compact`` built the compaction's
    ledger, it is built here the same way, the summary read from the transcript).
``user-prompt-submit``
    Prints the ledger as ``additionalContext`` once after a compaction, if ``session-start`` did
    not (the Codex route: its ``SessionStart`` has no ``compact`` source in every release).

Installed ``--with-mcp`` (the MCP server registered, so the agent has the ``recall`` tool), the
re-injecting hooks run with ``--recall-hint``: the block ends with one line saying how many
literals the archive holds and how to ask for one.

Each session has one state file, ``<state dir>/sessions/<session id>.json`` (the ledger with
its HMAC key, the transcript offset read so far, the re-injection flag, whether the ledger is
the last compaction's, the values its summary held), written atomically; the state dir is ``FIREWALL_STATE_DIR`` or the user state
dir. The audit log is ``FIREWALL_AUDIT_DB`` or the default SQLite log; the salience model
ranking what the block keeps is ``FIREWALL_SALIENCE`` (a file of ``firewall salience fit``) or
the built-in one; ``FIREWALL_ARCHIVE_TOKENS=0`` archives only the rules' literals, not the
span's other tokens (the archive's token tier). A hook never breaks the
agent: on any error it writes one line to stderr and exits 0.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import hashlib
import json
import os
import re
import shlex
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import platformdirs

from ..compaction.budget import Budget
from ..errors import FirewallError
from ..private_files import private_folder, read_private, write_atomic
from ..formats.transcripts import TranscriptChunk, live_start, read_transcript

APP_NAME = "literal-firewall"
STATE_ENV = "FIREWALL_STATE_DIR"
AGENTS = ("claude-code", "codex")
EVENTS = ("pre-compact", "post-compact", "session-start", "user-prompt-submit")
VENDOR_PATH = {"claude-code": "claude-code-hooks", "codex": "codex-hooks"}

# Which agent event runs which hook command, with its matcher ("" = every trigger).
_WIRING = {
    "claude-code": (("PreCompact", "", "pre-compact"), ("PostCompact", "", "post-compact"),
                    ("SessionStart", "compact", "session-start")),
    "codex": (("PreCompact", "", "pre-compact"), ("PostCompact", "", "post-compact"),
              ("SessionStart", "compact", "session-start"),
              ("UserPromptSubmit", "", "user-prompt-submit")),
}
# ── per-session state ────────────────────────────────────────────────────────────────────────

_STATE_ROOT: contextvars.ContextVar[Path | None] = contextvars.ContextVar("state_root",
                                                                         default=None)


@contextlib.contextmanager
def state_in(root: str | os.PathLike[str]) -> Iterator[None]:
    """Keep the hooks' session state under ``root`` for this context (``firewall eval`` drives
    the handlers without touching the user's state)."""
    token = _STATE_ROOT.set(Path(root))
    try:
        yield
    finally:
        _STATE_ROOT.reset(token)


def state_dir() -> Path:
    if _STATE_ROOT.get() is not None:
        return _STATE_ROOT.get()
    root = os.environ.get(STATE_ENV, "").strip()
    return Path(root).expanduser() if root else Path(platformdirs.user_state_dir(APP_NAME))


def session_path(session_id: str) -> Path:
    safe = re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", session_id)
    name = session_id if safe else "sha256-" + hashlib.sha256(session_id.encode()).hexdigest()
    return state_dir() / "sessions" / f"{name}.json"


@dataclass
class SessionState:
    """What the hooks keep between calls for one session."""

    session_id: str
    ledger: Any  # Ledger
    transcript: str | None = None
    offset: int = 0
    turns: int = 0
    pending: bool = False  # the ledger still has to be re-injected after a compaction
    held: list[str] = field(default_factory=list)  # values the agent's last summary holds
    pinned: bool = False  # the ledger is the last compaction's (built by ``_pin_compaction``)

    def to_json(self) -> str:
        # ensure_ascii: a lone surrogate a ledger value may hold round-trips as \\udxxx
        return json.dumps({"version": 1, "session_id": self.session_id,
                           "transcript": self.transcript, "offset": self.offset,
                           "turns": self.turns, "pending": self.pending, "held": self.held,
                           "pinned": self.pinned,
                           "ledger": json.loads(self.ledger.to_json())}, indent=1)


def private_sessions(path: Path) -> Path:
    """``path`` (a session's state file), once its folder is private to the user: the file
    holds the ledger's MAC key, and a planted one would be re-injected as a genuine ledger, so
    a folder another user owns or can write (or a symlink) is refused, never read."""
    if not private_folder(path.parent):
        raise FirewallError(f"the hooks' state folder {path.parent} is not private to this "
                            f"user (another owner, writable by others, or a symlink): set "
                            f"{STATE_ENV} to a folder of your own")
    return path


def load_state(session_id: str) -> SessionState:
    from ..compaction.ledger import Ledger
    path = private_sessions(session_path(session_id))
    try:
        data = json.loads(read_private(path).decode("utf-8"))
        return SessionState(session_id, Ledger.model_validate(data["ledger"]),
                            data.get("transcript"), int(data.get("offset", 0)),
                            int(data.get("turns", 0)), bool(data.get("pending")),
                            [str(v) for v in data.get("held", [])], bool(data.get("pinned")))
    except FileNotFoundError:
        return SessionState(session_id, Ledger.new(session_id))
    except (ValueError, KeyError, TypeError) as exc:
        # Never overwrite a state file we cannot read: set it aside, start a new ledger.
        aside = path.with_name(path.name + ".corrupt")
        os.replace(path, aside)
        sys.stderr.write(f"literal-firewall: unreadable state {path} moved to {aside} "
                         f"({type(exc).__name__})\n")
        return SessionState(session_id, Ledger.new(session_id))


def save_state(state: SessionState) -> Path:
    path = private_sessions(session_path(state.session_id))
    write_atomic(path, state.to_json().encode("utf-8"))
    return path


@contextlib.contextmanager
def _locked(session_id: str) -> Iterator[None]:
    """Serialize the hooks of one session (they can fire back to back)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: atomic writes only
        yield
        return
    lock = session_path(session_id).with_suffix(".lock")
    lock.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# ── the hook handlers ────────────────────────────────────────────────────────────────────────

def _update(state: SessionState, event: dict[str, Any], fw: Any) -> TranscriptChunk:
    """Extract from the transcript lines not read yet into the session's ledger (kept up to
    date between compactions: the MCP server serves it). The compaction's ledger is built by
    ``_pin_compaction`` when the summary is known."""
    from ..compaction.plan import ledger_blocks

    path = event.get("transcript_path")
    if not path:
        return TranscriptChunk(offset=state.offset)
    path = str(Path(path).expanduser())
    offset = state.offset if path == state.transcript else 0
    chunk = read_transcript(path, offset)
    if chunk.bad:  # said, not silent: the rest of the transcript is read
        sys.stderr.write(f"literal-firewall: {len(chunk.bad)} transcript line(s) not readable "
                         f"skipped ({path}, from byte {offset})\n")
    scan = fw.extractor.scan(chunk.turns, skip=lambda text: ledger_blocks(text, state.ledger))
    for lit in scan.literals:
        lit.turn += state.turns
    for timeout in scan.timeouts:  # fail closed is impossible here: say so
        sys.stderr.write(f"literal-firewall: rule {timeout.rule} timed out on transcript turn "
                         f"{timeout.turn + state.turns}; its literals may be missing\n")
    state.ledger.update(scan.literals)
    state.transcript, state.offset = path, chunk.offset
    state.turns += len(chunk.turns)
    state.pinned = False
    return chunk


def pre_compact(event: dict[str, Any], fw: Any, agent: str = "claude-code") -> dict | None:
    with _locked(_session(event)):
        state = load_state(_session(event))
        _update(state, event, fw)
        state.pending = True
        save_state(state)
    return None  # PreCompact stdout is not context (and Codex rejects non-hook JSON)


def post_compact(event: dict[str, Any], fw: Any, agent: str = "claude-code",
                 audit: Any = None) -> dict | None:
    with _locked(_session(event)):
        state = load_state(_session(event))
        chunk = _update(state, event, fw)
        summary = event.get("compact_summary")
        if not isinstance(summary, str):  # Codex: the summary is in the rollout, when local
            summary = chunk.summaries[-1] if chunk.summaries else None
        extracted: list[Any] = []
        evicted = _pin_compaction(state, fw, summary, extracted=extracted)
        state.pending = True
        save_state(state)
    log = audit if audit is not None else _audit_log()
    # Both clients fire PostCompact only after a compaction succeeded, and send no status
    record = audit_record(state.ledger, summary or None, fw, agent=agent, log=log,
                          evicted=evicted)
    log.write(record)
    if extracted:
        archive_span(log, record, state.ledger, *extracted[0],
                     limits=getattr(fw, "archive_limits", None))
    verdict = record.attempts[0].verdict
    lost = [v if not v.startswith("hmac:") else "(sensitive)"
            for v in (verdict.missing_values + verdict.mutated_values if verdict else [])]
    if lost:
        return {"systemMessage": f"literal-firewall: {len(lost)} pinned literal(s) missing or "
                                 f"altered in the compaction summary ({', '.join(lost[:5])}); "
                                 f"the ledger is re-injected after compaction."}
    return None


def compaction_span(chunk: TranscriptChunk) -> tuple[int, int]:
    """``(start, end)``: the turns a compaction of this transcript summarized, as ``firewall
    eval`` cuts a session file at the agent's compaction: after the leading system turns, up to
    the latest compaction's boundary (every turn when there is none yet)."""
    end = chunk.boundaries[-1] if chunk.boundaries else len(chunk.turns)
    start = 0
    while start < end and chunk.turns[start].role == "system":
        start += 1
    return start, end



def transcript_summary(chunk: TranscriptChunk) -> str | None:
    """What the agent wrote at its latest compaction, as the session file holds it."""
    if not chunk.boundaries:
        return None
    if chunk.agent == "codex":
        return chunk.summaries[-1] if chunk.summaries else None
    at = chunk.boundaries[-1]
    turn = chunk.turns[at] if at < len(chunk.turns) else None
    return turn.text if turn is not None and turn.role == "assistant" else None


def kept_after(chunk: TranscriptChunk) -> list[str]:
    """The texts of the turns after the latest compaction's summary (none when there is no
    compaction): in the agent's context verbatim."""
    from ..turns import turn_text

    if not chunk.boundaries:
        return []
    at = chunk.boundaries[-1]
    if chunk.agent != "codex" and transcript_summary(chunk) is not None:
        at += 1  # Claude Code's summary entry is the turn after the boundary
    return [turn_text(t) for t in chunk.turns[at:] if t.role != "system"]


def _pin_compaction(state: SessionState, fw: Any, summary: str | None, *,
                    summary_in_transcript: bool = False,
                    extracted: list[Any] | None = None) -> list[Any]:
    """Build the ledger of the transcript's latest compaction with ``Firewall.pin``, the path
    ``compact`` and ``firewall eval`` share: the whole transcript read again (the span's uses
    rank the entries; the context compacted, since the previous compaction, sets the budget), a new ledger under the session's nonce and
    key (a block it wrote stays recognisable), the values ``summary`` (or, with
    ``summary_in_transcript``, the one the transcript holds) holds costing nothing. Returns the
    evictions; ``extracted`` (a list) receives the archive entries of every literal the span
    held, pinned or not (see ``firewall.archive``)."""
    from ..compaction.ledger import Ledger

    old = state.ledger
    chunk = read_transcript(state.transcript) if state.transcript else TranscriptChunk()
    if summary_in_transcript:
        summary = transcript_summary(chunk)
    start, end = compaction_span(chunk)
    ledger = Ledger(conversation_id=old.conversation_id, nonce=old.nonce, key=old.key)
    # what the context holds besides the block: the summary, and any turn the transcript has
    # after it (a client that keeps recent turns verbatim), as compact counts its kept tail
    beside = ([summary] if summary else []) + kept_after(chunk)
    budget = fw.budget_for(chunk.turns[live_start(chunk.boundaries, start, end):end])
    pinned = fw.pin(ledger, chunk.turns[start:end], offset=start, beside=beside, budget=budget)
    state.ledger, state.held, state.pinned = ledger, sorted(pinned.held), True
    if extracted is not None:
        extracted.append((pinned.literals, chunk.turns, range(start, end)))
    return pinned.evicted


def archive_span(log: Any, record: Any, ledger: Any, literals: list[Any],
                 turns: list[Any], span: range | None = None, *, limits: Any = None) -> Any:
    """Write every literal the compacted span held into the log's archive, beside the
    record (``firewall recall``, the MCP ``recall`` tool), and the tokens of ``span`` (indexes
    of ``turns``) no rule extracted unless ``limits`` turns the token tier off; a log without
    one (JSONL) is skipped. Returns what the write did, or None."""
    from ..audit.archive import ArchiveLimits, archive_entries
    from ..compaction.ledger import LITERAL_MAX_CHARS
    from ..compaction.records import audit_key
    from ..turns import call_text

    writer = getattr(log, "write_archive", None)
    if writer is None:
        return None

    def text_of(lit: Any) -> str | None:
        if not 0 <= lit.turn < len(turns):
            return None
        turn = turns[lit.turn]
        return turn.text if lit.field == "text" or lit.value in turn.text else call_text(turn)

    limits = limits or ArchiveLimits()
    entries = archive_entries((lit for lit in literals if len(lit.value) <= LITERAL_MAX_CHARS),
                              text_of, key=audit_key(log),
                              secrets=[e.value for e in ledger.entries if e.sensitive],
                              span=[(i, turns[i]) for i in span]
                              if span is not None and limits.tokens else None)
    return writer(record.conversation_id, record.compaction, entries, limits)


def _fit(state: SessionState) -> list[Any]:
    """Without a firewall (re-injecting hooks do not load the packs when ``post-compact`` built
    the ledger): the default budget's cap, the values the summary holds costing nothing."""
    return state.ledger.fit(Budget().tokens(None), held=set(state.held))


def session_start(event: dict[str, Any], fw: Any, agent: str = "claude-code",
                  recall_hint: bool = False) -> dict | None:
    if event.get("source") != "compact":
        return None
    return _reinject(event, fw, "SessionStart", recall_hint=recall_hint)


def user_prompt_submit(event: dict[str, Any], fw: Any, agent: str = "codex",
                       recall_hint: bool = False) -> dict | None:
    return _reinject(event, fw, "UserPromptSubmit", only_pending=True, recall_hint=recall_hint)


def _reinject(event: dict[str, Any], fw: Any, hook_event: str,
              only_pending: bool = False, recall_hint: bool = False) -> dict | None:
    session = _session(event)
    if not session_path(session).exists():
        return None
    with _locked(session):
        state = load_state(session)
        if (only_pending and not state.pending) or not len(state.ledger):
            return None
        if not state.pinned and fw is not None:  # no post-compact built it: built here
            _pin_compaction(state, fw, None, summary_in_transcript=True)
        else:
            _fit(state)  # a no-op after post_compact
        state.pending = False
        save_state(state)
    context = state.ledger.render(state.held)
    if recall_hint:  # installed --with-mcp: the agent has the recall tool
        hint = _recall_hint(state.ledger.conversation_id)
        context = f"{context}\n{hint}" if hint else context
    return {"hookSpecificOutput": {"hookEventName": hook_event,
                                   "additionalContext": context}}


def _recall_hint(conversation_id: str) -> str | None:
    """The block's last line: how many literals the archive holds and how to ask for one
    (None when the log keeps no archive or it is empty: nothing to ask for)."""
    from ..audit.archive import hint_line

    try:
        counting = getattr(_audit_log(), "archive_count", None)
        count = counting(conversation_id) if counting is not None else 0
    except FirewallError:  # the log cannot be read now: the block goes without its line
        return None
    return hint_line(count, conversation=conversation_id) if count else None


def audit_record(ledger: Any, summary: str | None, fw: Any, *, agent: str,
                 log: Any = None, evicted: Iterable[Any] = ()) -> Any:
    """The record of a compaction the agent did: ``summary=None`` when it is opaque."""
    from ..compaction.records import AttemptResult, build_record
    from ..compaction.validate import validate

    required = [e for e in ledger.entries if fw.is_required(e)]
    verdict = None if summary is None else validate(
        summary, [(e.value, e.rule) for e in required], known=ledger.values())
    number = log.next_compaction_number(ledger.conversation_id) if log is not None else 1
    return build_record(
        fw, ledger, vendor_path=VENDOR_PATH.get(agent, agent), compaction=number, span=None,
        turns_compacted=0, tokens_before=0, summary=summary, verdict=verdict, evicted=evicted,
        attempts=[AttemptResult(1, summary, verdict)], compacted=True, error=None,
        opaque=summary is None, injected=True, audit=log)


def _audit_log() -> Any:
    from ..audit import DB_ENV, open_audit_log

    return open_audit_log(os.environ.get(DB_ENV) or None)


def _unpinned(name: str, event: dict[str, Any]) -> bool:
    """Will this re-injecting hook have to build the compaction's ledger (no post-compact
    did)? Then it needs the packs."""
    if name == "session-start" and event.get("source") != "compact":
        return False
    session = event.get("session_id")
    if not isinstance(session, str) or not session or not session_path(session).exists():
        return False
    state = load_state(session)
    return state.pending and not state.pinned and len(state.ledger) > 0


def _session(event: dict[str, Any]) -> str:
    session = event.get("session_id")
    if not isinstance(session, str) or not session:
        raise FirewallError("hook input has no session_id")
    return session


REINJECTING = ("session-start", "user-prompt-submit")  # their output is the agent's context
HANDLERS = {"pre-compact": pre_compact, "post-compact": post_compact,
            "session-start": session_start, "user-prompt-submit": user_prompt_submit}


def run_hook(name: str, *, agent: str = "claude-code", rules: list[str] | None = None,
             stdin: IO[str] | None = None, stdout: IO[str] | None = None,
             stderr: IO[str] | None = None, recall_hint: bool = False) -> int:
    """Run one hook on the event JSON from ``stdin``. Always returns 0 (fail open)."""
    stdin, stdout, stderr = stdin or sys.stdin, stdout or sys.stdout, stderr or sys.stderr
    try:
        if name not in HANDLERS:
            raise FirewallError(f"unknown hook {name!r}; one of {', '.join(EVENTS)}")
        event = json.loads(stdin.read() or "null")
        if not isinstance(event, dict):
            raise FirewallError("hook input is not a JSON object")
        fw = None
        if name in ("pre-compact", "post-compact") or _unpinned(name, event):
            from ..compaction.guard import Firewall
            from ..audit.archive import archive_from_env
            from ..compaction.salience import salience_from_env

            # $FIREWALL_SALIENCE, $FIREWALL_ARCHIVE_TOKENS
            fw = Firewall(rules or None, salience=salience_from_env(), archive=archive_from_env())
        if recall_hint and name in REINJECTING:
            output = HANDLERS[name](event, fw, agent, recall_hint=True)
        else:
            output = HANDLERS[name](event, fw, agent)
        if output:
            stdout.write(json.dumps(output, ensure_ascii=False) + "\n")
    except Exception as exc:  # noqa: BLE001 - a hook must never break the agent
        message = " ".join(str(exc).split())[:300]
        stderr.write(f"literal-firewall: {name} hook skipped: {type(exc).__name__}: {message}\n")
    return 0


# ── configuration ────────────────────────────────────────────────────────────────────────────

def hooks_config(agent: str, command: str = "firewall", rules: list[str] | None = None,
                 only: bool = False, with_mcp: bool = False) -> dict[str, Any]:
    """The ``{"hooks": {...}}`` block for Claude Code settings.json or Codex hooks.json;
    ``rules`` are added to the built-in packs, or replace them with ``only``.

    The agent runs the command through a shell: every value is quoted as one shell word (a
    pack path with a space stays one path; ``;``, ``$(...)`` or a backtick in a value is text,
    never a second command). ``command`` is shell words (``uv run firewall``; a path with a
    space written quoted), each quoted again. ``with_mcp``: the MCP server is registered too,
    so the re-injecting hooks end the block with the archive's hint line (``--recall-hint``)."""
    if agent not in _WIRING:
        raise FirewallError(f"unknown agent {agent!r}; one of {', '.join(AGENTS)}")
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise FirewallError(f"--command {command!r} is not shell words: {exc}") from None
    if not words:
        raise FirewallError("--command is empty")
    program = " ".join(shlex.quote(w) for w in words)
    extra = (" --agent codex" if agent == "codex" else "") + "".join(
        f" --rules {shlex.quote(str(r))}" for r in rules or ()) + (
        " --only" if only and rules else "")
    hooks: dict[str, list[dict[str, Any]]] = {}
    for event, matcher, name in _WIRING[agent]:
        hint = " --recall-hint" if with_mcp and name in REINJECTING else ""
        hooks.setdefault(event, []).append({"matcher": matcher, "hooks": [
            {"type": "command", "command": f"{program} hooks run {name}{extra}{hint}"}]})
    return {"hooks": hooks}


MCP_SERVER = "literal-firewall"


def mcp_config_path(settings: str | os.PathLike[str]) -> Path:
    """Where Claude Code reads a project's MCP servers: ``.mcp.json`` at the project root,
    beside the ``.claude`` folder of ``settings`` (else beside ``settings`` itself)."""
    path = Path(settings).expanduser()
    folder = path.parent
    return (folder.parent if folder.name == ".claude" else folder) / ".mcp.json"


def install_mcp(path: str | os.PathLike[str], command: str = "firewall") -> bool:
    """Register ``firewall mcp`` (its ``recall`` tool) as the ``literal-firewall`` server in
    the ``mcpServers`` of the JSON file at ``path`` (created if missing); an existing entry of
    that name is kept. True if anything changed."""
    path = Path(path).expanduser()
    config = _read_json_object(path)
    servers = config.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise FirewallError(f'{path}: "mcpServers" is not a JSON object; not touching it')
    if MCP_SERVER in servers:
        return False
    words = shlex.split(command)
    servers[MCP_SERVER] = {"command": words[0], "args": [*words[1:], "mcp"]}
    _write_json(path, config)
    return True


def _read_json_object(path: Path) -> dict[str, Any]:
    """A JSON settings file the user keeps (an empty or missing one reads as ``{}``); anything
    else is refused untouched."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        text = ""
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise FirewallError(f"{path} is not valid JSON ({exc}); not touching it") from None
    if not isinstance(value, dict):
        raise FirewallError(f"{path} does not hold a JSON object; not touching it")
    return value


def _write_json(path: Path, value: dict[str, Any]) -> None:
    write_atomic(path, (json.dumps(value, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


def merge_hooks(settings: dict[str, Any], config: dict[str, Any]) -> bool:
    """Add ``config``'s hooks to ``settings`` in place, keeping every existing hook; a hook whose
    command already runs the same firewall event is not added twice. True if anything changed."""
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise FirewallError('"hooks" in the settings file is not an object')
    changed = False
    for event, groups in config["hooks"].items():
        current = hooks.setdefault(event, [])
        if not isinstance(current, list):
            raise FirewallError(f'"hooks.{event}" in the settings file is not a list')
        for group in groups:
            name = group["hooks"][0]["command"].split(" hooks run ", 1)[1].split()[0]
            mine = re.compile(rf"\bhooks run {re.escape(name)}\b")
            present = any(isinstance(h, dict) and mine.search(str(h.get("command", "")))
                          for g in current if isinstance(g, dict)
                          for h in g.get("hooks") or ())
            if not present:
                current.append(group)
                changed = True
    return changed


def install(path: str | os.PathLike[str], agent: str, command: str = "firewall",
            rules: list[str] | None = None, only: bool = False, with_mcp: bool = False) -> bool:
    """Merge the hooks into the JSON settings file at ``path`` (created if missing)."""
    path = Path(path).expanduser()
    settings = _read_json_object(path)
    changed = merge_hooks(settings, hooks_config(agent, command, rules, only, with_mcp))
    if changed:
        _write_json(path, settings)
    return changed


# ── CLI ──────────────────────────────────────────────────────────────────────────────────────

def _cmd_config(args: argparse.Namespace) -> int:
    config = hooks_config(args.agent, args.command, args.rules, args.only, args.with_mcp)
    if args.install:
        changed = install(args.install, args.agent, args.command, args.rules, args.only,
                          args.with_mcp)
        sys.stderr.write(f"firewall: {'installed hooks in' if changed else 'hooks already in'} "
                         f"{args.install}\n")
        if args.with_mcp and args.agent == "claude-code":
            where = mcp_config_path(args.install)
            done = install_mcp(where, args.command)
            sys.stderr.write(f"firewall: {'registered' if done else 'already registered:'} the "
                             f"{MCP_SERVER} MCP server (its recall tool) in {where}\n")
        elif args.with_mcp:
            sys.stderr.write(f"firewall: register the MCP server in Codex too: codex mcp add "
                             f"{MCP_SERVER} -- {args.command} mcp\n")
    if args.print or not args.install:
        sys.stdout.write(json.dumps(config, indent=2) + "\n")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from ..options import pack_names

    # --rules adds to the built-in packs, as everywhere; no usage error here (see run_hook)
    rules = pack_names(args.rules, args.only) if args.rules else None
    return run_hook(args.event, agent=args.agent, rules=rules, recall_hint=args.recall_hint)


def add_hooks_commands(subparsers: Any) -> None:
    """Register ``firewall hooks ...`` on the CLI's subparsers."""
    from ..options import add_rules_option

    hooks = subparsers.add_parser("hooks", help="Claude Code / Codex CLI compaction hooks")
    sub = hooks.add_subparsers(dest="hooks_command", required=True)
    for agent, where in (("claude-code", "a settings.json (.claude/settings.json, "
                                         "~/.claude/settings.json)"),
                         ("codex", "a hooks.json (hooks.json in the Codex home directory)")):
        p = sub.add_parser(agent, help=f"print or install the {agent} hooks")
        p.add_argument("--print", action="store_true", help="print the hooks JSON (default)")
        p.add_argument("--install", metavar="PATH", help=f"merge the hooks into {where}")
        p.add_argument("--command", default="firewall",
                       help="how the agent runs this CLI: the hook command must be on the "
                            "agent's PATH, or give its full path (default: firewall)")
        p.add_argument("--with-mcp", action="store_true",
                       help="also register `firewall mcp` (its recall tool: Claude Code's "
                            ".mcp.json at the project root); the block re-injected after a "
                            "compaction then ends with one line saying how many literals are "
                            "archived and how to ask for one")
        add_rules_option(p, "packs the hooks use")
        p.set_defaults(func=_cmd_config, agent=agent)
    run = sub.add_parser("run", help="run one hook: the agent's event JSON on stdin")
    # no argparse choices: a usage error would exit 2, which blocks compaction in Claude Code
    run.add_argument("event", metavar="{" + ",".join(EVENTS) + "}",
                     help="the hook event this call answers")
    run.add_argument("--agent", choices=AGENTS, default="claude-code",
                     help="whose event and transcript format (default: claude-code)")
    run.add_argument("--recall-hint", action="store_true",
                     help="end the re-injected block with the archive's hint line (the agent "
                          "has the MCP recall tool)")
    add_rules_option(run)
    run.set_defaults(func=_cmd_run)


def main(argv: list[str] | None = None) -> int:
    """``python -m firewall.integrations.hooks ...``: the ``firewall hooks`` commands without the full CLI."""
    parser = argparse.ArgumentParser(prog="firewall")
    add_hooks_commands(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["hooks", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.func(args)
    except FirewallError as exc:
        sys.stderr.write(f"firewall: {exc}\n")
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

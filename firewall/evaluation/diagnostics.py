"""The diagnostics of the compression literature, run on recordings with real compaction
boundaries, offline first.

*Re-reading loop* (offline): after a compaction, an agent that lost what its span held fetches it
again. ``reread_calls`` counts the tool calls after a boundary that re-fetch what the span before
it already held: the same tool with the same normalized arguments (``description`` and timeouts
aside), or any read of the same file (a ``Read`` tool, ``cat``/``head``/``sed -n`` in a shell).
Each re-fetched target counts once per boundary (a second read after the boundary re-reads what
the new context holds), and a file edited after the boundary, before the read, does not count
(its content changed). Each boundary is judged on its own segment: the span is the turns since
the previous boundary, the calls counted are those up to the next one.

*Probe recovery* and *confabulation diff* (opt-in, they need a model): for pinned facts of the
span, a cloze question (an excerpt of the span with the fact blanked out) is asked of the full
span and of the compacted context. Recovery is the share of the facts the full span answers
exactly that the compacted context also answers exactly; a confabulation is a compacted answer
that states another value where the full span answered right. Without a model (the offline
extractive summarizer) they are skipped and say so: never guessed.

Boundaries come from Claude Code transcripts (``compact_boundary`` entries), Codex rollouts
(``compacted`` items), or a recording with the ``firewall replay --contexts`` lines of its replay.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import posixpath
import re
import shlex
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConversationError, FirewallError
from ..turns import Conversation, ToolCall, Turn

# arguments that say how to run a call, not what it fetches
_VOLATILE_ARGUMENTS = frozenset({"description", "timeout", "timeout_ms", "run_in_background",
                                 "justification", "with_escalated_permissions", "yield_time_ms",
                                 "max_output_tokens"})
# tools that change a file rather than fetch anything; their paths invalidate earlier reads
_WRITE_TOOLS = frozenset({"write", "edit", "multiedit", "notebookedit", "apply_patch",
                          "write_file", "edit_file", "create_file", "todowrite"})
_READ_TOOLS = frozenset({"read", "read_file", "readfile", "view", "open_file", "notebookread",
                         "cat"})
_PATH_KEYS = ("file_path", "path", "filename", "notebook_path", "file")
_SHELL_ARGS = ("command", "cmd", "script")
_SHELL_READERS = frozenset({"cat", "head", "tail", "less", "more", "nl", "bat", "sed", "view"})
_SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
_PATCHED = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+)$", re.MULTILINE)
_SED_SCRIPT = re.compile(r"^[\d,$]*[pd]$|^/.*/[pd]?$")


@dataclass(frozen=True, slots=True)
class Reread:
    """A tool call after a boundary that re-fetches what the span held."""

    index: int      # the turn holding the call
    tool: str
    target: str     # the file path, or the call's normalized arguments
    original: int   # the span turn whose call fetched it first


@dataclass(slots=True)
class BoundaryDiagnosis:
    boundary: int          # index of the first turn after the compaction
    span: tuple[int, int]  # the turns the compaction covered (since the previous boundary)
    end: int               # the turns after it, up to the next boundary
    calls_after: int
    rereads: list[Reread] = field(default_factory=list)
    probes: ProbeResult | None = None


@dataclass(slots=True)
class Diagnosis:
    source: str
    id: str
    kind: str  # claude-code | codex | replay
    turns: int
    boundaries: list[BoundaryDiagnosis]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ── re-reading loop ─────────────────────────────────────────────────────────────────────────

def _normpath(path: str, workdir: str | None = None) -> str:
    path = path.strip()
    if workdir and not path.startswith(("/", "~")):
        path = posixpath.join(workdir, path)
    return posixpath.normpath(path)


def _same_file(a: str, b: str) -> bool:
    """One path relative, the other absolute: the same file when the relative one is a suffix
    of whole components (a shell's ``src/x.py`` and Claude Code's ``/home/dev/app/src/x.py``)."""
    return a == b or b.endswith("/" + a.lstrip("./")) or a.endswith("/" + b.lstrip("./"))


def _shell_script(command: Any) -> str | None:
    if isinstance(command, str):
        return command
    if isinstance(command, list) and all(isinstance(p, str) for p in command):
        if len(command) >= 3 and posixpath.basename(command[0]) in _SHELLS \
                and command[1] in ("-c", "-lc"):
            return command[2]
        return shlex.join(command)
    return None


def _shell_reads(script: str) -> list[str]:
    """Paths a shell script reads with a plain file reader (``cat a``, ``sed -n 1,40p a``)."""
    try:
        lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:  # unbalanced quotes: not a command we can read
        return []
    paths, command = [], []
    for token in [*tokens, ";"]:
        if token and set(token) <= set("|&;()<>"):
            if command and posixpath.basename(command[0]) in _SHELL_READERS:
                args = [a for a in command[1:] if not a.startswith("-")]
                if posixpath.basename(command[0]) == "sed":
                    if "-i" in command or any(a.startswith("-i") for a in command[1:]):
                        args = []  # sed -i edits
                    args = [a for a in args if not _SED_SCRIPT.match(a)]
                paths += [a for a in args if not a.isdigit()]
            command = []
        else:
            command.append(token)
    return paths


def _fetch(call: ToolCall) -> tuple[list[str], str | None]:
    """What a call fetches: (file paths it reads, the key of the call itself); a write fetches
    nothing."""
    name = call.name.lower()
    if name in _WRITE_TOOLS:
        return [], None
    args = call.arguments
    workdir = next((args[k] for k in ("workdir", "cwd") if isinstance(args.get(k), str)), None)
    files: list[str] = []
    if name in _READ_TOOLS or args.get("command") == "view":
        files = [_normpath(args[k], workdir) for k in _PATH_KEYS if isinstance(args.get(k), str)]
    else:
        script = next((s for k in _SHELL_ARGS if (s := _shell_script(args.get(k)))), None)
        if script is not None:
            files = [_normpath(p, workdir) for p in _shell_reads(script)]
    kept = {k: v for k, v in args.items() if k not in _VOLATILE_ARGUMENTS}
    key = f"{call.name} " + " ".join(json.dumps(kept, sort_keys=True, ensure_ascii=False,
                                                default=str).split())
    return files, key


def _written(call: ToolCall) -> list[str]:
    """Files a write tool changes (``apply_patch`` names them in its patch)."""
    if call.name.lower() not in _WRITE_TOOLS:
        return []
    args = call.arguments
    paths = [_normpath(args[k]) for k in _PATH_KEYS if isinstance(args.get(k), str)]
    for value in args.values():
        if isinstance(value, str):
            paths += [_normpath(p) for p in _PATCHED.findall(value)]
    return paths


def _calls(turns: Sequence[Turn], start: int, end: int) -> Iterator[tuple[int, ToolCall]]:
    for index in range(start, end):
        for call in turns[index].tool_calls:
            yield index, call


def rereads_in_turns(turns: Sequence[Turn], boundary: int, *, start: int = 0,
                     end: int | None = None) -> list[Reread]:
    """The re-fetching calls in ``turns[boundary:end]`` of what ``turns[start:boundary]`` held."""
    end = len(turns) if end is None else end
    if not 0 <= start <= boundary <= end <= len(turns):
        raise FirewallError(f"need 0 <= start <= boundary <= end <= {len(turns)} turns, got "
                            f"start={start}, boundary={boundary}, end={end}")
    held_files: dict[str, int] = {}
    held_calls: dict[str, int] = {}
    for index, call in _calls(turns, start, boundary):
        files, key = _fetch(call)
        for path in files:
            held_files.setdefault(path, index)
        if key is not None:
            held_calls.setdefault(key, index)
    found: list[Reread] = []
    seen: set[str] = set()
    changed: list[str] = []
    for index, call in _calls(turns, boundary, end):
        changed += _written(call)
        files, key = _fetch(call)
        hit = None
        for path in files:
            original = next((i for p, i in held_files.items() if _same_file(p, path)), None)
            if original is not None and not any(_same_file(c, path) for c in changed):
                hit = (path, original)
                break
        if not files and key is not None and key in held_calls:  # a file read is judged above
            hit = (key, held_calls[key])
        if hit is not None and hit[0] not in seen:
            seen.add(hit[0])
            found.append(Reread(index, call.name, hit[0], hit[1]))
    return found


def reread_calls(messages: list[Any], boundary: int, *, start: int = 0, end: int | None = None,
                 format: str | None = None) -> list[Reread]:
    """Tool calls in ``messages[boundary:end]`` re-fetching what ``messages[start:boundary]``
    held. ``messages`` in any format ``firewall.formats`` reads (the native one by default
    detection); ``boundary`` is the index of the first message after the compaction (a replay's
    ``k + 1``). Indices are those of the turns the format yields: the message indices for the
    native and OpenAI chat formats."""
    from ..formats import parse_messages

    turns = parse_messages(messages, format=format).turns
    return rereads_in_turns(turns, boundary, start=start, end=end)


def diagnose_boundaries(turns: Sequence[Turn], boundaries: Sequence[int]
                        ) -> list[BoundaryDiagnosis]:
    """One diagnosis per boundary, each on its own segment of the recording."""
    cuts = sorted(set(boundaries))
    out = []
    for n, boundary in enumerate(cuts):
        start = cuts[n - 1] if n else 0
        end = cuts[n + 1] if n + 1 < len(cuts) else len(turns)
        calls = sum(len(t.tool_calls) for t in turns[boundary:end])
        out.append(BoundaryDiagnosis(boundary, (start, boundary), end, calls,
                                     rereads_in_turns(turns, boundary, start=start, end=end)))
    return out


# ── probe recovery and confabulation diff ─────────────────────────────────────────────────

PROBE_SYSTEM = (
    "You answer one question about an agent conversation. The user message holds the "
    "conversation (or what is left of it) and, in <instructions>, an excerpt with a [BLANK]. "
    "Do not summarize. Reply with the exact string that fills the [BLANK], copied character for "
    "character from the conversation, and nothing else; reply UNKNOWN if the conversation does "
    "not hold it."
)
OFFLINE_NOTE = ("probe recovery and confabulation diff skipped: they ask a model questions "
                "(--summarizer anthropic|openai with --model); the offline extractive summarizer "
                "cannot answer them, and a guessed answer would be a fake figure")


@dataclass(frozen=True, slots=True)
class Probe:
    fact: str       # never a sensitive one: secrets are not probed, and are masked when sent
    rule: str
    full: str       # the answer from the full span
    compacted: str  # the answer from the compacted context
    verdict: str    # recovered | unknown | confabulated | invalid (the full span missed it)


@dataclass(slots=True)
class ProbeResult:
    probes: list[Probe]

    @property
    def valid(self) -> list[Probe]:
        return [p for p in self.probes if p.verdict != "invalid"]

    @property
    def recovery(self) -> float | None:
        valid = self.valid
        return sum(p.verdict == "recovered" for p in valid) / len(valid) if valid else None

    @property
    def confabulations(self) -> list[Probe]:
        return [p for p in self.probes if p.verdict == "confabulated"]


def cloze(fact: str, turns: Sequence[Turn], width: int = 160) -> str | None:
    """An excerpt of the span around the first occurrence of ``fact``, the fact blanked out."""
    from ..turns import turn_text

    for turn in turns:
        text = turn_text(turn)
        at = text.find(fact)
        if at >= 0:
            left = max(0, at - width // 2)
            excerpt = text[left:at + len(fact) + width // 2]
            return " ".join(excerpt.replace(fact, "[BLANK]").split())
    return None


def _answer(model: Any, turns: Sequence[Turn], question: str) -> str:
    from ..summarizers.base import SummaryRequest

    reply = model.summarize(SummaryRequest(turns=tuple(turns), required=(),
                                           instructions=question))
    text = reply if isinstance(reply, str) else reply.text
    return text.strip().strip("`\"'").strip()


def _verdict(fact: str, full: str, compacted: str) -> str:
    from .gold import occurs

    if not occurs(fact, full):
        return "invalid"
    if occurs(fact, compacted):
        return "recovered"
    if not compacted or compacted.upper().startswith("UNKNOWN"):
        return "unknown"
    return "confabulated"


def probe(model: Any, full: Sequence[Turn], compacted: Sequence[Turn],
          facts: Sequence[tuple[str, str]], limit: int = 5) -> ProbeResult:
    """Ask cloze questions about ``facts`` ((value, rule) pairs, in order) of both contexts."""
    probes: list[Probe] = []
    for value, rule in facts:
        if len(probes) == limit:
            break
        question = cloze(value, full)
        if question is None:
            continue
        question = (f"Excerpt from earlier in the conversation:\n{question}\n\n"
                    "What exact string fills the [BLANK]? Reply with it alone, or UNKNOWN.")
        a_full, a_compacted = _answer(model, full, question), _answer(model, compacted, question)
        probes.append(Probe(value, rule, a_full, a_compacted,
                            _verdict(value, a_full, a_compacted)))
    return ProbeResult(probes)


# ── recordings ────────────────────────────────────────────────────────────────────────────

def _contexts(path: str) -> dict[str, list[dict[str, Any]]]:
    """``firewall replay --contexts`` lines by conversation id, each checked for its fields."""
    by_id: dict[str, list[dict[str, Any]]] = {}
    with open(path, encoding="utf-8") as handle:
        for number, raw in enumerate(handle, 1):
            if not raw.strip():
                continue
            try:
                line = json.loads(raw)
            except ValueError as exc:
                raise ConversationError(f"invalid JSON: {exc}", source=path,
                                        line=number) from None
            if not isinstance(line, dict) or not isinstance(line.get("id"), str) \
                    or not isinstance(line.get("k"), int) or isinstance(line.get("k"), bool) \
                    or not isinstance(line.get("context"), list):
                raise ConversationError("expected a replay context line with 'id' (string), "
                                        "'k' (integer) and 'context' (messages)",
                                        source=path, line=number)
            by_id.setdefault(line["id"], []).append(line)
    return by_id


def _recordings(path: str, contexts: dict[str, list[dict[str, Any]]]
                ) -> Iterator[tuple[str, str, list[Turn], list[int], list[list[Turn] | None]]]:
    """(id, kind, turns, boundaries, compacted context per boundary or None) of each recording."""
    from ..formats import parse_messages, read_conversations
    from ..formats.transcripts import read_transcript

    chunk = read_transcript(path)
    if chunk.agent is not None:
        # after a boundary the agent's context starts from what it wrote there: the summary
        if chunk.agent == "codex":
            compacted = [[Turn("assistant", text)] for text in chunk.summaries]
        else:
            compacted = [list(chunk.turns[b:b + 1]) for b in chunk.boundaries]
        yield Path(path).stem, chunk.agent, chunk.turns, chunk.boundaries, compacted
        return
    for conversation in read_conversations(path):
        lines = sorted(contexts.get(conversation.id, ()), key=lambda c: c["k"])
        for line in lines:
            if not 0 <= line["k"] < len(conversation.turns):
                raise ConversationError(f"replay context of {conversation.id!r} has k="
                                        f"{line['k']}, outside its {len(conversation.turns)} "
                                        f"messages", source=path)
        yield (conversation.id, "replay", conversation.turns, [c["k"] + 1 for c in lines],
               [parse_messages(c["context"]).turns for c in lines])


def diagnose_file(path: str, *, contexts: dict[str, list[dict[str, Any]]] | None = None,
                  model: Any = None, firewall: Any = None, probes: int = 5) -> list[Diagnosis]:
    out = []
    for cid, kind, turns, boundaries, compacted in _recordings(path, contexts or {}):
        diagnosis = Diagnosis(path, cid, kind, len(turns), diagnose_boundaries(turns, boundaries))
        if model is not None:
            by_boundary = dict(zip(boundaries, compacted, strict=True))
            for item in diagnosis.boundaries:
                span = Conversation(list(turns[item.span[0]:item.span[1]]))
                facts = [(lit.value, lit.rule) for lit in firewall.scan(span)
                         if not lit.sensitive]
                # what the model sees has its secrets replaced, as placeholder mode sends it
                compacted_turns = Conversation(list(by_boundary[item.boundary] or []))
                item.probes = probe(model, firewall.masked_turns(span),
                                    firewall.masked_turns(compacted_turns),
                                    list(dict.fromkeys(facts)), probes)
        out.append(diagnosis)
    return out


# ── command line ──────────────────────────────────────────────────────────────────────────

def format_diagnosis(d: Diagnosis) -> str:
    lines = [f"{d.id} ({d.kind}, {d.turns} turns, compaction boundaries: {len(d.boundaries)})"]
    if not d.boundaries:
        lines.append("  no compaction boundary: nothing to diagnose")
    for n, b in enumerate(d.boundaries, 1):
        lines.append(f"  compaction {n} before turn {b.boundary}: {len(b.rereads)} re-read(s) "
                     f"among {b.calls_after} tool call(s) after it")
        for r in b.rereads:
            lines.append(f"    turn {r.index} {r.tool}: {r.target[:100]} "
                         f"(first fetched at turn {r.original})")
        if b.probes is not None:
            recovery = b.probes.recovery
            lines.append(f"    probes: {len(b.probes.valid)} valid of {len(b.probes.probes)}, "
                         f"recovery {'-' if recovery is None else f'{recovery:.0%}'}, "
                         f"{len(b.probes.confabulations)} confabulated")
            for p in b.probes.confabulations:
                lines.append(f"      {p.fact!r}: compacted context says {p.compacted[:80]!r}")
    return "\n".join(lines)


def _firewall(args: argparse.Namespace) -> Any:
    from ..compaction.guard import Firewall
    from ..options import pack_names

    return Firewall(pack_names(args.rules, args.only))


def _mask_targets(d: Diagnosis, firewall: Any) -> None:
    """Re-read targets are tool arguments, which can hold a secret (a token in a curl command):
    shown with it replaced by a placeholder, as placeholder mode sends text."""
    rereads = [r for b in d.boundaries for r in b.rereads]
    masked = firewall.masked_turns(Conversation([Turn("user", r.target) for r in rereads]))
    targets = iter(t.text for t in masked)
    for b in d.boundaries:
        b.rereads = [dataclasses.replace(r, target=next(targets)) for r in b.rereads]


def cmd_diagnose(args: argparse.Namespace) -> int:
    contexts = _contexts(args.contexts) if args.contexts else {}
    from ..options import summarizer_from_args

    # the configured vendor summarizer, told to answer rather than summarize
    model = None if args.summarizer == "extractive" else summarizer_from_args(
        args, system=PROBE_SYSTEM, max_tokens=256)
    firewall = _firewall(args) if model is not None else None
    note = None if model is not None else OFFLINE_NOTE
    if note and not args.json:
        sys.stderr.write(f"firewall: {note}\n")
    seen: set[str] = set()
    for path in args.files:
        for d in diagnose_file(path, contexts=contexts, model=model, firewall=firewall,
                               probes=args.probes):
            seen.add(d.id)
            if any(b.rereads for b in d.boundaries):
                firewall = firewall or _firewall(args)
                _mask_targets(d, firewall)
            if args.json:
                sys.stdout.write(json.dumps({**d.to_json(), "probes_skipped": note},
                                            ensure_ascii=False) + "\n")
            else:
                sys.stdout.write(format_diagnosis(d) + "\n")
    unmatched = sorted(set(contexts) - seen)
    if unmatched:  # a replay of other files, or ids that changed: say so, never drop silently
        sys.stderr.write(f"firewall: {len(unmatched)} conversation(s) of {args.contexts} are in "
                         f"none of the files: {', '.join(map(repr, unmatched[:5]))}\n")
        return 1
    return 0


def add_diagnose_command(subparsers: Any) -> argparse.ArgumentParser:
    from ..options import add_rules_option, add_summarizer_options, non_negative

    p = subparsers.add_parser(
        "diagnose", help="re-reads after real compactions; probe recovery with a model",
        description="For each compaction boundary of FILE (a Claude Code transcript, a Codex "
                    "rollout, or a recording with --contexts from its replay): the tool calls "
                    "after it that re-fetch what the span held. With a model (--summarizer "
                    "anthropic|openai): probe recovery and confabulations of pinned facts.")
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="Claude Code transcripts, Codex rollouts or recorded conversations")
    p.add_argument("--contexts", metavar="CONTEXTS.jsonl",
                   help="the `firewall replay --contexts` output of these recordings")
    add_summarizer_options(p, " (no model: the probes are skipped)")
    p.add_argument("--probes", type=non_negative, default=5, metavar="N",
                   help="facts probed per compaction (default 5; two model calls each)")
    add_rules_option(p, "packs that find the facts to probe")
    p.add_argument("--json", action="store_true", help="one JSON object per recording")
    p.set_defaults(func=cmd_diagnose)
    return p

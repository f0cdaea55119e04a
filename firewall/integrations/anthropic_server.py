"""Anthropic server-side compaction behind the literal firewall: threshold (edit
``compact_20260112``) and on-demand (the top-level ``compaction`` parameter).

    import anthropic, firewall
    from firewall.integrations.anthropic_server import GuardedAnthropic

    guard = GuardedAnthropic(anthropic.Anthropic(), firewall.Firewall())
    turn = guard.create(model="claude-sonnet-4-5", max_tokens=4096, messages=messages,
                        context_management={"edits": [{"type": "compact_20260112"}]})
    turn.response              # the model's reply (a BetaMessage)
    messages = turn.messages   # the history to send next: append the next user turn to it
    turn.record                # the AuditRecord of a compaction, also written to fw.audit

    # on demand: compact now; the reply is the compaction block alone
    turn = guard.create(model="claude-sonnet-4-5", max_tokens=4096, messages=messages,
                        compaction={"type": "summarize"})

With ``recall_tool=True`` the guard also offers the ``recall_literal`` tool (the archive of
every literal its compactions scanned, pinned or not; ``firewall.integrations.recall_tool``),
ends the re-injected block with a line saying how many literals are archived, and answers the
model's calls to it locally (no model call, no network): when a reply calls only
``recall_literal``, the results are appended and the request continues (``MAX_ROUNDS`` times at
most). A reply that also calls your tools is returned as usual: answer yours and add
``guard.answer_recall(turn.response)`` to the same user message.

One guard serves one conversation (it owns its ledger). Per ``create``:

1. **Extract** every literal of the request's messages (text, ``tool_use.input``,
   ``tool_result.content``, server-tool results) into ``guard.ledger``, before the server can
   summarize them.
2. **Instruct.** ``instructions`` *replace* the server's compaction prompt, which the docs say
   is tuned per model. So the guard sends only what it must add: the required literals and the
   rule to copy them (plus, with ``tools``, the docs' "do not call any tools" sentence, which the
   replaced prompt would have carried). With nothing required it sends no ``instructions`` at
   all and the model's own prompt applies. The trade-off: while literals are required, the
   summary is written from the firewall's list alone, without the model's default guidance on
   state and next steps. To keep such guidance, pass ``prompt=`` (e.g. ``DEFAULT_PROMPT``, the
   documented default at the time of writing) or your own ``instructions`` in the edit or
   ``compaction`` config: either is sent first, then the list. The beta is added
   (``compact-2026-01-12``, or ``compact-2026-09-04`` on demand), and in threshold mode
   ``pause_after_compaction`` is turned on unless the caller set it: a paused compaction can be
   checked and re-asked before the model answers from it.
3. **Validate** the ``compaction`` block's visible ``content`` against the ledger. Paused (or on
   demand) and failing (missing or mutated literals, or ``content: null``), the same request is
   sent again with feedback in the instructions, up to ``firewall.max_retries`` times (each try
   is billed).
4. **Re-inject.** The signed block is never edited or moved: the next messages are the assistant
   message starting with it, then the rendered ledger as a separate user message, then (after a
   pause) the last ``keep_last`` messages. A paused compaction is then resumed with those
   messages (``resume=True``), so the model answers with every pinned literal in view. A
   ``content: null`` block (a failed compaction, a no-op for the server) is sent back where it
   was, with nothing pruned, and the ledger still follows it. On demand, the whole ``messages``
   is what the block replaces, and a failed compaction leaves ``messages`` as they were.
5. **Audit** each compaction as an ``AuditRecord`` (``vendor_path`` ``"anthropic-server"``, or
   ``"anthropic-server-on-demand"``), written to ``firewall.audit`` when it is set.

``stream=True`` is supported: each request goes through ``client.beta.messages.stream`` and is
validated once ``get_final_message()`` has collected it (``on_event`` sees every event as it
arrives). The reply text is therefore only final after the whole stream.

Errors from the SDK (rate limits, overload, bad requests) are raised as ``IntegrationError``
with the status and the API's message; the caller's messages are never modified.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from ..audit import AuditRecord
from ..tokens import turn_tokens
from ..errors import CompactionRefused, IntegrationError
from ..extras import import_extra
from ..formats import parse_messages
from ..compaction.plan import REQUIRED_INSTRUCTIONS, source_texts
from ..compaction.ledger import Eviction, Ledger, LedgerEntry
from ..literals import Literal
from ..compaction.records import AttemptResult, build_record, held_values, write_record
from ..compaction.validate import Verdict, validate
from . import recall_tool as recall

BETA = "compact-2026-01-12"
ON_DEMAND_BETA = "compact-2026-09-04"
EDIT_TYPE = "compact_20260112"
VENDOR_PATH = "anthropic-server"
ON_DEMAND_VENDOR_PATH = "anthropic-server-on-demand"

# The default compaction prompt as the compaction docs print it. The server's own varies by
# model, so the guard never sends this unasked: pass ``prompt=DEFAULT_PROMPT`` to keep a full
# summarization prompt ahead of the literal list.
DEFAULT_PROMPT = (
    "You have written a partial transcript for the initial task above. Please write a summary of "
    "the transcript. The purpose of this summary is to provide continuity so you can continue to "
    "make progress towards solving the task in a future context, where the raw history above may "
    "not be accessible and will be replaced with this summary. Write down anything that would be "
    "helpful, including the state, next steps, learnings etc. You must wrap your summary in a "
    "<summary></summary> block.")
# Added by the docs when tools are present: a tool call mid-summary fails as ``content: null``.
NO_TOOLS = "Do not call any tools while writing this summary; respond with text only."


# ── helpers shared with the OpenAI integration ─────────────────────────────────────────────


def to_param(obj: Any) -> Any:
    """An SDK response object as the plain dict the API sent (unset fields stay absent)."""
    # warnings off: the SDK parses a returned *user* message (responses.compact) into an output
    # message class and would warn about its input_text parts while dumping them unchanged
    return obj.to_dict(warnings=False) if hasattr(obj, "to_dict") else obj


# ── the Anthropic wrapper ──────────────────────────────────────────────────────────────────


@dataclass
class GuardedTurn:
    """The outcome of one ``create``: the reply, the next history, the ledger and its audit."""

    response: Any
    messages: list[Any]
    ledger: Ledger
    records: list[AuditRecord] = field(default_factory=list)
    verdict: Verdict | None = None
    compacted: bool = False
    responses: list[Any] = field(default_factory=list)  # every reply, re-asks included (billed)
    timeouts: list[Any] = field(default_factory=list)  # rule timeouts: literals may be missed
    audit_error: str | None = None

    @property
    def record(self) -> AuditRecord | None:
        return self.records[-1] if self.records else None


def _import_sdk() -> Any:
    return import_extra("anthropic", "GuardedAnthropic", IntegrationError)


def _error(sdk: Any, exc: Exception) -> IntegrationError:
    if isinstance(exc, sdk.APIStatusError):
        kind = f" {exc.type}" if getattr(exc, "type", None) else ""
        detail = getattr(exc, "api_message", None) or exc.message
        hint = " (rate limited: retry later or raise the client's max_retries)" \
            if exc.status_code == 429 else ""
        return IntegrationError(
            f"Anthropic API error {exc.status_code}{kind}: {detail}{hint}; "
            f"the conversation was not changed", status_code=exc.status_code)
    if isinstance(exc, sdk.APIConnectionError):
        return IntegrationError(f"could not reach the Anthropic API: {exc.message}; "
                                f"the conversation was not changed")
    return IntegrationError(f"Anthropic SDK error: {type(exc).__name__}: {exc}")


def _blocks(message: Any) -> list[Any]:
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def _type(block: Any) -> Any:
    return block.get("type") if isinstance(block, dict) else getattr(block, "type", None)


def _has_compaction(message: Any) -> bool:
    return any(_type(b) == "compaction" for b in _blocks(message))


def _plain(messages: list[Any]) -> list[Any]:
    """Messages with SDK block objects (``response.to_param()``) turned into plain dicts."""
    return [{**m, "content": [to_param(b) for b in m["content"]]}
            if isinstance(m, dict) and isinstance(m.get("content"), list) else m
            for m in messages]


def _tail(history: list[Any], keep_last: int) -> list[Any]:
    """The last ``keep_last`` messages, widened so no ``tool_result`` loses its ``tool_use``,
    and never reaching back to an older compaction block (only one may be sent)."""
    if keep_last <= 0 or not history:
        return []
    start = max(0, len(history) - keep_last)
    while start > 0 and any(_type(b) == "tool_result" for b in _blocks(history[start])):
        start -= 1
    older = [i for i, m in enumerate(history) if _has_compaction(m)]
    return list(history[max(start, older[-1] + 1 if older else 0):])


class _Guard:
    """State and the sans-IO core shared by the sync and async wrappers."""

    def __init__(self, client: Any, firewall: Any, *, ledger: Ledger | None = None,
                 conversation_id: str | None = None, keep_last: int = 1, resume: bool = True,
                 pause: bool = True, on_event: Callable[[Any], Any] | None = None,
                 prompt: str | None = None, recall_tool: bool = False) -> None:
        self.client, self.firewall, self.prompt = client, firewall, prompt
        self.recall_tool = recall_tool
        self._span = recall.SpanLiterals()  # what the next compaction archives
        self.ledger = ledger if ledger is not None else Ledger.new(
            conversation_id or f"anthropic-{uuid.uuid4().hex[:12]}")
        self.keep_last, self.resume, self.pause, self.on_event = keep_last, resume, pause, on_event
        self._seen: set[str] = set()
        self._offset = 0  # messages pruned from the front so far: keeps turn numbers absolute
        self._evicted: list[Eviction] = []  # not yet reported in a record
        self._unpinned: list[Literal] = []  # likewise
        self._compactions = 0

    # -- request building

    def _edits(self, kwargs: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
        config = kwargs.get("context_management") or {}
        edits = [dict(e) for e in (config.get("edits") or ())]
        at = next((i for i, e in enumerate(edits) if e.get("type") == EDIT_TYPE), None)
        if at is None:
            edits.append({"type": EDIT_TYPE})
            at = len(edits) - 1
        if self.pause:
            edits[at].setdefault("pause_after_compaction", True)
        return edits, at

    def _request(self, kwargs: dict[str, Any], messages: list[Any], base: str,
                 required: list[LedgerEntry], feedback: str | None) -> dict[str, Any]:
        request = {k: v for k, v in kwargs.items() if k != "stream"}
        if self.recall_tool:
            request["tools"] = recall.with_tool(kwargs.get("tools"), recall.anthropic_tool())
        instructions = _instructions(base, required, feedback, bool(request.get("tools")))
        if kwargs.get("compaction") is not None:  # on demand
            config = {k: v for k, v in kwargs["compaction"].items() if k != "instructions"}
            if instructions:
                config["instructions"] = instructions
            request.update(messages=messages, betas=_with_beta(kwargs, ON_DEMAND_BETA),
                           compaction=config)
            return request
        edits, at = self._edits(kwargs)
        edits[at].pop("instructions", None)
        if instructions:
            edits[at]["instructions"] = instructions
        request.update(messages=messages, betas=_with_beta(kwargs, BETA),
                       context_management={**(kwargs.get("context_management") or {}),
                                           "edits": edits})
        return request

    def _base_prompt(self, kwargs: dict[str, Any]) -> str:
        """The caller's own instructions (which replace the server's prompt, as they would
        without us), else ``prompt``, else nothing: the model's own prompt applies."""
        if kwargs.get("compaction") is not None:
            given = kwargs["compaction"].get("instructions")
        else:
            edits, at = self._edits(kwargs)
            given = edits[at].get("instructions")
        if isinstance(given, str) and given.strip():
            return given
        return self.prompt or ""

    def answer_recall(self, response: Any) -> list[dict[str, Any]]:
        """The ``tool_result`` blocks answering the ``recall_literal`` calls of ``response``
        from the archive (locally), to send with the results of your own tools."""
        return [{"type": "tool_result", "tool_use_id": b["id"],
                 "content": recall.answer(self.firewall, b.get("input"),
                                          conversation=self.ledger.conversation_id)}
                for b in (to_param(c) for c in getattr(response, "content", None) or ())
                if _type(b) == "tool_use" and b.get("name") == recall.RECALL_TOOL]

    def _recall_only(self, response: Any) -> bool:
        """Whether every tool the reply calls is ``recall_literal``: the guard can answer."""
        calls = [b for b in getattr(response, "content", None) or () if _type(b) == "tool_use"]
        return self.recall_tool and getattr(response, "stop_reason", None) == "tool_use" \
            and bool(calls) and all(getattr(b, "name", None) == recall.RECALL_TOOL
                                    for b in calls)

    # -- the loop (sans-IO): yields request kwargs, receives replies, returns a GuardedTurn

    def _core(self, kwargs: dict[str, Any]) -> Generator[dict[str, Any], Any, GuardedTurn]:
        fw = self.firewall
        on_demand = _on_demand(kwargs)
        vendor_path = ON_DEMAND_VENDOR_PATH if on_demand else VENDOR_PATH
        messages = kwargs.get("messages")
        if not isinstance(messages, list):
            raise IntegrationError("create() needs messages=[...] (a list)")
        conversation = parse_messages(_plain(messages), format="anthropic",
                                      id=self.ledger.conversation_id)
        number = fw.next_compaction(self.ledger.conversation_id, self._compactions + 1)
        pinned = fw.pin(self.ledger, conversation.turns, seen=self._seen, offset=self._offset,
                        compaction=number)
        self._evicted += pinned.evicted
        self._unpinned += pinned.oversize  # too long to pin: reported, never silent
        self._span.add(pinned.literals, conversation.turns, self._offset)
        required = [e for e in self.ledger.entries if fw.is_required(e)]
        pairs = [(e.value, e.rule) for e in required]
        base = self._base_prompt(kwargs)
        tokens_before = sum(turn_tokens(t) for t in conversation.turns)
        source = list(source_texts(conversation.turns))  # what the summary may copy

        history = list(messages)  # the caller's list is never modified
        request = self._request(kwargs, history, base, required, None)
        result = GuardedTurn(response=None, messages=history, ledger=self.ledger,
                             timeouts=pinned.timeouts)
        attempts: list[AttemptResult] = []
        resumed, rounds = False, 0

        def record(summary: str | None, verdict: Verdict | None, tail: list[Any],
                   error: str | None, block: str | None = None) -> None:
            rec = build_record(
                fw, self.ledger, vendor_path=vendor_path, compaction=number,
                span=(self._offset, self._offset + len(history) - 1) if history else None,
                turns_compacted=len(history), tokens_before=tokens_before,
                verbatim="\n".join(t.text for t in parse_messages(_plain(tail),
                                                                   format="anthropic").turns),
                summary=summary, verdict=verdict, evicted=self._evicted,
                unpinned=self._unpinned, attempts=attempts, compacted=summary is not None,
                error=error, injected=True, block=block)
            self._evicted, self._unpinned, self._compactions = [], [], number
            result.records.append(rec)
            result.audit_error = write_record(fw.audit, rec) or result.audit_error
            if summary is not None:  # the span is compacted: archive what it held
                result.audit_error = self._span.write(fw, rec, self.ledger) \
                    or result.audit_error

        while True:
            started = time.perf_counter()
            response = yield request
            result.responses.append(response)
            result.response = response
            content = list(getattr(response, "content", None) or ())
            params = [to_param(b) for b in content]
            found = [i for i, b in enumerate(content) if _type(b) == "compaction"]
            if not found and not on_demand:
                if attempts:  # a re-ask the server answered without compacting: nothing lost
                    record(None, None, [], "a re-ask returned no compaction block: the "
                           "server answered from the uncompacted conversation")
                result.messages = history + [{"role": "assistant", "content": params}]
                if not self._recall_only(response) or rounds >= recall.MAX_ROUNDS:
                    return result
                # answered here, from the archive; the model continues with the results
                rounds, attempts = rounds + 1, []
                history = result.messages + [{"role": "user",
                                              "content": self.answer_recall(response)}]
                request = self._request(kwargs, history, base, required, None)
                continue
            at = found[-1] if found else None
            summary = getattr(content[at], "content", None) if found else None
            summary = summary if isinstance(summary, str) and summary else None
            verdict = validate(summary, pairs, known=self.ledger.values(), source=source) \
                if summary is not None else None
            # on demand, nothing is sampled after the block: a re-ask is always possible
            paused = on_demand or getattr(response, "stop_reason", None) == "compaction"
            error = None if summary is not None else \
                "compaction failed: the block's content is null" if found else \
                "compaction failed: the reply holds no compaction block"
            attempts.append(AttemptResult(
                len(attempts) + 1, summary, verdict, error=error, usage=_usage(response),
                duration_ms=(time.perf_counter() - started) * 1000,
                model=getattr(response, "model", None)))
            ok = verdict is not None and verdict.ok
            if paused and not ok and len(attempts) <= fw.max_retries:
                # the request is unchanged, so it is over the trigger again: it re-compacts
                request = self._request(kwargs, history, base, required,
                                        _feedback(summary, verdict))
                continue
            if not ok and fw.policy == "raise":
                raise CompactionRefused(
                    f"server compaction lost required literals after {len(attempts)} "
                    f"attempt(s): " + _describe(summary, verdict), attempts=attempts)

            # the pinned values the server's summary does not hold (they all stay pinned)
            block = self.ledger.render(held_values(self.ledger, [summary] if summary else []))
            ledger_message = {"role": "user", "content": [{"type": "text", "text": block}]}
            if summary is not None:  # the block first and unchanged: the server starts there
                tail = _tail(history, self.keep_last) if paused and not on_demand else []
                next_messages = [{"role": "assistant", "content": params[at:]},
                                 ledger_message, *tail]
            elif on_demand:  # nothing to swap in: the conversation stays as it was
                tail, next_messages = [], history
            else:  # a failed compaction is a no-op: keep everything, still pin the ledger
                tail = []
                next_messages = history + [{"role": "assistant", "content": params},
                                           ledger_message]
            record(summary, verdict, tail, error, block)
            if self.recall_tool:  # after the archive write: the count includes this span
                ledger_message["content"][0]["text"] = recall.with_hint(
                    block, fw, self.ledger.conversation_id)
            result.verdict = verdict
            result.compacted = result.compacted or summary is not None
            result.messages = next_messages
            if summary is not None:  # the block's message is scanned (its text) next time
                self._offset += len(history)
            if on_demand or not (paused and summary is not None and self.resume) or resumed:
                return result
            # resume: the model answers from block + ledger + tail (the docs' pause pattern)
            resumed, attempts = True, []
            history = next_messages
            request = self._request(kwargs, history, base, required, None)  # no feedback


def _on_demand(kwargs: dict[str, Any]) -> bool:
    """Whether the request is an on-demand compaction; a config the API would refuse is an
    error here, before anything is sent."""
    config = kwargs.get("compaction")
    if config is None:
        return False
    if not isinstance(config, dict) or config.get("type") != "summarize":
        raise IntegrationError(f"compaction= must be {{'type': 'summarize', 'instructions': "
                               f"...}} (BetaCompactionConfigParam), got {config!r}")
    if kwargs.get("context_management") is not None:
        raise IntegrationError("compaction= (on demand) cannot be combined with "
                               "context_management: send one or the other")
    return True


def _with_beta(kwargs: dict[str, Any], beta: str) -> list[str]:
    betas = list(kwargs.get("betas") or ())
    return betas if beta in betas else [*betas, beta]


def _instructions(base: str, required: list[LedgerEntry], feedback: str | None,
                  tools: bool) -> str:
    """What replaces the server's prompt: ``base`` (the caller's or ``prompt=``), then what the
    firewall must add; empty when there is nothing to add, so the server's own prompt stays."""
    parts = [base] if base else []
    if required or feedback:
        if tools and NO_TOOLS not in base:  # the replaced default prompt says it with tools
            parts.append(NO_TOOLS)
        if required:
            parts.append(REQUIRED_INSTRUCTIONS + "\n" + "\n".join(f"- {e.value}"
                                                                  for e in required))
        if feedback:
            parts.append(feedback)
    return "\n\n".join(parts)


def _usage(response: Any) -> dict[str, Any]:
    usage = getattr(response, "usage", None)
    if usage is None or not hasattr(usage, "model_dump"):
        return {}
    dumped = usage.model_dump(mode="json", exclude_none=True)
    # top-level counts exclude compaction; billable = the sum over ``iterations``
    for item in dumped.pop("iterations", None) or ():
        if isinstance(item, dict) and item.get("type") == "compaction":
            for k in ("input_tokens", "output_tokens"):
                dumped[f"compaction_{k}"] = dumped.get(f"compaction_{k}", 0) + int(item.get(k) or 0)
    return dumped


def _describe(summary: str | None, verdict: Verdict | None) -> str:
    if summary is None:
        return "the compaction block's content is null"
    return "; ".join(f"{f.status} {f.value!r}" for f in verdict.missing + verdict.mutated) \
        if verdict else "unchecked"


def _feedback(summary: str | None, verdict: Verdict | None) -> str:
    lines = ["Your previous summary of this conversation cannot be used:"]
    if summary is None:
        lines.append(f"- it produced no summary (a tool call or malformed output). {NO_TOOLS}")
    elif verdict is not None:
        for f in verdict.missing:
            lines.append(f"- missing: {f.value!r}")
        for f in verdict.mutated:
            lines.append(f"- you wrote {f.resembles!r} where the exact literal is {f.value!r} "
                         f"({f.reason})")
    lines.append("Write the summary again so that every listed literal appears byte-for-byte.")
    return "\n".join(lines)


class GuardedAnthropic(_Guard):
    """``client.beta.messages.create`` with server compaction guarded (``anthropic.Anthropic``):
    threshold (``context_management``) or on demand (``compaction={"type": "summarize"}``).

    ``prompt``: a full summarization prompt sent ahead of the literal list (see the module
    docstring: ``instructions`` replace the model's own prompt; without ``prompt`` only the list
    and its rules are sent, and nothing when no literal is required).
    ``keep_last``: messages re-sent verbatim after the ledger when a paused compaction resumes.
    ``resume``: after a paused compaction, send the continuation request (default) or return
    the paused reply with ``messages`` ready to send. ``pause``: turn on
    ``pause_after_compaction`` unless the caller set it (re-asks need it).
    ``recall_tool``: offer ``recall_literal`` and answer its calls locally (module docstring).
    """

    def create(self, **kwargs: Any) -> GuardedTurn:
        sdk = _import_sdk()
        stream = bool(kwargs.get("stream"))
        core = self._core(kwargs)
        try:
            request = next(core)
            while True:
                request = core.send(self._call(sdk, request, stream))
        except StopIteration as done:
            return done.value

    def _call(self, sdk: Any, request: dict[str, Any], stream: bool) -> Any:
        try:
            if not stream:
                return self.client.beta.messages.create(**request)
            with self.client.beta.messages.stream(**request) as events:
                if self.on_event is not None:
                    for event in events:
                        self.on_event(event)
                return events.get_final_message()
        except sdk.AnthropicError as exc:
            raise _error(sdk, exc) from exc


class AsyncGuardedAnthropic(_Guard):
    """The async twin of ``GuardedAnthropic`` (``anthropic.AsyncAnthropic``); same core."""

    async def create(self, **kwargs: Any) -> GuardedTurn:
        sdk = _import_sdk()
        stream = bool(kwargs.get("stream"))
        core = self._core(kwargs)
        try:
            request = next(core)
            while True:
                request = core.send(await self._call(sdk, request, stream))
        except StopIteration as done:
            return done.value

    async def _call(self, sdk: Any, request: dict[str, Any], stream: bool) -> Any:
        try:
            if not stream:
                return await self.client.beta.messages.create(**request)
            async with self.client.beta.messages.stream(**request) as events:
                if self.on_event is not None:
                    async for event in events:
                        self.on_event(event)
                return await events.get_final_message()
        except sdk.AnthropicError as exc:
            raise _error(sdk, exc) from exc


__all__ = ["AsyncGuardedAnthropic", "BETA", "DEFAULT_PROMPT", "EDIT_TYPE", "GuardedAnthropic",
           "GuardedTurn", "IntegrationError", "NO_TOOLS", "ON_DEMAND_BETA"]

"""OpenAI Responses compaction (``context_management`` and ``responses.compact``) behind the
literal firewall.

    import openai, firewall
    from firewall.integrations.openai_responses import GuardedResponses

    guard = GuardedResponses(openai.OpenAI(), firewall.Firewall())
    turn = guard.compact(model="gpt-5.4", input=items)       # POST /responses/compact
    turn = guard.create(model="gpt-5.4", input=turn.input + [next_user_item],
                        context_management=[{"type": "compaction", "compact_threshold": 200_000}])
    turn.input     # the input items to send next (append the next user turn)
    turn.record    # the AuditRecord of a compaction (vendor_path "openai-opaque")

A compaction item carries only ``encrypted_content``: nothing in it can be read, so nothing is
validated. What the guard does instead:

1. **Extract** every literal of the input items (message text, ``function_call.arguments``
   parsed from JSON, ``function_call_output.output``) into ``guard.ledger`` before the call.
2. **Re-inject, always.** The next input is the compaction item, unchanged, then the rendered
   ledger as a separate message item, then whatever followed the item. ``create`` drops the
   items before the latest compaction item (the docs allow it; the item replaces them);
   ``compact`` keeps the user messages it returns. A request whose latest compaction item is not
   followed by a genuine ledger block gets one inserted right after it.
3. **Audit** each compaction: every pinned literal is ``opaque`` (``in_tail`` says whether it is
   still visible verbatim, e.g. in a returned user message), never reported as checked.

**Chained conversations** (``previous_response_id``, or ``conversation``): the server holds the
history and the request carries only the new items, so the guard scans what the client sees,
the items it sends *and* every output item it receives, and keeps the client's own record of
them in ``guard.history`` (never pruned). Nothing is ever pruned from ``input`` under chaining
(the docs say not to): after a compaction, ``turn.input`` is just the ledger item, to send with
the next turn. History the guard never saw cannot be scanned, so it refuses with
``IntegrationError`` a ``previous_response_id`` it did not return, and a ``conversation`` not
registered with ``guard.start_conversation(id, items)`` (the items it was created with), unless
built with ``allow_unscanned_history=True`` (the caller's statement that the server holds
nothing the guard needs to see).

**``recall_tool=True``**: ``create`` offers the ``recall_literal`` function tool (the archive of
every literal the guard's compactions scanned, pinned or not), the ledger item ends with a line
saying how many literals are archived, and a response whose function calls are all
``recall_literal`` is answered locally (no model call, no network): the guard sends the
``function_call_output`` items in a follow-up ``create`` (chained on the response when the
caller chains, else with the whole input) and returns that one (``MAX_ROUNDS`` at most). A
response that also calls your tools is returned as usual: send
``guard.answer_recall(turn.response)`` with your own outputs.

There is no retry lever (OpenAI takes no summarization prompt). ``compact_threshold`` compacts
inside a request that then answers before the ledger can be injected: prefer ``compact``.
``stream=True`` is not supported. SDK errors are raised as ``IntegrationError``; the caller's
items are never modified.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any

from ..tokens import turn_tokens
from ..extras import import_extra
from ..formats.openai_responses import message_item, to_turns
from ..compaction.plan import ledger_blocks
from ..compaction.ledger import Eviction, Ledger
from ..literals import Literal
from ..turns import Turn
from ..compaction.records import AttemptResult, build_record, write_record
from . import recall_tool as recall
from .anthropic_server import IntegrationError, to_param

VENDOR_PATH = "openai-opaque"


@dataclass
class GuardedResponse:
    """The outcome of one call: the SDK response, the next input items, the ledger, the audit."""

    response: Any
    input: list[Any]
    ledger: Ledger
    record: Any = None
    compacted: bool = False
    timeouts: list[Any] = field(default_factory=list)
    audit_error: str | None = None


def _import_sdk() -> Any:
    return import_extra("openai", "GuardedResponses", IntegrationError)


def _error(sdk: Any, exc: Exception) -> IntegrationError:
    if isinstance(exc, sdk.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        detail = body.get("message") or exc.message
        kind = f" {exc.type}" if getattr(exc, "type", None) else ""
        hint = " (rate limited: retry later or raise the client's max_retries)" \
            if exc.status_code == 429 else ""
        return IntegrationError(f"OpenAI API error {exc.status_code}{kind}: {detail}{hint}; "
                                f"the conversation was not changed", status_code=exc.status_code)
    if isinstance(exc, sdk.APIConnectionError):
        return IntegrationError(f"could not reach the OpenAI API: {exc.message}; "
                                f"the conversation was not changed")
    return IntegrationError(f"OpenAI SDK error: {type(exc).__name__}: {exc}")


def _type(item: Any) -> Any:
    return item.get("type") if isinstance(item, dict) else getattr(item, "type", None)


def _latest_compaction(items: list[Any]) -> int | None:
    found = [i for i, item in enumerate(items) if _type(item) == "compaction"]
    return found[-1] if found else None


class _Guard:
    """State and the sans-IO core shared by the sync and async wrappers."""

    def __init__(self, client: Any, firewall: Any, *, ledger: Ledger | None = None,
                 conversation_id: str | None = None, ledger_role: str = "user",
                 allow_unscanned_history: bool = False, recall_tool: bool = False) -> None:
        self.client, self.firewall, self.ledger_role = client, firewall, ledger_role
        self.recall_tool = recall_tool
        self._span = recall.SpanLiterals()  # what the next compaction archives
        self.allow_unscanned_history = allow_unscanned_history
        self.history: list[Any] = []  # the client's own record of a chained conversation
        self._responses: set[str] = set()  # ids this guard returned: safe to chain from
        self._conversations: set[str] = set()  # conversations served from their first turn
        self.ledger = ledger if ledger is not None else Ledger.new(
            conversation_id or f"openai-{uuid.uuid4().hex[:12]}")
        self._seen: set[str] = set()
        self._offset = 0
        self._evicted: list[Eviction] = []
        self._unpinned: list[Literal] = []  # likewise
        self._compactions = 0

    def _ledger_item(self) -> dict[str, Any]:
        block = self.ledger.render()
        if self.recall_tool:  # the agent has the tool: say how many literals it can ask for
            block = recall.with_hint(block, self.firewall, self.ledger.conversation_id)
        return message_item(block, self.ledger_role)

    def answer_recall(self, response: Any) -> list[dict[str, Any]]:
        """The ``function_call_output`` items answering the ``recall_literal`` calls of
        ``response`` from the archive (locally), to send with your own tools' outputs."""
        return [{"type": "function_call_output", "call_id": item["call_id"],
                 "output": recall.answer(self.firewall, item.get("arguments"),
                                         conversation=self.ledger.conversation_id)}
                for item in (to_param(o) for o in getattr(response, "output", None) or ())
                if _type(item) == "function_call" and item.get("name") == recall.RECALL_TOOL]

    def _follow_up(self, method: str, kwargs: dict[str, Any],
                   turn: GuardedResponse) -> dict[str, Any] | None:
        """The ``create`` kwargs that send the local answers when every function call of the
        response is ``recall_literal``; None when the turn is the caller's."""
        if not self.recall_tool or method != "create":
            return None
        calls = [o for o in getattr(turn.response, "output", None) or ()
                 if _type(o) == "function_call"]
        if not calls or any(getattr(c, "name", None) != recall.RECALL_TOOL for c in calls):
            return None
        follow = {**kwargs, "input": [*turn.input, *self.answer_recall(turn.response)]}
        if kwargs.get("previous_response_id") is not None:
            follow["previous_response_id"] = turn.response.id
        return follow

    def _has_ledger(self, turns: list[Turn]) -> bool:
        return any(ledger_blocks(t.text, self.ledger) for t in turns if t.text)

    def _chained(self, kwargs: dict[str, Any]) -> bool:
        """Whether the server holds the history; refuse history the guard never saw."""
        previous, conversation = kwargs.get("previous_response_id"), kwargs.get("conversation")
        if isinstance(conversation, dict):  # {"id": ...}
            conversation = conversation.get("id")
        if previous is None and conversation is None:
            return False
        if not self.allow_unscanned_history:
            if previous is not None and previous not in self._responses:
                raise IntegrationError(
                    f"previous_response_id {previous!r} was not returned by this guard: the "
                    f"history the server holds for it was never scanned, so its literals "
                    f"cannot be pinned. Send the conversation through the guard from its first "
                    f"turn, pass the history as input, or build the guard with "
                    f"allow_unscanned_history=True")
            if conversation is not None and conversation not in self._conversations \
                    and (previous is None or previous not in self._responses):
                raise IntegrationError(
                    f"conversation {conversation!r} is unknown to this guard: the items the "
                    f"server holds for it were never scanned. Register it with "
                    f"guard.start_conversation(id, items) (the items it was created with), or "
                    f"build the guard with allow_unscanned_history=True")
        if conversation is not None:
            self._conversations.add(str(conversation))
        return True

    def start_conversation(self, conversation: Any, items: list[Any] = ()) -> None:
        """Register a conversation the caller created (``client.conversations.create``) with
        ``items``: they are scanned into the ledger and the record, so ``create`` may chain on
        it. No request is made."""
        conversation = conversation.get("id") if isinstance(conversation, dict) else \
            getattr(conversation, "id", conversation)
        given = [to_param(i) for i in items]
        pinned = self.firewall.pin(self.ledger, to_turns(given), seen=self._seen,
                                   offset=self._offset + len(self.history),
                                   compaction=self.firewall.next_compaction(
                                       self.ledger.conversation_id, self._compactions + 1))
        self._evicted += pinned.evicted
        self._unpinned += pinned.oversize
        self.history += given
        self._conversations.add(str(conversation))

    def _core(self, method: str, kwargs: dict[str, Any]
              ) -> Generator[tuple[str, dict[str, Any]], Any, GuardedResponse]:
        fw = self.firewall
        if kwargs.get("stream"):
            raise IntegrationError("GuardedResponses does not support stream=True: call "
                                   "without it (the compaction item is opaque either way)")
        chained = self._chained(kwargs)
        given = kwargs.get("input")
        items = [message_item(given)] if isinstance(given, str) else \
            [to_param(i) for i in (given or ())]
        turns = to_turns(items)  # ConversationError (a FirewallError) on malformed items
        number = fw.next_compaction(self.ledger.conversation_id, self._compactions + 1)
        # turn numbers are positions in the client's record (chained: it only grows)
        base = self._offset + (len(self.history) if chained else 0)
        pinned = fw.pin(self.ledger, turns, seen=self._seen, offset=base, compaction=number)
        self._evicted += pinned.evicted
        self._unpinned += pinned.oversize  # too long to pin: reported, never silent
        self._span.add(pinned.literals, turns, base)
        tokens_before = sum(turn_tokens(t) for t in turns)

        request = dict(kwargs)
        if self.recall_tool and method == "create":
            request["tools"] = recall.with_tool(kwargs.get("tools"), recall.responses_tool())
        at = _latest_compaction(items)
        if at is not None and not self._has_ledger(turns[at + 1:]):
            # an earlier compaction without our ledger after it (a history we did not build)
            request["input"] = items[:at + 1] + [self._ledger_item()] + items[at + 1:]
        started = time.perf_counter()
        response = yield method, request
        duration = (time.perf_counter() - started) * 1000
        output = [to_param(o) for o in (getattr(response, "output", None) or ())]
        result = GuardedResponse(response=response, input=[], ledger=self.ledger,
                                 timeouts=pinned.timeouts)
        if isinstance(getattr(response, "id", None), str):
            self._responses.add(response.id)
        at = _latest_compaction(output)
        sent = request.get("input")
        sent = [message_item(sent)] if isinstance(sent, str) else list(sent or ())
        # Output items: a chained next request will not carry them, so scan them now (a
        # stateless one re-sends them, and ``seen`` keeps them from being counted twice).
        out_turns = to_turns(output)
        out = fw.pin(self.ledger, out_turns, seen=self._seen, offset=base + len(sent),
                     compaction=number)
        self._span.add(out.literals, out_turns, base + len(sent))
        self._evicted += out.evicted
        self._unpinned += out.oversize
        result.timeouts = [*result.timeouts, *out.timeouts]
        self.history = (self.history if chained else []) + sent + output
        if at is None:  # no compaction: the history simply grows (server-side, if chained)
            result.input = [] if chained else sent + output
            return result
        visible = "\n".join(t.text for t in to_turns(output) if t.text)
        usage = getattr(response, "usage", None)
        if chained:  # the server compacted the whole record the client sent so far
            before = self.history[:len(self.history) - len(output)]
            span = (self._offset, self._offset + len(before) - 1) if before else None
            compacted_count = len(before)
            tokens_before = sum(turn_tokens(t) for t in to_turns(before))
        else:
            span = (self._offset, self._offset + len(items) - 1) if items else None
            compacted_count = len(items)
        record = build_record(
            fw, self.ledger, vendor_path=VENDOR_PATH, compaction=number, span=span,
            turns_compacted=compacted_count, tokens_before=tokens_before, verbatim=visible,
            summary=None, verdict=None, evicted=self._evicted, unpinned=self._unpinned,
            compacted=True, error=None, opaque=True, attempts=[AttemptResult(
                1, None, None, model=getattr(response, "model", None), duration_ms=duration,
                usage=usage.model_dump(mode="json", exclude_none=True)
                if hasattr(usage, "model_dump") else {})])
        self._evicted, self._unpinned, self._compactions = [], [], number
        result.record, result.compacted = record, True
        result.audit_error = write_record(fw.audit, record) \
            or self._span.write(fw, record, self.ledger)
        # built once the span is archived: the ledger item's hint line counts it
        if chained:  # never prune: the server keeps the window; the ledger goes next turn
            result.input = [self._ledger_item()]
        else:
            # compact() returns the user messages to keep before the item; create() may drop
            # everything before it (the item replaces it)
            head = output[:at + 1] if method == "compact" else output[at:at + 1]
            result.input = head + [self._ledger_item()] + output[at + 1:]
        if method == "create" and not chained:
            self._offset += len(items)
        return result


class GuardedResponses(_Guard):
    """``client.responses.create`` / ``client.responses.compact`` guarded (``openai.OpenAI``).
    ``recall_tool``: offer ``recall_literal`` and answer its calls locally (module docstring)."""

    def create(self, **kwargs: Any) -> GuardedResponse:
        return self._drive("create", kwargs)

    def compact(self, **kwargs: Any) -> GuardedResponse:
        return self._drive("compact", kwargs)

    def _drive(self, method: str, kwargs: dict[str, Any]) -> GuardedResponse:
        turn = self._once(method, kwargs)
        for _ in range(recall.MAX_ROUNDS):  # recall_literal calls answered locally
            if (follow := self._follow_up(method, kwargs, turn)) is None:
                break
            kwargs, turn = follow, _carried(turn, self._once(method, follow))
        return turn

    def _once(self, method: str, kwargs: dict[str, Any]) -> GuardedResponse:
        sdk = _import_sdk()
        core = self._core(method, kwargs)
        name, request = next(core)
        try:
            response = getattr(self.client.responses, name)(**request)
        except sdk.OpenAIError as exc:
            raise _error(sdk, exc) from exc
        return _returned(core, response)


def _returned(core: Generator, response: Any) -> GuardedResponse:
    """What the sans-IO core returns once it has the response to its one call."""
    try:
        core.send(response)
    except StopIteration as done:
        return done.value
    raise AssertionError("the core makes exactly one call")


def _carried(earlier: GuardedResponse, later: GuardedResponse) -> GuardedResponse:
    """The follow-up's outcome, still reporting a compaction the first response did."""
    if later.record is None and earlier.record is not None:
        later.record, later.compacted = earlier.record, True
    later.audit_error = later.audit_error or earlier.audit_error
    later.timeouts = [*earlier.timeouts, *later.timeouts]
    return later


class AsyncGuardedResponses(_Guard):
    """The async twin of ``GuardedResponses`` (``openai.AsyncOpenAI``); same core."""

    async def create(self, **kwargs: Any) -> GuardedResponse:
        return await self._drive("create", kwargs)

    async def compact(self, **kwargs: Any) -> GuardedResponse:
        return await self._drive("compact", kwargs)

    async def _drive(self, method: str, kwargs: dict[str, Any]) -> GuardedResponse:
        turn = await self._once(method, kwargs)
        for _ in range(recall.MAX_ROUNDS):  # recall_literal calls answered locally
            if (follow := self._follow_up(method, kwargs, turn)) is None:
                break
            kwargs, turn = follow, _carried(turn, await self._once(method, follow))
        return turn

    async def _once(self, method: str, kwargs: dict[str, Any]) -> GuardedResponse:
        sdk = _import_sdk()
        core = self._core(method, kwargs)
        name, request = next(core)
        try:
            response = await getattr(self.client.responses, name)(**request)
        except sdk.OpenAIError as exc:
            raise _error(sdk, exc) from exc
        return _returned(core, response)


__all__ = ["AsyncGuardedResponses", "GuardedResponse", "GuardedResponses", "VENDOR_PATH"]

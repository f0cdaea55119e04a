"""OpenAI Agents SDK sessions behind the literal firewall, in one line.

    from agents import Runner, SQLiteSession
    from agents.memory import OpenAIResponsesCompactionSession
    from firewall.integrations.openai_agents import guard_session

    session = guard_session(OpenAIResponsesCompactionSession("s1", SQLiteSession("s1")), fw)
    await Runner.run(agent, "Why was INV-2025-08-44719 charged twice?", session=session)

``guard_session`` wraps any ``agents`` ``Session`` (the outermost one: wrap the compaction
session, not the store under it) and forwards everything else to it, the SDK's private
session hooks included, so the Runner drives it exactly as it drives the wrapped session.

**Responses compaction** (``OpenAIResponsesCompactionSession``, or any session with
``run_compaction``): the SDK calls ``responses.compact`` after a turn and replaces the stored
history with an opaque ``compaction`` item. The guard pins every literal of the stored history
*before* that call, and when a new compaction item appears, appends the rendered ledger as a
separate user message right after it (the item is never edited), so the next model call reads
the exact strings. The audit record (``vendor_path`` ``"openai-agents-opaque"``) reports every
pinned literal ``opaque``: nothing in the item can be checked.

**Any session** (``SQLiteSession``, Redis, SQLAlchemy...): ``await session.compact()`` runs the
firewall's own validated compaction (``Firewall.acompact``: summary checked and re-asked, ledger
re-injected, audited) over the stored items, and replaces them with the result. A compaction
that fails leaves the history as it was.

**``recall_tool=True``**: the re-injected ledger ends with a line saying how many literals the
archive holds (every literal a compaction extracted, pinned or not), for an agent that has the
``recall_literal`` tool: ``agent = session.with_recall(agent)`` adds it (a ``FunctionTool`` the
Runner runs locally, answered from the audit log's archive: no model call, no network).

    session = guard_session(OpenAIResponsesCompactionSession("s1", store), fw, recall_tool=True)
    await Runner.run(session.with_recall(agent), "Which file was it?", session=session)

The ``openai-agents`` SDK is an optional extra: only ``with_recall`` imports it.
"""

from __future__ import annotations

from typing import Any

from ..tokens import turn_tokens
from ..formats.openai_responses import message_item, to_turns
from ..compaction.plan import ledger_blocks
from ..compaction.ledger import Ledger
from ..compaction.records import AttemptResult, build_record, write_record
from . import recall_tool as recall
from .anthropic_server import to_param

VENDOR_PATH = "openai-agents-opaque"
_UNBOUNDED = 1 << 62  # a ledger budget no ledger reaches: pin without evicting


def _latest_compaction(items: list[dict[str, Any]]) -> int | None:
    found = [i for i, item in enumerate(items) if item.get("type") == "compaction"]
    return found[-1] if found else None


class GuardedSession:
    """An Agents SDK ``Session`` whose literals are pinned, re-injected and audited.

    ``ledger`` continues a persisted one (``guard.ledger.to_json()``); ``summarizer`` is used
    by ``compact()`` (default: the firewall's); ``recall_tool``: end the re-injected ledger
    with the archive's hint line (give the agent the tool with ``with_recall``). Every
    attribute not defined here is the wrapped session's.
    """

    def __init__(self, session: Any, firewall: Any = None, *, ledger: Ledger | None = None,
                 summarizer: Any = None, recall_tool: bool = False) -> None:
        if firewall is None:
            from ..compaction.guard import Firewall

            firewall = Firewall()
        self.session, self.firewall, self.summarizer = session, firewall, summarizer
        self.ledger = ledger if ledger is not None else Ledger.new(session.session_id)
        self.last_record: Any = None  # the AuditRecord of the latest compaction
        self.audit_error: str | None = None
        self._seen: set[str] = set()
        self._offset = 0  # items compacted away so far: provenance keeps counting
        self.recall_tool = recall_tool
        self._span = recall.SpanLiterals()  # what the next opaque compaction archives

    def __getattr__(self, name: str) -> Any:  # only called for names not found here
        if name == "session":  # not set yet (during unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.session, name)

    def __repr__(self) -> str:
        return f"GuardedSession({self.session!r})"

    # -- the Session protocol -------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[Any]:
        return await self.session.get_items(limit)

    async def add_items(self, items: list[Any]) -> None:
        await self.session.add_items(items)

    async def pop_item(self) -> Any:
        return await self.session.pop_item()

    async def clear_session(self) -> None:
        await self.session.clear_session()
        self._seen.clear()
        self._span = recall.SpanLiterals()

    # -- the firewall -----------------------------------------------------------------------

    async def _history(self) -> list[dict[str, Any]]:
        return [to_param(item) for item in await self.session.get_items()]

    def _pin(self, items: list[dict[str, Any]], **options: Any) -> Any:
        return self.firewall.pin(self.ledger, to_turns(items), seen=self._seen,
                                 offset=self._offset, **options)

    def _ledger_item(self) -> dict[str, Any]:
        return message_item(self._hinted(self.ledger.render()))

    def _hinted(self, block: str) -> str:
        return recall.with_hint(block, self.firewall, self.ledger.conversation_id) \
            if self.recall_tool else block

    def with_recall(self, agent: Any) -> Any:
        """``agent`` (a clone) with the ``recall_literal`` tool, answered locally from this
        conversation's archive; an agent that already has one is returned as it is."""
        tools = recall.with_tool(agent.tools, recall.agents_tool(
            self.firewall, conversation=self.ledger.conversation_id))
        return agent if len(tools) == len(agent.tools) else agent.clone(tools=tools)

    async def compact(self, summarizer: Any = None, *, keep_last: int | None = None) -> Any:
        """The firewall's own compaction of the stored history; returns the
        ``CompactionResult``. The store is rewritten only when the result is compacted."""
        items = await self._history()
        result = await self.firewall.acompact(
            items, summarizer or self.summarizer, keep_last=keep_last, ledger=self.ledger)
        self.last_record, self.audit_error = result.record, result.audit_error
        if result.compacted:
            messages = result.messages
            if self.recall_tool and result.block is not None:  # archived: the hint counts it
                hinted = message_item(self._hinted(result.block))
                messages = [hinted if m == message_item(result.block) else m for m in messages]
            await self.session.clear_session()
            await self.session.add_items(messages)
            self.ledger, self._offset = result.ledger, self._offset + len(items)
            self._seen.clear()
        return result


class GuardedCompactionSession(GuardedSession):
    """``GuardedSession`` around a session with Responses compaction (``run_compaction``)."""

    async def run_compaction(self, args: Any = None, *, wrapper: Any = None) -> None:
        fw = self.firewall
        before = await self._history()
        # extract before the vendor acts (the item is opaque); the budget is fitted, and a
        # compaction number taken, only once the session did compact
        scanned = self._pin(before, budget=_UNBOUNDED)
        self._span.add(scanned.literals, to_turns(before), self._offset)
        inner = self.session.run_compaction
        if wrapper is not None and "wrapper" in _parameters(inner):
            await inner(args, wrapper=wrapper)  # the SDK's automatic path needs its wrapper
        else:
            await inner(args)
        after = await self._history()
        at = _latest_compaction(after)
        if at is None or after == before:
            return  # the session decided not to compact
        number = fw.next_compaction(self.ledger.conversation_id)
        evicted = self._pin(before, compaction=number).evicted  # nothing new left to scan
        turns = to_turns(after)
        visible = "\n".join(t.text for t in turns if t.text)
        record = build_record(
            fw, self.ledger, vendor_path=VENDOR_PATH, compaction=number,
            span=(self._offset, self._offset + len(before) - 1) if before else None,
            turns_compacted=len(before), tokens_before=sum(turn_tokens(t)
                                                           for t in to_turns(before)),
            verbatim=visible, summary=None, verdict=None, evicted=evicted,
            unpinned=scanned.oversize, compacted=True, error=None, opaque=True,
            attempts=[AttemptResult(1, None, None, model=getattr(self.session, "model", None))])
        self.last_record = record
        self.audit_error = write_record(fw.audit, record) \
            or self._span.write(fw, record, self.ledger)
        # added once the span is archived: the ledger's hint line counts it
        if not any(ledger_blocks(t.text, self.ledger) for t in turns[at + 1:] if t.text):
            await self.session.add_items([self._ledger_item()])
        self._offset += len(before)


def _parameters(method: Any) -> Any:
    import inspect

    try:
        return inspect.signature(method).parameters
    except (TypeError, ValueError):
        return {}


def guard_session(session: Any, firewall: Any = None, **options: Any) -> GuardedSession:
    """Wrap an Agents SDK session; one with ``run_compaction`` keeps it, guarded."""
    if callable(getattr(session, "run_compaction", None)):
        return GuardedCompactionSession(session, firewall, **options)
    return GuardedSession(session, firewall, **options)


__all__ = ["GuardedCompactionSession", "GuardedSession", "VENDOR_PATH", "guard_session"]

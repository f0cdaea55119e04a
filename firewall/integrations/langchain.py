"""LangChain 1.x: the firewall as the summarizer of ``SummarizationMiddleware``.

    from langchain.agents import create_agent
    from firewall.integrations.langchain import firewall_summarization

    agent = create_agent(model, tools, middleware=[
        firewall_summarization(model, firewall=fw, trigger=("tokens", 60_000),
                               keep=("messages", 20))])

LangChain still decides *when* to summarize and *where* to cut (``trigger``, ``keep``, never
splitting a tool call from its result). The firewall does the rest, on the whole span rather than
the last ``trim_tokens_to_summarize`` tokens the stock summarizer sees: it extracts literals from
every message of the span in ``before_model``, asks the summary model with the required literals
listed, validates the summary and re-asks within ``firewall.max_retries``, and replaces the span
with the summary message, then the ledger as a *separate* message, then any turns its policy kept
verbatim, then LangChain's preserved tail. The cumulative ledger lives in the agent state
(``firewall_ledger``, private to the middleware, persisted per thread by the checkpointer; it
holds the ledger's HMAC key). If the summarizer fails, the conversation is left as it was.

Where the firewall does not deliberately differ (whole span, its own prompt, validation), the
summary model is called as the stock middleware calls it: marked as LangChain's internal call
(``lc_source``, ``internal_call_metadata()``, the no-stream tag), with LangChain's retry policy
(3 attempts, none for errors a ``ModelError`` marks non-retryable), and, on
``ContextOverflowError``, once more with the middle of the transcript cut out (the required
literals stay in the instructions, and the ledger carries every pinned one regardless).

``recall_tool=True`` registers the ``recall_literal`` tool with the agent (a middleware's own
``tools``): the agent's tool node answers it locally from the audit log's archive of this
thread (every literal a compaction extracted, pinned or not; no model call, no network), and
the re-injected ledger message ends with a line saying how many literals are archived.
"""

from __future__ import annotations

import contextvars
import uuid
from dataclasses import dataclass
from typing import Annotated, Any

from typing_extensions import NotRequired

from ..formats import langchain as lc_format
from ..compaction.guard import Firewall
from ..compaction.plan import CompactionResult
from ..compaction.ledger import Ledger
from . import recall_tool as recall
from ..tokens import count_tokens
from ..summarizers._prompt import SYSTEM_PROMPT, build_user_prompt, render_transcript
from ..summarizers.base import Summary, SummaryRequest
from ..turns import Conversation

_INSTALL = "pip install 'literal-firewall[langchain]'"

try:
    from langchain.agents.middleware._retry import default_retry_on
    from langchain.agents.middleware.internal_call_transformer import internal_call_metadata
    from langchain.agents.middleware.summarization import SummarizationMiddleware
    from langchain.agents.middleware.types import AgentState, PrivateStateAttr
    from langchain.chat_models import init_chat_model
    from langchain_core.exceptions import ContextOverflowError
    from langchain_core.messages import HumanMessage, RemoveMessage, SystemMessage
    from langchain_core.runnables import RunnableLambda
    from langchain_core.tools import StructuredTool
    from langchain.tools import ToolRuntime
    from langgraph.constants import TAG_NOSTREAM
    from langgraph.graph.message import REMOVE_ALL_MESSAGES
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(f"firewall.integrations.langchain needs LangChain 1.x: {_INSTALL}") from exc

STATE_KEY = "firewall_ledger"

__all__ = ["ChatModelSummarizer", "FirewallState", "FirewallSummarizationMiddleware",
           "firewall_summarization"]


class FirewallState(AgentState):
    """Agent state plus the cumulative ledger (``Ledger.to_json``), private to the middleware."""

    firewall_ledger: NotRequired[Annotated[str | None, PrivateStateAttr]]


# What LangChain's stock summary calls do, kept: LangChain marks its middleware's model
# calls as internal (out of the agent's token stream and ``run.messages``), retries transient
# errors (3 attempts, not the ones a ``ModelError`` marks non-retryable), and on a context
# overflow asks once more with the middle of the history cut out.
OMITTED = "\n\n[... middle of conversation omitted ...]\n\n"
STOCK_RETRY: dict[str, Any] = {"retry_if_exception_type": default_retry_on}


class ChatModelSummarizer:
    """A LangChain chat model as a firewall ``Summarizer`` (the firewall's own prompt), called
    as the stock ``SummarizationMiddleware`` calls its model: the same internal-call metadata
    and tags, ``with_retry`` (``retry``: its keyword arguments, default LangChain's), and one
    retry with the middle of the transcript cut on ``ContextOverflowError`` (the instructions,
    with every required literal, are never cut; the ledger keeps what the cut hid)."""

    def __init__(self, model: Any, *, system: str = SYSTEM_PROMPT,
                 retry: dict[str, Any] | None = None) -> None:
        self.model = init_chat_model(model) if isinstance(model, str) else model
        self.system = system
        self._retrying = self.model.with_retry(**(STOCK_RETRY if retry is None else retry))

    @property
    def vendor_path(self) -> str:
        """``langchain:`` and the chat model's class and model name."""
        name = getattr(self.model, "model_name", None) or getattr(self.model, "model", None)
        kind = type(self.model).__name__
        return f"langchain:{kind}:{name}" if isinstance(name, str) and name else \
            f"langchain:{kind}"

    def _prompt(self, request: SummaryRequest, transcript: str | None = None) -> list[Any]:
        return [SystemMessage(content=self.system),
                HumanMessage(content=build_user_prompt(request, transcript))]

    @staticmethod
    def _config() -> dict[str, Any]:  # the stock middleware's own config for summary calls
        return {"tags": [TAG_NOSTREAM],
                "metadata": {"lc_source": "summarization", **internal_call_metadata()}}

    def _shortened(self, request: SummaryRequest) -> str | None:
        """The transcript with its middle cut, as the stock overflow retry cuts it: the start
        and the most recent part, within half its tokens and 40% of the model's
        ``max_input_tokens`` when its profile says; None when nothing would fit."""
        transcript = render_transcript(request.turns)
        tokens = count_tokens(transcript)
        budget = tokens // 2
        profile = getattr(self.model, "profile", None)
        limit = profile.get("max_input_tokens") if isinstance(profile, dict) else None
        if isinstance(limit, int):
            budget = min(budget, limit * 2 // 5)
        keep = len(transcript) * budget // max(tokens, 1)
        if keep <= 0:
            return None
        head = keep // 4
        return transcript[:head] + OMITTED + transcript[len(transcript) - (keep - head):]

    def summarize(self, request: SummaryRequest) -> Summary:
        try:
            reply = self._retrying.invoke(self._prompt(request), config=self._config())
        except ContextOverflowError:
            shortened = self._shortened(request)
            if shortened is None:
                raise
            reply = self._retrying.invoke(self._prompt(request, shortened),
                                          config=self._config())
        return _summary(reply)

    async def asummarize(self, request: SummaryRequest) -> Summary:
        try:
            reply = await self._retrying.ainvoke(self._prompt(request), config=self._config())
        except ContextOverflowError:
            shortened = self._shortened(request)
            if shortened is None:
                raise
            reply = await self._retrying.ainvoke(self._prompt(request, shortened),
                                                 config=self._config())
        return _summary(reply)


def _summary(reply: Any) -> Summary:
    meta = getattr(reply, "response_metadata", None) or {}
    return Summary(text=str(reply.text).strip(), usage=dict(reply.usage_metadata or {})
                   if getattr(reply, "usage_metadata", None) else {},
                   model=meta.get("model_name") or meta.get("model"))


@dataclass
class _Run:
    """One ``before_model`` call, shared with the summarizer callable LangChain invokes."""

    messages: list[Any]
    ledger: Ledger
    result: CompactionResult | None = None


_RUN: contextvars.ContextVar[_Run | None] = contextvars.ContextVar("firewall_run", default=None)


class _Uncompacted(Exception):
    """The firewall could not produce a usable summary: leave the conversation as it was."""


class FirewallSummarizationMiddleware(SummarizationMiddleware):
    """``SummarizationMiddleware`` whose summarizer is the firewall (see the module docstring).

    Takes the stock arguments (``trigger``, ``keep``, ``token_counter``, ...) plus ``firewall``
    (default: every built-in pack), ``summary_model`` (default: ``model``) and
    ``summary_retry`` (``with_retry`` keyword arguments; default LangChain's own).
    ``trim_tokens_to_summarize`` defaults to ``None``: the summary model sees the whole span.
    Extraction covers the whole span whatever it is set to. ``recall_tool``: register
    ``recall_literal`` and end the ledger message with the archive's hint line.
    """

    state_schema = FirewallState

    def __init__(self, model: Any, *, firewall: Firewall | None = None,
                 summary_model: Any = None, trim_tokens_to_summarize: int | None = None,
                 summary_retry: dict[str, Any] | None = None, recall_tool: bool = False,
                 **kwargs: Any) -> None:
        if "summarizer" in kwargs:
            raise TypeError("the firewall is the summarizer: pass summary_model= instead")
        super().__init__(model, trim_tokens_to_summarize=trim_tokens_to_summarize,
                         summarizer=RunnableLambda(self._summarize, afunc=self._asummarize,
                                                   name="literal_firewall"), **kwargs)
        self.firewall = firewall if firewall is not None else Firewall()
        self.summary_model = ChatModelSummarizer(
            summary_model if summary_model is not None else self.model, retry=summary_retry)
        self.recall_tool = recall_tool
        self.tools = [self._recall_literal()] if recall_tool else []

    def _recall_literal(self) -> Any:
        """``recall_literal`` for the agent's tool node, answered from the archive of the
        thread's conversation (the ledger's, read from the agent state at call time)."""
        fw = self.firewall

        def recall_literal(query: str, runtime: ToolRuntime,
                           limit: int = recall.DEFAULT_LIMIT) -> str:
            saved = (runtime.state or {}).get(STATE_KEY) if isinstance(runtime.state, dict) \
                else getattr(runtime.state, STATE_KEY, None)
            conversation = Ledger.from_json(saved).conversation_id if saved else _thread_id()
            return recall.answer(fw, {"query": query, "limit": limit},
                                 conversation=conversation)

        return StructuredTool.from_function(recall_literal, name=recall.RECALL_TOOL,
                                            description=recall.DESCRIPTION)

    # -- the agent hooks ----------------------------------------------------------------

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        run = self._start(state)
        token = _RUN.set(run)
        try:
            update = super().before_model(state, runtime)
        except _Uncompacted:
            update = None
        finally:
            _RUN.reset(token)
        if update is not None and run.result is None:  # LangChain skipped the summarizer
            run.result = self.firewall.compact(
                self._conversation(run, _span_of(run.messages, update)),
                summarizer=self.summary_model, keep_last=0, ledger=run.ledger)
        return self._finish(run, update, state)

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        run = self._start(state)
        token = _RUN.set(run)
        try:
            update = await super().abefore_model(state, runtime)
        except _Uncompacted:
            update = None
        finally:
            _RUN.reset(token)
        if update is not None and run.result is None:  # LangChain skipped the summarizer
            run.result = await self.firewall.acompact(
                self._conversation(run, _span_of(run.messages, update)),
                summarizer=self.summary_model, keep_last=0, ledger=run.ledger)
        return self._finish(run, update, state)

    # -- the summarizer LangChain calls with the (possibly trimmed) span ----------------

    def _summarize(self, trimmed: list[Any]) -> str:
        run = self._run(trimmed)
        run.result = self.firewall.compact(self._conversation(run, self._full_span(run, trimmed)),
                                           summarizer=self.summary_model, keep_last=0,
                                           ledger=run.ledger)
        return _text(run.result)

    async def _asummarize(self, trimmed: list[Any]) -> str:
        run = self._run(trimmed)
        run.result = await self.firewall.acompact(
            self._conversation(run, self._full_span(run, trimmed)),
            summarizer=self.summary_model, keep_last=0, ledger=run.ledger)
        return _text(run.result)

    # -- helpers ------------------------------------------------------------------------

    def _start(self, state: Any) -> _Run:
        saved = state.get(STATE_KEY)
        ledger = Ledger.from_json(saved) if saved else Ledger.new(_thread_id())
        return _Run(messages=state["messages"], ledger=ledger)

    @staticmethod
    def _run(trimmed: list[Any]) -> _Run:
        run = _RUN.get()
        if run is None:  # called outside before_model (e.g. directly): the span is all we have
            run = _Run(messages=list(trimmed), ledger=Ledger.new(_thread_id()))
            _RUN.set(run)
        return run

    @staticmethod
    def _full_span(run: _Run, trimmed: list[Any]) -> list[Any]:
        """The whole span LangChain cut: the state's messages up to the last one it passed."""
        if not trimmed:
            return trimmed
        last = trimmed[-1].id
        for i in range(len(run.messages) - 1, -1, -1):
            if last is not None and run.messages[i].id == last:
                return run.messages[:i + 1]
        return list(trimmed)

    @staticmethod
    def _conversation(run: _Run, span: list[Any]) -> Conversation:
        return Conversation(turns=lc_format.to_turns(span), id=run.ledger.conversation_id,
                            format="langchain")

    def _finish(self, run: _Run, update: dict[str, Any] | None,
                state: Any) -> dict[str, Any] | None:
        result = run.result
        if result is None:
            return update
        ledger_json = result.ledger.to_json()
        if update is None or not result.compacted:  # keep the ledger, leave the messages
            return None if state.get(STATE_KEY) == ledger_json else {STATE_KEY: ledger_json}
        new = update["messages"]
        preserved = new[len(new) - _tail_len(new):]
        messages = [self._hinted(m, result.ledger) for m in result.messages] \
            if self.recall_tool else result.messages
        # result.messages: leading system turns, summary, ledger, turns kept verbatim.
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages,
                             *preserved], STATE_KEY: ledger_json}


    def _hinted(self, message: Any, ledger: Ledger) -> Any:
        """The ledger message ending with the archive's hint line (the agent has the tool)."""
        if (getattr(message, "additional_kwargs", None) or {}).get("lc_source") \
                != lc_format.LEDGER_SOURCE or not isinstance(message.content, str):
            return message
        return message.model_copy(update={"content": recall.with_hint(
            message.content, self.firewall, ledger.conversation_id)})


def _text(result: CompactionResult) -> str:
    if not result.compacted or result.summary is None:
        raise _Uncompacted(result.record.error or "the summarizer failed")
    return result.summary


def _tail_len(new: list[Any]) -> int:
    """How many of LangChain's new messages are the preserved tail (after its summary)."""
    for i, message in enumerate(new):
        if (getattr(message, "additional_kwargs", None) or {}).get("lc_source") == "summarization":
            return len(new) - i - 1
    return 0


def _span_of(messages: list[Any], update: dict[str, Any]) -> list[Any]:
    return messages[:len(messages) - _tail_len(update["messages"])]


def _thread_id() -> str:
    try:
        from langgraph.config import get_config

        thread = get_config().get("configurable", {}).get("thread_id")
    except RuntimeError:  # not inside a graph run
        thread = None
    return str(thread) if thread else uuid.uuid4().hex


def firewall_summarization(model: Any, *, firewall: Firewall | None = None,
                           trigger: Any = None, keep: Any = ("messages", 20),
                           summary_model: Any = None, recall_tool: bool = False,
                           **kwargs: Any) -> FirewallSummarizationMiddleware:
    """One line for ``create_agent(..., middleware=[...])``: a ``SummarizationMiddleware``
    whose summarizer is ``firewall``. ``trigger=None`` never summarizes, as in LangChain."""
    return FirewallSummarizationMiddleware(model, firewall=firewall, trigger=trigger, keep=keep,
                                           summary_model=summary_model,
                                           recall_tool=recall_tool, **kwargs)

"""LangChain 1.x: the firewall as SummarizationMiddleware's summarizer, in a real create_agent
graph with LangChain's fake chat models (offline)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import (AIMessage, HumanMessage, SystemMessage,  # noqa: E402
                                     ToolMessage)
from langchain.agents.middleware._retry import default_retry_on  # noqa: E402
from langchain.agents.middleware.internal_call_transformer import (  # noqa: E402
    internal_call_metadata)
from langchain_core.callbacks import BaseCallbackHandler  # noqa: E402
from langchain_core.exceptions import ContextOverflowError  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.constants import TAG_NOSTREAM  # noqa: E402

import firewall  # noqa: E402
from firewall.audit import MemoryAuditLog  # noqa: E402
from firewall.errors import ConversationError  # noqa: E402
from firewall.formats import langchain as lc_format  # noqa: E402
from firewall.integrations.langchain import (OMITTED,  # noqa: E402
                                             ChatModelSummarizer,
                                             FirewallSummarizationMiddleware,
                                             firewall_summarization)

INVOICE, ORDER, EMAIL, PATH = ("INV-2025-08-44719", "#W2378156", "dana.k@example.com",
                               "src/billing/refunds.py")
PACK = r"""
name: lctest
version: "1"
description: Literals of these tests
rules:
  - id: invoice-number
    kind: regex
    description: Invoice ids
    pattern: '\b(?P<literal>INV-\d{4}-\d{2}-\d{5})\b'
    examples:
      match: [{text: 'Why was INV-2025-08-44719 charged twice?', literals: ['INV-2025-08-44719']}]
      no_match: ['INV-25-17']
  - id: order-number
    kind: regex
    description: Order numbers
    pattern: '#W\d{7}\b'
    examples:
      match: [{text: 'order #W2378156 shipped', literals: ['#W2378156']}]
      no_match: ['#W12']
  - id: email
    kind: regex
    description: Email addresses
    pattern: '\b[\w.+-]+@[\w-]+\.[\w.]+\b'
    examples:
      match: [{text: 'mail dana.k@example.com now', literals: ['dana.k@example.com']}]
      no_match: ['no at sign']
  - id: source-path
    kind: regex
    description: Repository-relative source paths
    pattern: '(?<![\w/])src/[\w/.-]+\.\w+'
    examples:
      match: [{text: 'see src/billing/refunds.py please', literals: ['src/billing/refunds.py']}]
      no_match: ['/home/x/src']
"""


class RecordingModel(GenericFakeChatModel):
    """GenericFakeChatModel that keeps every prompt it was sent."""

    prompts: list = []

    def _generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
        self.prompts.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def fake(*replies: str) -> RecordingModel:
    return RecordingModel(messages=iter([AIMessage(r) for r in replies]), prompts=[])


@pytest.fixture(scope="module")
def packs(tmp_path_factory) -> list:
    path = tmp_path_factory.mktemp("packs") / "lctest.yaml"
    path.write_text(PACK)
    return firewall.load_packs(str(path))


@pytest.fixture
def fw(packs) -> firewall.Firewall:
    return firewall.Firewall(packs, audit=MemoryAuditLog(), max_retries=2)


def history() -> list[Any]:
    return [
        HumanMessage(f"Invoice {INVOICE} was charged twice; the code is in {PATH}."),
        AIMessage("", tool_calls=[{"name": "get_order", "args": {"invoice": INVOICE},
                                   "id": "call_1"}]),
        ToolMessage(f'{{"order_id": "{ORDER}", "email": "{EMAIL}"}}', tool_call_id="call_1",
                    name="get_order"),
        AIMessage(f"Order {ORDER} has two charges."),
        HumanMessage("Refund the second charge."),
        AIMessage("Refunding now."),
        HumanMessage("Done?"),
    ]


def agent_for(mw: FirewallSummarizationMiddleware, agent_model: Any) -> Any:
    return create_agent(agent_model, tools=[], middleware=[mw], checkpointer=InMemorySaver())


def ledger_messages(messages: list[Any]) -> list[Any]:
    return [m for m in messages if m.additional_kwargs.get("lc_source") == lc_format.LEDGER_SOURCE]


# ── messages ↔ turns ─────────────────────────────────────────────────────────────────────────

def test_to_turns():
    summary = HumanMessage("Here is a summary", additional_kwargs={"lc_source": "summarization"})
    turns = lc_format.to_turns([SystemMessage("be brief"), *history()[:3], summary])
    assert [t.role for t in turns] == ["system", "user", "assistant", "tool", "assistant"]
    call = turns[2].tool_calls[0]
    assert (call.name, call.arguments, call.id) == ("get_order", {"invoice": INVOICE}, "call_1")
    assert (turns[3].tool_name, turns[3].tool_call_id) == ("get_order", "call_1")
    assert turns[1].raw is not None and turns[1].text.startswith("Invoice")
    with pytest.raises(ConversationError):
        lc_format.to_turns([{"role": "user", "content": "a dict, not a message"}])


# ── the middleware in a create_agent graph ───────────────────────────────────────────────────

def test_agent_summary_is_validated_reasked_and_ledger_reinjected(fw):
    summarizer = fake("A customer was double charged in August.",  # loses every literal
                      f"Refund invoice {INVOICE} ({PATH}); order {ORDER}.")
    mw = firewall_summarization(fake("unused"), firewall=fw, trigger=("messages", 6),
                                keep=("messages", 2), summary_model=summarizer)
    msgs = history()
    out = agent_for(mw, fake("All done.")).invoke({"messages": msgs},
                                                  {"configurable": {"thread_id": "th-1"}})
    messages = out["messages"]
    summary, ledger = messages[0], messages[1]
    assert summary.additional_kwargs["lc_source"] == "summarization"
    assert INVOICE in summary.content and PATH in summary.content  # after the re-ask
    assert ledger_messages(messages) == [ledger]  # a separate message right after the summary
    # the block writes what the summary does not hold
    assert EMAIL in ledger.content and EMAIL not in summary.content
    for value in (INVOICE, ORDER, PATH):
        assert value in summary.content and value not in ledger.content
    # LangChain's preserved tail, untouched, then the agent's reply
    assert [m.content for m in messages[2:]] == ["Refunding now.", "Done?", "All done."]
    assert len(summarizer.prompts) == 2
    assert "Your previous summary cannot be used yet" in summarizer.prompts[1][-1].content
    [record] = fw.audit.export()
    assert record.conversation_id == "th-1" and len(record.attempts) == 2
    assert {lit.value for lit in record.literals} == {INVOICE, ORDER, EMAIL, PATH}


def test_extraction_sees_the_whole_span_despite_trimming(fw):
    # Stock LangChain hands the summarizer only the last `trim_tokens_to_summarize` tokens.
    filler = [m for i in range(12) for m in (HumanMessage(f"note {i} " + "lorem ipsum " * 40),
                                              AIMessage(f"ack {i}"))]
    msgs = [HumanMessage(f"Keep invoice {INVOICE} in mind.")] + filler + [HumanMessage("go")]
    summarizer = fake(f"Invoice {INVOICE}; many notes.")
    mw = FirewallSummarizationMiddleware(fake("unused"), firewall=fw, trigger=("messages", 10),
                                         keep=("messages", 1), trim_tokens_to_summarize=200,
                                         summary_model=summarizer)
    out = agent_for(mw, fake("ok")).invoke({"messages": msgs},
                                           {"configurable": {"thread_id": "th-trim"}})
    summary, ledger = out["messages"][:2]
    assert ledger_messages(out["messages"]) == [ledger] and INVOICE in summary.content
    prompt = summarizer.prompts[0][-1].content
    assert f"- {INVOICE}" in prompt and "note 0 " in prompt  # required, and the span is whole


def test_summary_that_never_complies_still_keeps_every_literal(fw):
    summarizer = fake("vague", "still vague", "vague again")
    mw = firewall_summarization(fake("unused"), firewall=fw, trigger=("messages", 6),
                                keep=("messages", 2), summary_model=summarizer)
    out = agent_for(mw, fake("ok")).invoke({"messages": history()},
                                           {"configurable": {"thread_id": "th-2"}})
    assert len(summarizer.prompts) == fw.max_retries + 1
    [ledger] = ledger_messages(out["messages"])
    assert all(v in ledger.content for v in (INVOICE, ORDER, EMAIL, PATH))
    [record] = fw.audit.export()
    assert {lit.status for lit in record.literals} == {"reinjected"}


# LangChain's own retry policy, without the waits between attempts (tests stay fast)
NO_WAIT = {"retry_if_exception_type": default_retry_on, "wait_exponential_jitter": False}


def test_failing_summarizer_leaves_the_conversation_as_it_was(fw):
    calls = []

    class Broken(GenericFakeChatModel):
        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            raise RuntimeError("provider down")

    mw = firewall_summarization(fake("unused"), firewall=fw, trigger=("messages", 6),
                                keep=("messages", 2), summary_model=Broken(messages=iter([])),
                                summary_retry=NO_WAIT)
    msgs = history()
    out = agent_for(mw, fake("ok")).invoke({"messages": msgs},
                                           {"configurable": {"thread_id": "th-3"}})
    assert [m.content for m in out["messages"][:-1]] == [m.content for m in msgs]
    assert not ledger_messages(out["messages"])
    [record] = fw.audit.export()
    assert record.outcome == "uncompacted" and "provider down" in record.error
    assert len(calls) == 3  # a transient error gets LangChain's 3 attempts, as stock


def test_summary_calls_are_marked_as_langchains_internal_calls(fw):
    seen = []

    class Spy(BaseCallbackHandler):
        def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
            seen.append((kwargs.get("tags") or [], kwargs.get("metadata") or {}))

    model = fake(f"Refund invoice {INVOICE} ({PATH}); order {ORDER}.")
    model.callbacks = [Spy()]
    # used on its own (Firewall.compact), outside the config an agent run would pass down
    result = fw.compact(history(), summarizer=ChatModelSummarizer(model), keep_last=2)
    assert result.compacted
    [(tags, metadata)] = seen
    assert TAG_NOSTREAM in tags and metadata["lc_source"] == "summarization"
    assert internal_call_metadata().items() <= metadata.items()  # out of run.messages


def test_context_overflow_is_asked_again_with_the_middle_cut(fw):
    class Overflowing(RecordingModel):
        def _generate(self, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            if not self.prompts:
                self.prompts.append(list(messages))
                raise ContextOverflowError("prompt is too long")
            return super()._generate(messages, *args, **kwargs)

    summarizer = Overflowing(messages=iter([AIMessage(f"Refund {INVOICE} ({PATH}).")]),
                             prompts=[])
    mw = firewall_summarization(fake("unused"), firewall=fw, trigger=("messages", 6),
                                keep=("messages", 2), summary_model=summarizer,
                                summary_retry=NO_WAIT)
    out = agent_for(mw, fake("ok")).invoke({"messages": history()},
                                           {"configurable": {"thread_id": "th-over"}})
    first, second = (p[-1].content for p in summarizer.prompts)
    assert OMITTED.strip() in second and OMITTED.strip() not in first
    assert len(second) < len(first)
    instructions = first[first.index("<instructions>"):]
    assert instructions in second  # the required literals are never cut
    assert INVOICE in out["messages"][0].content
    [record] = fw.audit.export()
    assert record.outcome == "compacted"


def test_second_compaction_keeps_the_cumulative_ledger_once(fw):
    summarizer = fake(f"Invoice {INVOICE} in {PATH}.", f"Invoice {INVOICE} in {PATH}, later.")
    mw = firewall_summarization(fake("unused"), firewall=fw, trigger=("messages", 6),
                                keep=("messages", 2), summary_model=summarizer)
    agent = agent_for(mw, fake("first", "second"))
    config = {"configurable": {"thread_id": "th-4"}}
    agent.invoke({"messages": history()}, config)
    out = agent.invoke({"messages": [HumanMessage("More?"), AIMessage("Yes."),
                                     HumanMessage("Then?"), AIMessage("Then this."),
                                     HumanMessage("Ok")]}, config)
    messages = out["messages"]
    [ledger] = ledger_messages(messages)  # the old block was summarized away, not duplicated
    assert messages.index(ledger) == 1
    # ORDER and EMAIL were only in the first span: the ledger from the state still pins them
    assert ORDER in ledger.content and EMAIL in ledger.content
    assert ORDER not in messages[0].content
    assert [r.compaction for r in fw.audit.export()] == [1, 2]


def test_async_agent(fw):
    summarizer = fake(f"Invoice {INVOICE} in {PATH}.")
    mw = firewall_summarization(fake("unused"), firewall=fw, trigger=("messages", 6),
                                keep=("messages", 2), summary_model=summarizer)
    out = asyncio.run(agent_for(mw, fake("ok")).ainvoke(
        {"messages": history()}, {"configurable": {"thread_id": "th-5"}}))
    [ledger] = ledger_messages(out["messages"])
    summary = out["messages"][0]
    assert all(v in ledger.content for v in (ORDER, EMAIL))
    assert all(v in summary.content and v not in ledger.content for v in (INVOICE, PATH))


def test_no_trigger_never_summarizes(fw):
    summarizer = fake("never used")
    mw = firewall_summarization(fake("unused"), firewall=fw, summary_model=summarizer)
    out = agent_for(mw, fake("ok")).invoke({"messages": history()},
                                           {"configurable": {"thread_id": "th-6"}})
    assert len(out["messages"]) == len(history()) + 1 and not summarizer.prompts


def test_summarizer_argument_is_rejected(fw):
    with pytest.raises(TypeError, match="summary_model"):
        FirewallSummarizationMiddleware(fake("x"), firewall=fw, summarizer=lambda m: "s")

"""A LangChain 1.x agent whose summarization keeps every pinned literal.

With a real model the only change from stock LangChain is the middleware line:

    agent = create_agent("anthropic:claude-sonnet-4-5", tools, middleware=[
        firewall_summarization("anthropic:claude-haiku-4-5", firewall=fw,
                               trigger=("tokens", 60_000), keep=("messages", 20))])

This script runs offline with LangChain's fake chat models: the summary model first paraphrases
the invoice away, the firewall re-asks, and the ledger rides in its own message after the summary.
Run: pip install 'literal-firewall[langchain]'; python examples/langchain_agent.py
"""

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

import firewall
from firewall.audit import MemoryAuditLog
from firewall.integrations.langchain import firewall_summarization

INVOICE = "INV-2025-08-44719"


def fake(*replies: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter(AIMessage(r) for r in replies))


def main() -> None:
    fw = firewall.Firewall(max_retries=2, audit=MemoryAuditLog())
    summary_model = fake("The customer was charged twice in early April; a refund is due.",
                         f"Invoice {INVOICE} was charged twice (order #W2378156); refund due.")
    agent = create_agent(fake("I have refunded the duplicate charge."), tools=[],
                         middleware=[firewall_summarization(
                             fake("unused"), firewall=fw, summary_model=summary_model,
                             trigger=("messages", 6), keep=("messages", 2))],
                         checkpointer=InMemorySaver())
    history = [
        HumanMessage(f"Why was {INVOICE} charged twice?"),
        AIMessage("", tool_calls=[{"name": "get_invoice", "args": {"invoice_id": INVOICE},
                                   "id": "call_1"}]),
        ToolMessage('{"order_id": "#W2378156", "charge_ids": ["ch_3PqL9x2eZvKYlo2C"]}',
                    tool_call_id="call_1", name="get_invoice"),
        AIMessage("The order #W2378156 shows two charges."),
        HumanMessage("Refund the second one."),
        AIMessage("On it."),
        HumanMessage("Done?"),
    ]
    out = agent.invoke({"messages": history}, {"configurable": {"thread_id": "support-42"}})
    for message in out["messages"]:
        print(f"--- {type(message).__name__}\n{message.content}\n")
    [record] = fw.audit.export()
    print(f"attempts: {len(record.attempts)}; literals: "
          + ", ".join(f"{lit.value}={lit.status}" for lit in record.literals))


if __name__ == "__main__":
    main()

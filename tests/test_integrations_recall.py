"""``recall_tool=True`` in the wrappers: the ``recall_literal`` tool offered, its calls answered
locally from the archive, and the re-injected block ending with the archive's hint line.

Only the vendors' HTTP is faked (each SDK's own mock transport, real response shapes), as in
the other ``test_integrations_*`` files; the archive is a real SQLite audit log.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import firewall
from firewall.audit import SQLiteAuditLog
from firewall.audit.archive import hint_line
from firewall.integrations import recall_tool

from test_leaks import AWS_ID, leaked

KEY = b"recall-test-key"
PATH = "src/app/models.py"
ORDER = "ORD-2024-88123"
HINT_START = "[literal-firewall archive: "


@pytest.fixture
def fw(tmp_path: Any) -> firewall.Firewall:
    return firewall.Firewall(audit=SQLiteAuditLog(tmp_path / "audit.db", key=KEY),
                             max_retries=0, keep_last=1)


def hits(result_text: str) -> list[str]:
    return [hit["value"] for hit in json.loads(result_text)["hits"]]


# -- Anthropic ------------------------------------------------------------------------------

ANTHROPIC_MESSAGES = [
    {"role": "user", "content": f"Fix {PATH}: order {ORDER} fails with E4021 when the cache "
                                f"warms up. My key is {AWS_ID}"},
    {"role": "assistant", "content": [{"type": "text", "text": "Looking at getUserName in "
                                                               f"{PATH} and tests/test_models.py."}]},
    {"role": "user", "content": "Go on."},
]


def anthropic_guard(fw: firewall.Firewall, *replies: Any, **options: Any) -> Any:
    pytest.importorskip("anthropic")
    from test_integrations_anthropic import FakeAPI, guard

    api = FakeAPI(*replies)
    return guard(fw, api, **options), api


def tool_use(*calls: tuple[str, dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    from test_integrations_anthropic import message

    return 200, message(*({"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args}
                          for i, (name, args) in enumerate(calls)), stop_reason="tool_use")


def anthropic_create(g: Any, messages: list[Any] = ANTHROPIC_MESSAGES, **kwargs: Any) -> Any:
    from test_integrations_anthropic import create

    return create(g, messages, **kwargs)


def test_anthropic_answers_recall_literal_locally_and_ends_the_block_with_the_hint(fw) -> None:
    from test_integrations_anthropic import compaction, message, paused, text

    g, api = anthropic_guard(
        fw, paused(compaction("Summary: the agent is fixing a model.")),
        tool_use(("recall_literal", {"query": "models.py"}),
                 ("recall_literal", {"query": AWS_ID}),
                 ("recall_literal", {"query": AWS_ID[:6]})),
        (200, message(text("Fixed."))), recall_tool=True)
    turn = anthropic_create(g)

    # compaction, its resumption, and one continuation with the local answers: no more
    assert len(api.requests) == 3
    for body in api.bodies:
        assert [t["name"] for t in body["tools"]] == ["recall_literal"]
    conversation = g.ledger.conversation_id
    count = fw.audit.archive_count(conversation)
    assert count > 3
    ledger_text = api.bodies[1]["messages"][1]["content"][0]["text"]
    assert ledger_text.splitlines()[-1] == hint_line(count, "recall_literal")
    answers = api.bodies[2]["messages"][-1]["content"]
    assert [a["tool_use_id"] for a in answers] == ["toolu_0", "toolu_1", "toolu_2"]
    assert hits(answers[0]["content"])[0] == PATH
    for answer in answers:  # the secret never comes back, in any form
        assert not leaked(answer["content"], [AWS_ID])
    assert turn.response.content[0].text == "Fixed."
    assert turn.messages[-1]["content"][0]["text"] == "Fixed."
    assert turn.messages[-2] == api.bodies[2]["messages"][-1]
    # the hint line is the firewall's own text: never scanned back into the ledger
    anthropic_create(g, [*turn.messages, {"role": "user", "content": "Thanks."}])
    assert not [v for v in g.ledger.values() if "recall" in v or "archive" in v]


def test_anthropic_without_the_option_offers_no_tool_and_no_hint(fw) -> None:
    from test_integrations_anthropic import compaction, paused

    g, api = anthropic_guard(fw, paused(compaction("Summary: the agent is fixing a model.")),
                             tool_use(("recall_literal", {"query": "models.py"})))
    turn = anthropic_create(g)
    assert len(api.requests) == 2  # the call is the caller's: nothing answered locally
    assert all("tools" not in body for body in api.bodies)
    assert HINT_START not in json.dumps(api.bodies[1])
    assert turn.messages[-1]["content"][0]["name"] == "recall_literal"


def test_anthropic_keeps_the_callers_tools_and_hands_back_mixed_calls(fw) -> None:
    g, api = anthropic_guard(fw, tool_use(("recall_literal", {"query": "E4021"}),
                                          ("lookup_order", {"order_id": ORDER})),
                             recall_tool=True)
    mine = {"name": "lookup_order", "description": "d", "input_schema": {"type": "object"}}
    turn = anthropic_create(g, tools=[mine, recall_tool.anthropic_tool()])
    assert [t["name"] for t in api.bodies[0]["tools"]] == ["lookup_order", "recall_literal"]
    # the caller answers its own tool: the guard returns, with the recall answer one call away
    assert len(api.requests) == 1
    [answer] = g.answer_recall(turn.response)
    assert answer["tool_use_id"] == "toolu_0" and "hits" in json.loads(answer["content"])


# -- OpenAI Responses -------------------------------------------------------------------------

OPENAI_ITEMS = [
    {"role": "user", "content": ANTHROPIC_MESSAGES[0]["content"]},
    {"type": "message", "role": "assistant", "id": "msg_a", "status": "completed",
     "content": [{"type": "output_text", "text": ANTHROPIC_MESSAGES[1]["content"][0]["text"],
                  "annotations": []}]},
]


def openai_guard(fw: firewall.Firewall, *replies: Any, **options: Any) -> Any:
    pytest.importorskip("openai")
    from test_integrations_openai import FakeAPI, guard

    api = FakeAPI(*replies)
    return guard(fw, api, **options), api


def function_calls(*calls: tuple[str, dict[str, Any]], id: str = "resp_1") -> tuple[int, dict]:
    from test_integrations_openai import response

    return 200, {**response(*({"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}",
                               "name": name, "arguments": json.dumps(args),
                               "status": "completed"} for i, (name, args) in enumerate(calls))),
                 "id": id}


def ledger_text(item: dict[str, Any]) -> str:
    [part] = item["content"]
    return part["text"]


def test_openai_answers_recall_literal_locally_and_ends_the_ledger_item_with_the_hint(fw):
    from test_integrations_openai import COMPACTION, answer, compacted, response, user_message

    kept = user_message("Fix the order bug.")
    g, api = openai_guard(
        fw, (200, compacted(kept, COMPACTION)),
        function_calls(("recall_literal", {"query": "models.py"}),
                       ("recall_literal", {"query": AWS_ID})),
        (200, response(answer("Fixed."))), recall_tool=True)
    compacted_turn = g.compact(model="gpt-test", input=OPENAI_ITEMS)
    assert "tools" not in api.bodies[0]  # /responses/compact takes none
    count = fw.audit.archive_count(g.ledger.conversation_id)
    assert count > 3
    assert ledger_text(compacted_turn.input[-1]).splitlines()[-1] == \
        hint_line(count, "recall_literal")

    nxt = {"type": "message", "role": "user",
           "content": [{"type": "input_text", "text": "Which file was it?"}]}
    turn = g.create(model="gpt-test", input=[*compacted_turn.input, nxt])
    # the calls, then one continuation carrying the local answers: no call for the answers
    assert len(api.requests) == 3
    for body in api.bodies[1:]:
        assert [t["name"] for t in body["tools"]] == ["recall_literal"]
    follow = api.bodies[2]["input"]
    assert follow[:len(compacted_turn.input) + 1] == [*compacted_turn.input, nxt]
    outputs = [i for i in follow if i.get("type") == "function_call_output"]
    assert [o["call_id"] for o in outputs] == ["call_0", "call_1"]
    assert hits(outputs[0]["output"])[0] == PATH
    for output in outputs:
        assert not leaked(output["output"], [AWS_ID])
    assert turn.response.output[0].content[0].text == "Fixed."
    assert turn.input[-1]["content"][0]["text"] == "Fixed."


def test_openai_async_answers_recall_literal_locally(fw) -> None:
    import asyncio

    openai = pytest.importorskip("openai")
    import httpx2

    from test_integrations_openai import FakeAPI, answer, response

    from firewall.integrations.openai_responses import AsyncGuardedResponses

    api = FakeAPI(function_calls(("recall_literal", {"query": "E4021"})),
                  (200, response(answer("Done."))))
    client = openai.AsyncOpenAI(api_key="test", base_url="http://api.test/v1", max_retries=0,
                                http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api)))
    g = AsyncGuardedResponses(client, fw, recall_tool=True)
    turn = asyncio.run(g.create(model="gpt-test", input=OPENAI_ITEMS))
    assert len(api.requests) == 2
    assert api.bodies[1]["input"][-1]["type"] == "function_call_output"
    assert turn.response.output[0].content[0].text == "Done."


def test_openai_chained_follow_up_chains_on_the_calling_response(fw) -> None:
    from test_integrations_openai import answer, response

    g, api = openai_guard(fw, (200, response(answer("Hi."))),
                          function_calls(("recall_literal", {"query": "E4021"}), id="resp_2"),
                          (200, {**response(answer("Done.")), "id": "resp_3"}),
                          recall_tool=True)
    first = g.create(model="gpt-test", input=OPENAI_ITEMS)
    g.create(model="gpt-test", previous_response_id=first.response.id, input="And now?")
    body = api.bodies[2]
    assert body["previous_response_id"] == "resp_2"
    assert [i["type"] for i in body["input"]] == ["function_call_output"]


def test_openai_without_the_option_offers_no_tool_and_no_hint(fw) -> None:
    from test_integrations_openai import COMPACTION, compacted, user_message

    g, api = openai_guard(fw, (200, compacted(user_message("Fix it."), COMPACTION)),
                          function_calls(("recall_literal", {"query": "models.py"})))
    compacted_turn = g.compact(model="gpt-test", input=OPENAI_ITEMS)
    assert HINT_START not in ledger_text(compacted_turn.input[-1])
    turn = g.create(model="gpt-test", input=compacted_turn.input)
    assert len(api.requests) == 2 and "tools" not in api.bodies[1]
    assert turn.response.output[0].name == "recall_literal"  # the caller's to answer


def test_openai_keeps_the_callers_tool_and_hands_back_mixed_calls(fw) -> None:
    g, api = openai_guard(fw, function_calls(("recall_literal", {"query": "E4021"}),
                                             ("lookup_order", {"order_id": ORDER})),
                          recall_tool=True)
    mine = {"type": "function", "name": "lookup_order", "parameters": {"type": "object"}}
    turn = g.create(model="gpt-test", input=OPENAI_ITEMS,
                    tools=[mine, recall_tool.responses_tool()])
    assert [t["name"] for t in api.bodies[0]["tools"]] == ["lookup_order", "recall_literal"]
    assert len(api.requests) == 1
    [output] = g.answer_recall(turn.response)
    assert output["call_id"] == "call_0" and "hits" in json.loads(output["output"])


# -- LangChain ------------------------------------------------------------------------------

def langchain_history() -> list[Any]:
    from langchain_core.messages import AIMessage, HumanMessage

    return [HumanMessage(ANTHROPIC_MESSAGES[0]["content"]),
            AIMessage(ANTHROPIC_MESSAGES[1]["content"][0]["text"]),
            HumanMessage("Refund it."), AIMessage("Refunding."), HumanMessage("Next?"),
            AIMessage("Checking."), HumanMessage("Which file was it?")]


def langchain_run(fw: firewall.Firewall, *replies: Any, **options: Any) -> tuple[Any, Any]:
    pytest.importorskip("langchain")
    from langchain.agents import create_agent
    from langchain_core.messages import AIMessage
    from langgraph.checkpoint.memory import InMemorySaver

    from firewall.integrations.langchain import firewall_summarization
    from test_integrations_langchain import RecordingModel, fake

    class ToolCallingModel(RecordingModel):
        """The fake chat model, offered tools as a real one is (it keeps them to read back)."""

        bound: list = []  # the tools of the latest call

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            self.bound[:] = tools
            return self

    agent_model = ToolCallingModel(messages=iter([r if isinstance(r, AIMessage) else AIMessage(r)
                                                  for r in replies]), prompts=[], bound=[])
    mw = firewall_summarization(agent_model, firewall=fw, trigger=("messages", 7),
                                keep=("messages", 2),
                                summary_model=fake("Summary: the agent is fixing a model."),
                                **options)
    agent = create_agent(agent_model, tools=[], middleware=[mw], checkpointer=InMemorySaver())
    out = agent.invoke({"messages": langchain_history()},
                       {"configurable": {"thread_id": "th-recall"}})
    return out["messages"], agent_model


def test_langchain_registers_recall_literal_answered_by_the_tool_node(fw) -> None:
    from langchain_core.messages import AIMessage, ToolMessage

    from firewall.formats import langchain as lc_format

    calls = AIMessage("", tool_calls=[
        {"name": "recall_literal", "args": {"query": "models.py"}, "id": "call_r"},
        {"name": "recall_literal", "args": {"query": AWS_ID}, "id": "call_s"}])
    messages, model = langchain_run(fw, calls, "Fixed.", recall_tool=True)
    assert [getattr(t, "name", None) for t in model.bound] == ["recall_literal"]
    [ledger] = [m for m in messages
                if m.additional_kwargs.get("lc_source") == lc_format.LEDGER_SOURCE]
    count = fw.audit.archive_count("th-recall")
    assert count > 3 and ledger.content.splitlines()[-1] == hint_line(count, "recall_literal")
    answers = {m.tool_call_id: m.content for m in messages if isinstance(m, ToolMessage)}
    assert hits(answers["call_r"])[0] == PATH
    assert not leaked(answers["call_s"], [AWS_ID])
    assert messages[-1].content == "Fixed."
    assert len(model.prompts) == 2  # the call, then the answer: the tool cost no model call


def test_langchain_without_the_option_registers_no_tool_and_no_hint(fw) -> None:
    from firewall.formats import langchain as lc_format

    messages, model = langchain_run(fw, "Fixed.")
    assert model.bound == []
    [ledger] = [m for m in messages
                if m.additional_kwargs.get("lc_source") == lc_format.LEDGER_SOURCE]
    assert HINT_START not in ledger.content


# -- OpenAI Agents SDK ------------------------------------------------------------------------

def agents_api(*outputs: list[dict[str, Any]] | None) -> Any:
    """The Agents tests' fake API, whose ``/responses`` replies take ``outputs`` in turn."""
    pytest.importorskip("agents")
    import httpx2

    from test_integrations_agents import FakeAPI

    class Scripted(FakeAPI):
        def handle(self, request: Any) -> Any:
            response = super().handle(request)
            if request.url.path.endswith("/responses") and outputs_left:
                output = outputs_left.pop(0)
                if output is not None:
                    return httpx2.Response(200, json={**json.loads(response.content),
                                                      "output": output})
            return response

    outputs_left = list(outputs)
    return Scripted()


RECALL_CALLS = [{"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}",
                 "name": "recall_literal", "arguments": json.dumps({"query": query}),
                 "status": "completed"} for i, query in enumerate(("models.py", AWS_ID))]


def agents_run(fw: firewall.Firewall, api: Any, recall: bool, **options: Any) -> Any:
    import asyncio

    from agents import Runner

    from firewall.integrations.openai_agents import guard_session
    from test_integrations_agents import compacting

    session = guard_session(compacting(api), fw, **options)

    async def run() -> tuple[list[Any], int]:
        agent = session.with_recall(api.agent()) if recall else api.agent()
        await Runner.run(agent, ANTHROPIC_MESSAGES[0]["content"], session=session)
        stored = await session.get_items()
        count = fw.audit.archive_count(session.ledger.conversation_id)
        await Runner.run(agent, "Which file was it?", session=session)
        return stored, count

    return session, asyncio.run(run())


def test_agents_session_hint_and_the_tool_the_runner_answers_locally(fw) -> None:
    from test_integrations_agents import ledger_item_after_compaction

    api = agents_api(None, RECALL_CALLS)
    session, (stored, count) = agents_run(fw, api, recall=True, recall_tool=True)
    assert count >= 3  # the first turn's literals, archived when the session compacted it
    block = ledger_item_after_compaction(stored, session.ledger)
    assert block.splitlines()[-1] == hint_line(count, "recall_literal")
    requests = api.requests("/responses")
    assert len(requests) == 3  # the first turn, the calls, the answer: the tool cost none
    assert all([t["name"] for t in body["tools"]] == ["recall_literal"] for body in requests)
    outputs = {i["call_id"]: i["output"] for i in requests[2]["input"]
               if i.get("type") == "function_call_output"}
    assert hits(outputs["call_0"])[0] == PATH
    assert not leaked(outputs["call_1"], [AWS_ID])
    # the agent already has the tool: nothing is added twice
    agent = session.with_recall(api.agent())
    assert session.with_recall(agent) is agent


def test_agents_session_without_the_option_has_no_hint(fw) -> None:
    from test_integrations_agents import ledger_item_after_compaction

    api = agents_api()
    session, (stored, _) = agents_run(fw, api, recall=False)
    assert HINT_START not in ledger_item_after_compaction(stored, session.ledger)
    assert all(not body.get("tools") for body in api.requests("/responses"))


def test_agents_firewall_compaction_ends_its_ledger_with_the_hint(fw) -> None:
    import asyncio

    from agents import Runner, SQLiteSession

    from firewall.integrations.openai_agents import guard_session

    api = agents_api()
    session = guard_session(SQLiteSession("plain"), fw, recall_tool=True)

    async def run() -> list[Any]:
        for text in (ANTHROPIC_MESSAGES[0]["content"], "Refund it.", "Done?"):
            await Runner.run(api.agent(), text, session=session)
        await session.compact(lambda messages: "The user wants a fix.", keep_last=1)
        return await session.get_items()

    after = asyncio.run(run())
    count = fw.audit.archive_count("plain")
    assert count >= 3
    assert after[1]["content"][0]["text"].splitlines()[-1] == hint_line(count, "recall_literal")

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


def anthropic_create(g: Any, **kwargs: Any) -> Any:
    from test_integrations_anthropic import create

    return create(g, ANTHROPIC_MESSAGES, **kwargs)


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

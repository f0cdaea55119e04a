"""Conversation loading: format detection from content, and errors naming line and field."""

import json
from pathlib import Path

import pytest

from firewall.errors import ConversationError
from firewall.formats import detect_format, is_jsonl, parse_messages, read_conversations

CONVERSATIONS = Path(__file__).parent / "fixtures" / "conversations"


def test_native_jsonl_streams_one_conversation_per_line():
    first, second = read_conversations(CONVERSATIONS / "native.jsonl")
    assert (first.id, first.format, second.id, len(second)) == ("c1", "native", "c2", 1)
    call = first.turns[2].tool_calls[0]
    assert (call.name, call.arguments, call.id) == ("get_order_details",
                                                    {"order_id": "#W2378156"}, "call_1")
    assert (first.turns[3].role, first.turns[3].tool_name) == ("tool", "get_order_details")


def test_anthropic_blocks_tool_use_and_tool_result():
    (conv,) = read_conversations(CONVERSATIONS / "anthropic.json")
    assert conv.format == "anthropic"
    assert [t.role for t in conv.turns] == ["system", "user", "assistant", "tool"]
    assert conv.turns[2].text == "Let me look."
    assert conv.turns[2].tool_calls[0].arguments == {"invoice_id": "INV-2025-08-44719"}
    assert conv.turns[3].tool_name == "get_invoice"
    assert "ch_3NkQ2xLkdIwHu7ix0" in conv.turns[3].text


def test_openai_chat_with_json_string_arguments():
    (conv,) = read_conversations(CONVERSATIONS / "openai.json")
    assert conv.format == "openai"
    assert [t.role for t in conv.turns] == ["system", "user", "assistant", "tool"]
    assert conv.turns[2].tool_calls[0].arguments == {"path": "src/auth/handler.ts"}
    assert conv.turns[3].tool_name == "read_file"
    assert conv.turns[1].raw == {"role": "user", "content": [
        {"type": "text", "text": "Read src/auth/handler.ts:142"}]}


def test_invalid_json_arguments_are_kept_whole_for_scanning():
    conv = parse_messages([{"role": "assistant", "tool_calls": [
        {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{bad #W1"}}]}])
    assert conv.turns[0].tool_calls[0].arguments == {"arguments": "{bad #W1"}


def test_detection_is_by_content():
    assert detect_format([{"role": "user", "content": "hi"}]) == "openai"
    assert detect_format([{"role": "assistant", "tool_calls": [{"name": "f", "arguments": {}}]}]) \
        == "native"
    assert detect_format([{"role": "user", "content": [{"type": "tool_result"}]}]) == "anthropic"


@pytest.mark.parametrize("content, message", [
    (b"", "the file is empty"),
    (b'{"messages": [{"role": "user", "content": "a"}]}\n{"messages": [{"role": "robot"}]}\n',
     ":2: messages[0].role: expected one of"),
    (b'{"messages": [{"role": "user", "content": "a"}]}\n{"messages": [{"role": "us',
     ":2: invalid JSON"),
    (b'{"messages": [{"role": "user", "content": "a"}]}\n{"messages": "\xff\xfe"}\n',
     ":2: not UTF-8 (byte 14)"),
    (b'[{"role": "user", "content": 5}]', "messages[0].content: expected text or a list"),
    (b'{"id": "x"}\n', ":1: expected a list of messages or an object with 'messages'"),
    (b'[{"role": "assistant", "tool_calls": [{"name": "f", "arguments": [1]}]}]',
     "messages[0].tool_calls[0].arguments: expected a JSON object"),
])
def test_malformed_input_names_line_and_field(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(content)
    with pytest.raises(ConversationError) as info:
        list(read_conversations(path))
    assert message in str(info.value)
    assert str(path) in str(info.value)


def test_empty_conversation_is_valid_and_empty(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text("[]")
    (conv,) = read_conversations(path)
    assert conv.turns == []


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ConversationError, match="cannot open"):
        list(read_conversations(tmp_path / "nope.jsonl"))


def test_openai_responses_items_are_detected():
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]},
             {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{\"a\": 1}"}]
    assert detect_format(items) == "openai_responses"
    conv = parse_messages(items)
    assert conv.turns[1].tool_calls[0].arguments == {"a": 1}


def test_a_non_string_block_type_is_not_a_crash():
    """Found by the conversations fuzzer: a dict as a block's type."""
    messages = [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": [{"type": {"path": "a.ts"}}]},
                {"role": "user", "content": [{"type": ["x"], "text": "ok"}]}]
    assert detect_format(messages) == "openai"
    assert [t.text for t in parse_messages(messages).turns] == ["hi", "", "ok"]


TRANSCRIPTS = Path(__file__).parent / "fixtures" / "transcripts"


@pytest.mark.parametrize("name, fmt, boundaries", [
    ("claude_code_compacted", "anthropic", [7, 21]),
    ("codex_rollout", "openai_responses", []),
])
def test_an_agent_session_file_is_read_whole_as_one_conversation(name, fmt, boundaries):
    from firewall.formats import is_jsonl
    from firewall.formats.transcripts import read_transcript

    path = TRANSCRIPTS / f"{name}.jsonl"
    (conversation,) = read_conversations(path)
    chunk = read_transcript(path)
    assert conversation.id == name and conversation.format == fmt
    assert [t.text for t in conversation.turns] == [t.text for t in chunk.turns]
    assert conversation.meta["boundaries"] == boundaries
    assert len(conversation.meta["summaries"]) == len(boundaries)
    if boundaries:  # what Claude Code wrote right after each boundary
        assert all(s.startswith("This session is being continued")
                   for s in conversation.meta["summaries"])
    assert not is_jsonl(path)  # one conversation: never cut into byte ranges


def test_a_conversations_jsonl_is_not_taken_for_a_session_file(tmp_path):
    from firewall.formats import is_jsonl

    path = tmp_path / "log.jsonl"
    line = {"id": "c", "type": "user", "messages": [{"role": "user", "content": "hi"}]}
    path.write_text(json.dumps(line) + "\n" + json.dumps(line) + "\n", encoding="utf-8")
    assert is_jsonl(path) and len(list(read_conversations(path))) == 2


def test_a_broken_line_of_a_session_file_is_reported_and_the_rest_read(tmp_path):
    lines = (TRANSCRIPTS / "claude_code_session.jsonl").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(lines[:4] + ['{"type": "user", "message": {"role": "user"',
                                           *lines[4:]]) + "\n", encoding="utf-8")
    errors = []
    (conversation,) = read_conversations(path, on_error=errors.append)
    # the line is named (file:line, as every bad line), the rest of the session is read
    assert [str(e) for e in errors] == [f"{path}:5: invalid JSON: Expecting ',' delimiter "
                                        "(column 44): line skipped, the rest of the session read"]
    assert len(conversation.turns) == len(next(read_conversations(
        TRANSCRIPTS / "claude_code_session.jsonl")).turns)
    with pytest.raises(ConversationError):
        list(read_conversations(path))


# ── every record a coding agent writes reads (issue 26) ─────────────────────────────────────

def test_every_claude_code_record_type_reads_as_one_conversation(tmp_path):
    path = TRANSCRIPTS / "claude_code_records.jsonl"
    assert not is_jsonl(path)  # its first line is a queue-operation record
    errors = []
    (conversation,) = read_conversations(path, on_error=errors.append)
    # the line a redaction left invalid is named and skipped; nothing else is an error
    assert [e.line for e in errors] == [13] and "invalid JSON" in str(errors[0])
    assert conversation.meta["bad_lines"] == 1
    # records without a message are counted by type, never a reason to reject the file
    assert conversation.meta["ignored"] == {
        "queue-operation": 1, "permission-mode": 1, "custom-title": 1, "summary": 1,
        "file-history-snapshot": 1, "progress": 1, "system": 1, "agent-name": 1,
        "worktree-state": 1, "sidechain": 1}
    roles = [(t.role, t.tool_name) for t in conversation.turns]
    assert roles == [
        ("tool", None),  # the file starts mid-session: a result whose call came before it
        ("user", None),  # /model opus: a slash command the user typed
        ("tool", "local-command"),  # what the slash command printed
        ("system", None),  # isMeta caveat
        ("user", None),  # !ls deploy/releases: typed
        ("tool", "bash"),  # what it printed: tool output, not user-typed
        ("user", None), ("assistant", None), ("tool", "Read"),
        ("system", None),  # a system reminder the harness put in a user entry
        ("tool", "task-notification"),  # a background task's notice
        ("assistant", None)]
    assert all("web-99" not in t.text for t in conversation.turns)  # the subagent's turn


def test_a_first_line_left_invalid_does_not_hide_a_session_file(tmp_path):
    path = tmp_path / "session.jsonl"
    lines = (TRANSCRIPTS / "claude_code_records.jsonl").read_bytes().splitlines(keepends=True)
    path.write_bytes(b'{"type":"user","message":{"role":"user","content":"cut "here"}}\n'
                     + b"".join(lines[5:]))
    errors = []
    (conversation,) = read_conversations(path, on_error=errors.append)
    assert [e.line for e in errors] == [1, 9] and len(conversation.turns) == 12


def test_a_subagents_own_transcript_reads_as_its_conversation():
    (conversation,) = read_conversations(TRANSCRIPTS / "claude_code_subagent.jsonl")
    assert [t.role for t in conversation.turns] == ["user", "assistant", "tool", "assistant"]
    assert conversation.turns[2].tool_name == "Grep"


def test_a_codex_rollout_with_a_line_type_not_known_yet_reads():
    (conversation,) = read_conversations(TRANSCRIPTS / "codex_rollout_new_types.jsonl")
    assert conversation.format == "openai_responses"
    assert [t.role for t in conversation.turns] == ["user", "assistant", "tool"]
    assert conversation.meta["ignored"] == {"session_state": 1, "session_meta": 1,
                                            "event_msg": 1}


def test_objects_without_messages_before_a_conversation_are_still_conversations(tmp_path):
    path = tmp_path / "mixed.jsonl"
    conversation = {"id": "c", "messages": [{"role": "user", "content": "hi"}]}
    path.write_text(json.dumps({"note": "no type"}) + "\n" + json.dumps(conversation) + "\n",
                    encoding="utf-8")
    errors = []
    assert [c.id for c in read_conversations(path, on_error=errors.append)] == ["c"]
    assert [e.line for e in errors] == [1]

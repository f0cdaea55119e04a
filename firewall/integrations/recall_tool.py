"""``recall_literal``: the archive as a function tool an agent can call, answered locally.

The wrappers' model may ask for an exact string it saw before a compaction; the call is
answered here, from the audit log's archive (``Firewall.recall``), with no model call and no
network. The tool in each vendor's shape, and its answer:

    tools = [*my_tools, anthropic_tool()]          # Anthropic Messages API
    tools = [*my_tools, openai_tool()]             # OpenAI Chat Completions / Responses
    agent = Agent(..., tools=[agents_tool(fw)])    # OpenAI Agents SDK (FunctionTool)
    agent = create_agent(model, [langchain_tool(fw)], ...)   # LangChain (StructuredTool)

    # your loop, on a tool call named RECALL_TOOL:
    result_text = answer(fw, call_arguments, conversation=conversation_id)

Sensitive literals are never returned (the archive keeps only their hash). A bad call (no
query, a bad limit, a log without an archive) is answered with an ``error`` the model can read,
never raised into the caller's loop.
"""

from __future__ import annotations

import json
from typing import Any

from ..audit.archive import DEFAULT_LIMIT, MAX_LIMIT
from ..errors import FirewallError

RECALL_TOOL = "recall_literal"
DESCRIPTION = (
    "Find an exact string (a file path, an id, a name, an error code) seen earlier in this "
    "conversation, before its context was compacted, pinned or not, from any part you "
    "remember: a base name ('models.py'), a path segment, a part of a snake_case or camelCase "
    "name, an id's first characters, or words of the line it was in. Returns the best hits "
    "with their exact value and the line they were seen in. Secrets are never returned.")
PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "the part of the string you remember"},
        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                  "description": f"at most this many hits (default {DEFAULT_LIMIT})"},
    },
    "required": ["query"],
    "additionalProperties": False,
}


def anthropic_tool() -> dict[str, Any]:
    """The tool as the Anthropic Messages API declares one."""
    return {"name": RECALL_TOOL, "description": DESCRIPTION, "input_schema": PARAMETERS}


def openai_tool() -> dict[str, Any]:
    """The tool as OpenAI Chat Completions declares one."""
    return {"type": "function", "function": {"name": RECALL_TOOL, "description": DESCRIPTION,
                                             "parameters": PARAMETERS}}


def answer(fw: Any, arguments: Any, *, conversation: str | None = None) -> str:
    """The tool result (JSON text) for a call's ``arguments`` (a dict, or its JSON text):
    ``{"hits": [...]}``, or ``{"error": ...}`` for a call that cannot be answered."""
    try:
        if isinstance(arguments, (str, bytes)):
            arguments = json.loads(arguments or "{}")
        if not isinstance(arguments, dict):
            raise FirewallError("the arguments must be an object with a query")
        query = arguments.get("query")
        limit = arguments.get("limit", DEFAULT_LIMIT)
        if not isinstance(query, str) or not isinstance(limit, int) or isinstance(limit, bool):
            raise FirewallError("query must be a string and limit an integer")
        hits = fw.recall(query, conversation=conversation, limit=limit)
    except (FirewallError, ValueError) as exc:
        return json.dumps({"error": str(exc)}, ensure_ascii=False)
    return json.dumps({"hits": [hit.to_dict() for hit in hits]}, ensure_ascii=False)


def agents_tool(fw: Any, *, conversation: str | None = None) -> Any:
    """An OpenAI Agents SDK ``FunctionTool`` answered by ``answer`` (the ``openai-agents``
    package, imported here)."""
    from agents import FunctionTool

    async def invoke(_context: Any, arguments: str) -> str:
        return answer(fw, arguments, conversation=conversation)

    return FunctionTool(name=RECALL_TOOL, description=DESCRIPTION, params_json_schema=PARAMETERS,
                        on_invoke_tool=invoke, strict_json_schema=False)


def langchain_tool(fw: Any, *, conversation: str | None = None) -> Any:
    """A LangChain ``StructuredTool`` answered by ``answer`` (``langchain-core``, imported
    here)."""
    from langchain_core.tools import StructuredTool

    def recall_literal(query: str, limit: int = DEFAULT_LIMIT) -> str:
        return answer(fw, {"query": query, "limit": limit}, conversation=conversation)

    return StructuredTool.from_function(recall_literal, name=RECALL_TOOL,
                                        description=DESCRIPTION)


__all__ = ["DESCRIPTION", "PARAMETERS", "RECALL_TOOL", "agents_tool", "anthropic_tool",
           "answer", "langchain_tool", "openai_tool"]

"""literal-firewall: keep the exact strings an agent depends on through context compaction.

    import firewall
    fw = firewall.Firewall(firewall.load_packs("core", "billing"), budget_tokens=firewall.Budget())
    result = fw.compact(messages, summarizer=firewall.ExtractiveSummarizer(), keep_last=8)

The public names below are imported on first use, so ``import firewall`` stays fast and the
optional vendor SDKs are only imported by the summarizers that need them.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    # conversations
    "Conversation": "turns", "Turn": "turns", "ToolCall": "turns",
    "parse_messages": "formats", "read_conversations": "formats",
    # rules and extraction
    "Pack": "extraction.packs", "load_packs": "extraction.packs",
    "Extractor": "extraction.extract", "Scanner": "extraction.extract", "Literal": "literals",
    # ledger, validation, the guard
    "Ledger": "compaction.ledger", "Budget": "compaction.budget",
    "validate": "compaction.validate", "Verdict": "compaction.validate",
    "Finding": "compaction.validate", "Firewall": "compaction.guard",
    "CompactionResult": "compaction.plan", "CallableSummarizer": "compaction.guard",
    "Trigger": "compaction.trigger",
    # summarizers
    "Summarizer": "summarizers.base", "SummaryRequest": "summarizers.base",
    "Summary": "summarizers.base", "RequiredLiteral": "summarizers.base",
    "ExtractiveSummarizer": "summarizers.extractive",
    "ScriptedSummarizer": "summarizers.scripted",
    "AnthropicSummarizer": "summarizers.anthropic", "OpenAISummarizer": "summarizers.openai",
    "GeminiSummarizer": "summarizers.gemini", "LiteLLMSummarizer": "summarizers.litellm",
    # audit
    "AuditRecord": "audit", "open_audit_log": "audit",
    # errors
    "FirewallError": "errors", "PackError": "errors", "ConversationError": "errors",
    "SummarizerError": "errors", "CompactionRefused": "errors", "AuditError": "errors",
    "IntegrationError": "errors",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'firewall' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__

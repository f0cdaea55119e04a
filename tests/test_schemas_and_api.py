"""Generated schemas match the models; the public surface is pinned."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import firewall
from firewall.schemas import render, schemas

SCHEMAS = Path(__file__).parent.parent / "schemas"


@pytest.mark.parametrize("name", sorted(schemas()))
def test_committed_schema_matches_the_models(name):
    committed = (SCHEMAS / name).read_text(encoding="utf-8")
    assert committed == render(schemas()[name]), "run: python -m firewall.schemas schemas"


def test_rulepack_schema_forbids_unknown_keys():
    schema = json.loads((SCHEMAS / "rulepack.schema.json").read_text())
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["RegexRule"]["additionalProperties"] is False


def test_public_surface_is_pinned():
    assert firewall.__all__ == sorted([
        "AnthropicSummarizer", "AuditError", "AuditRecord", "Budget", "CallableSummarizer",
        "CompactionRefused", "CompactionResult", "Conversation", "ConversationError",
        "ExtractiveSummarizer", "Extractor", "Finding", "Firewall", "FirewallError",
        "GeminiSummarizer", "IntegrationError", "Ledger", "LiteLLMSummarizer",
        "Literal", "OpenAISummarizer", "Pack", "PackError", "RequiredLiteral", "Scanner",
        "ScriptedSummarizer", "Summarizer", "Summary", "SummaryRequest", "SummarizerError",
        "ToolCall", "Trigger", "Turn", "Verdict", "load_packs", "open_audit_log", "parse_messages",
        "read_conversations", "validate"]) + ["__version__"]
    for name in firewall.__all__:
        assert getattr(firewall, name) is not None


def test_import_is_light():
    """`import firewall` loads no vendor SDK, no spaCy, and not even pydantic."""
    code = ("import sys, firewall; heavy = {'anthropic', 'openai', 'spacy', 'pydantic', "
            "'langchain', 'httpx2'} & set(sys.modules); print(sorted(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

"""The reach extras (mcp, openai-agents, google-genai, litellm) stay out of ``import firewall``
and of their own modules until used, and a missing one names the extra that installs it."""

import subprocess
import sys

import pytest

SDKS = ("mcp", "agents", "google.genai", "litellm")
MODULES = ("firewall.integrations.mcp_server", "firewall.cli", "firewall.integrations.openai_agents",
           "firewall.summarizers.litellm", "firewall.summarizers.gemini")


def test_reach_modules_import_no_sdk():
    code = ("import sys, firewall, " + ", ".join(MODULES) + "; "
            f"print(sorted(m for m in {SDKS!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_mcp_without_its_sdk_names_the_extra(monkeypatch):
    import argparse

    from firewall.integrations.mcp_server import LiteralService, MCPServerError, build_server

    monkeypatch.setitem(sys.modules, "mcp", None)  # makes `import mcp` raise ImportError
    service = LiteralService(argparse.Namespace(ledger=[], audit_db=None, command="mcp"))
    with pytest.raises(MCPServerError, match=r"literal-firewall\[mcp\]"):
        build_server(service)


def test_litellm_without_its_package_names_the_extra(monkeypatch):
    from firewall.errors import SummarizerError
    from firewall.summarizers.litellm import LiteLLMSummarizer

    monkeypatch.setitem(sys.modules, "litellm", None)
    with pytest.raises(SummarizerError, match=r"literal-firewall\[litellm\]"):
        LiteLLMSummarizer("openai/gpt-4.1-mini")


def test_gemini_without_its_sdk_names_the_extra(monkeypatch):
    from firewall.errors import SummarizerError
    from firewall.summarizers.gemini import GeminiSummarizer

    monkeypatch.setitem(sys.modules, "google.genai", None)
    with pytest.raises(SummarizerError, match=r"literal-firewall\[gemini\]"):
        GeminiSummarizer()

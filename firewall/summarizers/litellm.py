"""``LiteLLMSummarizer``: summaries through LiteLLM's ``completion``, so any of its providers
(``bedrock/...``, ``vertex_ai/...``, ``azure/...``, ``ollama/...``, a LiteLLM proxy) can be the
summarizer.

LiteLLM answers every provider in the Chat Completions shape, so the request and the checks of
the reply are ``OpenAISummarizer``'s (cut-off retry, refusal, content filter, empty text).
The ``litellm`` package is an optional extra, imported when a summarizer is built. Importing it
fetches LiteLLM's model price map from the network unless ``LITELLM_LOCAL_MODEL_COST_MAP`` is
set: the firewall sets it (when unset) so that building a summarizer sends nothing anywhere.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import SummarizerError
from ..extras import import_extra
from ._prompt import adrive, drive
from .base import Summary, SummaryRequest
from .openai import OpenAISummarizer


def _import_sdk() -> Any:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return import_extra("litellm", "LiteLLMSummarizer", SummarizerError)


class LiteLLMSummarizer(OpenAISummarizer):
    """Summarize with ``litellm.completion`` / ``acompletion``.

    ``model`` is LiteLLM's provider-prefixed name (``"anthropic/claude-haiku-4-5"``,
    ``"bedrock/anthropic.claude-3-5-haiku-20241022-v1:0"``, ``"openai/gpt-4.1-mini"``).
    ``completion_kwargs`` go to every call as given (``api_base``, ``api_key``, ``timeout``,
    ``num_retries``, AWS or Vertex settings...). The output budget is sent as ``max_tokens``,
    which LiteLLM maps to each provider's own field.
    """

    @property
    def vendor_path(self) -> str:
        """The audit names vendor and model, as for every client-side summarizer."""
        return f"litellm:{self.model}"

    def __init__(self, model: str, *, max_tokens: int = 2048, system: str | None = None,
                 **completion_kwargs: Any) -> None:
        # not OpenAISummarizer.__init__: no OpenAI client, key or base URL is involved here
        self._litellm = _import_sdk()
        from ._prompt import SYSTEM_PROMPT

        self.model, self.max_tokens = model, max_tokens
        self.system = SYSTEM_PROMPT if system is None else system
        self.token_param = "max_tokens"
        self.completion_kwargs = completion_kwargs

    def __repr__(self) -> str:
        return f"LiteLLMSummarizer(model={self.model!r}, max_tokens={self.max_tokens})"

    def summarize(self, request: SummaryRequest) -> Summary:
        def call(kwargs: dict[str, Any]) -> Any:
            try:
                return self._litellm.completion(**kwargs, **self.completion_kwargs)
            except Exception as exc:  # noqa: BLE001 - every provider error, said once
                raise _error(exc) from exc

        return drive(self._plan(request, None), call)

    async def asummarize(self, request: SummaryRequest) -> Summary:
        async def call(kwargs: dict[str, Any]) -> Any:
            try:
                return await self._litellm.acompletion(**kwargs, **self.completion_kwargs)
            except Exception as exc:  # noqa: BLE001
                raise _error(exc) from exc

        return await adrive(self._plan(request, None), call)


def _error(exc: Exception) -> SummarizerError:
    status = getattr(exc, "status_code", None)
    where = f" {status}" if isinstance(status, int) else ""
    provider = getattr(exc, "llm_provider", None)
    via = f" (provider {provider})" if provider else ""
    return SummarizerError(f"LiteLLM error{where}{via}: {type(exc).__name__}: {exc}")

"""``AnthropicSummarizer``: summaries from the Anthropic Messages API (``messages.create``).

The ``anthropic`` SDK is an optional extra, imported when a summarizer is built, never when
``firewall`` is imported.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import SummarizerError
from ..extras import import_extra
from ._endpoint import ANTHROPIC_HOST, client_base_url, pin_endpoint, vendor_path
from ._prompt import SYSTEM_PROMPT, Plan, adrive, build_user_prompt, drive, merge_usage
from .base import Summary, SummaryRequest


def _import_sdk() -> Any:
    return import_extra("anthropic", "AnthropicSummarizer", SummarizerError)


class AnthropicSummarizer:
    """Summarize with a Claude model; the required literals travel in ``request.instructions``.

    ``client`` / ``async_client`` are ``anthropic.Anthropic`` / ``AsyncAnthropic`` instances; the
    ones not given are built from ``client_kwargs`` (``api_key``, ``base_url``, ``timeout``,
    ``max_retries`` -- default 2: the SDK itself retries 408/409/429/5xx and connection errors).
    Given only ``client``, ``asummarize`` runs it in a worker thread rather than building a
    differently configured async client.

    ``ANTHROPIC_API_KEY`` (or any other credential the SDK finds in the environment) is sent to
    Anthropic only (``https://api.anthropic.com``): with a base URL pointing anywhere else,
    however it is set (``base_url`` or ``ANTHROPIC_BASE_URL``) and no ``api_key`` /
    ``auth_token`` / ``credentials``, the key is ``"not-needed"``; pass one for a proxy that
    wants it.

    A reply cut off at ``max_tokens`` is asked again once with twice the budget; a refusal, a
    second cut-off, a reply without text and every SDK error raise ``SummarizerError``.
    """

    def __init__(self, model: str = "claude-haiku-4-5", client: Any = None,
                 async_client: Any = None, max_tokens: int = 2048, system: str | None = None,
                 **client_kwargs: Any) -> None:
        self._sdk = _import_sdk()
        self.model = model
        self.max_tokens = max_tokens
        self.system = SYSTEM_PROMPT if system is None else system
        client_kwargs.setdefault("max_retries", 2)
        self._client_kwargs = anthropic_client_kwargs(client_kwargs)
        self._client = client
        self._async_client = async_client

    @property
    def vendor_path(self) -> str:
        """``anthropic:MODEL``, or ``anthropic-compatible:MODEL@HOST`` for another server."""
        client = self._client if self._client is not None else self._async_client
        return vendor_path("anthropic", self.model,
                           client_base_url(client, self._client_kwargs), ANTHROPIC_HOST)

    def __repr__(self) -> str:
        return f"AnthropicSummarizer(model={self.model!r}, max_tokens={self.max_tokens})"

    # -- drivers -------------------------------------------------------------------------------

    def summarize(self, request: SummaryRequest) -> Summary:
        if self._client is None:
            if self._async_client is not None:
                raise SummarizerError("AnthropicSummarizer was given only async_client: "
                                      "call asummarize() or pass client=")
            self._client = self._build(self._sdk.Anthropic)
        client = self._client

        def call(kwargs: dict[str, Any]) -> Any:
            try:
                return client.messages.create(**kwargs)
            except self._sdk.AnthropicError as exc:
                raise _error(self._sdk, exc) from exc

        return drive(self._plan(request), call)

    async def asummarize(self, request: SummaryRequest) -> Summary:
        if self._async_client is None:
            if self._client is not None:
                return await asyncio.to_thread(self.summarize, request)
            self._async_client = self._build(self._sdk.AsyncAnthropic)
        client = self._async_client

        async def call(kwargs: dict[str, Any]) -> Any:
            try:
                return await client.messages.create(**kwargs)
            except self._sdk.AnthropicError as exc:
                raise _error(self._sdk, exc) from exc

        return await adrive(self._plan(request), call)

    def _build(self, cls: Any) -> Any:
        try:
            return cls(**self._client_kwargs)
        except self._sdk.AnthropicError as exc:
            raise SummarizerError(f"could not create the Anthropic client: {exc}") from exc

    # -- the sans-IO core ----------------------------------------------------------------------

    def _plan(self, request: SummaryRequest) -> Plan:
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "system": self.system,
            "messages": [{"role": "user", "content": build_user_prompt(request)}],
        }
        message = yield params
        usage = _usage(message)
        if message.stop_reason == "max_tokens":
            # A cut-off summary loses whatever literals came last: one retry with room to finish.
            message = yield {**params, "max_tokens": 2 * self.max_tokens}
            usage = merge_usage(usage, _usage(message))
            if message.stop_reason == "max_tokens":
                raise SummarizerError(
                    f"the summary was cut off at max_tokens={2 * self.max_tokens} twice "
                    f"(model {message.model}); raise max_tokens or compact a shorter span")
        if message.stop_reason == "refusal":
            details = getattr(message, "stop_details", None)
            why = getattr(details, "explanation", None) or getattr(details, "category", None)
            raise SummarizerError(f"the model refused to summarize{f': {why}' if why else ''}")
        if message.stop_reason == "model_context_window_exceeded":
            raise SummarizerError(f"the transcript fills the context window of {message.model}: "
                                  "compact a shorter span")
        # Unknown block types arrive as objects of some block class with ``type`` set to the new
        # name (the SDK does not validate), so test ``type`` and the text itself, not the class.
        texts = [block.text for block in message.content
                 if getattr(block, "type", None) == "text"
                 and isinstance(getattr(block, "text", None), str)]
        text = "".join(texts)
        if not text.strip():
            kinds = [getattr(block, "type", "?") for block in message.content]
            raise SummarizerError(f"the reply holds no text (content blocks: {kinds}, "
                                  f"stop_reason {message.stop_reason!r})")
        return Summary(text=text, usage=usage, model=message.model)


def anthropic_client_kwargs(client_kwargs: dict[str, Any]) -> dict[str, Any]:
    """``client_kwargs`` for ``anthropic.Anthropic`` with the base URL fixed and, off
    Anthropic's host, no credential taken from the environment (see ``_endpoint``)."""
    return pin_endpoint(client_kwargs, env="ANTHROPIC_BASE_URL", host=ANTHROPIC_HOST,
                        credentials=("api_key", "auth_token", "credentials", "config",
                                     "profile"))


def _usage(message: Any) -> dict[str, Any]:
    usage = getattr(message, "usage", None)
    return usage.model_dump(mode="json", exclude_none=True) if usage is not None else {}


def _error(sdk: Any, exc: Exception) -> SummarizerError:
    if isinstance(exc, sdk.APIStatusError):
        kind = f" {exc.type}" if getattr(exc, "type", None) else ""
        detail = getattr(exc, "api_message", None) or exc.message
        request_id = f" (request-id {exc.request_id})" if getattr(exc, "request_id", None) else ""
        return SummarizerError(
            f"Anthropic API error {exc.status_code}{kind}: {detail}{request_id}")
    if isinstance(exc, sdk.APITimeoutError):
        return SummarizerError(f"Anthropic API request timed out: {exc.message}")
    if isinstance(exc, sdk.APIConnectionError):
        cause = f" ({exc.__cause__})" if exc.__cause__ else ""
        return SummarizerError(f"could not reach the Anthropic API: {exc.message}{cause}")
    return SummarizerError(f"Anthropic SDK error: {type(exc).__name__}: {exc}")

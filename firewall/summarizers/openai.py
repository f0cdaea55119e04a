"""``OpenAISummarizer``: summaries from Chat Completions, at OpenAI or any compatible server
(vLLM, llama.cpp, Ollama) via ``base_url``.

The ``openai`` SDK is an optional extra, imported when a summarizer is built, never when
``firewall`` is imported.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from ..errors import SummarizerError
from ..extras import import_extra
from ._endpoint import OPENAI_HOST, client_base_url, is_official, pin_endpoint, vendor_path
from ._prompt import SYSTEM_PROMPT, Plan, adrive, build_user_prompt, drive, merge_usage
from .base import Summary, SummaryRequest


def _import_sdk() -> Any:
    return import_extra("openai", "OpenAISummarizer", SummarizerError)


class OpenAISummarizer:
    """Summarize with ``client.chat.completions.create``; required literals are in the prompt.

    ``OPENAI_API_KEY`` from the environment is sent to OpenAI only (``https://api.openai.com``):
    with a base URL pointing anywhere else, however it is set (``base_url`` or the
    ``OPENAI_BASE_URL`` variable, which the SDK would otherwise read behind our back) and no
    ``api_key``, the key is ``"not-needed"``, which local servers ignore; pass ``api_key`` for a
    server that wants one.
    ``client`` / ``async_client`` (``openai.OpenAI`` / ``AsyncOpenAI``) replace the clients built
    from ``base_url``, ``api_key`` and ``client_kwargs`` (``max_retries`` defaults to 2).

    ``token_param`` names the output budget field: OpenAI deprecated ``max_tokens`` for
    ``max_completion_tokens`` (the only one reasoning models take), while compatible servers are
    known to take ``max_tokens``. By default it is chosen from the client's host.

    ``finish_reason == "length"`` is asked again once with twice the budget; a refusal, a content
    filter, a second cut-off, ``None`` content and every SDK error raise ``SummarizerError``.
    """

    def __init__(self, model: str = "gpt-4.1-mini", client: Any = None, async_client: Any = None,
                 base_url: str | None = None, api_key: str | None = None, max_tokens: int = 2048,
                 system: str | None = None,
                 token_param: Literal["max_completion_tokens", "max_tokens"] | None = None,
                 **client_kwargs: Any) -> None:
        self._sdk = _import_sdk()
        self.model = model
        self.max_tokens = max_tokens
        self.system = SYSTEM_PROMPT if system is None else system
        self.token_param = token_param
        if base_url is not None:
            client_kwargs["base_url"] = base_url
        if api_key is not None:
            client_kwargs["api_key"] = api_key
        pin_endpoint(client_kwargs, env="OPENAI_BASE_URL", host=OPENAI_HOST)
        client_kwargs.setdefault("max_retries", 2)
        self._client_kwargs = client_kwargs
        self._client = client
        self._async_client = async_client

    @property
    def vendor_path(self) -> str:
        """``openai:MODEL``, or ``openai-compatible:MODEL@HOST`` for another server."""
        client = self._client if self._client is not None else self._async_client
        return vendor_path("openai", self.model, client_base_url(client, self._client_kwargs),
                           OPENAI_HOST)

    def __repr__(self) -> str:
        return f"OpenAISummarizer(model={self.model!r}, max_tokens={self.max_tokens})"

    # -- drivers -------------------------------------------------------------------------------

    def summarize(self, request: SummaryRequest) -> Summary:
        if self._client is None:
            if self._async_client is not None:
                raise SummarizerError("OpenAISummarizer was given only async_client: "
                                      "call asummarize() or pass client=")
            self._client = self._build(self._sdk.OpenAI)
        client = self._client

        def call(kwargs: dict[str, Any]) -> Any:
            try:
                return client.chat.completions.create(**kwargs)
            except self._sdk.OpenAIError as exc:
                raise _error(self._sdk, exc) from exc

        return drive(self._plan(request, client), call)

    async def asummarize(self, request: SummaryRequest) -> Summary:
        if self._async_client is None:
            if self._client is not None:
                return await asyncio.to_thread(self.summarize, request)
            self._async_client = self._build(self._sdk.AsyncOpenAI)
        client = self._async_client

        async def call(kwargs: dict[str, Any]) -> Any:
            try:
                return await client.chat.completions.create(**kwargs)
            except self._sdk.OpenAIError as exc:
                raise _error(self._sdk, exc) from exc

        return await adrive(self._plan(request, client), call)

    def _build(self, cls: Any) -> Any:
        try:
            return cls(**self._client_kwargs)
        except self._sdk.OpenAIError as exc:  # e.g. no api_key and no OPENAI_API_KEY
            raise SummarizerError(f"could not create the OpenAI client: {exc}") from exc

    # -- the sans-IO core ----------------------------------------------------------------------

    def _plan(self, request: SummaryRequest, client: Any) -> Plan:
        budget = self.token_param or _token_param(client)
        params: dict[str, Any] = {
            "model": self.model,
            # "system", not "developer": compatible servers are not known to take the latter.
            "messages": [{"role": "system", "content": self.system},
                         {"role": "user", "content": build_user_prompt(request)}],
            budget: self.max_tokens,
        }
        completion = yield params
        usage = _usage(completion)
        choice = _first_choice(completion)
        if choice.finish_reason == "length":
            # A cut-off summary loses whatever literals came last: one retry with room to finish.
            completion = yield {**params, budget: 2 * self.max_tokens}
            usage = merge_usage(usage, _usage(completion))
            choice = _first_choice(completion)
            if choice.finish_reason == "length":
                raise SummarizerError(
                    f"the summary was cut off at {budget}={2 * self.max_tokens} twice "
                    f"(model {completion.model}); raise max_tokens or compact a shorter span")
        message = choice.message
        if getattr(message, "refusal", None):
            raise SummarizerError(f"the model refused to summarize: {message.refusal}")
        if choice.finish_reason == "content_filter":
            raise SummarizerError("the reply was withheld by the content filter")
        text = message.content
        if not isinstance(text, str) or not text.strip():
            raise SummarizerError(f"the reply holds no text (content {text!r}, "
                                  f"finish_reason {choice.finish_reason!r})")
        return Summary(text=text, usage=usage, model=completion.model)


def is_openai(base_url: Any) -> bool:
    """Whether a base URL is OpenAI's own API, over TLS: the one place the environment's
    ``OPENAI_API_KEY`` may go."""
    return is_official(base_url, OPENAI_HOST)


def _token_param(client: Any) -> str:
    host = getattr(getattr(client, "base_url", None), "host", OPENAI_HOST)
    return "max_completion_tokens" if host == OPENAI_HOST else "max_tokens"


def _first_choice(completion: Any) -> Any:
    choices = getattr(completion, "choices", None)
    if not choices:  # some compatible servers answer an error as 200 with no choices
        raise SummarizerError(f"the reply holds no choices: {completion!r}")
    return choices[0]


def _usage(completion: Any) -> dict[str, Any]:
    usage = getattr(completion, "usage", None)  # optional: compatible servers may omit it
    return usage.model_dump(mode="json", exclude_none=True) if usage is not None else {}


def _error(sdk: Any, exc: Exception) -> SummarizerError:
    if isinstance(exc, sdk.APIStatusError):
        body = exc.body if isinstance(exc.body, dict) else {}
        detail = body.get("message") or exc.message
        kind = f" {exc.type}" if getattr(exc, "type", None) else ""
        return SummarizerError(f"OpenAI API error {exc.status_code}{kind}: {detail}")
    if isinstance(exc, sdk.APITimeoutError):
        return SummarizerError(f"OpenAI API request timed out: {exc.message}")
    if isinstance(exc, sdk.APIConnectionError):
        cause = f" ({exc.__cause__})" if exc.__cause__ else ""
        return SummarizerError(f"could not reach the OpenAI API: {exc.message}{cause}")
    return SummarizerError(f"OpenAI SDK error: {type(exc).__name__}: {exc}")

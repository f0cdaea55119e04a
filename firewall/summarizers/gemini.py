"""``GeminiSummarizer``: summaries from Google's Gemini models (``google-genai``:
``client.models.generate_content``), through the Gemini Developer API or Vertex AI.

The ``google-genai`` SDK is an optional extra (``gemini``), imported when a summarizer is
built, never when ``firewall`` is imported.
"""

from __future__ import annotations

from typing import Any

from ..errors import SummarizerError
from ..extras import import_extra
from ._prompt import SYSTEM_PROMPT, Plan, adrive, build_user_prompt, drive, merge_usage
from .base import Summary, SummaryRequest

# finish reasons that withhold the reply: nothing usable came back
_WITHHELD = {"SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
             "LANGUAGE"}


def _import_sdk() -> Any:
    return import_extra("google.genai", "GeminiSummarizer", SummarizerError, extra="gemini")


class GeminiSummarizer:
    """Summarize with a Gemini model; the required literals travel in the user prompt.

    ``client`` is a ``google.genai.Client`` (its ``aio`` side serves ``asummarize``); without
    one, a client is built from ``client_kwargs`` (``api_key``, ``vertexai``, ``project``,
    ``location``, ``http_options``), which reads ``GOOGLE_API_KEY`` / ``GEMINI_API_KEY``
    otherwise. ``config`` adds fields of ``GenerateContentConfig`` (e.g. ``thinking_config``:
    on thinking models, thoughts count against ``max_output_tokens``).

    A reply cut off at ``MAX_TOKENS`` is asked again once with twice the budget; a blocked
    prompt, a withheld reply (safety, recitation...), a second cut-off, a reply without text
    and every SDK error raise ``SummarizerError``.
    """

    @property
    def vendor_path(self) -> str:
        """The audit names vendor and model, as for every client-side summarizer."""
        return f"gemini:{self.model}"

    def __init__(self, model: str = "gemini-2.5-flash", client: Any = None,
                 max_tokens: int = 2048, system: str | None = None,
                 config: dict[str, Any] | None = None, **client_kwargs: Any) -> None:
        self._sdk = _import_sdk()
        self.model, self.max_tokens = model, max_tokens
        self.system = SYSTEM_PROMPT if system is None else system
        self.config = dict(config or {})
        self._client = client
        self._client_kwargs = client_kwargs

    def __repr__(self) -> str:
        return f"GeminiSummarizer(model={self.model!r}, max_tokens={self.max_tokens})"

    @property
    def client(self) -> Any:
        if self._client is None:
            try:
                self._client = self._sdk.Client(**self._client_kwargs)
            except ValueError as exc:  # e.g. no API key anywhere
                raise SummarizerError(f"could not create the Gemini client: {exc}") from exc
        return self._client

    # -- drivers -------------------------------------------------------------------------------

    def summarize(self, request: SummaryRequest) -> Summary:
        models = self.client.models

        def call(kwargs: dict[str, Any]) -> Any:
            try:
                return models.generate_content(**kwargs)
            except Exception as exc:  # noqa: BLE001 - the SDK's and its transport's, said once
                raise _error(self._sdk, exc) from exc

        return drive(self._plan(request), call)

    async def asummarize(self, request: SummaryRequest) -> Summary:
        models = self.client.aio.models

        async def call(kwargs: dict[str, Any]) -> Any:
            try:
                return await models.generate_content(**kwargs)
            except Exception as exc:  # noqa: BLE001
                raise _error(self._sdk, exc) from exc

        return await adrive(self._plan(request), call)

    # -- the sans-IO core ----------------------------------------------------------------------

    def _plan(self, request: SummaryRequest) -> Plan:
        def params(budget: int) -> dict[str, Any]:
            return {"model": self.model, "contents": build_user_prompt(request),
                    "config": {**self.config, "system_instruction": self.system,
                               "max_output_tokens": budget}}

        response = yield params(self.max_tokens)
        usage = _usage(response)
        candidate = _first_candidate(response)
        if _reason(candidate) == "MAX_TOKENS":
            # A cut-off summary loses whatever literals came last: one retry with room to finish.
            response = yield params(2 * self.max_tokens)
            usage = merge_usage(usage, _usage(response))
            candidate = _first_candidate(response)
            if _reason(candidate) == "MAX_TOKENS":
                raise SummarizerError(
                    f"the summary was cut off at max_output_tokens={2 * self.max_tokens} twice "
                    f"(model {self.model}); raise max_tokens or compact a shorter span")
        reason = _reason(candidate)
        if reason in _WITHHELD:
            raise SummarizerError(f"the reply was withheld (finish_reason {reason})")
        parts = getattr(getattr(candidate, "content", None), "parts", None) or ()
        # thought summaries are the model's reasoning, not the summary
        text = "".join(p.text for p in parts
                       if isinstance(getattr(p, "text", None), str) and not p.thought)
        if not text.strip():
            raise SummarizerError(f"the reply holds no text (finish_reason {reason!r})")
        return Summary(text=text, usage=usage,
                       model=getattr(response, "model_version", None) or self.model)


def _reason(candidate: Any) -> str | None:
    reason = getattr(candidate, "finish_reason", None)
    return getattr(reason, "value", reason)


def _first_candidate(response: Any) -> Any:
    candidates = getattr(response, "candidates", None)
    if candidates:
        return candidates[0]
    feedback = getattr(response, "prompt_feedback", None)
    blocked = getattr(feedback, "block_reason", None)
    if blocked is not None:
        detail = getattr(feedback, "block_reason_message", None)
        raise SummarizerError(f"the prompt was blocked ({getattr(blocked, 'value', blocked)}"
                              + (f": {detail}" if detail else "") + ")")
    raise SummarizerError(f"the reply holds no candidates: {response!r}"[:500])


def _usage(response: Any) -> dict[str, Any]:
    usage = getattr(response, "usage_metadata", None)
    return usage.model_dump(mode="json", exclude_none=True) if usage is not None else {}


def _error(sdk: Any, exc: Exception) -> SummarizerError:
    if isinstance(exc, SummarizerError):
        return exc
    if isinstance(exc, sdk.errors.APIError):
        return SummarizerError(f"Gemini API error {exc.code} {exc.status or ''}".rstrip()
                               + f": {exc.message}")
    return SummarizerError(f"could not get a Gemini reply: {type(exc).__name__}: {exc}")

"""``ScriptedSummarizer``: canned answers for tests, the mock model of the summarizer protocol.

    s = ScriptedSummarizer(["lost the invoice", SummarizerError("boom"),
                            lambda req: f"fixed: {req.feedback}"])

Each call returns the next output; an exception instance (or class) is raised; a callable gets the
request and returns text or a ``Summary``. Every request is recorded in ``calls``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Union

from ..errors import SummarizerError
from ..tokens import count_tokens
from .base import Summary, SummaryRequest

Output = Union[str, Summary, BaseException, type[BaseException],
               Callable[[SummaryRequest], Union[str, Summary]]]


class ScriptedSummarizer:
    """Returns ``outputs`` in order. Past the end it repeats the last one (``repeat_last=True``)
    or raises ``SummarizerError``: a test that makes an unplanned call should fail loudly."""

    def __init__(self, outputs: Sequence[Output], *, repeat_last: bool = True) -> None:
        if isinstance(outputs, (str, Summary)):
            outputs = [outputs]  # a lone string would otherwise be read one character per call
        self.outputs: list[Output] = list(outputs)
        if not self.outputs:
            raise ValueError("ScriptedSummarizer needs at least one output")
        self.repeat_last = repeat_last
        self.calls: list[SummaryRequest] = []

    def __repr__(self) -> str:
        return f"ScriptedSummarizer({len(self.outputs)} outputs, {len(self.calls)} calls)"

    def summarize(self, request: SummaryRequest) -> Summary:
        self.calls.append(request)
        n = len(self.calls) - 1
        if n < len(self.outputs):
            output = self.outputs[n]
        elif self.repeat_last:
            output = self.outputs[-1]
        else:
            raise SummarizerError(
                f"ScriptedSummarizer has {len(self.outputs)} outputs and was called {n + 1} times")
        if isinstance(output, BaseException):
            raise output
        if isinstance(output, type) and issubclass(output, BaseException):
            raise output()
        if callable(output) and not isinstance(output, (str, Summary)):
            output = output(request)
        if isinstance(output, Summary):
            return output
        if not isinstance(output, str):
            raise SummarizerError(f"scripted output #{n + 1} is a {type(output).__name__}, "
                                  "not str, Summary, an exception or a callable")
        return Summary(text=output, usage={"output_tokens": count_tokens(output)},
                       model="scripted")

    async def asummarize(self, request: SummaryRequest) -> Summary:
        return self.summarize(request)

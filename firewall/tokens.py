"""Token counting, pluggable: every budget and cost figure goes through ``count_tokens``.

The default is an offline estimate calibrated on agent logs: one token per run of up to four
letters, per digit group of up to three digits, and per punctuation mark. Plain characters/4
undercounts JSON and shell output, where punctuation dominates.
"""

from __future__ import annotations

from collections.abc import Callable

import regex

TokenCounter = Callable[[str], int]

_PIECES = regex.compile(r"\p{L}{1,4}|\p{N}{1,3}|[^\p{L}\p{N}\s]")


def estimate_tokens(text: str) -> int:
    """Offline token estimate (see the module docstring)."""
    return len(_PIECES.findall(text))


_counter: TokenCounter = estimate_tokens


def count_tokens(text: str) -> int:
    return _counter(text)


def set_token_counter(counter: TokenCounter) -> TokenCounter:
    """Install a token counter (e.g. a vendor's count-tokens API); returns the previous one."""
    global _counter
    previous, _counter = _counter, counter
    return previous

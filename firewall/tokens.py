"""Token counting, pluggable: every budget and cost figure goes through ``count_tokens``.

The default, ``estimate_tokens``, is an offline estimate of OpenAI's ``o200k_base`` /
``cl100k_base`` BPE counts. It splits text with the o200k pre-tokenizer pattern (words with
their leading space or mark, digit groups of up to three, punctuation runs, whitespace) and
counts one token per piece, more for long words and long punctuation runs: BPE merges common
words whole, and on agent logs the pieces are almost always common words, digit groups and
JSON punctuation.

Calibration (``benchmarks/eval_results.md`` has the command): on the dev conversations' 3.9M
characters (user, assistant and tool turns), against ``o200k_base`` as shipped in the
``bpe-openai`` wheel, the estimate totals 1.02x the real count (tool output 1.00x, user and
assistant text 1.04x; per message over 200 characters, 10th-90th percentile 0.97x-1.05x;
``cl100k_base`` counts are within 1 % of o200k on this data). IDs are undercounted by about one token in five (``#W2378156``: 4, real 5).
For comparison, characters/4 gives 0.86x overall and 0.75x on tool output, and the previous
estimate here (a token per 4 letters, 3 digits or punctuation mark) gave 1.43x.

Claude's tokenizer is not public. ``anthropic_counter`` wraps its count-tokens API, and
``calibrated`` turns any such remote counter into a local one: the estimate scaled by the
remote/estimate ratio measured on one sample (one API call), because the firewall counts every
value and every turn and a network call each would be absurd. ``counter_named`` resolves the
CLI's ``--tokens``. Counting is offline unless a vendor counter is asked for by name
(``anthropic``): nothing leaves the process for a path the user did not choose, so ``auto``
is the estimate whatever keys the environment holds, and the CLI calibrates a vendor counter
on masked text only. ``bpe_counter`` wraps a real BPE when one is installed. Install any
``str -> int`` with ``set_token_counter``.
"""

from __future__ import annotations

import math
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import regex

TokenCounter = Callable[[str], int]

# o200k_base's pre-tokenizer (tiktoken's pattern), with each alternative captured by kind.
_PIECES = regex.compile(
    r"(?P<w>[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    r"|\p{N}{1,3}"
    r"|(?P<p> ?[^\s\p{L}\p{N}]+[\r\n/]*)"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+")
# The same pattern restricted to ASCII text, for the standard library's ``re``, which runs it
# 2-3x faster than ``regex`` runs the Unicode one; most of an agent's context (JSON, IDs,
# English, the ledger block) is ASCII. On ASCII text the two give the same pieces: letters are
# exactly A-Z and a-z (ASCII has no Lt, Lm, Lo or M), numbers 0-9, and whitespace is spelled
# out, because ``re``'s ``\s`` also matches \x1c-\x1f and ``regex``'s does not (tests check
# every ASCII string of up to two characters, and random ones, against ``_PIECES``).
_S = r"\t\n\x0b\x0c\r "  # what regex's \s matches in ASCII
_ASCII_PIECES = re.compile(
    rf"(?P<w>[^\r\nA-Za-z0-9]?[A-Z]*[a-z]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\nA-Za-z0-9]?[A-Z]+[a-z]*"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    r"|[0-9]{1,3}"
    rf"|(?P<p> ?[^{_S}A-Za-z0-9]+[\r\n/]*)"
    rf"|[{_S}]*[\r\n]+|[{_S}]+(?![^{_S}])|[{_S}]+")
_LONG_WORD, _WORD_STEP = 9, 6  # a word of 9+ characters costs one more token per 6
_LONG_MARKS = 3  # a punctuation run of 4+ marks costs one more token per 2


def estimate_tokens(text: str) -> int:
    """Offline estimate of a BPE token count (see the module docstring)."""
    # (word, punctuation run) per piece, one of them set, or neither for digits and whitespace
    pieces = (_ASCII_PIECES if text.isascii() else _PIECES).findall(text)
    n = len(pieces)  # a token per piece, plus:
    for word, marks in pieces:
        if word:
            if len(word) >= _LONG_WORD:
                n += (len(word) - _LONG_WORD + _WORD_STEP) // _WORD_STEP
        elif marks:
            size = len(marks) - (marks[0] == " ")
            if size > _LONG_MARKS:
                n += (size - 2) // 2
    return n


_counter: TokenCounter = estimate_tokens
_cache: OrderedDict[str, int] = OrderedDict()  # the same turns are counted at every compaction
# bounded by the characters it holds, not by entries: 65,536 coding-agent turns of 10 KB each
# would hold 650 MB of text alive after their conversations are done
_CACHE_CHARS, _CACHE_MIN_CHARS = 1 << 23, 6
_cached_chars = 0
_lock = threading.Lock()


def count_tokens(text: str) -> int:
    global _cached_chars
    if len(text) < _CACHE_MIN_CHARS:
        return _counter(text)
    with _lock:
        n = _cache.get(text)
        if n is not None:
            _cache.move_to_end(text)
            return n
    n = _counter(text)
    if len(text) > _CACHE_CHARS // 16:  # one huge text must not flush everything else
        return n
    with _lock:
        if text not in _cache:
            _cache[text] = n
            _cached_chars += len(text)
            while _cached_chars > _CACHE_CHARS:
                _cached_chars -= len(_cache.popitem(last=False)[0])
    return n


def turn_tokens(turn: Any) -> int:
    """Tokens the model reads for a turn: ``turns.turn_text``, its text and its tool calls as
    the model sees them. The one reading of a turn that the guard, the triggers, eval, replay
    and the audit count by."""
    from .turns import turn_text

    return count_tokens(turn_text(turn))


def token_counter() -> TokenCounter:
    """The counter installed (a Dask worker is handed the client's)."""
    return _counter


def set_token_counter(counter: TokenCounter) -> TokenCounter:
    """Install a token counter (e.g. a vendor's count-tokens API); returns the previous one."""
    global _counter, _cached_chars
    with _lock:
        previous, _counter = _counter, counter
        _cache.clear()
        _cached_chars = 0
    return previous


def bpe_counter(encoding: str = "o200k_base") -> TokenCounter:
    """A real BPE counter from an installed package, for ``set_token_counter``.

    Tries ``bpe_openai`` (its wheel ships the encodings) and then ``tiktoken`` (which may
    download the encoding on first use). Neither is a dependency of this package.
    """
    from .errors import FirewallError

    try:
        import bpe_openai

        enc = bpe_openai.get_encoding(encoding)
    except ImportError:
        try:
            import tiktoken

            enc = tiktoken.get_encoding(encoding)
        except ImportError:
            raise FirewallError("no BPE package installed: pip install bpe-openai (or "
                                "tiktoken)") from None
    return lambda text: len(enc.encode(text))


class AnthropicCounter:
    """Anthropic's count-tokens API as a counter: the tokens of ``text`` as one user message,
    less the message's own framing (measured once, on a one-character message). Pickled (for a
    Dask worker), it leaves its client behind: unpickling calls nothing, and the copy makes its
    own client if it is ever called."""

    def __init__(self, model: str = "claude-haiku-4-5", client: Any = None) -> None:
        self.model, self._client = model, client
        self.framing = self._api(".") - 1

    def __call__(self, text: str) -> int:
        return max(0, self._api(text) - self.framing) if text else 0

    def _api(self, text: str) -> int:
        if self._client is None:
            from .errors import SummarizerError
            from .extras import import_extra
            from .summarizers.anthropic import anthropic_client_kwargs

            sdk = import_extra("anthropic", "AnthropicSummarizer", SummarizerError)
            # the environment's key goes to Anthropic only (anthropic_client_kwargs)
            self._client = sdk.Anthropic(**anthropic_client_kwargs({}))
        return self._client.messages.count_tokens(
            model=self.model, messages=[{"role": "user", "content": text}]).input_tokens

    def __getstate__(self) -> dict[str, Any]:
        return {"model": self.model, "framing": self.framing, "_client": None}


def anthropic_counter(model: str = "claude-haiku-4-5", client: Any = None) -> TokenCounter:
    """Anthropic's count-tokens API as a counter (``AnthropicCounter``): one call now, for the
    message framing, and one per text counted."""
    return AnthropicCounter(model, client)


@dataclass(frozen=True, slots=True)
class ScaledEstimate:
    """The offline estimate times ``ratio``: a remote counter's scale at local cost. Plain
    data, so it pickles as it is (``--tokens anthropic --dask`` hands it to every worker)."""

    ratio: float

    def __call__(self, text: str) -> int:
        return math.ceil(estimate_tokens(text) * self.ratio)


def calibrated(reference: TokenCounter, sample: str) -> TokenCounter:
    """The offline estimate scaled to ``reference`` by their ratio on ``sample``: one call to
    ``reference`` (say, a vendor's API), then local counting at the vendor's scale."""
    return ScaledEstimate(reference(sample) / max(1, estimate_tokens(sample)))


def is_vendor_counter(name: str) -> bool:
    """Whether ``--tokens NAME`` sends text to a vendor (to calibrate on)."""
    return name.partition(":")[0] == "anthropic"


def counter_named(name: str, sample: str = "") -> TokenCounter:
    """``estimate``, ``o200k``, ``cl100k``, ``anthropic[:MODEL]`` or ``auto`` (the estimate:
    see the module docstring). The Anthropic counter is ``calibrated`` on ``sample``, which is
    sent to the API as it is: pass masked text."""
    from .errors import FirewallError

    kind, _, model = name.partition(":")
    if kind in ("estimate", "auto"):
        return estimate_tokens
    if kind in ("o200k", "cl100k"):
        return bpe_counter(f"{kind}_base")
    if kind == "anthropic":
        try:
            remote = anthropic_counter(model or "claude-haiku-4-5")
            return calibrated(remote, sample or "token")
        except FirewallError:
            raise
        except Exception as exc:  # counting is not safety: say so and count offline
            print(f"firewall: Anthropic count-tokens failed ({type(exc).__name__}: {exc}); "
                  "counting with the offline estimate", file=sys.stderr)
            return estimate_tokens
    raise FirewallError(f"--tokens: unknown counter {name!r} (estimate, o200k, cl100k, "
                        "anthropic[:MODEL], auto)")

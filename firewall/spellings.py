"""The spellings of a secret other than its own that text carries it in: URL-encoded (a query
string, a form body: ``%2F`` for ``/``, ``+`` for a space, either hex case) and base64 (an
``Authorization: Basic`` header, a Docker ``auth``, a Kubernetes ``data:`` value; standard and
URL-safe alphabets).

A base64 spelling depends on where the secret starts in the encoded bytes (three alignments),
so what is looked for is, per alignment, the characters that the secret's bytes alone decide:
the same run wherever it sits, whatever surrounds it (``user:`` before it, padding after). Only
secrets of at least ``BASE64_MIN_CHARS`` characters get them: a shorter one's run would be a
handful of characters found by chance in other base64.
"""

from __future__ import annotations

import base64
import functools
import re
from urllib.parse import quote, quote_plus

BASE64_MIN_CHARS = 8
_HEX = re.compile(r"%[0-9A-F]{2}")


@functools.lru_cache(maxsize=4096)
def encoded_spellings(secret: str) -> tuple[str, ...]:
    """The URL-encoded and base64 spellings of ``secret`` that differ from it (see the
    module), longest first."""
    data = secret.encode("utf-8", "surrogatepass")
    found = set()
    # a lone surrogate has no UTF-8 bytes of its own: spelled as Python writes it (surrogatepass)
    for encoded in (quote(data, safe=""), quote(data), quote_plus(data, safe=""),
                    quote_plus(data)):
        found |= {encoded, _HEX.sub(lambda m: m.group().lower(), encoded)}
    if len(secret) >= BASE64_MIN_CHARS:
        for shift in range(3):
            text = base64.b64encode(b"\0" * shift + data).decode("ascii")
            # the characters whose 6 bits lie wholly inside the secret's bytes
            run = text[-(-8 * shift // 6):(8 * (shift + len(data))) // 6]
            found |= {run, run.replace("+", "-").replace("/", "_")}
    found.discard(secret)
    return tuple(sorted((s for s in found if s), key=len, reverse=True))


__all__ = ["BASE64_MIN_CHARS", "encoded_spellings"]

"""URLs without their passwords: what errors, listings and the report page print.

A URL holds a password in ``scheme://user:PASSWORD@host`` or in a ``password=`` parameter
(libpq's ``?password=``, ``sslpassword=``). A user writes it as they mean it, reserved
characters included (``/``, ``@``, ``?``, a ``%`` that encodes nothing), so the password is
read here up to the *last* ``@`` of the URL: none of it shows, whatever a URL parser would make
of it. A library's message about a URL can quote what it made of it (libpq quotes the token
it cannot decode, psycopg the host it cannot resolve): ``without_passwords`` cleans such a
message of any piece of the password.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

MASK = "***"
# scheme://user:password@ : the password runs to the last @ before white space (bounded: the
# search stays linear on hostile text, and no real password is longer)
_USERINFO = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^:/@?#\s]*):"
                       r"(?P<password>\S{0,1024})@")
# password=... runs to the next &name= parameter (a raw & may be part of the password)
_PARAMETER = re.compile(r"(?i)(?P<head>(?<![A-Za-z0-9_])(?:ssl)?password=)"
                        r"(?P<password>(?:[^&\s]|&(?![A-Za-z_][A-Za-z0-9_]*=))*)")
_QUOTED = re.compile(r""""[^"]*"|'[^']*'""")
_RUN = 3  # a quoted part sharing this many characters in a row with a password is hidden


def redacted_url(text: str) -> str:
    """``text`` (a URL, or any text holding URLs) with every URL password written ``***``."""
    text = _USERINFO.sub(lambda m: f"{m['head']}:{MASK}@", text)
    return _PARAMETER.sub(lambda m: m["head"] + MASK, text)


def url_passwords(url: str) -> set[str]:
    """Every spelling of the passwords ``url`` holds: as written and percent-decoded."""
    written = {m["password"] for pattern in (_USERINFO, _PARAMETER)
               for m in pattern.finditer(url)}
    return {spelling for p in written for spelling in (p, unquote(p)) if spelling}


def without_passwords(text: str, url: str) -> str:
    """``text`` (a library's message about ``url``) holding no piece of the URL's passwords:
    each spelling is replaced, and so is each quoted part (``"..."``, ``'...'``) that shares
    three characters in a row with one (all of a shorter password)."""
    spellings = sorted(url_passwords(url), key=len, reverse=True)
    if not spellings:
        return text
    for spelling in spellings:
        text = text.replace(spelling, MASK)
    runs = {s[i:i + min(_RUN, len(s))] for s in spellings
            for i in range(max(1, len(s) - _RUN + 1))}

    def hide(quoted: re.Match[str]) -> str:
        part = quoted[0]
        return part[0] + MASK + part[-1] if any(run in part[1:-1] for run in runs) else part

    return _QUOTED.sub(hide, text)


__all__ = ["MASK", "redacted_url", "url_passwords", "without_passwords"]

"""Validators a regex rule can name (``checksum: iban``) to drop look-alikes of a standard format.

A validator is called only on a value the rule's regex already matched, never on raw text, so
its cost is per candidate, not per character. Each one delegates to a maintained library
(python-stdnum, the standard library's ``ipaddress``, publicsuffixlist with its bundled copy of
the Public Suffix List) instead of re-implementing a standard; they are imported on first use,
so ``import firewall`` stays light. A validator answers False for anything it cannot read: it
only ever drops a candidate, it never raises.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection
from typing import Any


def luhn(value: str) -> bool:
    """Payment card numbers and IMEIs: the Luhn mod-10 check over the digits (spaces and dashes
    of the printed groupings allowed)."""
    from stdnum import luhn as _luhn

    digits = value.replace(" ", "").replace("-", "")
    return len(digits) >= 2 and digits.isascii() and _luhn.is_valid(digits)


# Issuer prefixes (IIN ranges) of the card networks and the lengths each issues, from the
# networks' published rules: (lowest prefix, highest prefix, lengths). A Luhn-valid number
# outside them is an IMEI, a tracking or order number: one random digit run in ten passes Luhn.
_CARD_RANGES: tuple[tuple[str, str, Collection[int]], ...] = (
    ("4", "4", (13, 16, 19)),                 # Visa
    ("51", "55", (16,)),                      # Mastercard
    ("2221", "2720", (16,)),                  # Mastercard 2-series
    ("34", "34", (15,)),                      # American Express
    ("37", "37", (15,)),
    ("300", "305", range(14, 20)),            # Diners Club
    ("36", "36", range(14, 20)),
    ("38", "39", range(16, 20)),
    ("3528", "3589", range(16, 20)),          # JCB
    ("6011", "6011", range(16, 20)),          # Discover
    ("644", "649", range(16, 20)),
    ("65", "65", range(16, 20)),
    ("62", "62", range(16, 20)),              # UnionPay
    ("2200", "2204", range(16, 20)),          # Mir
    ("50", "50", range(12, 20)),              # Maestro, Verve
    ("56", "69", range(12, 20)),              # Maestro and other 5x/6x issuers
    ("1", "1", (15,)),                        # UATP
)


def payment_card(value: str) -> bool:
    """Payment card numbers: Luhn, and an issuer prefix (IIN) whose network issues numbers of
    that length. An IMEI (15 digits, 35... or 86...) passes Luhn but is no card."""
    if not luhn(value):
        return False
    digits = value.replace(" ", "").replace("-", "")
    return any(lo <= digits[:len(lo)] <= hi and len(digits) in lengths
               for lo, hi, lengths in _CARD_RANGES)


def iban(value: str) -> bool:
    """IBANs, compact or printed in groups of four (``AL47 2121 1009 0000 0002 3569 8741``):
    ISO 13616 mod-97, the country's registered length and BBAN structure, and its national
    check digits where stdnum knows them."""
    from stdnum import iban as _iban

    return value.isascii() and _iban.is_valid(value)


def aba_routing(value: str) -> bool:
    """US bank routing numbers (ABA RTN): weights 3, 7, 1 over nine digits."""
    from stdnum.us import rtn

    return value.isascii() and rtn.is_valid(value)


def ipv4(value: str) -> bool:
    """IPv4 addresses in dotted-quad form (RFC 791; leading zeros are refused as ambiguous),
    with an optional CIDR prefix length (``/16``) or port (``:8080``)."""
    address, _, suffix = value.partition("/")
    limit = 32
    if not suffix:
        address, _, suffix = value.partition(":")
        limit = 65535
    if suffix and not (suffix.isdecimal() and suffix.isascii() and int(suffix) <= limit):
        return False
    import ipaddress

    try:
        ipaddress.IPv4Address(address)
    except ValueError:
        return False
    return True


def ipv6(value: str) -> bool:
    """IPv6 addresses in any RFC 4291 text form: full, compressed with ``::``, an embedded
    IPv4 tail (``::ffff:192.0.2.1``), a zone (``fe80::1%eth0``, RFC 4007), an optional prefix
    length (``/64``). The unspecified ``::`` alone is refused: in text it is a separator."""
    address, slash, prefix = value.partition("/")
    if slash and not (prefix.isdecimal() and prefix.isascii() and int(prefix) <= 128):
        return False
    if address.strip(":") == "":
        return False
    import ipaddress

    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return False
    return True


def mac(value: str) -> bool:
    """48-bit MAC addresses (IEEE EUI-48) in the colon (``01:23:45:67:89:ab``), hyphen
    (``01-23-45-67-89-AB``) and Cisco dotted (``0123.4567.89ab``) notations; one separator
    throughout. The manufacturer is not looked up: documentation and test MACs are load-bearing
    literals too."""
    from stdnum import mac as _mac

    if not value.isascii():
        return False
    if "." in value:  # dotted: three groups of four hex digits
        groups = value.split(".")
        if len(groups) != 3 or any(len(g) != 4 for g in groups):
            return False
        flat = "".join(groups)
        value = ":".join(flat[i:i + 2] for i in range(0, 12, 2))
    elif ":" in value and "-" in value:
        return False
    elif len(value) != 17:  # no single-digit groups: "1:2:3:4:5:6" is not written for a MAC
        return False
    return _mac.is_valid(value, validate_manufacturer=False)


def bitcoin(value: str) -> bool:
    """Bitcoin addresses: base58check (P2PKH ``1…``, P2SH ``3…``) and bech32/bech32m segwit
    (``bc1…``), checksums included."""
    from stdnum import bitcoin as _bitcoin

    return value.isascii() and _bitcoin.is_valid(value)


# Top-level domains that a bare ``name.tld`` is accepted under. A two-letter country code is
# accepted unless it is also a common file extension or attribute name in code (``setup.py``,
# ``README.md``, ``self.id``): there only a multi-label public suffix (``gov.pl``, ``co.in``)
# or a leading ``www.`` marks a domain (a scheme or an ``@``: other rules). Of the generic TLDs, only the
# ones seen on their own in prose, and no word that code uses as an attribute (``log.info``,
# ``np.int``, ``this.store``, ``x.app``).
GENERIC_TLDS = frozenset({"com", "net", "org", "edu", "gov", "mil", "io", "ai", "co", "dev",
                          "me", "tv", "xyz", "biz"})
CODE_EXTENSIONS = frozenset({"py", "md", "sh", "rs", "pl", "pm", "so", "cc", "mk", "ml", "ps",
                             "sc", "tf", "la", "ac", "am", "in", "pt", "sv", "mm", "cl", "gd",
                             "id"})


@functools.lru_cache(maxsize=1)
def _public_suffixes() -> Any:
    """The Public Suffix List bundled with ``publicsuffixlist`` (ICANN section only: the
    private section lists hosting services, not suffixes people type). Parsed once, from the
    package's own data file: nothing is fetched."""
    from publicsuffixlist import PublicSuffixList

    return PublicSuffixList(only_icann=True, accept_unknown=False)


def domain(value: str) -> bool:
    """A bare domain name (``microsoft.com``, ``google.co.il``, ``www.bbc.co.uk``, ``例子.中国``),
    optionally followed by a path: its suffix must be an ICANN public suffix with a registrable
    label in front of it (``co.il`` alone is not a domain), under the TLD policy above. The
    top-level domain must be written in lower case: a capital there is a class or constant."""
    host = value.split("/", 1)[0]
    labels = host.split(".")
    if len(labels) < 2 or any(not label for label in labels):
        return False
    tld = labels[-1]
    if not tld.islower() and tld.isascii():  # pydicom.valuerep.IS, Context.Store: code
        return False
    host = host.lower()
    if tld in GENERIC_TLDS and len(labels) == 2:  # microsoft.com: no list needed (nor loaded)
        return True
    if tld.isascii() and not tld.startswith("xn--") and labels[0] != "www":
        if tld not in GENERIC_TLDS and (len(tld) != 2 or tld in CODE_EXTENSIONS):
            if len(labels) < 3:  # a two-label suffix needs a label in front: no list lookup
                return False
            suffix = _public_suffixes().publicsuffix(host)
            return suffix is not None and "." in suffix and host != suffix
    return _public_suffixes().privatesuffix(host) is not None


CHECKSUMS: dict[str, Callable[[str], bool]] = {
    "luhn": luhn,
    "payment_card": payment_card,
    "iban": iban,
    "iban_mod97": iban,  # the name packs used before the library-backed check; same check
    "aba_routing": aba_routing,
    "ipv4": ipv4,
    "ipv6": ipv6,
    "mac": mac,
    "bitcoin": bitcoin,
    "domain": domain,
}

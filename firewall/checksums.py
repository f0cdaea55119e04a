"""Checksum validators a regex rule can name (``checksum: luhn``) to drop look-alike numbers."""

from __future__ import annotations

from collections.abc import Callable


def luhn(value: str) -> bool:
    """Payment card numbers and IMEIs: the Luhn mod-10 check over the digits."""
    digits = [int(c) for c in value if c.isdecimal()]  # isdigit() also takes '²'
    if len(digits) < 2:
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def iban_mod97(value: str) -> bool:
    """IBANs: move the first four characters to the end, letters to numbers, mod 97 == 1."""
    compact = "".join(value.split()).upper()
    if len(compact) < 15 or not compact.isalnum() or not compact.isascii():
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def aba_routing(value: str) -> bool:
    """US bank routing numbers: weights 3, 7, 1 over nine digits."""
    digits = [int(c) for c in value if c.isdecimal()]
    if len(digits) != 9:
        return False
    return sum(d * w for d, w in zip(digits, (3, 7, 1) * 3)) % 10 == 0


CHECKSUMS: dict[str, Callable[[str], bool]] = {
    "luhn": luhn,
    "iban_mod97": iban_mod97,
    "aba_routing": aba_routing,
}

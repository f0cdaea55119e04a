"""The standard literal classes (IBAN, card, IP, MAC, e-mail, URL and domain, crypto address):
table-driven cases written from the standards (tests/fixtures/standard_classes.yaml, see its
header), run through the built-in packs; and the library-backed validators behind them."""

import socket

import pytest
from hypothesis import given, settings, strategies as st
import yaml

from firewall.extraction import checksums
from firewall.extraction.extract import Extractor
from firewall.extraction.packs import load_packs
from firewall.turns import Turn

from conftest import FIXTURES

TABLE = yaml.safe_load((FIXTURES / "standard_classes.yaml").read_text(encoding="utf-8"))


def _rows(section: str):
    return [pytest.param(cls, row, id=f"{cls}-{i}") for cls, rows in TABLE[section].items()
            for i, row in enumerate(rows)]


@pytest.fixture(scope="module")
def builtin() -> Extractor:
    return Extractor(load_packs())


def _found(extractor: Extractor, text: str) -> set[tuple[str, int, str]]:
    return {(lit.value, lit.start, lit.rule)
            for lit in extractor.scan([Turn("user", text)]).literals}


@pytest.mark.parametrize("cls, row", _rows("cases"))
def test_each_expected_span_is_extracted_exactly(builtin, cls, row):
    found = {(value, start) for value, start, _ in _found(builtin, row["text"])}
    for span in row["spans"]:
        assert (span, row["text"].index(span)) in found, (span, sorted(found))


@pytest.mark.parametrize("cls, row", _rows("negatives"))
def test_look_alikes_are_not_extracted_by_the_class_rules(builtin, cls, row):
    values = {value for value, _, rule in _found(builtin, row["text"])
              if rule in TABLE["rules"][cls]}
    assert not values & set(row["absent"])


def test_the_iban_table_covers_the_registry_lengths():
    """Every country's IBAN has the length the IBAN registry gives it, written compact and in
    printed groups; one character more or less is not an IBAN."""
    rows = TABLE["cases"]["iban"]
    assert len({row["country"] for row in rows}) >= 50
    for row in rows:
        (span,) = row["spans"]
        compact = span.replace(" ", "")
        assert (compact[:2], len(compact)) == (row["country"], row["length"])
        assert checksums.iban(span)
        assert not checksums.iban(compact[:-1]) and not checksums.iban(compact + "0")


@pytest.mark.parametrize("value, valid", [
    ("microsoft.com", True), ("google.co.il", True), ("www.bbc.co.uk/news", True),
    ("例子.中国", True), ("example.com.au", True), ("ns1.example.co.in", True),
    ("co.il", False), ("setup.py", False), ("README.md", False), ("self.id", False),
    ("www.example.store", True), ("this.store", False), ("www.setup.py", True),
    ("user.email", False), ("Context.Store", False), ("a.b.example", False), ("x.zz", False),
])
def test_domain_validator_reads_the_public_suffix_list(value, valid):
    assert checksums.domain(value) is valid


def test_the_public_suffix_list_is_read_offline(monkeypatch):
    """The bundled list is parsed from the package's own file: with sockets refused, the
    validator still answers."""
    def refuse(*args, **kwargs):
        raise AssertionError("the domain validator opened a socket")

    monkeypatch.setattr(socket, "socket", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    checksums._public_suffixes.cache_clear()
    try:
        assert checksums.domain("google.co.il") and not checksums.domain("co.il")
    finally:
        checksums._public_suffixes.cache_clear()


@pytest.mark.parametrize("name, value, valid", [
    ("ipv4", "192.0.2.1:65535", True), ("ipv4", "192.0.2.1:65536", False),
    ("ipv4", "10.0.0.0/33", False), ("ipv4", "010.0.0.1", False),
    ("ipv6", "fe80::1%eth0", True), ("ipv6", "::ffff:192.0.2.1", True),
    ("ipv6", "2001:db8::/129", False), ("ipv6", "::", False), ("ipv6", "1::2::3", False),
    ("mac", "0123.4567.89ab", True), ("mac", "01:23:45:67:89:AB", True),
    ("mac", "01:23-45:67:89:ab", False), ("mac", "0123.4567.89a", False),
    ("luhn", "4242 4242 4242 4242", True), ("luhn", "4242 4242 4242 4241", False),
    ("iban_mod97", "GB82WEST12345698765432", True),
    ("bitcoin", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4", True),
    ("bitcoin", "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t5", False),
])
def test_validators(name, value, valid):
    assert checksums.CHECKSUMS[name](value) is valid


@pytest.mark.parametrize("name", sorted(checksums.CHECKSUMS))
@pytest.mark.parametrize("value", ["", "²³", "١٢٣٤٥٦٧٨٩٠١٢٣", "\udcff", ":" * 40, "." * 40,
                                   "DE" + "1" * 5000, "bc1" + "q" * 5000])
def test_validators_refuse_what_they_cannot_read(name, value):
    """A validator only ever drops a candidate: odd input gives False, never an exception."""
    assert checksums.CHECKSUMS[name](value) is False


@settings(max_examples=300, deadline=None)  # the first domain check parses the suffix list
@given(st.text(alphabet=st.sampled_from("0123456789abcfxABCZ:.-/% 例子\udcff"), max_size=48))
def test_validators_never_raise(value):
    for validator in checksums.CHECKSUMS.values():
        assert validator(value) in (True, False)

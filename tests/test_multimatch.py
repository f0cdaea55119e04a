"""The Hyperscan prefilter (optional extra): it only narrows which rules run, never results."""

import pytest

from firewall.extraction import multimatch
from firewall.extraction.extract import Extractor
from firewall.extraction.packs import Pack, parse_pack

pytestmark = pytest.mark.skipif(not multimatch.available(), reason="hyperscan not installed")


@pytest.fixture(autouse=True)
def fresh_process():
    multimatch._databases.clear()  # each test as a new process: no database in memory
    yield
    multimatch._databases.clear()


def pack_from(text: str) -> Pack:
    spec = parse_pack(text)
    return Pack(name=spec.name, version=spec.version, rules=tuple(spec.rules),
                owners=(spec.name,) * len(spec.rules))


PACK = r"""
name: p
version: '1'
rules:
  - id: word-boundary
    kind: regex
    pattern: '\b[A-Z]{3}\d{3}\b'
  - id: lookbehind
    kind: regex
    pattern: '(?<=id=)\w+'
  - id: dollar
    kind: regex
    pattern: 'end\d$'
  - id: icase
    kind: regex
    pattern: 'order\s+#?(?P<literal>\d{4,})'
    flags: [ignorecase]
  - id: keyed
    kind: regex
    pattern: 'tok_(?P<literal>[a-z0-9]{8})'
    keywords: [TOK_]
  - id: backreference
    kind: regex
    pattern: '(\d{2})-\1'
  - id: named-twice
    kind: regex
    pattern: '(?:a(?P<literal>\d+)|b(?P<literal>\d+))'
  - id: anchored-g
    kind: regex
    pattern: '\Gstart\d'
"""

TEXTS = ["ABC123 id=xyz ORDER #12345 end1\n", "tok_abcd1234 and TOK_ZZZZ", "12-12 13-14",
         "a12 b34", "start1 then start2", "ÄBC123 id=é", "x\x1cABC123\x1c", "nothing here",
         "order   77777 end5"]


def test_the_database_gives_the_results_of_running_every_rule(tmp_path, monkeypatch):
    monkeypatch.setenv("FIREWALL_CACHE_DIR", str(tmp_path))
    extractor = Extractor([pack_from(PACK)])
    assert extractor._prefilter.wait_multimatch(timeout=120)
    for text in TEXTS:
        got = sorted((l.rule, l.start, l.end) for l in extractor.scan_text(text, "user").literals)
        expected = sorted(
            (rule.qid, s, e) for rule in extractor.rules for s, e in rule.find(text, 1.0))
        assert got == expected, text
    assert list((tmp_path / "hyperscan").glob("*.hsdb"))  # stored for the next process


def test_a_stored_database_is_loaded_and_a_corrupt_one_is_a_miss(tmp_path, monkeypatch):
    monkeypatch.setenv("FIREWALL_CACHE_DIR", str(tmp_path))
    pack = pack_from(PACK)
    assert Extractor([pack])._prefilter.wait_multimatch(timeout=120)
    stored = max((tmp_path / "hyperscan").glob("*.hsdb"), key=lambda p: p.stat().st_size)
    multimatch._databases.clear()  # as a new process: nothing in memory
    fresh = Extractor([pack])
    assert fresh._prefilter.wait_multimatch(timeout=120)
    assert fresh.scan_text("tok_abcd1234", "user").literals[0].value == "abcd1234"
    stored.write_bytes(stored.read_bytes()[:-10] + b"0123456789")  # a damaged entry
    multimatch._databases.clear()
    assert multimatch._load(stored, 8) is None
    again = Extractor([pack])
    assert again._prefilter.wait_multimatch(timeout=120)  # compiled again, then stored again
    assert multimatch._load(stored, 8) is not None


def test_without_a_cache_no_database_is_compiled(monkeypatch):
    monkeypatch.setenv("FIREWALL_CACHE_DIR", "")
    extractor = Extractor([pack_from(PACK)])
    assert not extractor._prefilter.wait_multimatch(timeout=5)
    assert [l.value for l in extractor.scan_text("ABC123", "user").literals] == ["ABC123"]


CASELESS = r"""
name: c
version: '1'
rules:
  - id: flag
    kind: regex
    pattern: '(?<![\w-])fix-\d{4}'
    flags: [ignorecase]
  - id: scoped
    kind: regex
    pattern: '(?<![\w-])(?i:key)=(?=[A-Z0-9]{0,9}\d)[A-Z0-9]{3,10}(?![\w-])'
  - id: keyed
    kind: regex
    pattern: '(?i)visit-\d{4}'
    keywords: [visit]
  - id: dotless
    kind: regex
    pattern: '(?i)ıd=\d{4}'
"""


def test_the_databases_keep_case_insensitive_rules_regex_folds_beyond_ascii(tmp_path,
                                                                            monkeypatch):
    """`regex` matches i with İ, I with ı, k with the Kelvin sign: neither database (nor the
    keywords or the locator tests in them) may rule such a match out."""
    monkeypatch.setenv("FIREWALL_CACHE_DIR", str(tmp_path))
    extractor = Extractor([pack_from(CASELESS)])
    assert extractor._prefilter.wait_multimatch(timeout=120)  # both, when the UTF-8 one holds any
    for text in ["é FİX-1234", "FİX-1234", "é \u212aEY=AB12", "\u212aey=AB12", "VİSİT-1234 é",
                 "ID=1234", "é ID=1234", "fix-1234 key=AB12 visit-1234"]:
        got = sorted((l.rule, l.start, l.end) for l in extractor.scan_text(text, "user").literals)
        expected = []
        for rule in extractor.rules:
            locator, rule.locator = rule.locator, None  # `regex` alone
            expected += [(rule.qid, s, e) for s, e in rule.find(text, 1.0)]
            rule.locator = locator
        assert got == sorted(expected), text
        assert got, text


def test_a_process_that_exits_at_once_still_leaves_the_database_for_the_next(tmp_path,
                                                                            monkeypatch):
    """A hook or one CLI command exits long before a compile ends: the compile goes on in a
    detached child, which stores the database, so the next process loads it at once."""
    import os
    import subprocess
    import sys
    import time

    script = (
        "import sys\n"
        "from firewall.extraction import prefilter\n"
        "from firewall.extraction.extract import Extractor\n"
        "from firewall.extraction.packs import Pack, parse_pack\n"
        "spec = parse_pack(sys.stdin.read())\n"
        "pack = Pack(name=spec.name, version=spec.version, rules=tuple(spec.rules),\n"
        "            owners=(spec.name,) * len(spec.rules))\n"
        "extractor = Extractor([pack])\n"
        "extractor.scan_text('x' * prefilter.MULTIMATCH_AFTER, 'user')  # asks for them\n"
        "assert extractor._prefilter._multimatch(False) is None  # not ready: exits now\n")
    env = {**os.environ, "FIREWALL_CACHE_DIR": str(tmp_path)}
    subprocess.run([sys.executable, "-c", script], input=PACK, text=True, env=env, check=True,
                   timeout=120)
    folder = tmp_path / "hyperscan"
    deadline = time.monotonic() + 120
    while (not list(folder.glob("*.hsdb")) or list(folder.glob("*.job"))) and \
            time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(folder.glob("*.hsdb")) and not list(folder.glob("*.job"))
    monkeypatch.setenv("FIREWALL_CACHE_DIR", str(tmp_path))
    extractor = Extractor([pack_from(PACK)])
    extractor._prefilter._seen = 10**9  # past the threshold: asks for it, loads it at once
    assert extractor._prefilter._multimatch(False) is not None

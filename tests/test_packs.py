"""Pack loading: valid packs load; every invalid fixture fails with its exact message."""

from pathlib import Path

import pytest

from firewall.errors import PackError
from firewall.extraction.packs import builtin_names, load_pack, load_packs, parse_pack

FIXTURES = Path(__file__).parent / "fixtures" / "packs"

INVALID = {
    "unknown_key.yaml": ":7: pack 'bad', rule 'r1', field 'patern': Extra inputs are not permitted",
    "bad_kind.yaml": ":4: pack 'bad', rule 'r1', field 'kind': kind must be one of regex, "
                     "json_key, terms, entity",
    "bad_regex.yaml": ":6: pack 'bad', rule 'r1', field 'pattern': invalid regex: missing ) at "
                      "position 9",
    "double_quoted.yaml": ":6: pack 'bad', rule 'r1', field 'pattern': write regexes "
                          "single-quoted",
    "plain_pattern.yaml": ":6: pack 'bad', rule 'r1', field 'pattern': write regexes "
                          "single-quoted",
    "duplicate_id.yaml": ":7: pack 'bad', rule 'r1', field 'id': duplicate rule id (first "
                         "defined as rule #1)",
    "missing_version.yaml": ":1: pack 'bad', field 'version': Field required",
    "bad_priority.yaml": ":7: pack 'bad', rule 'r1', field 'priority': Input should be less than "
                         "or equal to 100",
    "bad_checksum.yaml": ":7: pack 'bad', rule 'r1', field 'checksum': unknown checksum 'crc64'; "
                         "known: luhn, payment_card, iban, iban_mod97, aba_routing, ipv4, ipv6, "
                         "mac, bitcoin, domain",
    "not_yaml.yaml": ":4: invalid YAML: expected ',' or '}', but got '<stream end>'",
    "bad_role.yaml": ":7: pack 'bad', rule 'r1', field 'roles.1': Input should be 'system', "
                     "'user', 'assistant' or 'tool'",
    "failing_example.yaml": ": pack 'bad': 1 rule example(s) fail",
}


def test_every_invalid_fixture_is_in_the_table():
    assert {p.name for p in (FIXTURES / "invalid").glob("*.yaml")} == set(INVALID)


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_pack_error_names_path_line_pack_rule_field(name):
    path = FIXTURES / "invalid" / name
    with pytest.raises(PackError) as info:
        load_packs(str(path))
    assert str(info.value).startswith(f"{path}{INVALID[name]}")


def test_failing_example_lists_the_miss_and_loads_when_not_strict():
    path = FIXTURES / "invalid" / "failing_example.yaml"
    with pytest.raises(PackError, match=r"bad/r1: missed \['inv-13'\]"):
        load_packs(str(path))
    assert len(load_packs(str(path), strict=False)[0].rules) == 1


def test_minimal_pack_from_the_issue_loads_with_defaults():
    (pack,) = load_packs(str(FIXTURES / "valid" / "minimal.yaml"))
    rule = pack.rules[0]
    assert (pack.name, pack.version, rule.id, rule.kind) == ("billing", "1", "invoice-number",
                                                             "regex")
    assert (rule.severity, rule.sensitive, rule.priority, rule.flags) == ("pin", False, 50, [])
    assert rule.roles == ["user", "tool", "assistant"]


def test_defaults_apply_unless_the_rule_sets_its_own():
    (pack,) = load_packs(str(FIXTURES / "valid" / "all_kinds.yaml"))
    assert {r.id: r.priority for r in pack.rules} == {"ticket": 70, "card": 70, "order-key": 70,
                                                      "product": 70}
    assert [r.id for r in pack.rules if r.sensitive] == ["card"]


def test_extends_inherits_rules_and_disables_by_id():
    pack = load_pack(str(FIXTURES / "valid" / "child.yaml"))
    assert pack.qualified_ids() == ["kinds/ticket", "kinds/order-key", "kinds/product"]


def test_extends_cycle_and_unknown_disable_are_errors(tmp_path):
    (tmp_path / "a.yaml").write_text("name: a\nversion: '1'\nextends: [b.yaml]\n")
    (tmp_path / "b.yaml").write_text("name: b\nversion: '1'\nextends: [a.yaml]\n")
    with pytest.raises(PackError, match="'extends' cycle"):
        load_pack(str(tmp_path / "a.yaml"))
    (tmp_path / "c.yaml").write_text(
        "name: c\nversion: '1'\nextends:\n  - pack: d.yaml\n    disable: [nope]\n")
    (tmp_path / "d.yaml").write_text("name: d\nversion: '1'\n")
    with pytest.raises(PackError, match="cannot disable unknown rule"):
        load_pack(str(tmp_path / "c.yaml"))


def test_unknown_pack_name_lists_builtins():
    with pytest.raises(PackError, match="unknown rule pack 'nope'; built-in packs:"):
        load_packs("nope")


def test_missing_file_and_non_mapping():
    with pytest.raises(PackError, match="rule pack file not found"):
        load_packs("missing/pack.yaml")
    with pytest.raises(PackError, match="must be a mapping"):
        parse_pack("- just\n- a list\n", "list.yaml")


def test_block_scalar_regex_is_accepted():
    spec = parse_pack("name: b\nversion: '1'\nrules:\n  - id: r\n    kind: regex\n"
                      "    pattern: |-\n      \\bINV #\\d+\n")
    assert spec.rules[0].pattern == "\\bINV #\\d+"


def test_builtin_packs_load_strictly():
    names = builtin_names()
    assert {"core", "coding", "billing", "commerce", "cloud"} <= set(names)
    packs = load_packs()
    assert [p.name for p in packs] == names
    assert all(p.rules for p in packs)


def test_the_per_user_cache_keeps_only_the_most_recently_used_entries(tmp_path, monkeypatch):
    """Each engine or pack change writes new cache entries (a Hyperscan database is 10-20 MB):
    storing one drops all but the most recently used, and a load counts as a use."""
    import os

    from firewall.extraction import multimatch, packcache

    monkeypatch.setenv("FIREWALL_CACHE_DIR", str(tmp_path))
    folder = tmp_path / "hyperscan"
    for i in range(multimatch.KEEP_DATABASES + 3):
        multimatch._store(folder / f"{i:040d}.hsdb", b"database %d" % i)
        os.utime(folder / f"{i:040d}.hsdb", ns=(i * 10**9, i * 10**9))  # stored in order
    names = sorted(p.name for p in folder.glob("*.hsdb"))
    assert len(names) == multimatch.KEEP_DATABASES
    assert names[0] == f"{3:040d}.hsdb"  # the three oldest went
    packcache.used(folder / f"{3:040d}.hsdb")  # loaded now: the most recent
    multimatch._store(folder / ("x" * 40 + ".hsdb"), b"another")
    kept = {p.name for p in folder.glob("*.hsdb")}
    assert f"{3:040d}.hsdb" in kept and f"{4:040d}.hsdb" not in kept
    (folder / "notes.txt").write_text("not an entry")
    packcache.prune(folder, "*.hsdb", 1)
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt", "x" * 40 + ".hsdb"]

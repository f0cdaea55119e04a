"""The salience model: shipped as data, ranking what the agent used above a listing, validated
on load, fitted on recorded conversations, chosen on the command line and in the hooks."""

from __future__ import annotations

import io
import json

import pytest

from firewall.cli import main
from firewall.formats import parse_messages
from firewall.compaction.guard import Firewall
from firewall.compaction.plan import is_own_message
from firewall.integrations.hooks import run_hook
from firewall.compaction.ledger import Ledger, LedgerEntry
from firewall.compaction.salience import (DEFAULT_PATH, ENV, FEATURES, Salience, SalienceError, Term,
                               default_salience, load_salience, salience_from_env, span_context)


def call(name: str, call_id: str, **arguments) -> dict:
    return {"role": "assistant", "content": "",
            "tool_calls": [{"name": name, "arguments": arguments, "id": call_id}]}


def result(call_id: str, name: str, content: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def session(i: int) -> list[dict]:
    """A small coding session: a listing, a file read, an edit, and later calls that come back
    to some of what was shown (the opened file, a ticket id) and not to the rest."""
    files = [f"src/pkg{i}/mod_{j}.py" for j in range(12)]
    target = files[i % 12]
    return [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": f"Fix ticket BUG-{4100 + i} in the pkg{i} handler, please."},
        call("bash", "c1", command=f"ls src/pkg{i}"),
        result("c1", "bash", "\n".join(files)),
        call("read_file", "c2", file_path=target),
        result("c2", "read_file", f"def handler_{i}(x):\n    return x + {900 + i}  # v1.{i}.3\n"
                                  f"TOKEN = 'tk_{i}a9f3c21'\n"),
        call("edit_file", "c3", file_path=target, old_string=f"x + {900 + i}",
             new_string=f"x + {901 + i}"),
        result("c3", "edit_file", "ok"),
        {"role": "assistant", "content": f"Edited {target}; running the tests for BUG-{4100 + i}."},
        call("bash", "c4", command=f"pytest {target} -k handler_{i}"),
        result("c4", "bash", "1 passed"),
        call("read_file", "c5", file_path=target),
        result("c5", "read_file", "ok"),
        call("bash", "c6", command=f"ls src/pkg{i} && git commit -m 'BUG-{4100 + i}' {target}"),
        result("c6", "bash", "done"),
    ]


@pytest.fixture
def logs(tmp_path):
    path = tmp_path / "sessions.jsonl"
    path.write_text("".join(json.dumps({"id": f"s{i}", "messages": session(i)}) + "\n"
                            for i in range(8)), encoding="utf-8")
    return path


def pinned(fw: Firewall, messages: list[dict]) -> tuple[Ledger, list]:
    conversation = parse_messages(messages, id="c")
    turns = conversation.turns[1:8]
    ledger = Ledger.new("c")
    fw._extract(ledger, turns, offset=1, seen=None)
    return ledger, [t for t in turns if not is_own_message(t)]


# ── the shipped default ─────────────────────────────────────────────────────────────────────

def test_the_shipped_model_ranks_what_the_agent_used_above_the_listing_it_came_from():
    """The file the agent opened and the ticket the user typed rank above the eleven files of
    the same listing it did not open; the shipped model is read from the package."""
    fw = Firewall()
    hand = default_salience()
    assert hand.source == str(DEFAULT_PATH) and "built-in" in hand.describe()
    for i in range(4):
        ledger, turns = pinned(fw, session(i))
        key = hand.key(ledger.entries, turns)
        by_value = {e.value: e for e in ledger.entries}
        target = f"src/pkg{i}/mod_{i % 12}.py"
        siblings = [v for v in by_value if v.startswith(f"src/pkg{i}/mod_") and v != target]
        assert len(siblings) == 11
        unopened = max(key(by_value[v]) for v in siblings)
        assert key(by_value[target]) > unopened
        assert key(by_value[f"BUG-{4100 + i}"]) > unopened


def test_a_firewall_ranks_with_its_salience_and_defaults_to_the_shipped_one(tmp_path):
    assert Firewall().salience is default_salience()
    # a model that only counts characters keeps the shortest values when the budget binds
    short = Salience((Term("log_length", weight=-5.0),), "logistic", 0.0, "short")
    ledger_default, ledger_short = Ledger.new("a"), Ledger.new("b")
    turns = parse_messages(session(3), id="c").turns[1:8]
    Firewall().pin(ledger_default, turns, offset=1, budget=60)
    Firewall(salience=short).pin(ledger_short, turns, offset=1, budget=60)
    assert ledger_default.values() != ledger_short.values()
    path = tmp_path / "short.json"
    path.write_text(short.dumps(), encoding="utf-8")
    assert Firewall(salience=str(path)).salience.terms == short.terms


# ── the file ────────────────────────────────────────────────────────────────────────────────

def test_a_model_round_trips_through_its_file(tmp_path):
    model = Salience((Term("used_in_call", weight=1.5), Term("count", power=0.5),
                      Term("tier", base=2.0)), "logistic", -2.25, "mine",
                     about={"rows": 10})
    path = tmp_path / "m.json"
    path.write_text(model.dumps(), encoding="utf-8")
    back = Salience.load(path)
    assert (back.terms, back.link, back.bias, back.name, back.about) == \
        (model.terms, model.link, model.bias, model.name, model.about)
    assert back.source == str(path)


@pytest.mark.parametrize("change, message", [
    ({"format": "other 2"}, "format must be 'literal-firewall salience 1'"),
    ({"link": "softmax"}, "link must be one of odds, logistic"),
    ({"bias": "high"}, "bias must be a finite number"),
    ({"terms": []}, "terms must be a non-empty list"),
    ({"terms": [{"feature": "moon_phase", "weight": 1}]}, "terms[0]: feature must be one of"),
    ({"terms": [{"feature": "tier", "weight": 1, "base": 2}]},
     "terms[0]: needs exactly one of base, power, weight"),
    ({"terms": [{"feature": "tier", "base": 0}]}, "terms[0]: base must be a finite number above 0"),
    ({"terms": [{"feature": "tier", "weight": float("nan")}]},
     "terms[0]: weight must be a finite number"),
    ({"colour": "red"}, "unknown field(s): colour"),
])
def test_a_bad_model_file_is_refused_naming_the_file_and_field(tmp_path, change, message):
    data = json.loads(DEFAULT_PATH.read_text(encoding="utf-8")) | change
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(SalienceError) as info:
        Salience.load(path)
    assert str(info.value).startswith(f"{path}: ") and message in str(info.value)


def test_a_missing_or_unreadable_model_file_is_a_clear_error(tmp_path):
    with pytest.raises(SalienceError, match="cannot read salience file"):
        load_salience(tmp_path / "none.json")
    (tmp_path / "x.json").write_text("{oops", encoding="utf-8")
    with pytest.raises(SalienceError, match="x.json: not JSON"):
        load_salience(tmp_path / "x.json")


# ── features ────────────────────────────────────────────────────────────────────────────────

def test_features_tell_an_address_from_text_the_agent_wrote():
    fw = Firewall()
    conversation = parse_messages(session(1), id="c")
    ledger = Ledger.new("c")
    fw._extract(ledger, conversation.turns[1:8], offset=1, seen=None)
    context = span_context(ledger.entries, conversation.turns[1:8])
    by_value = {e.value: e for e in ledger.entries}
    target = "src/pkg1/mod_1.py"
    assert FEATURES["in_address"][0](by_value[target], context)
    assert not FEATURES["in_written"][0](by_value[target], context)
    sibling = by_value["src/pkg1/mod_7.py"]
    assert not FEATURES["in_address"][0](sibling, context)
    assert FEATURES["log_listed"][0](sibling, context) > 0  # one of a listing of 12
    assert FEATURES["age"][0](sibling, context) > 0


def test_features_tell_what_the_agent_did_with_a_value_since_it_was_shown():
    """Typed by the user and left alone; one of a listing the agent opened other entries of;
    used only inside a file body the agent wrote, never to name something."""
    fw = Firewall()
    ledger, turns = pinned(fw, session(1))
    context = span_context(ledger.entries, turns)
    by_value = {e.value: e for e in ledger.entries}

    def feature(name: str, value: str) -> float:
        return FEATURES[name][0](by_value[value], context)

    assert feature("typed_only", "BUG-4101")  # the user's ticket, not used yet
    assert not feature("typed_only", "pkg1")  # the user's, and the agent ran `ls src/pkg1`
    assert feature("listing_worked", "src/pkg1/mod_7.py")  # its sibling mod_1.py was opened
    assert not feature("listing_worked", "src/pkg1/mod_1.py")  # opened itself
    assert feature("log_siblings_used", "src/pkg1/mod_7.py") > 0
    written = parse_messages([
        {"role": "user", "content": "Raise ERR-4410 from src/app/main.py when the key is bad."},
        call("Write", "w1", file_path="src/app/main.py", content="raise Bad('ERR-4410')\n"),
    ]).turns
    def extracted(turns):
        entries = Ledger.new("w")
        fw._extract(entries, turns, offset=0, seen=None)
        return {e.value: e for e in entries.entries}, span_context(entries.entries, turns)

    by_value, context = extracted(written)
    assert {"ERR-4410", "src/app/main.py"} <= set(by_value)
    # the user typed ERR-4410, so it is not written-only; a tool's value re-typed in a body is
    assert not FEATURES["written_only"][0](by_value["src/app/main.py"], context)
    shown = parse_messages([
        {"role": "tool", "tool_call_id": "r", "name": "Read", "content": "code ERR-4410 at src/x.py"},
        call("Write", "w1", file_path="src/app/main.py", content="raise Bad('ERR-4410')\n"),
    ]).turns
    by_value, context = extracted(shown)
    assert FEATURES["written_only"][0](by_value["ERR-4410"], context)
    assert not FEATURES["written_only"][0](by_value["src/x.py"], context)  # never used at all


def test_a_logistic_score_is_a_probability_that_follows_its_weights():
    entry = LedgerEntry(value="BUG-4101", rule="p/x", kind="x", role="user", first_seen=1,
                        last_seen=1)
    context = span_context([entry], [])
    up = Salience((Term("role_user", weight=3.0),), "logistic", -1.0)
    down = Salience((Term("role_user", weight=-3.0),), "logistic", -1.0)
    assert 0.5 < up.score(entry, context) < 1 and 0 < down.score(entry, context) < 0.5


# ── fitting ─────────────────────────────────────────────────────────────────────────────────

def test_fit_learns_that_values_the_agent_came_back_to_are_the_ones_it_uses(logs):
    pytest.importorskip("numpy")
    from firewall.evaluation.salience_fit import collect_files, fit, heaviest, judge_all

    samples = collect_files([logs])
    assert samples and any(any(s.labels) for s in samples)
    assert any(not all(s.labels) for s in samples)
    model = fit(samples, ("in_address", "log_listed", "role_user"), name="t")
    weights = {t.feature: t.weight for t in model.terms}
    assert weights["in_address"] > 0
    assert heaviest(model, 1)[0][0] in weights
    score = judge_all(model, samples)
    assert score.n["strict"] > 0 and score.recall("strict") is not None


def test_fit_refuses_logs_without_both_labels(tmp_path):
    pytest.importorskip("numpy")
    from firewall.errors import FirewallError
    from firewall.evaluation.salience_fit import fit

    with pytest.raises(FirewallError, match="both used and unused"):
        fit([], ("tier",))


# ── the command line and the hooks ──────────────────────────────────────────────────────────

def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_fits_shows_and_evaluates_with_a_salience_file(capsys, logs, tmp_path):
    pytest.importorskip("numpy")
    out_path = tmp_path / "fitted.json"
    code, out, _ = run(capsys, "salience", "fit", str(logs), "--out", str(out_path),
                       "--features", "in_address,log_listed,role_user", "--compare")
    assert code == 0 and f"wrote {out_path}" in out and "weighs most" in out
    assert "on these logs, hand-set (built-in)" in out and "addressing" in out
    model = Salience.load(out_path)
    assert model.link == "logistic" and [t.feature for t in model.terms] == \
        ["in_address", "log_listed", "role_user"]
    code, out, _ = run(capsys, "salience", "show", str(out_path))
    assert code == 0 and "in_address" in out and "weight +" in out
    code, out, _ = run(capsys, "eval", str(logs), "--salience", str(out_path))
    assert code == 0 and f"salience fitted ({out_path})" in out
    code, out, _ = run(capsys, "eval", str(logs))
    assert code == 0 and "salience hand-set (built-in)" in out


def test_cli_refuses_a_bad_salience_file_before_doing_any_work(capsys, logs, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "literal-firewall salience 1", "terms": []}', encoding="utf-8")
    for command in (["eval", str(logs)], ["compact", str(logs), "--no-audit"],
                    ["replay", str(logs), "--window", "2000"]):
        code, _, err = run(capsys, *command, "--salience", str(bad))
        assert code == 2 and f"firewall: {bad}: terms must be a non-empty list" in err


def test_the_hooks_take_their_salience_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV, raising=False)
    assert salience_from_env() is default_salience()
    good = tmp_path / "s.json"
    good.write_text(Salience((Term("tier", base=3.0),), name="env").dumps(), encoding="utf-8")
    monkeypatch.setenv(ENV, str(good))
    assert salience_from_env().name == "env"
    # a bad file makes the hook skip, saying why (hooks fail open), never a crash
    monkeypatch.setenv(ENV, str(tmp_path / "missing.json"))
    monkeypatch.setenv("FIREWALL_STATE_DIR", str(tmp_path / "state"))
    stderr = io.StringIO()
    event = {"hook_event_name": "PreCompact", "session_id": "s1",
             "transcript_path": str(tmp_path / "t.jsonl"), "trigger": "auto"}
    code = run_hook("pre-compact", stdin=io.StringIO(json.dumps(event)),
                    stdout=io.StringIO(), stderr=stderr)
    assert code == 0 and "cannot read salience file" in stderr.getvalue()


def test_search_fits_the_built_in_form_on_the_recall_it_is_judged_by(capsys, logs, tmp_path):
    from firewall.evaluation.salience_fit import collect_files, judge_all, objective, search

    samples = collect_files([logs], budget=40)  # a budget that binds on these short sessions
    found = search(samples, rounds=1)
    assert found.link == "odds" and all(t.weight is None for t in found.terms)
    assert objective(found, samples) >= objective(default_salience(), samples)
    assert judge_all(found, samples).n["strict"] > 0
    out_path = tmp_path / "searched.json"
    code, out, _ = run(capsys, "salience", "fit", str(logs), "--out", str(out_path),
                       "--method", "search", "--budget", "40")
    assert code == 0 and Salience.load(out_path).about["method"] == "search"

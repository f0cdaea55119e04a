"""`firewall replay`: recorded conversations driven as a harness would, compacting at a
watermark."""

import json
import os
from pathlib import Path

import pytest

from firewall.cli import main
from firewall.evaluation.gold import gold_set, occurs
from firewall.formats import parse_messages
from firewall.compaction.guard import Firewall
from firewall.evaluation.replay import SENSITIVE, Totals, format_totals, redact, replay_conversation
from firewall.evaluation.replaylog import ReplayConversation
from firewall.errors import SummarizerError
from firewall.summarizers.scripted import ScriptedSummarizer
from firewall.compaction.trigger import BACKING_OFF, SKIPPED, Trigger, live_tokens

AWS_ID = "AKIA" + "KIEM6OJW25SI6WOR"  # not the documentation key: that one is allowlisted
PADDING = " ".join(f"line {i} of the build log: compiling module number {i}." for i in range(40))


def session(rounds: int = 6, secret: bool = False):
    """A coding session: each round looks up a ticket, reads its file, then a later round's
    tool call passes the earlier ticket and path again (the load-bearing literals)."""
    messages = [{"role": "system", "content": "You fix bugs in the repository."},
                {"role": "user", "content": "Fix the tickets TCK-1000 to TCK-1005."
                                            + (f" The deploy key is {AWS_ID}." if secret else "")}]
    for r in range(rounds):
        ticket, path = f"TCK-{1000 + r}", f"src/pkg/module_{r}.py"
        earlier = f"TCK-{1000 + r - 2}" if r >= 2 else ticket
        args = {"ticket": ticket, "again": earlier, "path": f"src/pkg/module_{max(r - 2, 0)}.py"}
        if secret and r == rounds - 1:
            args["key"] = AWS_ID
        messages += [
            {"role": "assistant", "content": f"Looking at {ticket}.",
             "tool_calls": [{"id": f"c{r}", "name": "lookup", "arguments": args}]},
            {"role": "tool", "tool_call_id": f"c{r}", "name": "lookup",
             "content": f"{ticket} is about {path}, line {40 + r}.\n{PADDING}"},
            {"role": "assistant", "content": f"{ticket} needs a change in {path}."},
        ]
    return messages


def conversation(**kw):
    return parse_messages(session(**kw), id="s1")


@pytest.fixture(scope="module")
def fw():
    return Firewall(None, keep_last=2)


def window_for(messages, share: float) -> int:
    """A window whose 0.8 watermark is ``share`` of the whole recording's tokens."""
    return int(live_tokens(parse_messages(messages).turns) * share / 0.8)


def test_replay_compacts_at_the_watermark_and_recompacts_on_the_cumulative_ledger(fw):
    conv = conversation()
    trigger = Trigger(window=window_for(session(), 0.4))
    contexts = []
    replay = replay_conversation(conv, firewall=fw, trigger=trigger, keep_last=2,
                                 contexts=contexts.append)
    assert len(replay.live_tokens) == len(conv.turns)
    assert len(replay.compactions) >= 2 and all(c.compacted for c in replay.compactions)
    for c, line in zip(replay.compactions, contexts):
        assert c.tokens_before > trigger.threshold >= c.tokens_after
        assert replay.live_tokens[c.at_message] == c.tokens_after
        assert line["k"] == c.k and line["compaction"] == c.compaction
        assert set(line) == {"id", "compaction", "k", "context", "ledger", "ledger_tokens",
                             "span_tokens"}
        context = parse_messages(line["context"]).turns
        assert context[0].text == "You fix bugs in the repository."  # the system prompt first
        assert context[1].text.startswith("Summary of the earlier conversation (turns 1-")
        # k is the last recorded message the compaction covered: the next one is kept
        kept = [t.text for t in context[3:]]
        assert conv.turns[c.k + 1].text in kept and conv.turns[c.k].text not in kept
    # the second compaction summarised the first summary: one summary, one ledger block
    assert sum(t.text.startswith("Summary of") for t in
               parse_messages(contexts[-1]["context"]).turns) == 1
    assert set(contexts[0]["ledger"]) <= set(contexts[-1]["ledger"])  # cumulative


def test_recall_is_measured_with_evals_gold_in_the_composed_context_and_the_ledger(fw):
    conv = conversation()
    contexts = []
    replay = replay_conversation(conv, firewall=fw, trigger=Trigger(
        window=window_for(session(), 0.4)), keep_last=2, contexts=contexts.append)
    for c, line in zip(replay.compactions, contexts):
        gold = [g for g in gold_set(conv, c.k) if g.strict]
        assert c.gold == len(gold) > 0
        composed = "\n".join(t.text + json.dumps([x.arguments for x in t.tool_calls])
                             for t in parse_messages(line["context"]).turns[1:])
        in_ledger = [g for g in gold if any(occurs(g.literal, v) for v in line["ledger"])]
        assert c.recall_context == sum(occurs(g.literal, composed) for g in gold) / len(gold)
        assert c.recall_ledger == len(in_ledger) / len(gold)
        ids = [g for g in gold if g.id_like]
        assert c.gold_id_like == len(ids) and c.recall_context_id_like == 1.0
        assert c.ledger_tokens > 0 and c.span_tokens > c.ledger_tokens


def test_a_gold_token_lost_only_for_its_end_punctuation_is_marked_bare(fw, capsys):
    # the user's "L031:" is pinned as L031; a later command's free text has the token "L031:"
    messages = session()
    messages[1]["content"] += " The linter says L031: avoid aliases."
    messages += [{"role": "assistant", "content": "Checking the lint log.", "tool_calls": [
        {"id": "lint", "name": "bash", "arguments": {"command": "grep -c 'L031:' lint.log"}}]},
        {"role": "tool", "tool_call_id": "lint", "name": "bash", "content": "0"}]
    replay = replay_conversation(parse_messages(messages, id="s1"), firewall=fw,
                                 trigger=Trigger(window=window_for(messages, 0.4)), keep_last=2,
                                 summarizer=ScriptedSummarizer(["Work went on."]))
    first = replay.compactions[0]
    lost = {f.value: f for f in first.losses}
    assert "L031:" in lost and lost["L031:"].bare and first.recall_context_id_like < 1.0
    assert all(not f.bare for v, f in lost.items() if v != "L031:")
    totals = Totals()
    totals.add(replay)
    assert totals.lost_id_like_bare >= 1
    assert "held without the punctuation" in format_totals(totals, Trigger(window=1000))


def test_under_the_watermark_nothing_is_compacted(fw):
    replay = replay_conversation(conversation(), firewall=fw, trigger=Trigger(window=10**6))
    assert replay.compactions == [] and replay.live_tokens == sorted(replay.live_tokens)


def test_a_tail_near_the_watermark_does_not_make_the_replay_thrash(fw):
    """With a window this small the kept tail plus the summary and ledger sit near the
    watermark: the replay used to compact at nearly every message, growing the context as
    often as not, with k going back and forth. Now it compacts only when enough is fresh,
    counts the skips, never grows the context, and k never goes back."""
    messages = session(rounds=8)
    conv = parse_messages(messages, id="tight")
    contexts = []
    replay = replay_conversation(conv, firewall=fw, trigger=Trigger(
        window=window_for(messages, 0.2)), keep_last=2, contexts=contexts.append)
    cs = replay.compactions
    ks = [c.k for c in cs]
    assert cs and ks == sorted(ks) and [line["k"] for line in contexts] == ks
    for c, line in zip(cs, contexts):
        assert c.tokens_after < c.tokens_before if c.compacted else \
            c.tokens_after == c.tokens_before
        assert live_tokens(parse_messages(line["context"]).turns) <= c.tokens_before
    assert all(b.at_message - a.at_message > 1 for a, b in zip(cs, cs[1:]))
    assert replay.skipped > 0  # the trigger fired at those messages: said, not hidden


def test_the_command_counts_the_skipped_compactions(fw, tmp_path, capsys):
    messages = session(rounds=8)
    data = tmp_path / "tight.json"
    data.write_text(json.dumps({"id": "tight", "messages": messages}), encoding="utf-8")
    window = window_for(messages, 0.2)
    replay = replay_conversation(parse_messages(messages, id="tight"), firewall=fw,
                                 trigger=Trigger(window=window), keep_last=2)
    assert main(["replay", str(data), "--window", str(window), "--keep-last", "2"]) == 0
    out = capsys.readouterr().out
    assert f"compactions skipped ({SKIPPED}, or {BACKING_OFF}): {replay.skipped}\n" in out
    assert replay.skipped


def short_session(rounds: int):
    """The session's shape with short tool results: a small window's first span is shorter
    than a summary of a few hundred tokens."""
    messages = [{"role": "system", "content": "You fix bugs in the repository."},
                {"role": "user", "content": f"Fix the tickets TCK-1000 to TCK-{1000 + rounds}."}]
    for r in range(rounds):
        ticket, path = f"TCK-{1000 + r}", f"src/pkg/module_{r}.py"
        messages += [
            {"role": "assistant", "content": f"Looking at {ticket}.",
             "tool_calls": [{"id": f"c{r}", "name": "lookup", "arguments": {"ticket": ticket}}]},
            {"role": "tool", "tool_call_id": f"c{r}", "name": "lookup",
             "content": f"{ticket} is about {path}, line {40 + r}: the parser drops the last "
                        f"token of a quoted string."},
            {"role": "assistant", "content": f"{ticket} needs a change in {path}."}]
    return messages


def test_a_summary_longer_than_its_span_is_not_applied_nor_asked_for_at_every_message(fw):
    """The first compaction's summary (and ledger) would be larger than its span: it fails
    closed, the context as it was; the following messages do not ask the summarizer again
    until a span could hold what it cost (never, in a window this small): skipped instead."""
    long_summary = "Tickets from TCK-1000. " + " ".join(
        f"Note {i}: the parser was looked at." for i in range(25))
    summarizer = ScriptedSummarizer([long_summary])
    replay = replay_conversation(parse_messages(short_session(10), id="short"), firewall=fw,
                                 trigger=Trigger(window=400), keep_last=2, summarizer=summarizer)
    assert all(c.tokens_after <= c.tokens_before for c in replay.compactions)
    assert [c.compacted for c in replay.compactions] == [False]
    assert [r.attempt for r in summarizer.calls] == list(range(1, len(summarizer.calls) + 1))
    assert replay.skipped > 0


def test_a_failed_compaction_is_recorded_and_k_stays_in_order():
    """A summarizer that always fails: each compaction fails closed (recorded as such, the
    context unchanged), and k follows the span it would have covered, never going back."""
    conv = conversation(rounds=8)
    fw = Firewall(None, keep_last=2, max_retries=0)
    replay = replay_conversation(conv, firewall=fw, trigger=Trigger(
        window=window_for(session(rounds=8), 0.3)), keep_last=2,
        summarizer=ScriptedSummarizer([SummarizerError("offline")]))
    cs = replay.compactions
    assert cs and not any(c.compacted for c in cs)
    assert all(c.tokens_after == c.tokens_before and c.ledger_tokens == 0 for c in cs)
    ks = [c.k for c in cs]
    assert ks == sorted(ks) and all(c.k < c.at_message for c in cs)


def test_preemptive_compacts_before_the_assistant_message_that_would_cross(fw):
    conv = conversation()
    window = window_for(session(), 0.4)
    # a third of the threshold: with half, the kept tail plus the output alone cross it again
    expected = int(window * 0.8) // 3
    trigger = Trigger(window=window, policy="preemptive", expected_output=expected)
    contexts = []
    replay = replay_conversation(conv, firewall=fw, trigger=trigger, keep_last=2,
                                 contexts=contexts.append)
    reactive = replay_conversation(conv, firewall=fw, trigger=Trigger(window=window),
                                   keep_last=2)
    first = replay.compactions[0]
    assert conv.turns[first.at_message].role == "assistant"
    assert first.tokens_before <= trigger.threshold < first.tokens_before + expected
    assert first.at_message < reactive.compactions[0].at_message  # earlier than reactive
    # the message whose model call it preceded is not in the composed context yet
    texts = [t.text for t in parse_messages(contexts[0]["context"]).turns]
    assert conv.turns[first.at_message].text not in texts
    assert first.trigger == "preemptive"


def test_a_secret_is_never_written_in_clear(fw, tmp_path, capsys):
    data = tmp_path / "secret.jsonl"
    data.write_text(json.dumps({"id": "s1", "messages": session(secret=True)}) + "\n",
                    encoding="utf-8")
    out = tmp_path / "contexts.jsonl"
    window = window_for(session(secret=True), 0.4)
    code = main(["replay", str(data), "--window", str(window), "--keep-last", "2", "--json",
                 "--budget", "0", "--contexts", str(out)])  # budget 0: the secret is lost
    printed = capsys.readouterr().out
    assert code == 0
    assert AWS_ID not in printed and AWS_ID not in out.read_text(encoding="utf-8")
    assert ReplayConversation.model_validate_json(printed.splitlines()[0]).compactions
    assert SENSITIVE in out.read_text(encoding="utf-8")  # it was there, and redacted
    # a summary that keeps nothing, no ledger: the secret is lost, and named [sensitive]
    forgetful = Firewall(None, keep_last=2, budget_tokens=0)
    replay = replay_conversation(parse_messages(session(secret=True), id="s1"),
                                 firewall=forgetful, trigger=Trigger(window=window),
                                 summarizer=ScriptedSummarizer(["Work went on."]), keep_last=2)
    losses = [l.value for c in replay.compactions for l in c.losses]
    assert SENSITIVE in losses and AWS_ID not in replay.model_dump_json()


def test_redact_reaches_every_string_of_a_message():
    message = {"role": "user", "content": [{"type": "text", "text": f"key {AWS_ID}."}],
               AWS_ID: [AWS_ID + "x"]}
    assert AWS_ID not in json.dumps(redact(message, {AWS_ID}))
    assert redact(message, set()) is message


def test_the_command_prints_a_table_with_totals_or_json_lines(tmp_path, capsys):
    data = tmp_path / "sessions.jsonl"
    data.write_text("".join(json.dumps({"id": f"s{i}", "messages": session()}) + "\n"
                            for i in range(2)) + "{not json\n", encoding="utf-8")
    window = str(window_for(session(), 0.4))
    assert main(["replay", str(data), "--window", window, "--keep-last", "2"]) == 1  # bad line
    captured = capsys.readouterr()
    assert "2 conversation(s)" in captured.out and "composed-context ID-like recall" in \
        captured.out and "ledger" in captured.out
    assert f"{data}:3" in captured.err
    assert main(["replay", str(data), "--window", window, "--keep-last", "2", "--json"]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [ReplayConversation.model_validate_json(x).id for x in lines] == ["s0", "s1"]


@pytest.mark.parametrize("argv", [["--window", "0"], ["--window", "100", "--watermark", "1.5"],
                                  ["--window", "100", "--trigger", "eager"], []])
def test_bad_options_are_usage_errors(tmp_path, argv, capsys):
    data = tmp_path / "s.jsonl"
    data.write_text(json.dumps({"id": "s", "messages": session(1)}) + "\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_:
        main(["replay", str(data), *argv])
    assert exit_.value.code == 2


def test_each_compaction_counts_the_recorded_calls_that_fetch_its_span_again(fw):
    """The agent reads m_0.py early and again at the end: the compaction the second read
    follows counts it, once."""
    messages = [{"role": "system", "content": "You fix bugs."},
                {"role": "user", "content": "Fix the parser."}]
    for r, name in enumerate([0, 1, 2, 3, 4, 5, 0]):
        messages += [
            {"role": "assistant", "content": "Reading.", "tool_calls": [
                {"id": f"c{r}", "name": "read_file", "arguments": {"path": f"src/m_{name}.py"}}]},
            {"role": "tool", "tool_call_id": f"c{r}", "name": "read_file", "content": PADDING}]
    conv = parse_messages(messages, id="reads")
    replay = replay_conversation(conv, firewall=fw, trigger=Trigger(
        window=window_for(messages, 0.35)), keep_last=2)
    done = [c for c in replay.compactions if c.compacted]
    assert len(done) >= 2
    last_read = len(conv.turns) - 2  # the call reading m_0.py again
    before = [c for c in done if c.k < last_read][-1]
    assert before.rereads == 1
    assert sum(c.rereads for c in done) == 1


def claude_code_session(path, reads: int) -> None:
    """A Claude Code session file: the task, then ``reads`` Read calls of long files, each
    result in a user entry, one JSON entry per line as Claude Code writes them."""
    def entry(n, kind, content):
        return json.dumps({"parentUuid": None if n == 0 else f"u{n - 1}", "isSidechain": False,
                           "sessionId": "s1", "uuid": f"u{n}", "type": kind,
                           "message": {"role": kind, "content": content}})

    lines = [entry(0, "user", "Refunds of INV-2025-08-44719 go to the wrong charge; fix it.")]
    for r in range(reads):
        path_r = f"/home/dev/shop/src/billing/module_{r}.py"
        body = "".join(f"{i + 1}\tdef step_{r}_{i}(charge): return charge  # settle the charge, then log it\n"
                       for i in range(12))
        lines += [entry(len(lines), "assistant", [{"type": "tool_use", "id": f"t{r}",
                                                   "name": "Read",
                                                   "input": {"file_path": path_r}}]),
                  entry(len(lines) + 1, "user", [{"type": "tool_result", "tool_use_id": f"t{r}",
                                                  "content": body}])]
    lines.append(entry(len(lines), "assistant", [{"type": "tool_use", "id": "again",
                                                  "name": "Read", "input": {
                                                      "file_path": "/home/dev/shop/src/billing/"
                                                                   "module_0.py"}}]))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_a_claude_code_session_file_replays_like_any_recording(tmp_path, capsys):
    path = tmp_path / "session.jsonl"
    claude_code_session(path, reads=8)
    contexts = tmp_path / "contexts.jsonl"
    assert main(["replay", str(path), "--window", "2500", "--keep-last", "2",
                 "--contexts", str(contexts)]) == 0
    out = capsys.readouterr().out
    assert "1 conversation(s), 1 compaction(s) (0 failed closed)" in out
    (line,) = [json.loads(x) for x in contexts.read_text(encoding="utf-8").splitlines()]
    composed = parse_messages(line["context"])
    assert composed.format == "anthropic"  # the session's messages, in the Messages API shape
    # the file the agent reads again after the compaction is in the composed context
    assert "/home/dev/shop/src/billing/module_0.py" in line["ledger"]
    assert "composed-context ID-like recall 100.0 % of 1 gold" in out


# ── the Claude Code hooks at each replayed compaction (issue 31) ─────────────────────────────

REPLAYED = Path(__file__).parent / "fixtures" / "transcripts" / "claude_code_replay.jsonl"


def _kept(recall, n):
    return round((recall or 0) * (n or 0))


def test_replaying_a_claude_code_session_drives_the_hooks_at_each_compaction(capsys):
    from firewall.formats import read_conversations
    from firewall.evaluation.replay import table_row

    (conv,) = read_conversations(REPLAYED)
    # a budget that must evict: the ledger loses gold, so the comparison is not 100 % = 100 %
    fw = Firewall(None, budget_tokens=40, keep_last=2)
    trigger = Trigger(window=2000)
    replay = replay_conversation(conv, firewall=fw, trigger=trigger, keep_last=2)
    done = [c for c in replay.compactions if c.compacted]
    assert len(done) >= 3 and any(c.lost for c in done)
    ledger = hooks = ledger_id = hooks_id = 0
    for c in done:  # the hooks' figure beside the ledger's, at every compaction
        assert c.recall_hooks is not None and c.recall_hooks_id_like is not None
        assert c.hooks_tokens > 0
        # summary + the hooks' block hold at least what summary + ledger hold
        assert _kept(c.recall_hooks, c.gold) >= c.gold - c.lost
        assert _kept(c.recall_hooks_id_like, c.gold_id_like) >= \
            _kept(c.recall_context_id_like, c.gold_id_like)
        ledger, hooks = ledger + c.gold - c.lost, hooks + _kept(c.recall_hooks, c.gold)
        ledger_id += _kept(c.recall_context_id_like, c.gold_id_like)
        hooks_id += _kept(c.recall_hooks_id_like, c.gold_id_like)
    assert hooks >= ledger and hooks_id >= ledger_id
    totals = Totals()
    totals.add(replay)
    text = format_totals(totals, trigger)
    assert f"through the hooks ({len(done)} compaction(s)" in text
    assert "0 compaction(s) where the hooks hold less gold (ID-like or strict)" in text
    assert "+ hooks' block: ctx ID" in table_row(replay)
    # JSON lines carry the figures; a recording that is not a session file has none
    assert ReplayConversation.model_validate_json(replay.model_dump_json()) == replay
    other = replay_conversation(conversation(), firewall=fw, trigger=Trigger(
        window=window_for(session(), 0.4)), keep_last=2)
    assert other.compactions and all(c.hooks_tokens is None for c in other.compactions)
    assert "+ hooks' block" not in table_row(other)


def test_the_replayed_session_file_is_what_claude_code_would_have_written(tmp_path):
    from firewall.formats import read_conversations
    from firewall.formats.transcripts import read_transcript
    from firewall.evaluation.hook_eval import ReplayedSession

    (conv,) = read_conversations(REPLAYED)
    assert conv.meta["boundaries"] == [18]  # the session's own compaction
    session = ReplayedSession.of(conv, Firewall(None))
    first = session.compacted(9, "First summary: INC-40417 traced.", last=12)
    second = session.compacted(25, "Second summary.", last=27)
    path = tmp_path / "replayed.jsonl"
    path.write_bytes(session.written)
    chunk = read_transcript(path)
    # the replay's two compactions replace the session's own (its summary stays a message)
    assert chunk.boundaries == [10, 27] and not chunk.bad
    assert [chunk.turns[b].text for b in chunk.boundaries] == \
        ["First summary: INC-40417 traced.", "Second summary."]
    assert all(chunk.turns[b].role == "assistant" for b in chunk.boundaries)
    recorded = [t for i, t in enumerate(chunk.turns) if i not in chunk.boundaries]
    assert [t.text for t in recorded] == [t.text for t in conv.turns[:28]]
    assert [t.tool_calls for t in recorded] == [t.tool_calls for t in conv.turns[:28]]
    # what the agent has after each: the summary, then the block of the values it lacks
    for (text, tokens, block), summary in ((first, "First summary"), (second, "Second")):
        assert text.startswith(summary) and block in text and tokens > 0
        assert block.startswith("<<<ledger ")
    assert "INC-40417" not in first[2].split("\n", 2)[2]  # the summary holds it
    session.close()
    assert not os.path.exists(session._dir.name)
    assert ReplayedSession.of(conversation(), Firewall(None)) is None


def test_gold_the_context_lost_is_one_recall_call_away_when_archived(capsys):
    tight = Firewall(None, keep_last=1, budget_tokens=1)  # the block holds next to nothing
    conv = conversation()
    replay = replay_conversation(conv, firewall=tight, trigger=Trigger(
        window=window_for(session(), 0.4)), keep_last=1,
        summarizer=ScriptedSummarizer(["Work went on."] * 20))
    cs = [c for c in replay.compactions if c.compacted]
    assert cs and sum(c.one_call_id_like for c in cs) > 0
    for c in cs:
        lost_id = [f for f in c.losses if len(f.value) >= 4 and any(
            ch.isdigit() or ch in "/@" for ch in f.value)]
        assert c.one_call_id_like == sum(f.archived for f in lost_id)
        # what the archive holds was in a compacted span: the recording before k has it
        for f in c.losses:
            if f.archived:
                assert any(occurs(f.value, t.text) for t in conv.turns[:c.k + 1])
    totals = Totals()
    totals.add(replay)
    text = format_totals(totals, Trigger(window=window_for(session(), 0.4)))
    assert "one recall call away" in text and totals.one_call_id_like > 0


def test_one_call_away_counts_the_tokens_the_token_tier_swept_as_eval_does():
    """A token no rule extracts (a range, ``35-90``) that a compacted span held and a later call
    passes is one call away through the token tier (counted apart), and lost with it off."""
    from firewall.audit.archive import ArchiveLimits

    messages = session()
    tool_results = 0
    for m in messages:
        if m["role"] == "tool":
            m["content"] += f" pages {tool_results + 3}5-90 done"
            tool_results += 1
        if m.get("tool_calls") and tool_results >= 2:  # passes the token of two rounds before
            m["tool_calls"][0]["arguments"]["pages"] = f"{tool_results + 1}5-90"
    runs = {}
    for tokens in (True, False):
        tight = Firewall(None, keep_last=1, budget_tokens=1,
                         archive=ArchiveLimits(tokens=tokens))
        replay = replay_conversation(
            parse_messages(messages, id="s1"), firewall=tight,
            trigger=Trigger(window=window_for(messages, 0.4)), keep_last=1,
            summarizer=ScriptedSummarizer(["Work went on."] * 20))
        runs[tokens] = [c for c in replay.compactions if c.compacted]
    on, off = runs[True], runs[False]
    assert on and len(on) == len(off)
    for with_tier, without in zip(on, off):
        swept = [f.value for f in with_tier.losses if f.archived and f.value.endswith("5-90")]
        assert swept and with_tier.one_call_token_id_like == len(swept)
        assert with_tier.one_call_id_like == without.one_call_id_like + len(swept)
        assert without.one_call_token_id_like == 0
        assert not any(f.archived for f in without.losses if f.value.endswith("5-90"))
    totals = Totals()
    for c in on:
        totals.add(ReplayConversation(id="s1", source="", messages=1, window=1, watermark=0.8,
                                      live_tokens=[], compactions=[c]))
    assert "of which held by a swept token only, the token tier" in format_totals(
        totals, Trigger(window=window_for(messages, 0.4)))


def test_the_table_writes_a_conversation_id_inert(tmp_path, capsys):
    """The id comes from the input: one holding terminal escapes drove the terminal from the
    replay's table (``audit list`` and ``recall`` escape it)."""
    hostile = "conv\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e"
    source = tmp_path / "conversation.json"
    source.write_text(json.dumps({"id": hostile, "messages": [
        {"role": "user", "content": "fix /srv/app/main.py line 3"},
        {"role": "assistant", "content": "ok"}, {"role": "user", "content": "thanks"}]}))
    capsys.readouterr()
    assert main(["replay", str(source), "--window", "20"]) == 0
    out = capsys.readouterr().out
    assert "conv\\u001b]0;pwned" in out
    assert not any(c in out for c in "\x1b\x07\x9b\u202e")

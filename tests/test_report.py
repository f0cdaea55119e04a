"""``firewall report``: the HTML page from a replay and from an audit log, its escaping, and the
page in a real headless Chromium (skipped, saying how to install it, where it is absent)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from firewall.cli import main
from firewall.errors import FirewallError
from firewall.evaluation.replaylog import ReplayConversation
from firewall.evaluation.report import from_audit, read_replay, render

import headless

REPLAY = Path(__file__).parent / "fixtures" / "replay" / "replay.jsonl"
HOSTILE = "</script><img src=x onerror=alert(1)>"
AWS_ID = "AKIA" + "KIEM6OJW25SI6WOR"  # not the documentation key: that one is allowlisted


def test_fixture_follows_the_replay_contract():
    lines = REPLAY.read_text().splitlines()
    assert [ReplayConversation.model_validate_json(line).id for line in lines] == [
        "billing-42", "retail-7 <b>bold</b>"]


def test_untrusted_text_renders_as_text():
    page = render(list(read_replay(REPLAY)), source=f"replay {HOSTILE}")
    assert HOSTILE not in page and "<b>bold</b>" not in page
    assert page.count("&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;") == 2  # loss, source
    assert "retail-7 &lt;b&gt;bold&lt;/b&gt;" in page
    assert "<script" not in page  # the page runs no script at all
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing fetched


def test_worst_losses_first_and_counts_per_compaction():
    page = render(list(read_replay(REPLAY)), source="r")
    second = page[page.index("Compaction 2: 2 lost, worst first"):]
    assert second.index("INV-2025-08-44719") < second.index("[sensitive]")  # used 4× vs 1×
    assert "3,450 → 900" in page and "60 (2.3%)" in page  # tokens; ledger share of the span
    assert page.count('<svg class="chart"') == 2


def test_a_sensitive_value_a_replay_left_in_clear_is_masked(tmp_path):
    conv = json.loads(REPLAY.read_text().splitlines()[0])
    conv["compactions"][0]["losses"][0]["value"] = f"aws_access_key_id={AWS_ID}"
    path = tmp_path / "replay.jsonl"
    path.write_text(json.dumps(conv) + "\n")
    page = render(list(read_replay(path)), source="r")
    assert AWS_ID not in page and "[sensitive]" in page


def test_the_firings_a_replay_skipped_are_counted_beside_its_compactions(tmp_path):
    conv = json.loads(REPLAY.read_text().splitlines()[0])
    conv["skipped"] = 7
    path = tmp_path / "replay.jsonl"
    path.write_text(json.dumps(conv) + "\n")
    assert "(+7 skipped)" in render(list(read_replay(path)), source="r")
    assert "skipped)" not in render(list(read_replay(REPLAY)), source="r")


def test_a_bad_replay_line_is_named(tmp_path):
    path = tmp_path / "replay.jsonl"
    path.write_text(REPLAY.read_text().splitlines()[0] + "\n" + '{"id": "x"}\n')
    with pytest.raises(FirewallError, match=r"replay\.jsonl:2: not a replay line"):
        list(read_replay(path))


def test_report_from_an_audit_log(tmp_path, capsys):
    from firewall.audit import open_audit_log
    from firewall.compaction.guard import Firewall

    db = tmp_path / "audit.db"
    fw = Firewall(audit=open_audit_log(db), keep_last=1)
    messages = [{"role": "user", "content": f"Refund INV-2025-08-44719, key {AWS_ID}"},
                {"role": "assistant", "content": "Looking at src/billing/refunds.py now."},
                {"role": "user", "content": "thanks"}]
    fw.compact(messages)
    out = tmp_path / "audit.html"
    assert main(["report", "--audit-db", str(db), "--html", str(out)]) == 0
    page = out.read_text()
    assert "holds no per-message series" in page
    assert 'aria-label="tokens before and after each compaction' in page
    assert AWS_ID not in page
    [view] = from_audit(open_audit_log(db).export())
    [c] = view.compactions
    assert c.pinned >= 2 and view.live_tokens is None
    assert "wrote" in capsys.readouterr().err


def test_report_needs_a_source(capsys):
    with pytest.raises(SystemExit):
        main(["report", "--html", "x.html"])
    assert "one of the arguments --replay --audit-db is required" in capsys.readouterr().err


# ── in a real browser ─────────────────────────────────────────────────────────────────────

@pytest.fixture(scope="module")
def browser():
    reason = headless.missing()
    if reason and os.environ.get("CI"):
        pytest.fail(reason)  # CI installs Chromium (.ci/run): it must run this test
    if reason:
        pytest.skip(reason)
    with headless.chromium() as driver:
        yield driver


def test_page_renders_in_headless_chromium(browser, tmp_path):
    from selenium.webdriver.common.by import By

    out = tmp_path / "report.html"
    assert main(["report", "--replay", str(REPLAY), "--html", str(out)]) == 0
    _, errors = headless.load(browser, out)
    assert errors == []
    charts = headless.svg_sizes(browser)
    assert len(charts) == 2 and all(w > 300 and h > 100 for w, h in charts)
    line = browser.find_element(By.CSS_SELECTOR, "svg.chart polyline.live")
    assert line.size["width"] > 300
    assert len(browser.find_elements(By.CSS_SELECTOR, "svg.chart g.marker")) == 2
    assert all(w > 0 for w, _ in headless.svg_sizes(browser, "svg.fates"))
    # the hostile literal is text on the page, and no element came out of it
    assert HOSTILE in browser.find_element(By.CSS_SELECTOR, "ul.losses").text
    assert browser.find_elements(By.TAG_NAME, "img") == []
    assert browser.find_elements(By.TAG_NAME, "script") == []


def test_a_long_series_is_drawn_from_its_peaks_and_keeps_each_drop():
    from firewall.evaluation.report import MAX_POINTS, CompactionView, ConversationView, live_chart

    series = [1000 + (i % 2500) * 10 for i in range(10_000)]  # peaks just before each drop
    drops = [CompactionView(n, i, "reactive", 30_000, series[i], 20_000, 300, True, 9, 4, 0, 0,
                            5, 1.0, 1.0, 0) for n, i in enumerate((2500, 5000, 7500), 1)]
    svg = live_chart(ConversationView("long", "r", 10_000, 32_000, 0.8, series, drops))
    points = re.search(r'class="live" points="([^"]+)"', svg).group(1).split()
    assert len(points) <= MAX_POINTS + 2 * len(drops)
    ys = [float(p.split(",")[1]) for p in points]
    top = min(ys)  # SVG y grows downwards: the highest value drawn
    assert sum(y == top for y in ys) == 3  # the three tokens_before (30,000), each drawn
    assert svg.count('<g class="marker">') == 3


# ── every field the data controls ─────────────────────────────────────────────────────────

def _hostile_views():
    """One conversation whose every string field holds markup naming the field, and a URL
    whose password names it too (a lost literal holding a URL password is a secret: masked)."""
    from firewall.evaluation.report import CompactionView, ConversationView, Loss

    def evil(field):
        return f"<b id={field}>x</b> postgresql://fw:Pw-{field}-9q@db.internal/audit"

    loss = Loss("<b id=value>x</b>", evil("rule"), 3, evil("detail"))
    compaction = CompactionView(1, 2, evil("trigger"), 900, 300, 600, 40, True, 5, 3, 1, 1, 4,
                                0.75, 0.5, 2, [loss])
    return [ConversationView(evil("id"), evil("source"), 4, 1000, 0.8, [100, 500, 900, 300],
                             [compaction], skipped=1)]


FIELDS = ["value", "rule", "detail", "trigger", "id", "source", "page-source"]


def test_every_field_the_data_controls_is_escaped_and_its_url_password_hidden():
    page = render(_hostile_views(), source=f"<b id=page-source>x</b> "
                                            f"postgresql://fw:Pw-page-source-9q@db/audit")
    for field in FIELDS:
        assert f"<b id={field}>" not in page, field
        assert f"&lt;b id={field}&gt;x&lt;/b&gt;" in page, field
        assert f"Pw-{field}-9q" not in page, field
    assert page.count("postgresql://fw:***@db") >= len(FIELDS) - 1


def test_the_page_of_a_postgres_log_does_not_print_its_password(postgres_url, monkeypatch,
                                                                tmp_path):
    from firewall import audit
    from firewall.audit import open_audit_log
    from firewall.compaction.guard import Firewall

    monkeypatch.setenv(audit.KEY_ENV, "fleet-key-0123456789abcdef")
    # the test server trusts its socket: any password is accepted, and must not be printed
    password = "Zq9%2FXw7-s3cret"
    url = postgres_url.replace("fwtest@", f"fwtest:{password}@")
    Firewall(audit=open_audit_log(url), keep_last=1).compact(
        [{"role": "user", "content": "Refund INV-2025-08-44719"},
         {"role": "assistant", "content": "Looking at src/billing/refunds.py now."},
         {"role": "user", "content": "thanks"}])
    out = tmp_path / "pg.html"
    assert main(["report", "--audit-db", url, "--html", str(out)]) == 0
    page = out.read_text()
    assert "postgresql://fwtest:***@/postgres" in page and "compaction 1" in page
    for spelling in (password, "Zq9/Xw7-s3cret", "Xw7-s3"):
        assert spelling not in page


def test_each_compaction_shows_the_archive_three_shares(tmp_path):
    """A replay line carrying the archive's count (`one_call_id_like`) gets its three shares;
    an older line without it shows none."""
    lines = REPLAY.read_text().splitlines()
    conv = json.loads(lines[0])
    for c in conv["compactions"]:
        c.update(gold_id_like=4, recall_context_id_like=0.5, one_call_id_like=1)
        for loss in c["losses"]:
            loss["archived"] = True
    path = tmp_path / "replay.jsonl"
    path.write_text(json.dumps(conv) + "\n" + lines[1] + "\n")
    views = list(read_replay(path))
    assert views[0].compactions[0].shares == (2, 1, 1)
    assert all(c.shares is None for c in views[1].compactions)
    page = render(views, source="r")
    assert "context / one call / lost" in page and "50 % / 25 % / 25 %" in page
    assert "one recall call away: the archive holds it" in page

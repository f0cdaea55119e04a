"""``firewall report``: one self-contained HTML page of what compaction did, for people.

From a replay (``firewall replay --json`` lines, ``ReplayConversation``): per conversation, the
live context tokens over the recorded messages with each compaction marked, the watermark and the
window; per compaction, the literals pinned / in the summary / evicted / lost, the worst losses
first, and the re-reads; a table across conversations. From an audit log, what its records hold:
tokens before and after each compaction and where each literal ended (no per-message series).

The page needs no network: CSS and SVG are inline, no script runs. Every string from the data is
untrusted (a literal can be ``</script><img onerror=...>``): all of it goes through ``esc``, which
escapes it and writes any URL's password as ``***`` (the page names its source: a PostgreSQL
log's URL may hold one), and sensitive literals never appear in clear (a replay writes them as
``[sensitive]``, the audit log stores them hashed, and a value a sensitive rule matches is
masked here again).
"""

from __future__ import annotations

import argparse
import html
import statistics
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import FirewallError
from ..audit.urls import redacted_url
from ..literals import SENSITIVE

MAX_LOSSES = 12     # losses listed per compaction; the rest are counted
MAX_POINTS = 600    # a longer series is drawn from per-bucket maxima: peaks stay visible


@dataclass(slots=True)
class Loss:
    value: str
    rule: str | None
    uses_after: int | None
    detail: str | None = None


@dataclass(slots=True)
class CompactionView:
    number: int
    at_message: int | None
    trigger: str | None
    tokens_before: int
    tokens_after: int
    span_tokens: int | None
    ledger_tokens: int
    compacted: bool
    pinned: int
    in_summary: int
    evicted: int
    lost: int
    gold: int | None
    recall_context: float | None
    recall_ledger: float | None
    rereads: int | None
    losses: list[Loss] = field(default_factory=list)
    # the ID-like gold: in the context, one recall call away (the archive), lost (replay only)
    shares: tuple[int, int, int] | None = None


@dataclass(slots=True)
class ConversationView:
    id: str
    source: str
    messages: int | None
    window: int | None
    watermark: float | None
    live_tokens: list[int] | None  # None: the input holds no per-message series
    compactions: list[CompactionView]
    skipped: int = 0  # times the trigger fired but no compaction was worth trying


# ── inputs ──────────────────────────────────────────────────────────────────────────────────

def read_replay(path: str | Path) -> Iterator[ConversationView]:
    """The ``ReplayConversation`` lines of a ``firewall replay --json`` output, validated."""
    from pydantic import ValidationError

    from .replaylog import ReplayConversation

    try:
        handle = open(path, encoding="utf-8")
    except OSError as exc:
        raise FirewallError(f"{path}: cannot open: {exc.strerror}") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                conv = ReplayConversation.model_validate_json(line)
            except ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(str(p) for p in first["loc"]) or "line"
                raise FirewallError(f"{path}:{number}: not a replay line ({where}: "
                                    f"{first['msg']}; {exc.error_count()} error(s))") from None
            yield ConversationView(
                conv.id, conv.source, conv.messages, conv.window, conv.watermark,
                conv.live_tokens, [CompactionView(
                    c.compaction, c.at_message, c.trigger, c.tokens_before, c.tokens_after,
                    c.span_tokens, c.ledger_tokens, c.compacted, c.pinned, c.in_summary,
                    c.evicted, c.lost, c.gold, c.recall_context, c.recall_ledger, c.rereads,
                    [Loss(g.value, g.rule, g.uses_after,
                          "held without its end punctuation" if g.bare else
                          ("one recall call away: the archive holds it" if g.archived else None))
                     for g in c.losses], _shares(c))
                    for c in conv.compactions], conv.skipped)


def _shares(c: Any) -> tuple[int, int, int] | None:
    """(in context, one call away, lost) of a replayed compaction's ID-like gold."""
    if c.gold_id_like is None or c.one_call_id_like is None:
        return None  # a line from before the archive
    kept = round((c.recall_context_id_like or 0) * c.gold_id_like)
    return kept, c.one_call_id_like, c.gold_id_like - kept - c.one_call_id_like


_LOST = ("missing", "mutated_unrepaired")


def from_audit(records: Iterable[Any]) -> list[ConversationView]:
    """Audit records grouped by conversation, in compaction order."""
    by_id: dict[str, list[Any]] = {}
    for record in records:
        by_id.setdefault(record.conversation_id, []).append(record)
    views = []
    for cid, recs in by_id.items():
        compactions = []
        for r in sorted(recs, key=lambda r: (r.compaction, r.created_at)):
            lost = [o for o in r.literals if o.status in _LOST]
            # a user-typed literal lost is the worst: the user said it; then the earliest
            lost.sort(key=lambda o: (o.role != "user", o.status != "mutated_unrepaired", o.turn))
            compactions.append(CompactionView(
                r.compaction, None, None, r.tokens_before, r.tokens_after, None,
                r.ledger_tokens, r.outcome == "compacted",
                sum(o.in_ledger for o in r.literals),
                sum(o.in_ledger and o.in_summary for o in r.literals),
                sum(o.status == "evicted" for o in r.literals), len(lost), None, None, None,
                None, [Loss(SENSITIVE if o.sensitive or o.value is None else o.value, o.rule,
                            None, o.status.replace("_", " ")) for o in lost]))
        views.append(ConversationView(cid, "audit log", None, None, None, None, compactions))
    return views


def _mask_sensitive(views: Sequence[ConversationView]) -> None:
    """Mask, again, every loss value a sensitive rule matches: the page is shared, and a
    replay written by another tool may not have masked it."""
    values = {loss.value for v in views for c in v.compactions for loss in c.losses
              if loss.value != SENSITIVE}
    if not values:
        return
    from ..compaction.guard import Firewall

    found = Firewall().scan([{"role": "user", "content": "\n".join(sorted(values))}])
    secrets = [lit.value for lit in found if lit.sensitive]
    for view in views:
        for c in view.compactions:
            for loss in c.losses:
                if any(secret in loss.value for secret in secrets):
                    loss.value = SENSITIVE


# ── drawing ─────────────────────────────────────────────────────────────────────────────────

def esc(value: Any) -> str:
    """``value`` as HTML text, any URL password in it written ``***``: the page is shared."""
    return html.escape(redacted_url(str(value)), quote=True)


def _k(n: float) -> str:
    if n >= 1000 and n % 1000 == 0:
        return f"{n / 1000:.0f}k"
    return f"{n / 1000:.0f}k" if n >= 10_000 else f"{n / 1000:.1f}k" if n >= 1000 else f"{n:.0f}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.0%}" if x in (0, 1) else f"{x:.1%}"


def _downsample(series: Sequence[int]) -> list[tuple[int, int]]:
    if len(series) <= MAX_POINTS:
        return list(enumerate(series))
    step = len(series) / MAX_POINTS
    points = []
    for b in range(MAX_POINTS):
        lo, hi = int(b * step), max(int((b + 1) * step), int(b * step) + 1)
        chunk = series[lo:hi]
        top = max(range(len(chunk)), key=chunk.__getitem__)
        points.append((lo + top, chunk[top]))
    return points


def _ticks(top: float, count: int = 4) -> list[float]:
    raw = top / count
    magnitude = 10 ** (len(str(int(raw))) - 1) if raw >= 1 else 1
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [step * i for i in range(1, int(top // step) + 1)]


def live_chart(view: ConversationView) -> str:
    """Live context tokens per recorded message: a line, the window and the watermark, a marker
    at each compaction (hover it for the numbers)."""
    series = view.live_tokens or []
    w, h, left, right, top, bottom = 760, 220, 56, 16, 14, 30
    n = max(len(series) - 1, 1)
    peak = max([*series, view.window or 0, 1, *(c.tokens_before for c in view.compactions)])
    y_top = peak * 1.08
    pw, ph = w - left - right, h - top - bottom

    def x(i: float) -> float:
        return left + pw * i / n

    def y(v: float) -> float:
        return top + ph * (1 - v / y_top)

    out = [f'<svg class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" '
           f'aria-label="live context tokens of {esc(view.id)}">']
    for t in _ticks(y_top):
        out.append(f'<line class="grid" x1="{left}" x2="{w - right}" y1="{y(t):.1f}" '
                   f'y2="{y(t):.1f}"/><text class="tick" x="{left - 6}" y="{y(t) + 4:.1f}" '
                   f'text-anchor="end">{_k(t)}</text>')
    for i in _ticks(n, 6):
        out.append(f'<text class="tick" x="{x(i):.1f}" y="{h - bottom + 16}" '
                   f'text-anchor="middle">{i:.0f}</text>')
    out.append(f'<text class="axis" x="{w - right}" y="{h - 2}" text-anchor="end">recorded '
               f'message</text><line class="base" x1="{left}" x2="{w - right}" '
               f'y1="{y(0):.1f}" y2="{y(0):.1f}"/>')
    if view.window:
        out.append(f'<line class="window" x1="{left}" x2="{w - right}" y1="{y(view.window):.1f}"'
                   f' y2="{y(view.window):.1f}"/><text class="label" x="{left + 6}" '
                   f'y="{y(view.window) - 5:.1f}">window '
                   f'{view.window:,}</text>')
        if view.watermark:
            mark = view.window * view.watermark
            out.append(f'<line class="watermark" x1="{left}" x2="{w - right}" y1="{y(mark):.1f}"'
                       f' y2="{y(mark):.1f}"/><text class="label wm" x="{left + 6}" '
                       f'y="{y(mark) - 5:.1f}">watermark '
                       f'{view.watermark:.0%}</text>')
    if series:
        # each compaction drawn as the drop it is: up to tokens_before, down to the composed context
        drops = {c.at_message: c.tokens_before for c in view.compactions
                 if c.at_message is not None and 0 <= c.at_message < len(series)}
        sampled = dict(_downsample(series)) | {i: series[i] for i in drops}
        pairs = []
        for i in sorted(sampled):
            if i in drops:
                pairs.append((i, drops[i]))
            pairs.append((i, sampled[i]))
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in pairs)
        out.append(f'<polyline class="live" points="{points}"/>')
    for c in view.compactions:
        if c.at_message is None:
            continue
        cx = x(c.at_message)
        tip = (f"compaction {c.number} at message {c.at_message}: {c.tokens_before:,} → "
               f"{c.tokens_after:,} tokens; recall {_pct(c.recall_context)}; {c.lost} lost")
        out.append(f'<g class="marker{" failed" if not c.compacted else ""}"><title>{esc(tip)}'
                   f'</title><line x1="{cx:.1f}" x2="{cx:.1f}" y1="{top}" y2="{y(0):.1f}"/>'
                   f'<circle cx="{cx:.1f}" cy="{top + 8}" r="8"/><text x="{cx:.1f}" '
                   f'y="{top + 12}" text-anchor="middle">{c.number}</text></g>')
    out.append("</svg>")
    return "".join(out)


def before_after_chart(view: ConversationView) -> str:
    """Without a per-message series (audit log): tokens before → after, one pair per compaction."""
    comps = view.compactions
    w, bar, gap, left = 760, 14, 10, 110
    h = 20 + len(comps) * (2 * bar + gap)
    top = max([1, *(max(c.tokens_before, c.tokens_after) for c in comps)])
    out = [f'<svg class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" '
           f'aria-label="tokens before and after each compaction of {esc(view.id)}">']
    for i, c in enumerate(comps):
        y0 = 10 + i * (2 * bar + gap)
        for j, (kind, value) in enumerate((("before", c.tokens_before),
                                           ("after", c.tokens_after))):
            length = (w - left - 80) * value / top
            out.append(f'<rect class="{kind}" x="{left}" y="{y0 + j * bar}" width="{length:.1f}"'
                       f' height="{bar - 2}"/><text class="tick" x="{left + length + 6:.1f}" '
                       f'y="{y0 + j * bar + bar - 4}">{value:,}</text>')
        out.append(f'<text class="tick" x="{left - 8}" y="{y0 + bar + 3}" text-anchor="end">'
                   f'compaction {c.number}</text>')
    out.append('</svg><div class="legend"><span><i class="b"></i>live tokens when it fired'
               '</span><span><i class="a"></i>after: the composed context</span></div>')
    return "".join(out)


def fate_bar(c: CompactionView) -> str:
    """Pinned literals (in the summary too / in the ledger only), evicted, lost: one bar."""
    parts = [("summary", c.in_summary, "pinned, also in the summary"),
             ("ledger", c.pinned - c.in_summary, "pinned, in the ledger only"),
             ("evicted", c.evicted, "evicted by the ledger budget"),
             ("lost", c.lost, "lost: not in the composed context")]
    total = sum(max(v, 0) for _, v, _ in parts) or 1
    out, x = ['<svg class="fates" viewBox="0 0 200 14" width="150" height="14" '
              'preserveAspectRatio="none">'], 0.0
    for kind, value, what in parts:
        if value > 0:
            width = 200 * value / total
            out.append(f'<rect class="{kind}" x="{x:.2f}" y="0" width="{width:.2f}" height="14">'
                       f'<title>{value} {esc(what)}</title></rect>')
            x += width
    out.append("</svg>")
    return "".join(out)


def sparkline(view: ConversationView) -> str:
    series = view.live_tokens
    if not series:
        return ""
    peak, n = max([*series, 1]), max(len(series) - 1, 1)
    points = " ".join(f"{120 * i / n:.1f},{17 - 15 * v / peak:.1f}"
                      for i, v in _downsample(series))
    return (f'<svg class="spark" viewBox="0 0 120 18" width="120" height="18">'
            f'<polyline points="{points}"/></svg>')


# ── the page ────────────────────────────────────────────────────────────────────────────────

CSS = """
:root{--ink:#1d2433;--muted:#5b6478;--line:#e3e6ee;--bg:#f6f7fb;--card:#fff;--blue:#2f6fde;
--green:#1e8a4c;--light:#8fd1a8;--amber:#e0a021;--red:#d43d3d}
*{box-sizing:border-box}body{margin:0;background:var(--bg);color:var(--ink);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:1120px;margin:0 auto;padding:24px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:0 0 8px}
h3{font-size:14px;margin:14px 0 6px}
.sub,.note{color:var(--muted)}.note{font-size:13px}
.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:16px 18px;
margin:14px 0;box-shadow:0 1px 2px rgba(20,30,60,.04)}
.kpis{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:10px;margin:14px 0}
.kpi{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:10px 14px}
.kpi b{display:block;font-size:22px}.kpi span{color:var(--muted);font-size:12px}
.kpi.bad b{color:var(--red)}.kpi.good b{color:var(--green)}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{white-space:nowrap;padding:5px 8px;border-bottom:1px solid var(--line);text-align:right;
vertical-align:middle}
th{color:var(--muted);font-weight:600;font-size:12px;background:#fafbfd;white-space:normal}
.wide{overflow-x:auto}.legend .b{background:#b9c6e4}.legend .a{background:var(--blue)}
.scroll{max-height:460px;overflow:auto;border:1px solid var(--line);border-radius:6px}
.scroll th{position:sticky;top:0;z-index:1}
td:first-child,th:first-child{text-align:left}td.l,th.l{text-align:left}
a{color:var(--blue);text-decoration:none}a:hover{text-decoration:underline}
.chart{width:100%;height:auto;display:block}
.chart .grid{stroke:var(--line)}.chart .base{stroke:#9aa3b5}
.chart .tick,.chart .axis{fill:var(--muted);font-size:11px}
.chart .label{font-size:11px;fill:#6b7385}
.chart .label.wm{fill:#b07a0c}.chart .window{stroke:#9aa3b5;stroke-dasharray:2 3}
.chart .watermark{stroke:var(--amber);stroke-dasharray:6 4;stroke-width:1.5}
.chart .live{fill:none;stroke:var(--blue);stroke-width:2;stroke-linejoin:round}
.chart .marker line{stroke:var(--red);stroke-width:1.2;stroke-dasharray:3 2}
.chart .marker circle{fill:var(--red)}.chart .marker text{fill:#fff;font-size:10px;font-weight:700}
.chart .marker.failed circle{fill:#7a1f1f}
.chart .before{fill:#b9c6e4}.chart .after{fill:var(--blue)}
.fates{display:block;border-radius:3px;overflow:hidden;background:#eef0f5}
.summary{fill:var(--green)}.ledger{fill:var(--light)}.evicted{fill:var(--amber)}
.lost{fill:var(--red)}
.spark polyline{fill:none;stroke:var(--blue);stroke-width:1.3}
.legend{display:flex;gap:14px;flex-wrap:wrap;color:var(--muted);font-size:12px;margin:6px 0}
.legend i{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:5px;
vertical-align:-1px}.legend .s{background:var(--green)}.legend .l{background:var(--light)}
.legend .e{background:var(--amber)}.legend .x{background:var(--red)}
.legend .w{background:var(--amber);height:3px;vertical-align:3px}
.legend .c{background:var(--red);border-radius:50%}
.legend .t{background:var(--blue);height:3px;vertical-align:3px}
ul.losses{margin:4px 0 0;padding-left:18px}ul.losses li{margin:2px 0}
code{font:12.5px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f0f2f7;
padding:1px 5px;border-radius:4px;word-break:break-all}
.bad{color:var(--red)}.ok{color:var(--green)}
"""


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _conv_stats(v: ConversationView) -> dict[str, Any]:
    recalls = [c.recall_context for c in v.compactions if c.recall_context is not None]
    rereads = [c.rereads for c in v.compactions if c.rereads is not None]
    shares = [c.ledger_tokens / c.span_tokens for c in v.compactions if c.span_tokens]
    return {"min_recall": min(recalls) if recalls else None,
            "lost": sum(c.lost for c in v.compactions),
            "rereads": sum(rereads) if rereads else None,
            "share": _median(shares),
            "peak": max([*(v.live_tokens or ()), *(c.tokens_before for c in v.compactions)],
                        default=None)}


def _summary_table(views: Sequence[ConversationView], anchors: dict[int, str]) -> str:
    rows = []
    order = sorted(range(len(views)), key=lambda i: (-_conv_stats(views[i])["lost"], i))
    for i in order:
        v, s = views[i], _conv_stats(views[i])
        recall, peak = s["min_recall"], s["peak"]
        klass = "" if recall is None else ' class="bad"' if recall < 0.97 else ' class="ok"'
        rows.append(
            f'<tr><td><a href="#{anchors[i]}">{esc(v.id)}</a></td>'
            f'<td>{"–" if v.messages is None else v.messages}</td><td>{len(v.compactions)}'
            + (f' <span title="the trigger fired, but no compaction was worth trying: too '
               f'little fresh material, or a failing summarizer">(+{v.skipped} skipped)</span>'
               if v.skipped else '') + '</td>'
            f'<td>{"–" if peak is None else f"{peak:,}"}</td>'
            f'<td{klass}>{_pct(recall)}</td><td>{s["lost"]}</td>'
            f'<td>{"–" if s["rereads"] is None else s["rereads"]}</td>'
            f'<td>{_pct(s["share"])}</td><td class="l">{sparkline(v)}</td></tr>')
    return ('<div class="scroll"><table><thead><tr><th>conversation</th><th>messages</th>'
            '<th>compactions</th>'
            '<th>peak live tokens</th><th>lowest recall</th><th>literals lost</th>'
            '<th>re-reads</th><th>ledger / span</th><th class="l">live tokens</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _compaction_rows(v: ConversationView) -> str:
    rows = []
    for c in v.compactions:
        share = f" ({_pct(c.ledger_tokens / c.span_tokens)})" if c.span_tokens else ""
        state = "" if c.compacted else (' <span class="bad" title="the firewall failed closed '
                                         'and kept the span">not compacted</span>')
        rows.append(
            f'<tr><td>{c.number}{state}</td>'
            f'<td>{"–" if c.at_message is None else c.at_message}</td>'
            f'<td class="l">{esc(c.trigger or "–")}</td>'
            f'<td>{c.tokens_before:,} → {c.tokens_after:,}</td>'
            f'<td>{c.ledger_tokens:,}{share}</td><td>{c.pinned}</td><td>{c.in_summary}</td>'
            f'<td>{c.evicted}</td><td class="{"bad" if c.lost else ""}">{c.lost}</td>'
            f'<td>{_pct(c.recall_context)}</td>'
            f'<td>{_share_cell(c.shares)}</td>'
            f'<td>{"–" if c.rereads is None else c.rereads}</td>'
            f'<td class="l">{fate_bar(c)}</td></tr>')
    return ('<div class="wide"><table><thead><tr><th>#</th><th>at message</th>'
            '<th class="l">trigger</th><th>live tokens</th><th>ledger tokens</th><th>pinned</th>'
            '<th>in summary</th><th>evicted</th><th>lost</th><th>recall</th>'
            '<th title="ID-like gold: in the context / one recall call away (the archive) / '
            'lost">ID-like: context / one call / lost</th><th>re-reads</th>'
            f'<th class="l">literals</th></tr></thead><tbody>{"".join(rows)}</tbody></table>'
            '</div>')


def _share_cell(shares: tuple[int, int, int] | None) -> str:
    if shares is None or not sum(shares):
        return "–"
    total = sum(shares)
    return " / ".join(f"{n * 100 / total:.0f} %" for n in shares)


def _losses(v: ConversationView) -> str:
    blocks = []
    for c in v.compactions:
        if not c.losses:
            continue
        worst = sorted(c.losses, key=lambda x: -(x.uses_after or 0))  # stable: input order
        items = []
        for loss in worst[:MAX_LOSSES]:
            extra = [f"used {loss.uses_after}× after"] if loss.uses_after is not None else []
            extra += [esc(x) for x in (loss.rule, loss.detail) if x]
            items.append(f'<li><code>{esc(loss.value)}</code> <span class="note">'
                         f'{" · ".join(extra)}</span></li>')
        more = len(worst) - MAX_LOSSES
        tail = f'<li class="note">and {more} more</li>' if more > 0 else ""
        blocks.append(f'<h3>Compaction {c.number}: {len(c.losses)} lost, worst first</h3>'
                      f'<ul class="losses">{"".join(items)}{tail}</ul>')
    return "".join(blocks)


LEGEND = ('<div class="legend"><span><i class="t"></i>live context tokens</span>'
          '<span><i class="w"></i>watermark</span><span><i class="c"></i>compaction '
          '(hover for numbers)</span><span><i class="s"></i>pinned, in summary too</span>'
          '<span><i class="l"></i>pinned, ledger only</span><span><i class="e"></i>evicted</span>'
          '<span><i class="x"></i>lost</span></div>')


def render(views: Sequence[ConversationView], *, source: str) -> str:
    """The whole page; ``views`` from :func:`read_replay` or :func:`from_audit`."""
    views = list(views)
    _mask_sensitive(views)
    comps = [c for v in views for c in v.compactions]
    recalls = [c.recall_context for c in comps if c.recall_context is not None]
    rereads = [c.rereads for c in comps if c.rereads is not None]
    lost = sum(c.lost for c in comps)
    has_series = any(v.live_tokens for v in views)
    median_recall = _median(recalls)
    kpis = [("conversations", f"{len(views):,}", ""), ("compactions", f"{len(comps):,}", ""),
            ("median recall, composed context", _pct(median_recall),
             "" if median_recall is None else "good" if median_recall >= 0.97 else "bad"),
            ("lowest recall", _pct(min(recalls) if recalls else None), ""),
            ("literals lost", f"{lost:,}", "bad" if lost else "good"),
            ("re-reads after compaction", f"{sum(rereads):,}" if rereads else "–", "")]
    anchors = {i: f"conv-{i + 1}" for i in range(len(views))}
    sections = []
    for i, v in enumerate(views):
        facts = [f"{v.messages:,} messages" if v.messages is not None else None,
                 f"window {v.window:,} tokens" if v.window else None,
                 f"{len(v.compactions)} compaction{'s' if len(v.compactions) != 1 else ''}"]
        chart = live_chart(v) if v.live_tokens else before_after_chart(v) \
            if v.compactions else '<p class="note">No compaction.</p>'
        sections.append(
            f'<section class="card" id="{anchors[i]}"><h2>{esc(v.id)}</h2>'
            f'<div class="sub">{esc(" · ".join(f for f in facts if f))} · from '
            f'<code>{esc(v.source)}</code></div>{chart}'
            f'{_compaction_rows(v) if v.compactions else ""}{_losses(v)}</section>')
    no_series = "" if has_series else (
        '<p class="note">An audit log records, per compaction, the tokens before and after and '
        'where each literal ended; it holds no per-message series of the live context. For '
        'the live-context chart, replay the recordings (<code>firewall replay --json</code>) '
        'and report the replay.</p>')
    tiles = "".join(f'<div class="kpi {k}"><b>{esc(value)}</b><span>{esc(label)}</span></div>'
                    for label, value, k in kpis)
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; img-src data:\">"
        f'<title>literal-firewall report</title><style>{CSS}</style></head><body><main>'
        f'<h1>Compaction report</h1><div class="sub">literal-firewall · from '
        f'<code>{esc(source)}</code></div><div class="kpis">{tiles}</div>{no_series}'
        f'<section class="card"><h2>Across conversations</h2><p class="note">Worst first: most '
        f'literals lost. Recall: share of the load-bearing literals (those the rest of the '
        f'recording uses) still in the composed context (summary + ledger + kept turns); '
        f'lowest over the conversation\'s compactions.</p>{LEGEND}'
        f'{_summary_table(views, anchors)}</section>{"".join(sections)}</main></body></html>')


def write_report(views: Sequence[ConversationView], out: str | Path, *, source: str) -> Path:
    out = Path(out)
    out.write_text(render(views, source=source), encoding="utf-8")
    return out


# ── command line ──────────────────────────────────────────────────────────────────────────

def cmd_report(args: argparse.Namespace) -> int:
    if args.replay:
        views, source = list(read_replay(args.replay)), args.replay
    else:
        from ..audit import audit_db_spec, open_audit_log

        log = open_audit_log(args.audit_db)
        # a log names itself as errors name it: a PostgreSQL URL without its password
        source = str(log.path) if audit_db_spec(args.audit_db) else "the default audit log"
        views = from_audit(log.export())
    out = write_report(views, args.html, source=source)
    sys.stderr.write(f"firewall: wrote {out} ({len(views)} conversation(s))\n")
    return 0


def add_report_command(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "report", help="one self-contained HTML page of a replay or an audit log",
        description="Write ONE HTML page (no network needed to view it): per conversation the "
                    "live context tokens with each compaction marked, per compaction the "
                    "literals pinned / in summary / evicted / lost (worst first) and the "
                    "re-reads, and a table across conversations.")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--replay", metavar="REPLAY.jsonl",
                        help="the output of `firewall replay --json`")
    source.add_argument("--audit-db", metavar="PATH",
                        help="an audit log (SQLite, .jsonl, or a postgresql:// URL)")
    p.add_argument("--html", required=True, metavar="OUT.html", help="the page to write")
    p.set_defaults(func=cmd_report)
    return p

"""Which signals would move what the ledger's budget keeps? One factor at a time on the shipped
salience, and what the budget loses.

For each domain of ``salience_cv.py`` where the budget binds (coding dev, the two heldout coding
files, the CC0 Claude Code sessions), ``firewall eval``'s ledger recall (ID-like / strict /
addressing) at the default budget:

- with the shipped (hand-set) model, and with one factor of it changed or one factor added
  (``SIGNALS``), printed as the change in points. This is exploration on every domain, not a
  held-out figure: ``salience_cv.py`` judges fitted models held out;
- the ID-like gold extraction had and the budget evicted, by the kind of the entry carrying it
  and the tool of its first sighting;
- the share of the entries of big listings (50+ values of one kind in one message) that carry
  ID-like gold, against all entries; the kept tokens by tier and the user-typed entries.

    .venv/bin/python benchmarks/salience_signals.py [--data ../shared/data]
        [--cache /tmp/salience_samples.pkl]

``--cache`` is shared with ``salience_cv.py``. Reads ``../shared/data/`` (relative to the
repository); says so and exits 2 when it is absent.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import replace

from salience_cv import DATA, load  # noqa: E402  (benchmarks/ is the script's folder)

from firewall.compaction.ledger import VALUE_SEP, Ledger, is_plain, value_text
from firewall.compaction.salience import FEATURES, Salience, Term, default_salience
from firewall.evaluation.gold import occurs
from firewall.evaluation.salience_fit import BUCKETS, judge_all
from firewall.tokens import count_tokens

BINDING = ("claude_code", "coding", "coding_heldout", "coding2_heldout")
# (feature, how, value): a hand-set factor changed, or a factor added
SIGNALS = [
    ("written_only", "base", 0.5), ("typed_only", "base", 0.25), ("has_slash", "base", 2.0),
    ("listing_worked", "base", 2.0), ("log_listed", "weight", -0.25),
    ("value_tokens", "power", 0.25), ("value_tokens", "power", 0.5),
    ("all_digits", "base", 0.25), ("in_address", "base", 2.0), ("age", "weight", -1.0),
    ("tier", "base", 1.5), ("tier", "base", 3.0), ("id_shaped", "base", 3.0),
    ("id_shaped", "base", 8.0), ("count", "power", 0.75), ("recency", "power", 0.0),
]


def with_signal(model: Salience, feature: str, how: str, value: float) -> Salience:
    terms = [t for t in model.terms if t.feature != feature] + [Term(feature, **{how: value})]
    return replace(model, terms=tuple(terms), name=f"{feature} {how} {value:g}", source="")


def recalls(model: Salience, samples: list) -> list[float]:
    score = judge_all(model, samples)
    return [100 * (score.recall(b) or 0.0) for b in BUCKETS]


def evicted_gold(model: Salience, samples: list) -> Counter:
    """ID-like gold some pinned entry carried that the budgeted block lost: by (kind, tool,
    addressing)."""
    lost: Counter = Counter()
    for s in samples:
        src = s.ledger
        ledger = Ledger.model_construct(conversation_id=src.conversation_id, nonce=src.nonce,
                                        key=src.key, entries=list(src.entries), evictions=[])
        ledger.fit(s.budget, salience=model.key_in(s.context))
        text = "\n".join([ledger.render()] + [v for v in ledger.values() if not is_plain(v)])
        for g in s.gold:
            if not g.id_like or occurs(g.literal, text):
                continue
            carrier = next((e for e in src.entries if occurs(g.literal, e.value)), None)
            if carrier is not None:
                lost[(carrier.kind, carrier.tool or carrier.role, g.addresses)] += 1
    return lost


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=__import__("pathlib").Path, default=DATA)
    parser.add_argument("--cache", help="pickle of the pinned cuts (salience_cv.py's)")
    args = parser.parse_args()
    if not args.data.is_dir():
        print(f"salience_signals: the dev data ../shared/data/ is absent ({args.data}); "
              f"nothing measured", file=sys.stderr)
        return 2
    samples = load(args.cache, args.data)
    hand = default_salience()
    base = {d: recalls(hand, samples[d]) for d in BINDING}
    print("| signal | " + " | ".join(BINDING) + " |")
    print("|---|" + "---:|" * len(BINDING))
    print("| hand-set (ID-like / strict / addressing %) | "
          + " | ".join(" / ".join(f"{x:.1f}" for x in base[d]) for d in BINDING) + " |")
    for feature, how, value in SIGNALS:
        model = with_signal(hand, feature, how, value)
        cells = []
        for d in BINDING:
            now = recalls(model, samples[d])
            cells.append(" / ".join(f"{a - b:+.1f}" for a, b in zip(now, base[d])))
        print(f"| `{feature}` {how} {value:g} | " + " | ".join(cells) + " |", flush=True)
    print("\nID-like gold the budget evicts (kind, first tool or role, addressing): count")
    for d in BINDING:
        lost = evicted_gold(hand, samples[d])
        print(f"  {d}: {sum(lost.values())} lost, "
              f"{sum(n for (_, _, a), n in lost.items() if a)} addressing; "
              + ", ".join(f"{k} {n}" for k, n in lost.most_common(6)))
    print("\nentries of 50+-value listings carrying ID-like gold, against all entries:")
    for d in BINDING:
        big = every = big_pos = every_pos = 0
        for s in samples[d]:
            for e, positive in zip(s.ledger.entries, s.id_labels):
                every += 1
                every_pos += positive
                if s.context.uses.listed.get(e.value, 1) >= 50:
                    big += 1
                    big_pos += positive
        print(f"  {d}: {100 * big_pos / max(big, 1):.1f} % of {big} against "
              f"{100 * every_pos / max(every, 1):.1f} % of {every}")
    print("\nthe hand-set block's kept tokens by tier (0: one of a listing), and user-typed "
          "entries:")
    for d in BINDING:
        tiers, users = kept_by_tier(hand, samples[d])
        total = sum(tiers.values()) or 1
        print(f"  {d}: " + ", ".join(f"tier {t} {100 * n / total:.1f} %"
                                     for t, n in sorted(tiers.items()))
              + f"; {users} user-typed entries")
    return 0


def kept_by_tier(model: Salience, samples: list) -> tuple[Counter, int]:
    tier = FEATURES["tier"][0]
    tiers: Counter = Counter()
    users = 0
    for s in samples:
        src = s.ledger
        ledger = Ledger.model_construct(conversation_id=src.conversation_id, nonce=src.nonce,
                                        key=src.key, entries=list(src.entries), evictions=[])
        ledger.fit(s.budget, salience=model.key_in(s.context))
        kept = set(ledger.values())
        users += sum(e.role == "user" for e in src.entries)
        for e in src.entries:
            if e.value in kept:
                tiers[tier(e, s.context)] += count_tokens(VALUE_SEP + value_text(e.value))
    return tiers, users


if __name__ == "__main__":
    raise SystemExit(main())

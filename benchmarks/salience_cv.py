"""Does a fitted salience beat the hand-set one on conversations it was not fitted on?

Per domain (retail: the three tau-bench files; coding: the mini-swe-agent dev set;
coding_heldout and coding2_heldout: the repository's ``benchmarks/heldout/`` coding files;
claude_code: the CC0 Claude Code sessions), the ID-like, strict and addressing gold recall of
the budgeted ledger block and its cost, exactly as ``firewall eval``'s ledger columns measure them (same cuts, same gold,
same default budget), for:

- ``hand-set``: the shipped default (``firewall/compaction/salience.json``);
- each fitted candidate (``CANDIDATES``), judged two ways:
  - ``by conversation``: K-fold over conversations (each domain's conversations dealt to the
    folds in turn); fitted on the other folds of every domain, judged on the held-out fold;
  - ``by source``: fitted on the other domains only, judged on this one (leave one domain
    out: the closest thing here to sessions of another author).

    .venv/bin/python benchmarks/salience_cv.py [--data ../shared/data] [--folds 4]
        [--cache /tmp/salience_samples.pkl]

Reads ``../shared/data/`` (relative to the repository; ``--data`` elsewhere); says so and exits
2 when it is absent.
``--cache`` keeps the pinned cuts between runs (extraction is most of the time).
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from firewall.compaction.salience import default_salience  # noqa: E402
from firewall.evaluation.salience_fit import (FIT_FEATURES, Score, collect_files, fit, heaviest,  # noqa: E402
                                   judge, percent, search)

DATA = ROOT.parent / "shared" / "data"
HELDOUT = ROOT / "benchmarks" / "heldout"
# patterns under --data, or (``heldout/...``) under benchmarks/heldout of the repository
DOMAINS = {
    "retail": ["tau2_retail_gpt41.jsonl", "tau2_retail_toolorchestra.jsonl",
               "taubench_retail_grok3_pr68.jsonl"],
    "coding": ["coding_minisweagent_deepseek_dev.jsonl"],
    "coding_heldout": ["heldout/coding_heldout.jsonl"],
    "coding2_heldout": ["heldout/coding2_heldout.jsonl"],
    "claude_code": ["claude_code_cc0/*.jsonl"],
}
# the fitted candidates: a logistic model of the hand-set model's own signals, one of every
# signal, and a direct search of the hand-set form (and a few more factors) on the recall
CANDIDATES: dict[str, object] = {
    "logistic refit": ("tier", "id_shaped", "log_priority", "log_count", "recency"),
    "logistic all": FIT_FEATURES,
    "search": "search",
}


def files_of(domain: str, data: Path) -> list[Path]:
    out: list[Path] = []
    for pattern in DOMAINS[domain]:
        if pattern.startswith("heldout/"):
            out += sorted(HELDOUT.glob(pattern.removeprefix("heldout/")))
        else:
            out += sorted(data.glob(pattern))
    return out


def load(cache: str | None, data: Path) -> dict[str, list]:
    if cache and Path(cache).exists():
        with open(cache, "rb") as f:
            return pickle.load(f)
    samples: dict[str, list] = {}
    t0 = time.perf_counter()
    for domain in DOMAINS:
        samples[domain] = collect_files(
            files_of(domain, data), on_error=lambda exc: None,  # the redaction's invalid lines
            progress=lambda m: print(f"  {m} ({time.perf_counter() - t0:.0f} s)",
                                     file=sys.stderr))
    if cache:
        with open(cache, "wb") as f:
            pickle.dump(samples, f)
    return samples


def folds_of(samples: dict[str, list], k: int) -> dict[tuple[str, str], int]:
    """Each conversation's fold: per domain, in sorted order, dealt in turn."""
    fold: dict[tuple[str, str], int] = {}
    for domain, items in samples.items():
        convs = sorted({(s.source, s.conversation) for s in items})
        for i, c in enumerate(convs):
            fold[c] = i % k
    return fold


def score(model, items) -> Score:
    total = Score()
    for s in items:
        total.add(judge(model, s))
    return total


def cell(s: Score) -> list[str]:
    return [percent(s.recall("id_like")), percent(s.recall("strict")),
            percent(s.recall("addresses")), percent(s.cost)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folds", type=int, default=4)
    parser.add_argument("--cache", help="pickle of the pinned cuts, reused when present")
    parser.add_argument("--data", type=Path, default=DATA, help="the dev data folder")
    args = parser.parse_args()
    if not args.data.is_dir():
        print(f"salience_cv: the dev data ../shared/data/ is absent ({args.data}); nothing "
              f"measured", file=sys.stderr)
        return 2
    samples = load(args.cache, args.data)
    hand = default_salience()
    fold = folds_of(samples, args.folds)
    every = [s for items in samples.values() for s in items]

    fits: dict[tuple[str, object], object] = {}

    def fitted(name: str, key: object, train: list) -> object:
        """One fit per candidate and training set, shared by every domain judged on it."""
        if (name, key) not in fits:
            t0 = time.perf_counter()
            how = CANDIDATES[name]
            fits[(name, key)] = search(train) if how == "search" else fit(train, how)
            print(f"  fitted {name} without {key} ({time.perf_counter() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
        return fits[(name, key)]

    rows = []
    for domain, items in samples.items():
        row = [domain, str(len(items)), str(sum(g.id_like for s in items for g in s.gold))]
        row += cell(score(hand, items))
        for name in CANDIDATES:
            by_conv = Score()
            for f in range(args.folds):
                test = [s for s in items if fold[(s.source, s.conversation)] == f]
                if test:  # the held-out fold of every domain stays out of the fit
                    train = [s for s in every if fold[(s.source, s.conversation)] != f]
                    by_conv.add(score(fitted(name, f"fold {f}", train), test))
            other = [s for d, its in samples.items() if d != domain for s in its]
            by_source = score(fitted(name, domain, other), items)
            row += cell(by_conv) + cell(by_source)
        rows.append(row)
        print("  | " + " | ".join(row) + " |", file=sys.stderr, flush=True)

    head = ["domain", "cuts", "ID-like gold", "hand-set ID", "strict", "addr", "cost"]
    for name in CANDIDATES:
        head += [f"{name} by conv ID", "strict", "addr", "cost", f"{name} by source ID",
                 "strict", "addr", "cost"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    for name, how in CANDIDATES.items():
        if how == "search":
            model = search(every)
            print(f"\n{name}, fitted on every domain: "
                  + ", ".join(json.dumps(t.to_json()) for t in model.terms))
        else:
            model = fit(every, how)
            print(f"\n{name}, fitted on every domain, weighs most (standardized weight): "
                  + ", ".join(f"{f} {w:+.2f}" for f, w in heaviest(model, 8)))
    print(f"\n{args.folds} folds; recall and cost in %; cost = block tokens / span tokens on "
          f"spans of 16,000 tokens or more ('-': none); the default budget")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Extraction throughput (MB/s) on the dev data: the firewall vs a naive loop vs Presidio.

What is scanned is what ``Extractor.scan`` scans: every non-system message's text (a tool
result's text included) and every string value of the tool-call arguments. Each engine is
called once per message, as a firewall runs, in the same process and the same repetition:

* ``firewall``        ``Scanner(Extractor(load_packs())).add(turn)`` per message: every rule
                      kind (regex, terms, json_key...), prefilter, JSON parsing of tool results.
* ``firewall-regex``  the same engine built from the regex rules only (apples to apples with
                      the naive loop).
* ``naive-regex``     every regex rule compiled once with the `regex` module, ``finditer`` over
                      every text of its roles, no prefilter (same group/requires/checksum/allowlist
                      post-processing, written independently of the engine).
* ``naive-re``        the same loop with the stdlib ``re`` (only the rules ``re`` compiles).
* ``presidio``        ``AnalyzerEngine`` + ``RecognizerRegistry`` of one ``PatternRecognizer``
                      per regex rule, the no_op NLP engine, one ``analyze()`` per message
                      (the message's texts joined by a newline, the entities of its role).

Correctness: the firewall's regex-rule literals, as (message, field, start, end, rule) spans,
must equal the naive `regex` loop's exactly; any difference is an engine bug and is printed.

    python benchmarks/throughput.py [--data DIR] [--repeat 5] [--pack NAME_OR_PATH ...]
                                    [--per-file N] [--no-presidio] [--profile] [--json FILE|-]
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import platform
import re
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data"

# ── shared helpers (imported by incremental.py and memory.py) ────────────────────────────


def machine_info() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        cpu = platform.processor() or "unknown"
    versions = {}
    for dist in ("regex", "google-re2", "pyahocorasick", "pydantic", "presidio-analyzer"):
        try:
            from importlib.metadata import version

            versions[dist] = version(dist)
        except Exception:  # noqa: BLE001 - not installed
            pass
    return {
        "nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "packages": versions,
    }


def print_header(title: str) -> dict[str, Any]:
    info = machine_info()
    command = " ".join([Path(sys.executable).name, *sys.argv])
    print(f"# {title}")
    print(f"command : {command}")
    print(f"machine : nproc={info['nproc']}  cpu={info['cpu']}")
    print(f"python  : {info['implementation']} {info['python']}  ({info['platform']})")
    print("packages: " + "  ".join(f"{k}={v}" for k, v in info["packages"].items()))
    return {"command": command, "machine": info}


def add_common_args(parser: argparse.ArgumentParser, *, repeat: int) -> None:
    parser.add_argument("--data", default=str(DEFAULT_DATA),
                        help="directory of dev *.jsonl conversations (default: ../shared/data "
                             "relative to the repository root)")
    parser.add_argument("--pack", action="append", default=[], metavar="NAME_OR_PATH",
                        help="rule pack to load (repeatable; default: every built-in pack)")
    parser.add_argument("--repeat", type=int, default=repeat,
                        help=f"repetitions; medians are reported (default {repeat})")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON ('-': stdout)")


def conversation_files(data: str | Path) -> list[Path]:
    """The conversation files of the data directory (reference gold files are not)."""
    directory = Path(data)
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.glob("*.jsonl") if not p.name.startswith("gold_"))


def exit_without_data(data: str | Path) -> None:
    print(f"no dev data at {data} (expected *.jsonl conversations): nothing to benchmark; "
          "pass --data DIR")
    sys.exit(0)


def load_conversations(files: list[Path], per_file: int | None = None) -> list[Any]:
    """Every conversation of ``files``, or the first ``per_file`` of each."""
    import itertools

    from firewall.errors import ConversationError
    from firewall.formats import read_conversations

    conversations = []
    for path in files:
        try:
            conversations.extend(itertools.islice(read_conversations(path), per_file))
        except ConversationError as exc:
            print(f"skipping {path.name}: not conversations ({exc})")
    return conversations


def load_packs_for_bench(names: list[str]) -> tuple[list[Any], str]:
    """Built-in packs (or ``--pack``), strict; a pack whose examples fail loads non-strict."""
    from firewall.errors import PackError
    from firewall.extraction.packs import load_packs

    try:
        return load_packs(*names), "strict"
    except PackError as exc:
        print(f"warning: strict load failed, loading without running rule examples: "
              f"{str(exc).splitlines()[0]}")
        return load_packs(*names, strict=False), "non-strict"


def describe_packs(packs: list[Any]) -> str:
    parts = []
    for pack in packs:
        kinds = collections.Counter(rule.kind for rule in pack.rules)
        parts.append(f"{pack.name} {pack.version} ({len(pack.rules)} rules: "
                     + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) + ")")
    return "; ".join(parts)


def exit_without_packs(names: list[str]) -> None:
    print("no rule packs to benchmark (the built-in rules/ directory is empty"
          + (f" and --pack {names} gave none" if names else "") + "); pass --pack NAME_OR_PATH")
    sys.exit(0)


def bench_inputs(args: argparse.Namespace, title: str) -> tuple[dict[str, Any], list[Path],
                                                                list[Any], str]:
    """What every benchmark starts with: the header, the data files and the packs (each
    script exits 0 with a clear message when either is missing)."""
    header = print_header(title)
    files = conversation_files(args.data)
    if not files:
        exit_without_data(args.data)
    packs, mode = load_packs_for_bench(args.pack)
    if not packs or not any(p.rules for p in packs):
        exit_without_packs(args.pack)
    print(f"packs   : {describe_packs(packs)} [{mode}]")
    return header, files, packs, mode


def write_json(target: str | None, payload: dict[str, Any]) -> None:
    if not target:
        return
    text = json.dumps(payload, indent=2, default=str)
    if target == "-":
        print(text)
    else:
        Path(target).write_text(text + "\n", encoding="utf-8")
        print(f"results written to {target}")


# ── what gets scanned ────────────────────────────────────────────────────────────────────


def _leaves(node: Any, path: str) -> Iterator[tuple[str, str]]:
    """(path, string) for every string leaf: the paths ``Extractor.scan_json`` names."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _leaves(value, f"{path}[{i}]")
    elif isinstance(node, str):
        yield path, node


def message_units(turn: Any) -> list[tuple[str, str]]:
    """(field, text) of everything the extractor text-scans in one message."""
    if turn.role == "system":
        return []
    units = [("text", turn.text)] if turn.text else []
    for call in turn.tool_calls:
        units.extend((path, text) for path, text in _leaves(call.arguments, "arguments") if text)
    return units


# ── the naive loop ───────────────────────────────────────────────────────────────────────


class NaiveLoop:
    """One compiled pattern per regex rule, ``finditer`` over every text, no prefilter."""

    def __init__(self, packs: list[Any], module: Any) -> None:
        import regex

        from firewall.extraction.checksums import CHECKSUMS
        from firewall.extraction.compiled import REQUIRES
        from firewall.extraction.packs import RegexRule
        from firewall.turns import ROLES

        flag_names = {"ignorecase": "IGNORECASE", "multiline": "MULTILINE", "dotall": "DOTALL",
                      "verbose": "VERBOSE"}
        self.module = module.__name__
        self.skipped: list[str] = []
        self.by_role: dict[str, list[tuple]] = {role: [] for role in ROLES}
        seen = set()
        total = 0
        for pack in packs:
            for qid, rule in zip(pack.qualified_ids(), pack.rules):
                if not isinstance(rule, RegexRule) or qid in seen:
                    continue
                seen.add(qid)
                total += 1
                flags = 0
                for name in rule.flags:
                    flags |= getattr(module, flag_names[name])
                try:
                    pattern = module.compile(rule.pattern, flags)
                except Exception as exc:  # noqa: BLE001 - re lacks some `regex` syntax
                    self.skipped.append(f"{qid}: {exc}")
                    continue
                group = rule.group if rule.group is not None else \
                    "literal" if "literal" in pattern.groupindex else 0
                checksum = CHECKSUMS[rule.checksum] if rule.checksum else None
                requires = tuple(REQUIRES[name] for name in getattr(rule, "requires", ()))
                allow = rule.allowlist
                allow_values = frozenset(allow.values)
                allow_patterns = tuple(regex.compile(p) for p in allow.patterns)
                # the filters the pack format gained for gitleaks imports (entropy, stopwords,
                # regexes on the value, the match and the line), written out independently
                extra = (rule.entropy, tuple(w.lower() for w in allow.stopwords),
                         *(tuple(regex.compile(p) for p in getattr(allow, name))
                           for name in ("regexes", "match_regexes", "line_regexes")))
                entry = (qid, pattern, group, checksum, requires, allow_values, allow_patterns,
                         extra)
                for role in rule.roles:
                    self.by_role[role].append(entry)
        self.total = total
        self.compiled = total - len(self.skipped)

    def scan_message(self, turn: Any, units: list[tuple[str, str]]) -> list[tuple]:
        found = []
        for field, text in units:
            for qid, pattern, group, checksum, requires, allow_values, allow_patterns, \
                    extra in self.by_role[turn.role]:
                for m in pattern.finditer(text):
                    if group == "first":
                        spans = [m.span(g) for g in range(1, pattern.groups + 1)]
                        start, end = next((s for s in spans if s[1] > s[0]), m.span())
                    else:
                        start, end = m.span(group)
                    if start < 0 or start == end:
                        continue
                    value = text[start:end]
                    if requires and not all(test(value) for test in requires):
                        continue
                    if checksum is not None and not checksum(value):
                        continue
                    if value in allow_values or any(p.fullmatch(value) for p in allow_patterns):
                        continue
                    if _dropped_by_extra(extra, value, m, text):
                        continue
                    found.append((field, start, end, qid))
        return found


def _dropped_by_extra(extra: tuple, value: str, m: Any, text: str) -> bool:
    import math

    entropy, stopwords, in_value, in_match, in_line = extra
    if entropy is not None:
        counts = collections.Counter(value)
        bits = -sum(c / len(value) * math.log2(c / len(value)) for c in counts.values())
        if bits <= entropy:
            return True
    if any(w in value.lower() for w in stopwords) or any(p.search(value) for p in in_value):
        return True
    if any(p.search(m.group()) for p in in_match):
        return True
    if in_line:
        line_start = text.rfind("\n", 0, m.start()) + 1
        line_end = text.find("\n", m.end())
        line = text[line_start:len(text) if line_end < 0 else line_end]
        return any(p.search(line) for p in in_line)
    return False


# ── Presidio ─────────────────────────────────────────────────────────────────────────────


class PresidioBaseline:
    def __init__(self, packs: list[Any]) -> None:
        import logging

        import regex
        from presidio_analyzer import AnalyzerEngine, Pattern, PatternRecognizer, RecognizerRegistry
        from presidio_analyzer.nlp_engine import NlpEngineProvider

        from firewall.extraction.packs import RegexRule
        from firewall.turns import ROLES

        logging.getLogger("presidio-analyzer").setLevel(logging.ERROR)
        flag_values = {"ignorecase": regex.IGNORECASE, "multiline": regex.MULTILINE,
                       "dotall": regex.DOTALL, "verbose": regex.VERBOSE}
        recognizers, self.entities = [], {role: [] for role in ROLES}
        self.entity_rule: dict[str, str] = {}
        self.skipped: list[str] = []
        seen = set()
        for pack in packs:
            for qid, rule in zip(pack.qualified_ids(), pack.rules):
                if not isinstance(rule, RegexRule) or qid in seen:
                    continue
                seen.add(qid)
                flags = 0
                for name in rule.flags:
                    flags |= flag_values[name]
                entity = "R" + re.sub(r"[^A-Za-z0-9]", "_", qid).upper() + f"_{len(seen)}"
                try:
                    recognizers.append(PatternRecognizer(
                        supported_entity=entity, name=qid,
                        patterns=[Pattern(name=qid, regex=rule.pattern, score=1.0)],
                        global_regex_flags=flags))
                except Exception as exc:  # noqa: BLE001
                    self.skipped.append(f"{qid}: {exc}")
                    continue
                self.entity_rule[entity] = qid
                for role in rule.roles:
                    self.entities[role].append(entity)
        registry = RecognizerRegistry(recognizers=recognizers, supported_languages=["en"])
        nlp_engine = NlpEngineProvider(nlp_configuration={
            "nlp_engine_name": "no_op", "models": [{"lang_code": "en", "model_name": "no_op"}],
        }).create_engine()
        self.engine = AnalyzerEngine(registry=registry, nlp_engine=nlp_engine,
                                     supported_languages=["en"])
        self.recognizer_module = PatternRecognizer.__module__

    def scan_message(self, turn: Any, units: list[tuple[str, str]]) -> list[str]:
        entities = self.entities[turn.role]
        if not units or not entities:
            return []
        text = "\n".join(text for _, text in units)
        results = self.engine.analyze(text, language="en", entities=entities)
        return [text[r.start:r.end] for r in results]


# ── the benchmark ────────────────────────────────────────────────────────────────────────


def regex_only(packs: list[Any]) -> list[Any]:
    from firewall.extraction.packs import RegexRule

    out = []
    for pack in packs:
        keep = [(o, r) for o, r in zip(pack.owners, pack.rules) if isinstance(r, RegexRule)]
        out.append(pack.model_copy(update={"rules": tuple(r for _, r in keep),
                                           "owners": tuple(o for o, _ in keep)}))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser, repeat=5)
    parser.add_argument("--no-presidio", action="store_true", help="skip the Presidio baseline")
    parser.add_argument("--profile", action="store_true",
                        help="after timing, cProfile one firewall pass and print the top functions")
    parser.add_argument("--per-file", type=int, metavar="N",
                        help="only the first N conversations of each file (the naive loop and "
                             "Presidio take about an hour over the whole dev data)")
    args = parser.parse_args(argv)

    header, files, packs, mode = bench_inputs(args, "throughput: extraction MB/s on the dev data")
    sys.path.insert(0, str(REPO))
    import regex

    from firewall.extraction.compiled import covered
    from firewall.extraction.extract import Extractor, Scanner

    conversations = load_conversations(files, args.per_file)
    messages = [(ci, ti, turn, message_units(turn))
                for ci, conv in enumerate(conversations) for ti, turn in enumerate(conv.turns)]
    scanned = [m for m in messages if m[3]]
    nbytes = sum(len(text.encode("utf-8")) for *_, units in messages for _, text in units)
    mb = nbytes / 1e6
    print(f"data    : {', '.join(p.name for p in files)}: {len(conversations)} conversations, "
          f"{len(messages)} messages ({len(scanned)} with text to scan), "
          f"{sum(len(u) for *_, u in messages)} texts, {nbytes:,} bytes scanned "
          "(system prompts excluded, as the extractor skips them)")

    extractor = Extractor(packs, cache_size=0)  # measure scanning, not the memo
    extractor_regex = Extractor(regex_only(packs), cache_size=0)  # measure scanning, not the memo
    naive_regex = NaiveLoop(packs, regex)
    naive_re = NaiveLoop(packs, re)
    regex_qids = {qid for p in packs for qid, r in zip(p.qualified_ids(), p.rules)
                  if r.kind == "regex"}
    kinds = collections.Counter(r.kind for r in extractor.rules)
    prefilter = extractor._by_role["tool"].prefilter
    re2_groups = prefilter._ascii.groups
    re2_members = sum(len(g.rules) for g in re2_groups)
    print(f"rules   : {len(extractor.rules)} compiled ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))}); "
          f"prefilter: {prefilter.size} regex rules, {len(prefilter._unkeyed)} without "
          f"keywords, RE2 sets {'ACTIVE: ' + str(len(re2_groups)) + ' groups of ' + str(re2_members) if re2_groups else 'INACTIVE (0)'} members")
    print(f"naive   : regex compiles {naive_regex.compiled}/{naive_regex.total}; "
          f"re compiles {naive_re.compiled}/{naive_re.total}"
          + (f" (re skips: {'; '.join(naive_re.skipped)})" if naive_re.skipped else ""))
    presidio = None
    if not args.no_presidio:
        try:
            presidio = PresidioBaseline(packs)
            from presidio_analyzer import pattern_recognizer

            print(f"presidio: {len(presidio.entity_rule)} PatternRecognizers, no_op NLP engine; "
                  f"its PatternRecognizer matches with the `{pattern_recognizer.re.__name__}` module")
        except ImportError as exc:
            print(f"presidio: not installed ({exc}); skipped")

    # ── correctness: identical regex-rule literals ──
    fw_spans: collections.Counter = collections.Counter()
    for ci, ti, turn, _ in messages:
        for lit in extractor.scan_turn(turn, ti).literals:
            if lit.rule in regex_qids:
                fw_spans[(ci, ti, lit.field, lit.start, lit.end, lit.rule)] += 1
    naive_spans: collections.Counter = collections.Counter()
    naive_re_spans: collections.Counter = collections.Counter()
    for ci, ti, turn, units in scanned:
        for span in naive_regex.scan_message(turn, units):
            naive_spans[(ci, ti, *span)] += 1
        for span in naive_re.scan_message(turn, units):
            naive_re_spans[(ci, ti, *span)] += 1
    only_fw, only_naive = fw_spans - naive_spans, naive_spans - fw_spans
    text_of = {(ci, ti, f): t for ci, ti, _, units in scanned for f, t in units}
    keywords = {qid: [k.lower() for k in r.keywords] for p in packs
                for qid, r in zip(p.qualified_ids(), p.rules) if r.kind == "regex"}

    def gated(key: tuple) -> bool:  # the rule's keywords are absent: rule semantics, not a bug
        words = keywords[key[5]]
        text = text_of[(key[0], key[1], key[2])].lower()
        return bool(words) and not any(w in text for w in words)

    keyword_gated = collections.Counter({k: v for k, v in only_naive.items() if gated(k)})
    only_naive = only_naive - keyword_gated
    noise_of: dict[tuple, Any] = {}

    def in_noise(key: tuple) -> bool:  # inside what the packs declare noise: dropped by design
        unit = (key[0], key[1], key[2])
        if unit not in noise_of:
            noise_of[unit] = covered(extractor.noise_spans(text_of[unit], 60.0) or [])
        return noise_of[unit](key[3], key[4])

    noise_dropped = collections.Counter({k: v for k, v in only_naive.items() if in_noise(k)})
    only_naive = only_naive - noise_dropped
    identical = not only_fw and not only_naive
    by_design = " and ".join(name for name, spans in (("keyword gating", keyword_gated),
                                                      ("declared noise", noise_dropped)) if spans)
    print(f"\ncheck   : firewall regex-rule spans {sum(fw_spans.values())}, naive `regex` spans "
          f"{sum(naive_spans.values())}: " + (f"IDENTICAL except {by_design}" if identical and
          by_design else "IDENTICAL" if identical else
          f"DIFFER ({sum(only_fw.values())} only in firewall, {sum(only_naive.values())} only in "
          "naive, keyword gating and declared noise aside) — ENGINE BUG"))
    if noise_dropped:
        print(f"          {sum(noise_dropped.values())} naive-only spans lie in declared noise "
              "(ls -l columns, line-number gutters...), which the firewall drops by design: "
              f"{dict(collections.Counter(k[5] for k in noise_dropped.elements()).most_common(6))}")
    if keyword_gated:
        by_rule = collections.Counter(k[5] for k in keyword_gated.elements())
        print(f"          {sum(keyword_gated.values())} naive-only spans are in texts without any of "
              f"the rule's keywords (keywords gate a rule by design; these rules' keywords are "
              f"not necessary for their pattern — a pack issue): {dict(by_rule.most_common(10))}")
        for key in list(keyword_gated)[:3]:
            ci, ti, f, s, e, qid = key
            print(f"            e.g. {conversations[ci].id} msg {ti} {f} {qid} "
                  f"{text_of[(ci, ti, f)][s:e]!r}")
    for label, diff in (("only firewall", only_fw), ("only naive", only_naive)):
        by_rule = collections.Counter(k[5] for k in diff.elements())
        if by_rule:
            print(f"  {label} by rule: {dict(by_rule.most_common(10))}")
        for key in list(diff)[:5]:
            ci, ti, f, s, e, qid = key
            print(f"    {label}: {conversations[ci].id} msg {ti} {f} [{s}:{e}] {qid} "
                  f"{text_of.get((ci, ti, f), '')[s:e]!r}")
    re_agree = [q for q in regex_qids if q not in {s.split(':')[0] for s in naive_re.skipped}]
    fw_on_re_rules = collections.Counter({k: v for k, v in naive_spans.items() if k[5] in re_agree})
    re_diff = (fw_on_re_rules - naive_re_spans) + (naive_re_spans - fw_on_re_rules)
    print(f"          stdlib `re` loop vs `regex` loop on the {len(re_agree)} rules `re` compiles: "
          + ("identical spans" if not re_diff else f"{sum(re_diff.values())} spans differ "
             f"(by rule: {dict(collections.Counter(k[5] for k in re_diff.elements()).most_common(6))})"))

    presidio_overlap = None
    if presidio is not None:
        fw_values = {text_of[(k[0], k[1], k[2])][k[3]:k[4]] for k in fw_spans}
        pv = set()
        for ci, ti, turn, units in scanned:
            pv.update(presidio.scan_message(turn, units))
        inter = fw_values & pv
        presidio_overlap = {"firewall_values": len(fw_values), "presidio_values": len(pv),
                            "both": len(inter), "only_firewall": len(fw_values - pv),
                            "only_presidio": len(pv - fw_values),
                            "jaccard": round(len(inter) / max(1, len(fw_values | pv)), 4)}
        print(f"          Presidio distinct values {len(pv)}, firewall regex-rule distinct values "
              f"{len(fw_values)}, both {len(inter)} (Jaccard {presidio_overlap['jaccard']}); "
              f"only Presidio {len(pv - fw_values)} e.g. {sorted(pv - fw_values)[:4]}, only "
              f"firewall {len(fw_values - pv)} e.g. {sorted(fw_values - pv)[:4]} (Presidio reports "
              "the whole match, not the `literal` group, and has no checksum/allowlist)")

    # ── timing ──
    def run_firewall(ex: Any) -> None:
        current, scanner = -1, None
        for ci, _, turn, _ in messages:
            if ci != current:
                current, scanner = ci, Scanner(ex)
            scanner.add(turn)

    def run_naive(loop: NaiveLoop) -> None:
        for _, _, turn, units in scanned:
            loop.scan_message(turn, units)

    def run_presidio() -> None:
        for _, _, turn, units in scanned:
            presidio.scan_message(turn, units)

    engines = {"firewall": lambda: run_firewall(extractor),
               "firewall-regex": lambda: run_firewall(extractor_regex),
               "naive-regex": lambda: run_naive(naive_regex),
               "naive-re": lambda: run_naive(naive_re)}
    if presidio is not None:
        engines["presidio"] = run_presidio
    for run in engines.values():  # warm-up (lazy compiles, caches)
        run()
    times: dict[str, list[float]] = {name: [] for name in engines}
    print(f"\ntiming  : {args.repeat} repetitions, engines interleaved in each")
    for rep in range(args.repeat):
        line = []
        for name, run in engines.items():
            gc.collect()
            t0 = time.perf_counter()
            run()
            elapsed = time.perf_counter() - t0
            times[name].append(elapsed)
            line.append(f"{name} {mb / elapsed:.2f}")
        print(f"  rep {rep + 1}: " + "  ".join(line) + "  MB/s")
    med = {name: statistics.median(ts) for name, ts in times.items()}
    mbps = {name: mb / t for name, t in med.items()}
    print(f"\n{'engine':<16}{'median s':>10}{'MB/s':>10}{'µs/msg':>10}   note")
    notes = {"naive-re": f"{naive_re.compiled}/{naive_re.total} rules (those `re` compiles)",
             "firewall": "all rule kinds, as a firewall runs",
             "firewall-regex": "regex rules only"}
    for name, t in med.items():
        print(f"{name:<16}{t:>10.3f}{mbps[name]:>10.2f}{t / len(messages) * 1e6:>10.1f}   "
              f"{notes.get(name, '')}")
    ratios = {"firewall/naive-regex": med["naive-regex"] / med["firewall"],
              "firewall/naive-re": med["naive-re"] / med["firewall"],
              "firewall-regex/naive-regex": med["naive-regex"] / med["firewall-regex"]}
    if presidio is not None:
        ratios["firewall/presidio"] = med["presidio"] / med["firewall"]
        ratios["firewall-regex/presidio"] = med["presidio"] / med["firewall-regex"]
    targets = {"firewall/naive-regex": 4.0, "firewall/presidio": 10.0}
    print("\nratios (speed-up, same run, medians):")
    for name, value in ratios.items():
        target = targets.get(name)
        verdict = "" if target is None else f"   target >= {target:g}x: " + \
            ("MET" if value >= target else "NOT MET")
        print(f"  {name:<28}{value:>7.2f}x{verdict}")

    if args.profile:
        import cProfile
        import io
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        run_firewall(extractor)
        profiler.disable()
        stream = io.StringIO()
        stats = pstats.Stats(profiler, stream=stream)
        stats.sort_stats("tottime").print_stats(20)
        print("\nprofile (one firewall pass, by own time):")
        print("\n".join(stream.getvalue().splitlines()[:45]))

    write_json(args.json, {
        **header, "benchmark": "throughput", "data": [p.name for p in files],
        "packs": describe_packs(packs), "pack_load": mode,
        "conversations": len(conversations), "messages": len(messages), "bytes": nbytes,
        "repeat": args.repeat, "seconds": times, "median_seconds": med, "mb_per_s": mbps,
        "ratios": ratios, "identical_spans": identical,
        "spans": {"firewall": sum(fw_spans.values()), "naive_regex": sum(naive_spans.values()),
                  "only_firewall": sum(only_fw.values()), "only_naive": sum(only_naive.values()),
                  "keyword_gated": sum(keyword_gated.values())},
        "naive_re_compiled": [naive_re.compiled, naive_re.total],
        "presidio_overlap": presidio_overlap,
        "re2_set_active": bool(re2_groups),
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())

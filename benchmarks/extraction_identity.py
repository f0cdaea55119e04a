"""Proof that a speed change extracts the same literals: one hash of everything extracted.

Every conversation of every dev set (the ``*.jsonl`` files of ``--data`` and the session files
of its ``claude_code_cc0/`` folder) is scanned with the built-in packs, and every literal of
every conversation (value, rule, turn, role, offsets, field, tool, severity, sensitivity,
priority, count, mixed-script flag), in order, goes into one SHA-256, with one hash per file.
Run it before and after a change: the hashes must be equal (or the change's note says which
rule's output changed and why).

    python benchmarks/extraction_identity.py [--data DIR] [--file NAME ...] [--json FILE|-]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import DEFAULT_DATA, exit_without_data, load_packs_for_bench  # noqa: E402


def dev_files(data: Path) -> list[Path]:
    """The conversation files of ``data`` and of its ``claude_code_cc0/`` folder."""
    files = sorted(p for p in data.glob("*.jsonl") if not p.name.startswith("gold_"))
    files += sorted((data / "claude_code_cc0").glob("*.jsonl"))
    return files


def literal_record(lit) -> str:
    return json.dumps([lit.value, lit.rule, lit.turn, lit.role, lit.start, lit.end, lit.field,
                       lit.tool, lit.severity, lit.sensitive, lit.priority, lit.count,
                       lit.mixed_script], ensure_ascii=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA),
                        help="the dev data folder (default: ../shared/data relative to the "
                             "repository root)")
    parser.add_argument("--file", action="append", default=[],
                        help="only the files with this name (repeatable)")
    parser.add_argument("--json", help="also write the hashes as JSON ('-': stdout)")
    args = parser.parse_args()
    data = Path(args.data)
    files = dev_files(data) if data.is_dir() else []
    if args.file:
        files = [f for f in files if f.name in args.file]
    if not files:
        exit_without_data(data)
    from firewall.extraction.extract import Extractor
    from firewall.formats import read_conversations

    packs, _ = load_packs_for_bench([])
    extractor = Extractor(packs)
    total = hashlib.sha256()
    per_file: dict[str, dict[str, object]] = {}
    skipped: list = []  # bad lines of a session file: skipped, the rest read (as the CLI does)
    started = time.perf_counter()
    for path in files:
        digest, count = hashlib.sha256(), 0
        for conversation in read_conversations(path, on_error=skipped.append):
            result = extractor.scan(conversation)
            digest.update(f"conversation {conversation.id} {len(result.timeouts)}\n".encode())
            for lit in result.literals:
                digest.update(literal_record(lit).encode() + b"\n")
                count += 1
        name = path.relative_to(data).as_posix()
        per_file[name] = {"literals": count, "sha256": digest.hexdigest()}
        total.update(f"{name} {digest.hexdigest()}\n".encode())
        print(f"{digest.hexdigest()[:16]}  {count:7d} literals  {name}", flush=True)
    print(f"{len(skipped)} bad lines skipped")
    print(f"{total.hexdigest()}  all ({time.perf_counter() - started:.0f} s)")
    if args.json:
        text = json.dumps({"all": total.hexdigest(), "files": per_file}, indent=1)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n")


if __name__ == "__main__":
    main()

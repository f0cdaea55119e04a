"""Options shared by the subcommands of ``firewall`` (defined apart from ``cli`` so that the
modules registering their own subcommands, such as ``evaluate`` and ``hooks``, need not import
the command line).

Pack selection, the same for every command: ``--rules PACK_OR_PATH`` (repeatable) adds a pack to
the built-in ones; ``--only`` makes the ``--rules`` packs the only ones.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any


def add_rules_option(parser: argparse.ArgumentParser, what: str = "the packs to use") -> None:
    parser.add_argument("--rules", action="append", metavar="PACK_OR_PATH",
                        help=f"{what}: a built-in pack name or a YAML path, ADDED to the "
                             f"built-in packs (repeatable)")
    parser.add_argument("--only", action="store_true",
                        help="use only the --rules packs, not the built-in ones")


def pack_names(rules: Sequence[str] | None, only: bool = False) -> list[str]:
    """The packs a command line selects: every built-in pack plus ``rules``, or, with ``only``,
    ``rules`` alone (an error without any)."""
    from .errors import PackError
    from .extraction.packs import builtin_names

    rules = list(rules or ())
    if only and not rules:
        raise PackError("--only needs at least one --rules PACK_OR_PATH")
    names = rules if only else builtin_names() + [r for r in rules if r not in builtin_names()]
    return list(dict.fromkeys(names))


def packs_from_args(args: argparse.Namespace, *, strict: bool = True) -> list[Any]:
    from .extraction.packs import load_packs

    return load_packs(*pack_names(args.rules, getattr(args, "only", False)), strict=strict)


def add_fail_fast_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fail-fast", action="store_true",
                        help="stop at the first bad line of an input file (default: report it "
                             "as file:line, skip it, go on, and exit 1 at the end)")


def non_negative(text: str) -> int:
    """An argparse type: a whole number, 0 or more (``--keep-last -3`` is an error, not 0)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


KEEP_LAST = 8  # messages kept verbatim at the end: the same default for compact and eval


def add_keep_last_option(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--keep-last", type=non_negative, default=KEEP_LAST, metavar="N",
                        help=f"messages kept verbatim at the end{what} (default {KEEP_LAST})")


def add_tokens_option(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--tokens", default=default, metavar="COUNTER",
                        help="what counts tokens: estimate (offline, o200k-calibrated), o200k, "
                             "cl100k (need bpe-openai or tiktoken), anthropic[:MODEL] (the "
                             "count-tokens API: opt-in, one call to calibrate the estimate on "
                             "the input with every secret masked), auto (the estimate: "
                             f"counting never picks a vendor by itself); default {default}")


SUMMARIZERS = ("extractive", "anthropic", "openai")


def add_summarizer_options(parser: argparse.ArgumentParser, what: str = "") -> None:
    parser.add_argument("--summarizer", choices=SUMMARIZERS, default="extractive",
                        help=f"default: the offline extractive one{what}")
    parser.add_argument("--model", help="model for the anthropic / openai summarizers")
    parser.add_argument("--base-url", help="OpenAI-compatible server for --summarizer openai")


def add_placeholders_option(parser: argparse.ArgumentParser) -> None:
    """``--placeholders``, the same for every command that can send text to a summarizer
    (``compact``, ``replay``): each secret a rule finds goes out as a placeholder, in every
    spelling (see ``firewall.placeholders``), and is put back in the summary."""
    parser.add_argument("--placeholders", action="store_true",
                        help="replace sensitive literals by placeholders for the summarizer "
                             "(what goes to --summarizer anthropic/openai holds no secret a "
                             "rule finds; the summary gets them back)")


def summarizer_from_args(args: argparse.Namespace, **settings: Any) -> Any:
    """The summarizer the options name; ``settings`` (``system``, ``max_tokens``) go to a vendor
    one."""
    if args.summarizer == "extractive":
        from .summarizers.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    if args.model:
        settings["model"] = args.model
    if args.summarizer == "anthropic":
        from .summarizers.anthropic import AnthropicSummarizer

        return AnthropicSummarizer(**settings)
    from .summarizers.openai import OpenAISummarizer

    return OpenAISummarizer(base_url=args.base_url, **settings)


def _dask_address(text: str) -> str:
    """``--dask ADDRESS``: a scheduler address (``tcp://host:8786``), or ``local``."""
    if text == "local" or "://" in text:
        return text
    raise argparse.ArgumentTypeError(
        f"expected a scheduler address like tcp://host:8786, got {text!r} (to start a local "
        f"cluster, put --dask after the input files, or write --dask local)")


def _byte_size(text: str) -> int:
    """``64M``, ``512k``, ``1G`` or a number of bytes, 1 or more."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    scale = units.get(text[-1:].lower(), 1)
    try:
        value = int(float(text[:-1] if scale > 1 else text) * scale)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a size like 64M or 4096: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 byte or more: {text!r}")
    return value


def add_dask_option(parser: argparse.ArgumentParser) -> None:
    """``--dask [ADDRESS]`` and ``--dask-partition SIZE``, the same for every batch command
    (``distributed`` runs them; the output is the same as without)."""
    from .evaluation.distributed import LOCAL, MAX_PARTITION, MIN_PARTITION, RANGES_PER_WORKER

    parser.add_argument("--dask", nargs="?", const=LOCAL, type=_dask_address, metavar="ADDRESS",
                        help="run on Dask (the dask extra): alone, a local cluster of one "
                             "worker process per core; with tcp://host:8786, a running "
                             "cluster whose workers see the input files. The output is the "
                             "same as without")
    parser.add_argument("--dask-partition", type=_byte_size, metavar="SIZE",
                        help=f"bytes of a JSONL file per Dask task, e.g. 8M (default: the "
                             f"input in {RANGES_PER_WORKER} ranges per worker, each "
                             f"{MIN_PARTITION >> 20}M to {MAX_PARTITION >> 20}M)")


def add_audit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--audit-db", metavar="PATH_OR_URL",
                        help="audit log: SQLite file, .jsonl, or postgresql://... shared by "
                             "many machines (the postgres extra; key: $FIREWALL_AUDIT_KEY) "
                             "(default: $FIREWALL_AUDIT_DB, else the per-user state folder)")
    if parser.prog.split()[-1] == "compact":
        parser.add_argument("--no-audit", action="store_true", help="write no audit record")


def missing_log_file(spec: str | None) -> str | None:
    """The path of the log file ``spec`` names when it does not exist yet, else None (a
    database server's log exists as soon as it can be opened)."""
    from pathlib import Path

    from .audit import audit_db_spec, default_db_path, is_database_url

    spec = audit_db_spec(spec)
    if spec == ":memory:" or is_database_url(spec):
        return None
    path = Path(spec).expanduser() if spec else default_db_path()
    return None if path.exists() else str(path)


def add_archive_tokens_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-archive-tokens", dest="archive_tokens", action="store_false",
                        help="archive only the literals the rules extracted, not the span's "
                             "other tokens holding a digit, / or @ (the archive's token tier, "
                             "on by default; the hooks read FIREWALL_ARCHIVE_TOKENS=0)")


def add_salience_option(parser: argparse.ArgumentParser) -> None:
    """``--salience FILE``: which entries the ledger's budget keeps (``firewall salience``)."""
    parser.add_argument("--salience", metavar="FILE",
                        help="salience model (JSON, from `firewall salience fit`) ranking what "
                             "the ledger's budget keeps (default: the built-in hand-set one)")


def salience_from_args(args: argparse.Namespace) -> Any:
    """The ``Salience`` that ``--salience`` names (the built-in one without it)."""
    from .compaction.salience import load_salience

    return load_salience(getattr(args, "salience", None))

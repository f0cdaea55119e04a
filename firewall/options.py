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
    from .packs import builtin_names

    rules = list(rules or ())
    if only and not rules:
        raise PackError("--only needs at least one --rules PACK_OR_PATH")
    names = rules if only else builtin_names() + [r for r in rules if r not in builtin_names()]
    return list(dict.fromkeys(names))


def packs_from_args(args: argparse.Namespace, *, strict: bool = True) -> list[Any]:
    from .packs import load_packs

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


def add_summarizer_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--summarizer", choices=("extractive", "anthropic", "openai"),
                        default="extractive", help="default: the offline extractive one")
    parser.add_argument("--model", help="model for the anthropic / openai summarizers")
    parser.add_argument("--base-url", help="OpenAI-compatible server for --summarizer openai")


def summarizer_from_args(args: argparse.Namespace) -> Any:
    """The summarizer ``--summarizer``, ``--model`` and ``--base-url`` name."""
    name = args.summarizer
    if name == "extractive":
        from .summarizers.extractive import ExtractiveSummarizer

        return ExtractiveSummarizer()
    if name == "anthropic":
        from .summarizers.anthropic import AnthropicSummarizer

        return AnthropicSummarizer(**({"model": args.model} if args.model else {}))
    from .summarizers.openai import OpenAISummarizer

    kwargs = {"model": args.model} if args.model else {}
    return OpenAISummarizer(base_url=args.base_url, **kwargs)

"""Conversation files as the command line reads them: streamed, with bad lines reported.

Every command that reads recorded conversations goes through ``ConversationFiles``: one
conversation in memory at a time, a bad line (truncated, not JSON, not a conversation) reported
on stderr as ``file:line: what`` and skipped (``fail_fast`` raises it instead), and a progress
bar over the bytes read when stderr is a terminal (quiet when piped or redirected).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from .errors import ConversationError
from .turns import Conversation


class ConversationFiles:
    """``for path, conversation in files`` (or ``files.read(path)``); ``bad`` counts the lines
    skipped, ``conversations`` those read. Use as a context manager: the bar is closed on exit."""

    def __init__(self, paths: Sequence[str | os.PathLike[str]], *, fail_fast: bool = False,
                 label: str = "reading", stream: IO[str] | None = None,
                 progress: bool | None = None) -> None:
        self.paths = [str(p) for p in paths]
        self.fail_fast = fail_fast
        self.stream = stream or sys.stderr
        self.bad = self.conversations = 0
        show = progress if progress is not None else _is_terminal(self.stream)
        self._bar = _bar(self.paths, label, self.stream) if show else None

    def __enter__(self) -> ConversationFiles:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def __iter__(self) -> Iterator[tuple[str, Conversation]]:
        for path in self.paths:
            for conversation in self.read(path):
                yield path, conversation

    def read(self, path: str | os.PathLike[str]) -> Iterator[Conversation]:
        from .formats import read_conversations

        advance = self._bar.update if self._bar is not None else None
        for conversation in read_conversations(path, on_error=self.bad_line,
                                               on_progress=advance):
            self.conversations += 1
            if self._bar is not None:
                self._bar.set_postfix_str(f"{self.conversations} conversation(s)", refresh=False)
            yield conversation

    def note(self, text: str) -> None:
        """A line on stderr that does not break the progress bar."""
        self._write(text, self.stream)

    def out(self, text: str) -> None:
        """A line of output on stdout, written as the files are read (a lone surrogate of the
        input as its JSON escape: no crash)."""
        from .audit import escape_surrogates

        self._write(escape_surrogates(text), sys.stdout)

    def _write(self, text: str, stream: IO[str]) -> None:
        if self._bar is not None and _is_terminal(stream):
            self._bar.write(text, file=stream)  # clears the bar, writes, redraws it
        else:
            stream.write(text + "\n")

    def bad_line(self, error: ConversationError) -> None:
        """Report a bad line and count it (``fail_fast``: raise it)."""
        if self.fail_fast:
            raise error
        self.bad += 1
        self.note(f"firewall: skipped {error}")

    def report(self) -> bool:
        """Say how many bad lines were skipped; True when there were any (exit non-zero)."""
        self.close()
        if self.bad:
            self.stream.write(f"firewall: {self.bad} bad line(s) skipped (see above; "
                              f"--fail-fast stops at the first)\n")
        return bool(self.bad)


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _bar(paths: Sequence[str], label: str, stream: IO[str]) -> Any:
    from tqdm import tqdm  # only on a terminal: piped runs never import it

    total = 0
    for path in paths:
        try:
            total += Path(path).stat().st_size
        except OSError:
            pass  # read_conversations names the file when it opens it
    return tqdm(total=total or None, unit="B", unit_scale=True, unit_divisor=1024,
                desc=label, file=stream, dynamic_ncols=True, leave=False)



def line_aligned_ranges(path: str | os.PathLike[str], size: int) -> list[tuple[int, int]]:
    """``(start, end)`` byte ranges of about ``size`` bytes covering the file, each starting
    and ending on a line start, so that a JSONL file is read in pieces by several workers
    (``formats.read_jsonl_range``) and no line is cut or read twice."""
    if size < 1:
        raise ValueError(f"a byte range needs 1 byte or more, got {size}")
    total = Path(path).stat().st_size
    bounds = [0]
    with open(path, "rb") as handle:
        while bounds[-1] + size < total:
            handle.seek(bounds[-1] + size - 1)
            handle.readline()  # to the start of the line after the byte before the target
            if handle.tell() >= total:
                break
            bounds.append(handle.tell())
    bounds.append(total)
    return list(zip(bounds, bounds[1:]))


def count_lines(path: str | os.PathLike[str], start: int, end: int) -> int:
    """Newlines in bytes ``start..end``: where the next range's line numbers start."""
    count = 0
    with open(path, "rb") as handle:
        handle.seek(start)
        left = end - start
        while left > 0:
            chunk = handle.read(min(left, 1 << 20))
            if not chunk:
                break
            count += chunk.count(b"\n")
            left -= len(chunk)
    return count

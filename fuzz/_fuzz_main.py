"""The command line every harness shares: an empty corpus directory given on it gets the
harness's seeds, then atheris runs ``TestOneInput``. Run as ``python fuzz/fuzz_X.py ...``: the
harness's folder is on ``sys.path`` then, so each ``main`` imports this module."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable


def fuzz_main(test_one_input: Callable[[bytes], None], seeds: Iterable[bytes]) -> None:
    try:
        import atheris
    except ImportError:
        sys.exit("atheris is not installed: pip install atheris")
    for arg in sys.argv[1:]:
        if not arg.startswith("-") and os.path.isdir(arg) and not os.listdir(arg):
            for n, seed in enumerate(seeds):
                with open(os.path.join(arg, f"seed-{n}"), "wb") as handle:
                    handle.write(seed)
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()

"""The `firewall` command line, a leaf over the library: nothing in the library imports it.

``main`` parses and dispatches (``main.py``); the commands that read conversations are in
``commands``, those that read the audit log in ``audit`` and ``recall``, what they share in
``common``. The larger commands (eval, replay, hooks, report, ...) live beside their library
code and load on first use.
"""

from .main import build_parser, main

__all__ = ["build_parser", "main"]

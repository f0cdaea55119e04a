"""Wrappers that put the literal firewall around vendors' own compaction."""

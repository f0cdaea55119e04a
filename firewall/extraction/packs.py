"""Finding and loading rule packs: built-in names and files, ``extends``, the per-user cache,
and the examples every strict load runs through the engine.

The format itself (YAML → validated models) is ``pack_format``; its public names are
re-exported here, the one module a caller needs to load and inspect packs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import PackError
from .pack_format import (ALLOWLIST_REGEX_FIELDS, RULE_KINDS, EntityRule, Extends, JsonKeyRule,
                          Noise, Pack, PackSpec, RegexRule, Rule, TermsRule, parse_pack)

__all__ = ["ALLOWLIST_REGEX_FIELDS", "RULE_KINDS", "EntityRule", "JsonKeyRule", "Pack", "PackSpec",
           "RegexRule", "Rule", "TermsRule", "builtin_dir", "builtin_names", "load_pack",
           "load_packs", "parse_pack", "resolve"]


# ── discovery and loading ───────────────────────────────────────────────────────────────

def builtin_dir() -> Path:
    """The built-in packs: inside the wheel (``firewall/rules``) or the source checkout."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "rules"
    return installed if installed.is_dir() else package.parent / "rules"


def builtin_names() -> list[str]:
    return sorted(p.stem for p in builtin_dir().glob("*.yaml"))


def resolve(name_or_path: str | Path, relative_to: Path | None = None) -> Path:
    text = str(name_or_path)
    candidate = Path(text)
    if relative_to is not None and not candidate.is_absolute():
        local = relative_to / candidate
        if local.suffix in (".yaml", ".yml") and local.is_file():
            return local
    if candidate.suffix in (".yaml", ".yml") or "/" in text or candidate.is_file():
        if not candidate.is_file():
            raise PackError(f"rule pack file not found: {text}")
        return candidate
    builtin = builtin_dir() / f"{text}.yaml"
    if not builtin.is_file():
        raise PackError(f"unknown rule pack {text!r}; built-in packs: "
                        f"{', '.join(builtin_names())}, or give a path to a .yaml file")
    return builtin


def load_pack(name_or_path: str | Path, *, _chain: tuple[str, ...] = (),
              _relative_to: Path | None = None, _read: list[Path] | None = None) -> Pack:
    """``_read`` collects every file the pack is built from (it and the packs it extends)."""
    path = resolve(name_or_path, _relative_to)
    key = str(path.resolve())
    if key in _chain:
        raise PackError(f"'extends' cycle: {' -> '.join(_chain + (key,))}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PackError(f"cannot read: {exc}", path=str(path)) from None
    if _read is not None:
        _read.append(path)
    spec = parse_pack(text, str(path))
    rules: list[Any] = []
    owners: list[str] = []
    noise: list[Noise] = []
    noise_owners: list[str] = []
    for parent in spec.extends:
        ref = Extends(pack=parent) if isinstance(parent, str) else parent
        base = load_pack(ref.pack, _chain=_chain + (key,), _relative_to=path.parent,
                         _read=_read)
        unknown = set(ref.disable) - {r.id for r in base.rules}
        if unknown:
            raise PackError(f"cannot disable unknown rule(s) {', '.join(sorted(unknown))} "
                            f"of pack {base.name!r}", pack=spec.name, field="extends.disable",
                            path=str(path))
        for owner, rule in zip(base.owners, base.rules):
            if rule.id not in ref.disable:
                rules.append(rule)
                owners.append(owner)
        noise.extend(base.noise)
        noise_owners.extend(base.noise_owners)
    rules.extend(spec.rules)
    owners.extend([spec.name] * len(spec.rules))
    noise.extend(spec.noise)
    noise_owners.extend([spec.name] * len(spec.noise))
    return Pack(name=spec.name, version=spec.version, description=spec.description,
                path=str(path), rules=tuple(rules), owners=tuple(owners), noise=tuple(noise),
                noise_owners=tuple(noise_owners))


def load_packs(*names_or_paths: str | Path, strict: bool = True) -> list[Pack]:
    """Load packs by built-in name or path (all built-in packs when none is given).

    In strict mode every rule's examples are run through the whole engine and a pack whose
    examples fail does not load. A pack loaded before from the same files by the same library
    comes from the per-user cache (``packcache``), its examples already checked.
    """
    from . import packcache

    packs = []
    for name in names_or_paths or builtin_names():
        pack = packcache.lookup(resolve(name), examples_checked=strict)
        if pack is None:
            read: list[Path] = []
            pack = load_pack(name, _read=read)
            if strict:
                _check_examples(pack)
            packcache.store(pack, read, examples_checked=strict)
        packs.append(pack)
    return packs


def _check_examples(pack: Pack) -> None:
    from .examples import failures  # the engine depends on packs, not the reverse

    problems = failures([pack])
    if problems:
        raise PackError(f"{len(problems)} rule example(s) fail; run 'firewall rules "
                        f"test {pack.path}':\n  "
                        + "\n  ".join(p.describe() for p in problems[:10]),
                        pack=pack.name, path=pack.path)

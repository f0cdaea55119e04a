"""The rule-pack format: YAML → validated pydantic models (``compiled`` turns them into rules).

The raw form mirrors the YAML exactly (``extra="forbid"``: a misspelt key is an error, not a
silently ignored setting). Every error names the pack, the rule id, the field and the line.
"""

from __future__ import annotations

import functools
from functools import cached_property
from typing import Annotated, Any, Literal as TypingLiteral

import regex
from pydantic import (BaseModel, ConfigDict, Field, TypeAdapter, ValidationError,
                      field_validator)

from .checksums import CHECKSUMS
from ..errors import PackError
from ..turns import Role

RULE_ID = r"^[a-z0-9][a-z0-9._-]*$"
PACK_NAME = r"^[a-z0-9][a-z0-9._-]*$"
DEFAULT_ROLES: list[Role] = ["user", "tool", "assistant"]
REGEX_FIELDS = ("pattern", "value_pattern")
ALLOWLIST_REGEX_FIELDS = ("patterns", "regexes", "match_regexes", "line_regexes")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MatchExample(_Strict):
    """A text and the exact literals this rule must extract from it, in order of appearance."""

    text: str
    literals: list[str]


class Examples(_Strict):
    match: list[MatchExample] = Field(default_factory=list)
    no_match: list[str] = Field(default_factory=list, description="texts that must yield nothing")


class Allowlist(_Strict):
    """Values this rule must not report. Any one check that holds drops the value (gitleaks'
    allowlist ``condition = "OR"``)."""

    values: list[str] = Field(default_factory=list)
    patterns: list[str] = Field(default_factory=list, description="regexes matching the whole value")
    stopwords: list[str] = Field(default_factory=list,
                                 description="a value containing one of these (any case)")
    regexes: list[str] = Field(default_factory=list,
                               description="regexes found anywhere in the value")
    match_regexes: list[str] = Field(
        default_factory=list, description="regex rules: regexes found anywhere in the whole "
                                          "match (not only the `literal` group)")
    line_regexes: list[str] = Field(
        default_factory=list, description="regex rules: regexes found anywhere in the lines "
                                          "the match stands on (an inline marker such as "
                                          "`gitleaks:allow`)")


class _RuleBase(_Strict):
    id: str = Field(pattern=RULE_ID, description="unique within the pack")
    description: str = ""
    roles: list[Role] = Field(default_factory=lambda: list(DEFAULT_ROLES), min_length=1,
                              description="the turns the rule applies to")
    severity: TypingLiteral["required", "pin"] = Field(
        "pin", description="required: must appear in the summary itself; pin: the ledger suffices")
    sensitive: bool = Field(False, description="a secret: hashed in the audit log, placeholder mode")
    priority: int = Field(50, ge=0, le=100, description="ledger salience; higher is kept longer")
    examples: Examples = Field(default_factory=Examples)
    allowlist: Allowlist = Field(default_factory=Allowlist)


class RegexRule(_RuleBase):
    kind: TypingLiteral["regex"]
    pattern: str = Field(description="`regex` syntax; a named group `literal` selects what is kept")
    flags: list[TypingLiteral["ignorecase", "multiline", "dotall", "verbose"]] = Field(
        default_factory=list, description="case-sensitive unless `ignorecase` is given")
    keywords: list[str] = Field(
        default_factory=list,
        description="prefilter: the rule runs only on texts containing one of these (any case)")
    checksum: str | None = Field(
        None, description="a validator run on each match, which drops what fails it: luhn, "
                          "payment_card, iban, aba_routing, ipv4, ipv6, mac, bitcoin, domain "
                          "(firewall/checksums.py)")
    requires: list[TypingLiteral["digit", "letter", "upper", "lower"]] = Field(
        default_factory=list,
        description="character classes the kept value must contain (checked after a match: "
                    "cheaper than a lookahead tried at every position)")
    group: int | str | None = Field(
        None, description="the capture group kept: its number, or `first`, the first group that "
                          "took part in the match (gitleaks' rule); default: the `literal` "
                          "group, else the whole match")
    entropy: float | None = Field(
        None, gt=0, le=16, description="the kept value's Shannon entropy, in bits per "
                                       "character, must be above this (random tokens score "
                                       "high, words and placeholders low)")

    @field_validator("group")
    @classmethod
    def _group_number_or_first(cls, value: int | str | None) -> int | str | None:
        if value is None or value == "first" or isinstance(value, int) and value >= 0:
            return value
        raise ValueError("must be a capture group number (0: the whole match) or 'first'")


class JsonKeyRule(_RuleBase):
    kind: TypingLiteral["json_key"]
    keys: list[str] = Field(min_length=1, description="key names or glob patterns such as *_id")
    exclude_keys: list[str] = Field(
        default_factory=list, description="key names or glob patterns that `keys` must not take: "
                                          "free-text arguments such as command or content")
    value_pattern: str | None = Field(None, description="regex the whole value must match")
    roles: list[Role] = Field(default_factory=lambda: ["tool", "assistant"], min_length=1)


class TermsRule(_RuleBase):
    kind: TypingLiteral["terms"]
    terms: list[str] = Field(min_length=1)
    ignore_case: bool = False
    whole_word: bool = Field(True, description="a term glued to a letter or digit does not match")


class EntityRule(_RuleBase):
    kind: TypingLiteral["entity"]
    labels: list[str] = Field(min_length=1, description="spaCy NER labels: PERSON, ORG, MONEY...")
    model: str = "en_core_web_sm"
    optional: bool = Field(False, description="skip the rule, instead of failing, without spaCy")


Rule = Annotated[RegexRule | JsonKeyRule | TermsRule | EntityRule, Field(discriminator="kind")]
_RULE_ADAPTER: TypeAdapter[Any] = TypeAdapter(Rule)
RULE_KINDS = ("regex", "json_key", "terms", "entity")


class NoiseExample(_Strict):
    """A text and the exact stretches of it the noise pattern must cover, in order."""

    text: str
    noise: list[str]


class Noise(_Strict):
    """Text that is not a literal however it looks (like gitleaks' allowlists): a literal of
    any pack that lies inside a match is dropped, unless its rule is ``sensitive`` (a secret
    stays a secret wherever it stands). Listing columns, line-number gutters, harness
    placeholders."""

    id: str = Field(pattern=RULE_ID, description="unique within the pack's noise")
    description: str = ""
    pattern: str = Field(description="`regex` syntax; every match is a noise stretch")
    flags: list[TypingLiteral["ignorecase", "multiline", "dotall", "verbose"]] = Field(
        default_factory=list)
    keywords: list[str] = Field(
        default_factory=list, description="prefilter: looked for only in texts containing one "
                                          "of these (any case)")
    examples: list[NoiseExample] = Field(default_factory=list)


class Defaults(_Strict):
    """Values every rule of the pack takes unless it sets its own."""

    roles: list[Role] | None = Field(None, min_length=1)
    severity: TypingLiteral["required", "pin"] | None = None
    sensitive: bool | None = None
    priority: int | None = Field(None, ge=0, le=100)


class Extends(_Strict):
    pack: str = Field(description="a built-in pack name or a path relative to this pack")
    disable: list[str] = Field(default_factory=list, description="rule ids not to inherit")


class PackSpec(_Strict):
    """A rule pack file, as written."""

    name: str = Field(pattern=PACK_NAME)
    version: str
    description: str = ""
    extends: list[Extends | str] = Field(default_factory=list)
    defaults: Defaults = Field(default_factory=Defaults)
    rules: list[Rule] = Field(default_factory=list)
    noise: list[Noise] = Field(default_factory=list, description="what is not a literal")


class Pack(BaseModel):
    """A loaded pack: its own rules plus inherited ones (already filtered by ``disable``)."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    version: str
    description: str = ""
    path: str | None = None
    rules: tuple[Any, ...]  # Rule models; ``owners`` maps rule index → defining pack name
    owners: tuple[str, ...]
    noise: tuple[Noise, ...] = ()  # own and inherited
    noise_owners: tuple[str, ...] = ()

    def qualified_ids(self) -> list[str]:
        return [f"{owner}/{rule.id}" for owner, rule in zip(self.owners, self.rules)]

    @cached_property
    def rules_by_id(self) -> dict[str, Any]:
        return dict(zip(self.qualified_ids(), self.rules))


# ── YAML with line numbers ──────────────────────────────────────────────────────────────

class _LineDict(dict):
    """A mapping that remembers the line (1-based) of itself and of each key's value."""

    line: int = 0
    key_lines: dict[str, int]
    key_styles: dict[str, str | None]


@functools.lru_cache(maxsize=1)
def _loader() -> Any:
    """The YAML loader, built on first use: a pack served from the cache needs no YAML."""
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):  # type: ignore[override]
            mapping = _LineDict(super().construct_mapping(node, deep=True))
            mapping.line = node.start_mark.line + 1
            mapping.key_lines, mapping.key_styles = {}, {}
            for key_node, value_node in node.value:
                key = key_node.value
                mapping.key_lines[key] = value_node.start_mark.line + 1
                mapping.key_styles[key] = getattr(value_node, "style", None)
            return mapping

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                           Loader.construct_mapping)
    return Loader


def _error_field(error: dict[str, Any]) -> str:
    # ``loc`` of a discriminated union carries the kind tag ('regex'); drop it for readability
    parts = [str(p) for p in error["loc"] if p not in RULE_KINDS]
    return ".".join(parts) or "(rule)"


def parse_pack(text: str, path: str = "<string>") -> PackSpec:
    """Parse and validate one pack's YAML text; every error names pack, rule, field and line."""
    import yaml

    try:
        raw = yaml.load(text, Loader=_loader())  # noqa: S506 - a SafeLoader
    except RecursionError:
        raise PackError("invalid YAML: nested too deeply", path=path) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise PackError(f"invalid YAML: {getattr(exc, 'problem', exc)}", path=path,
                        line=mark.line + 1 if mark else None) from None
    if not isinstance(raw, dict):
        raise PackError("a rule pack must be a mapping with name, version and rules",
                        path=path, line=1)
    pack_name = raw.get("name") if isinstance(raw.get("name"), str) else None
    raw_rules = raw.get("rules") or []
    if not isinstance(raw_rules, list):
        raise PackError("expected a list of rules", pack=pack_name, field="rules", path=path,
                        line=raw.key_lines.get("rules"))
    defaults = {k: v for k, v in (raw.get("defaults") or {}).items() if v is not None} \
        if isinstance(raw.get("defaults"), dict) else {}
    rules, seen = [], {}
    for position, raw_rule in enumerate(raw_rules):
        rules.append(_parse_rule(raw_rule, position, defaults, pack_name, path, seen))
    header = {k: v for k, v in raw.items() if k not in ("rules", "noise")}
    noise = _parse_noise(raw, pack_name, path)
    try:
        spec = PackSpec.model_validate({**header, "rules": []})
    except ValidationError as exc:
        error = exc.errors()[0]
        field = _error_field(error)
        top = str(error["loc"][0]) if error["loc"] else ""
        raise PackError(error["msg"], pack=pack_name, field=field, path=path,
                        line=raw.key_lines.get(top, raw.line)) from None
    return spec.model_copy(update={"rules": rules, "noise": noise})


def _parse_noise(raw: dict, pack: str | None, path: str) -> list[Noise]:
    entries = raw.get("noise") or []
    if not isinstance(entries, list):
        raise PackError("expected a list of noise patterns", pack=pack, field="noise", path=path,
                        line=raw.key_lines.get("noise"))
    out, seen = [], set()
    for position, entry in enumerate(entries):
        where = f"noise[{position}]"
        if not isinstance(entry, dict):
            raise PackError(f"noise #{position + 1} must be a mapping", pack=pack, field=where,
                            path=path, line=raw.key_lines.get("noise"))
        line_of = getattr(entry, "key_lines", {})
        noise_id = entry.get("id") if isinstance(entry.get("id"), str) else f"#{position + 1}"
        _require_quoted(entry, ("pattern",), pack, f"noise/{noise_id}", path)
        try:
            noise = Noise.model_validate(entry)
            regex.compile(noise.pattern)
        except ValidationError as exc:
            error = exc.errors()[0]
            top = str(error["loc"][0]) if error["loc"] else ""
            raise PackError(error["msg"], pack=pack, rule=f"noise/{noise_id}",
                            field=_error_field(error), path=path,
                            line=line_of.get(top, getattr(entry, "line", None))) from None
        except (regex.error, RecursionError, OverflowError) as exc:
            raise PackError(f"invalid regex: {exc}", pack=pack, rule=f"noise/{noise_id}",
                            field="pattern", path=path, line=line_of.get("pattern")) from None
        if noise.id in seen:
            raise PackError("duplicate noise id", pack=pack, rule=f"noise/{noise.id}",
                            field="id", path=path, line=getattr(entry, "line", None))
        seen.add(noise.id)
        out.append(noise)
    return out


def _require_quoted(raw: dict, fields: tuple[str, ...], pack: str | None, rule: str,
                    path: str) -> None:
    """Regex fields must be single-quoted or block scalars: PyYAML silently cuts a plain scalar
    at ' #', and double quotes turn \\b into a backspace."""
    for name in fields:
        if name in raw and getattr(raw, "key_styles", {}).get(name) not in ("'", "|", ">"):
            raise PackError("write regexes single-quoted ('...') or as a block scalar (|): "
                            "plain and double-quoted YAML change backslashes and cut at ' #'",
                            pack=pack, rule=rule, field=name, path=path,
                            line=getattr(raw, "key_lines", {}).get(name))


def _parse_rule(raw_rule: Any, position: int, defaults: dict[str, Any], pack: str | None,
                path: str, seen: dict[str, int]) -> Any:
    if not isinstance(raw_rule, dict):
        raise PackError(f"rule #{position + 1} must be a mapping", pack=pack,
                        field=f"rules[{position}]", path=path)
    rule_id = raw_rule.get("id") if isinstance(raw_rule.get("id"), str) else f"#{position + 1}"
    line_of = getattr(raw_rule, "key_lines", {})
    _require_quoted(raw_rule, REGEX_FIELDS, pack, rule_id, path)
    merged = {**defaults, **raw_rule}
    try:
        rule = _RULE_ADAPTER.validate_python(merged)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = _error_field(error)
        top = next((str(p) for p in error["loc"] if p not in RULE_KINDS), "")
        message = error["msg"]
        if error["type"] == "union_tag_invalid" or error["type"] == "union_tag_not_found":
            field, message = "kind", f"kind must be one of {', '.join(RULE_KINDS)}"
        raise PackError(message, pack=pack, rule=rule_id, field=field, path=path,
                        line=line_of.get(top, getattr(raw_rule, "line", None))) from None
    if rule.id in seen:
        raise PackError(f"duplicate rule id (first defined as rule #{seen[rule.id] + 1})",
                        pack=pack, rule=rule.id, field="id", path=path,
                        line=getattr(raw_rule, "line", None))
    seen[rule.id] = position
    _check_compiles(rule, pack, path, line_of)
    return rule


def _check_compiles(rule: Any, pack: str | None, path: str, line_of: dict[str, int]) -> None:
    """Regexes and checksum names are checked here, where the line is still known."""
    sources = [(name, getattr(rule, name, None)) for name in REGEX_FIELDS]
    sources += [(f"allowlist.{name}", p) for name in ALLOWLIST_REGEX_FIELDS
                for p in getattr(rule.allowlist, name)]
    compiled: dict[str, Any] = {}
    for name, source in sources:
        if source is None:
            continue
        try:
            compiled[name] = regex.compile(source)
        except (regex.error, RecursionError, OverflowError) as exc:
            raise PackError(f"invalid regex: {exc}", pack=pack, rule=rule.id, field=name,
                            path=path, line=line_of.get(name.split(".")[0])) from None
    for name in ("match_regexes", "line_regexes"):
        if getattr(rule.allowlist, name) and not isinstance(rule, RegexRule):
            raise PackError(f"allowlist.{name} needs a regex rule (a {rule.kind} rule has no "
                            f"match or line to test)", pack=pack, rule=rule.id,
                            field=f"allowlist.{name}", path=path, line=line_of.get("allowlist"))
    group = getattr(rule, "group", None)
    if isinstance(group, int) and group > compiled["pattern"].groups:
        raise PackError(f"group {group} does not exist: the pattern has "
                        f"{compiled['pattern'].groups} capture group(s)", pack=pack,
                        rule=rule.id, field="group", path=path, line=line_of.get("group"))
    checksum = getattr(rule, "checksum", None)
    if checksum is not None and checksum not in CHECKSUMS:
        raise PackError(f"unknown checksum {checksum!r}; known: {', '.join(CHECKSUMS)}",
                        pack=pack, rule=rule.id, field="checksum", path=path,
                        line=line_of.get("checksum"))

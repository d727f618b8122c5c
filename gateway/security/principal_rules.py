"""``ssl.principal.mapping.rules``: a client certificate's subject (its distinguished name as
RFC 2253 writes it, ``CN=alice,OU=apps,O=example``) to a user name, with Kafka's rule syntax:
``RULE:pattern/replacement/`` entries, optionally ending ``L`` or ``U`` (lower or upper case the
result), and ``DEFAULT`` (the name unchanged), tried in order; the first whose pattern matches
the whole name wins. A name no rule matches is refused, as Kafka refuses it."""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_ENTRY = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")
_JAVA_GROUP = re.compile(r"\$(\d)")


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        if not self.pattern.fullmatch(name):
            return None
        mapped = self.pattern.sub(self.replacement, name, count=1)
        return mapped.lower() if self.case == "L" else mapped.upper() if self.case == "U" \
            else mapped


@functools.cache  # parsed once per text, not per client certificate
def parse_rules(text: str) -> tuple[Rule, ...]:
    """The rules, in order; a ValueError names what is not a rule."""
    rules: list[Rule] = []
    position = 0
    text = text.strip()
    while position < len(text):
        match = _ENTRY.match(text, position)
        if match is None or match.end() == position:
            raise ValueError(f"ssl.principal.mapping.rules: expected RULE:pattern/replacement/"
                             f"[LU] or DEFAULT at {text[position:]!r}")
        position = match.end()
        if match.group(1):
            rules.append(Rule(None))
            continue
        try:
            pattern = re.compile(match.group(2))
        except re.error as exc:
            raise ValueError(f"ssl.principal.mapping.rules: {match.group(2)!r}: {exc}") from None
        rules.append(Rule(pattern, _JAVA_GROUP.sub(r"\\g<\1>", match.group(3)), match.group(4)))
    return tuple(rules) or (Rule(None),)


def map_name(rules: tuple[Rule, ...], distinguished_name: str) -> str:
    for rule in rules:
        mapped = rule.apply(distinguished_name)
        if mapped is not None:
            return mapped
    raise PermissionError(f"no ssl.principal.mapping.rules entry matches {distinguished_name!r}")

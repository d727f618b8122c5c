"""Topic regular expressions of KIP-848 members (ConsumerGroupHeartbeat v1 SubscribedTopicRegex).

Kafka compiles them with RE2/J and a topic matches when the whole name matches; here RE2 itself
(google-re2) does the same, so the syntax is the same family (no lookaround, no backreferences).
An invalid expression gets Kafka's message with RE2/J's description of the error, translated from
RE2's wording.

A group resolves its expressions against the topics when a member brings a new one, and again on
a heartbeat once ``REFRESH_INTERVAL_S`` has passed (Kafka's batch refresh interval) or as soon as
the number of topics changed, at most once per ``MIN_REFRESH_S``: a topic created later is
assigned without any member changing its subscription, and the scans stay bounded per group.
"""
from __future__ import annotations

import functools
import time
from collections.abc import Iterable

import re2

REFRESH_INTERVAL_S = 10.0  # Kafka's REGEX_BATCH_REFRESH_INTERVAL_MS
MIN_REFRESH_S = 1.0

# RE2's error texts and the descriptions RE2/J (which Kafka uses) gives for the same errors
_RE2J_DESCRIPTIONS = {
    "missing )": "missing closing )",
    "missing ]": "missing closing ]",
    "trailing \\": "trailing backslash at end of expression",
    "no argument for repetition operator": "missing argument to repetition operator",
    "invalid repetition size": "invalid repeat count",
    "bad repetition operator": "invalid nested repetition operator",
    "invalid perl operator": "invalid or unsupported Perl syntax",
    "invalid named capture group": "invalid named capture",
}


class InvalidRegex(ValueError):
    """The expression does not compile; the message is Kafka's."""


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # RE2 would log each refused pattern to stderr
    return options


_OPTIONS = _options()


@functools.lru_cache(maxsize=256)
def compile_regex(regex: str) -> re2._Regexp:
    try:
        return re2.compile(regex, _OPTIONS)
    except re2.error as exc:
        raise InvalidRegex(f"SubscribedTopicRegex `{regex}` is not a valid regular expression: "
                           f"{_description(exc)}.") from None


def _description(exc: re2.error) -> str:
    text = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) \
        else str(exc)
    for re2_text, re2j_text in _RE2J_DESCRIPTIONS.items():
        if text.startswith(re2_text + ":") or text == re2_text:
            return re2j_text
    return text.split(": ", 1)[0]


def resolve(regex: str, topics: Iterable[str]) -> frozenset[str]:
    """The topics whose whole name matches (an expression that no longer compiles matches
    nothing: it was checked when a member brought it)."""
    try:
        pattern = compile_regex(regex)
    except InvalidRegex:
        return frozenset()
    return frozenset(t for t in topics if pattern.fullmatch(t) is not None)


class RegexResolutions:
    """One group's resolved expressions and when they were resolved."""

    def __init__(self) -> None:
        self.topics: dict[str, frozenset[str]] = {}  # regex -> matching topic names
        self.at = float("-inf")  # monotonic time of the last scan
        self.topic_count = -1  # how many topics there were at the last scan

    def due(self, regexes: set[str], topic_count: int) -> bool:
        if regexes - self.topics.keys():
            return True
        since = time.monotonic() - self.at
        return since >= REFRESH_INTERVAL_S or (
            topic_count != self.topic_count and since >= MIN_REFRESH_S)

    def refresh(self, regexes: set[str], topics: list[str]) -> bool:
        """Resolve every expression of the group; whether any resolution changed."""
        resolved = {r: resolve(r, topics) for r in regexes}
        changed = any(self.topics.get(r) != found for r, found in resolved.items())
        self.topics = resolved
        self.at = time.monotonic()
        self.topic_count = len(topics)
        return changed

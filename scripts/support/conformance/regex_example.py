"""A readable string that a task's regular expression matches.

Golden traces need concrete URLs, headers and form values where the dataset
gives a pattern (`^__SHOPPING__/[a-z0-9-]*guard[a-z0-9-]*\\.html$`). The pattern
is parsed with the standard library's own regex parser and walked to build a
plain example: repeats at their minimum (or once, in the "filled" style),
letters for wildcards, the first branch of alternations, and lookahead bodies
written out so that the words a lookahead demands are present. Every
candidate is checked with `re.fullmatch`; the first that matches wins.
"""

from __future__ import annotations

import re
from re import _constants as C  # type: ignore[attr-defined]
from re import _parser  # type: ignore[attr-defined]
from typing import Any

_CATEGORY_CHARS = {
    C.CATEGORY_DIGIT: "1",
    C.CATEGORY_NOT_DIGIT: "a",
    C.CATEGORY_SPACE: " ",
    C.CATEGORY_NOT_SPACE: "a",
    C.CATEGORY_WORD: "a",
    C.CATEGORY_NOT_WORD: "-",
}
_PREFERRED = "abcdefghijklmnopqrstuvwxyz0123456789-_ ./"


class NoExample(Exception):
    """The pattern has no example this generator can build."""


def _char_in(items: list[tuple[Any, Any]]) -> str:
    negate = any(op is C.NEGATE for op, _ in items)
    allowed: list[str] = []
    for op, arg in items:
        if op is C.LITERAL:
            allowed.append(chr(arg))
        elif op is C.RANGE:
            low, high = arg
            allowed.extend(chr(c) for c in range(low, min(high, low + 60) + 1))
        elif op is C.CATEGORY:
            allowed.append(_CATEGORY_CHARS.get(arg, "a"))
    if negate:
        for ch in _PREFERRED:
            if ch not in allowed:
                return ch
        raise NoExample("negated class excludes every preferred character")
    for ch in _PREFERRED:
        if ch in allowed:
            return ch
    if not allowed:
        raise NoExample("empty character class")
    return allowed[0]


def _walk(parsed: Any, filled: bool, lookaheads: bool) -> str:
    out: list[str] = []
    for op, arg in parsed:
        if op is C.LITERAL:
            out.append(chr(arg))
        elif op is C.NOT_LITERAL:
            out.append("a" if chr(arg) != "a" else "b")
        elif op is C.ANY:
            # A lone wildcard usually stands for an unescaped literal dot ("-68.21"); keep it one.
            out.append(".")
        elif op is C.IN:
            out.append(_char_in(arg))
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
            low, _high, body = arg
            count = max(low, 1) if filled else low
            is_wildcard = len(body) == 1 and body[0][0] is C.ANY
            out.append(("x" if is_wildcard else _walk(body, filled, lookaheads)) * count)
        elif op is C.SUBPATTERN:
            out.append(_walk(arg[-1], filled, lookaheads))
        elif op is C.BRANCH:
            out.append(_walk(arg[1][0], filled, lookaheads))
        elif op is C.ASSERT:
            direction, body = arg
            if lookaheads and direction == 1:
                out.append(_walk(body, False, lookaheads) + " ")
        elif op in (C.AT, C.ASSERT_NOT):
            continue
        elif op is C.GROUPREF:
            raise NoExample("back-references are not supported")
        elif op is C.CATEGORY:
            out.append(_CATEGORY_CHARS.get(arg, "a"))
        else:
            raise NoExample(f"unsupported regex construct {op}")
    return "".join(out)


def regex_example(pattern: str, *, flags: int = 0, prefer_filled: bool = True) -> str:
    """A string that `re.fullmatch(pattern, s, flags)` accepts; raises `NoExample` otherwise."""
    parsed = _parser.parse(pattern, flags)
    order = [(True, True), (False, True), (True, False), (False, False)]
    if not prefer_filled:
        order = [(False, True), (True, True), (False, False), (True, False)]
    for filled, lookaheads in order:
        try:
            candidate = _walk(parsed, filled, lookaheads)
        except NoExample:
            continue
        candidate = re.sub(r"\s+", " ", candidate).strip() if candidate.strip() else candidate
        if re.fullmatch(pattern, candidate, flags):
            return candidate
    raise NoExample(f"no example found for {pattern!r}")


def example_for(value: str, *, flags: int = 0) -> str:
    """`value` itself, or an example when it is written as a `^...$` pattern."""
    if len(value) >= 2 and value.startswith("^") and value.endswith("$"):
        return regex_example(value, flags=flags)
    return value

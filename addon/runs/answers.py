"""Whether a later finish of a finished attempt sends the answer its verdict judged.

A finish answers for its own answer (docs/architecture.md, The finish): the same answer again gets the first
outcome, another is refused with both named. "The same" is decided on the document the evaluator
reads, never on the bytes sent.
"""

from __future__ import annotations

import json
from typing import Any

from webarena_live.evaluator import FinalAnswer


def answer_key(answer: FinalAnswer) -> str:
    """What makes two final answers the same answer: the document each holds (text unfenced and parsed
    as JSON, as the verdict reads it), written canonically; so whitespace, key order and JSON sent as
    text or as an object do not count, while `1`, `1.0` and `true` stay different values."""
    return json.dumps(answer.document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def different_answer(session: str, judged: FinalAnswer, sent: FinalAnswer) -> dict[str, Any] | None:
    """The refusal's detail when `sent` is not the answer `judged` (both named); None when it is."""
    if answer_key(sent) == answer_key(judged):
        return None
    return {
        "message": f"session {session!r} is finished and its verdict judged another answer; "
        "POST /sessions with restart to judge a new one",
        "judged": judged.document,
        "refused": sent.document,
    }

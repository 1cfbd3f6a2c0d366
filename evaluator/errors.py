"""Every error the evaluator raises on purpose derives from `WebArenaLiveError`.

Callers catch the base class to tell "the input was wrong" from a bug; the
subclass names say which input.
"""

from __future__ import annotations


class WebArenaLiveError(Exception):
    """Base class of all errors raised by webarena-live on bad input."""


class TaskFileError(WebArenaLiveError):
    """A task file (dataset) could not be read or a task in it is malformed."""


class UnknownTaskError(WebArenaLiveError):
    """A task id was asked for that the loaded dataset does not contain."""


class SiteConfigError(WebArenaLiveError):
    """The site map config is malformed, or a task needs a site it does not map."""


class AgentResponseError(WebArenaLiveError):
    """The agent's final response could not be parsed into the response model."""


class TraceFormatError(WebArenaLiveError):
    """A network trace (HAR, Playwright trace, journal) could not be read."""


class NormalizationError(WebArenaLiveError):
    """A value could not be normalized to the type its schema asks for."""


class RunInputError(WebArenaLiveError):
    """A file of one recorded run (response, trace, run config) is missing or unreadable."""


class UnknownValueTypeError(NormalizationError):
    """A schema names a value type or format that no normalizer serves."""


class ComparisonError(WebArenaLiveError):
    """Two values could not be compared at all (a self-referencing structure, an empty expected object)."""


class OutputDirError(WebArenaLiveError):
    """The output directory cannot be created or written."""

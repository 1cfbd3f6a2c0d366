"""The URL value type: comparable URLs with site placeholders and query parameters.

A URL normalizes to a `UrlParts`: a *base URL* (scheme, host, path, fragment,
with the site's real address replaced by its `__SITE__` placeholder) and its
query parameters (name -> sorted tuple of lower-cased values). Two URLs are
equal when their base URLs match — case-insensitively, or by regular
expression when one side is written `^...$` — and every query parameter
present on either side has the same first value, a missing parameter counting
as the empty string.

Options (keyword arguments, all optional):
- `render_url(template) -> str` and `derender_url(url) -> str`: site map
  functions with `sites` and `strict` already bound by the caller
  (e.g. `functools.partial(site_map.derender, sites=task.sites, strict=False)`);
- `query_params`: parameters to use instead of the URL's own query string
  (how an expected event gives them);
- `decode_base64_query`: path segments that are URL-safe base64 of a query
  string are decoded into parameters and removed from the path;
- `ignored_query_params` (names) and `ignored_query_params_patterns`
  (case-insensitive regular expressions searched in names);
- `normalize_query_params(params) -> params`: type-aware normalization of
  the parameter values (a `query_params_schema` applied by the caller).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse, urlunparse

from url_normalize import url_normalize

from webarena_live.evaluator.errors import NormalizationError
from webarena_live.evaluator.values.base import Normalized, is_regexp

QueryParams = Mapping[str, Any]
"""Parameter name -> tuple of values (or, after schema normalization, normalized values)."""

# A path segment that may be URL-safe base64 (optionally padded).
_BASE64_SEGMENT = re.compile(r"^[A-Za-z0-9_-]{4,}={0,2}$")


def _identity(value: str) -> str:
    return value


@lru_cache(maxsize=1 << 16)
def canonical_url(url: str) -> str | None:
    """url-normalize's canonical form (percent-encoding, case, default ports), cached.

    It is by far the costliest step of reading a URL (IDNA host checks), and
    the same URLs come back across evaluators, tasks and re-evaluations.
    """
    return url_normalize(url)


def parse_query(query: str) -> dict[str, tuple[str, ...]]:
    """`a=2&a=1&b=` -> `{"a": ("1", "2"), "b": ("",)}`: every value kept, sorted, percent-decoded."""
    if not query:
        return {}
    return {
        unquote(name): tuple(sorted(unquote(value) for value in values))
        for name, values in parse_qs(query, keep_blank_values=True).items()
    }


def split_base64_query(path: str) -> tuple[str, list[str]]:
    """Take base64-encoded query strings out of a URL path.

    Returns the path without those segments and the decoded query strings. A
    segment counts only when it decodes to UTF-8 text containing `=`.
    """
    if not path:
        return path, []
    segments = path.split("/")
    queries: list[str] = []
    for index, segment in enumerate(segments):
        if not segment or not _BASE64_SEGMENT.match(segment):
            continue
        try:
            text = base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)).decode("utf-8")
        except (binascii.Error, ValueError):
            continue
        if "=" not in text:
            continue
        query = unquote(text).strip()
        if query:
            queries.append(query.lstrip("?&"))
            segments[index] = ""
    kept = [segment for segment in segments if segment]
    if not kept:
        return ("/" if path.startswith("/") else ""), queries
    cleaned = "/".join(kept)
    if path.startswith("/"):
        cleaned = "/" + cleaned
    if path.endswith("/") and not cleaned.endswith("/"):
        cleaned += "/"
    return cleaned, queries


def _first_value(values: Any) -> Any:
    """The value a parameter is compared by: its first (sorted) value, "" when absent or None."""
    if not values:
        return ""
    first = values[0]  # a bare normalized value here is a schema mismatch and fails like the reference
    return "" if first is None else first


def _value_is_regexp(value: Any) -> bool:
    if isinstance(value, Normalized):
        return value.is_regexp
    return is_regexp(value)


@dataclass(frozen=True, slots=True)
class UrlParts:
    """One normalized URL: base URL without query, and the query parameters."""

    base_url: str
    query: Mapping[str, Any] = field(default_factory=dict, hash=False)
    is_regex: bool = False

    def __str__(self) -> str:
        pairs = [f"{name}={value}" for name, values in sorted(self.query.items()) for value in values]
        parsed = urlparse(self.base_url)
        return urlunparse((parsed.scheme, parsed.netloc, parsed.path, "", "&".join(pairs), parsed.fragment))

    def __hash__(self) -> int:
        return hash(self.base_url)

    def to_json(self) -> dict[str, Any]:
        """What reports show: the base URL and the parameters as plain JSON values."""
        return {"base_url": self.base_url, "query_params": _plain(self.query)}

    def path_matches(self, other: UrlParts, render_url: Callable[[str], str] = _identity) -> bool:
        """Base URLs match, ignoring query parameters; either side may be a regular expression.

        Placeholders are rendered (`render_url`) on both sides before a
        regular expression is applied, since patterns are written against
        templates such as `^__GITLAB__/.*/issues$`.
        """
        for pattern_side, target_side in ((self, other), (other, self)):
            if pattern_side.is_regex:
                pattern = _rendered_pattern(pattern_side.base_url, render_url)
                target = target_side.base_url
                if target.startswith("__"):
                    target = render_url(target)
                try:
                    if re.match(pattern, target):
                        return True
                except re.error as error:
                    raise NormalizationError(
                        f"invalid URL pattern {pattern_side.base_url!r}: {error}"
                    ) from None
        if not self.is_regex and not other.is_regex:
            return self.base_url.lower().rstrip("/") == other.base_url.lower().rstrip("/")
        return False

    def query_matches(self, other: UrlParts) -> bool:
        """Every parameter of either side has the same first value; `self`'s values may be patterns."""
        for name in set(self.query) | set(other.query):
            mine = _first_value(self.query.get(name, ()))
            theirs = _first_value(other.query.get(name, ()))
            if _value_is_regexp(mine):
                try:
                    if not re.match(str(mine), str(theirs)):
                        return False
                except re.error as error:
                    raise NormalizationError(
                        f"invalid pattern for query parameter {name!r}: {error}"
                    ) from None
            elif not mine == theirs:  # noqa: SIM201 - `==` first, so a normalized value's __eq__ decides
                return False
        return True


def _rendered_pattern(pattern: str, render_url: Callable[[str], str]) -> str:
    if is_regexp(pattern):
        body = pattern[1:-1]
        return f"^{render_url(body) if body.startswith('__') else body}$"
    return render_url(pattern) if pattern.startswith("__") else pattern


def _plain(value: Any) -> Any:
    if isinstance(value, Normalized):
        return value.normalized
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def _is_ssh(url: str) -> bool:
    lowered = url.lower()
    return lowered.startswith("ssh://") or (lowered.startswith("git@") and ":" in url and "://" not in url)


def _ssh_parts(url: str) -> UrlParts:
    """`ssh://git@host:2222/a/B.git` and `git@host:a/B.git` -> `git@__SSH_HOST__:a/b.git` (hosts drop out)."""
    if url.lower().startswith("ssh://"):
        netloc = urlparse(url).netloc
        user = netloc.split("@")[0].lower() if "@" in netloc else "git"
        path = urlparse(url).path
    else:
        user, _, host_path = url.partition("@")
        if ":" not in host_path:
            raise NormalizationError(f"not an scp-like git URL: {url!r}")
        path = host_path.split(":", 1)[1]
        user = user.lower()
    return UrlParts(base_url=f"{user}@__SSH_HOST__:{path.lstrip('/').lower()}")


class Url(Normalized):
    """A URL compared by site-relative base URL and query parameters (see the module docs)."""

    type_name = "url"

    __slots__ = (
        "decode_base64_query",
        "derender",
        "ignored_names",
        "ignored_patterns",
        "normalize_query_params",
        "query_override",
        "render",
    )

    def __init__(
        self,
        raw: Any,
        *,
        derender_url: Callable[..., str] | None = None,
        render_url: Callable[..., str] | None = None,
        query_params: QueryParams | None = None,
        decode_base64_query: bool = False,
        ignored_query_params: Iterable[str] | None = None,
        ignored_query_params_patterns: Iterable[str] | None = None,
        normalize_query_params: Callable[[Any], Any] | None = None,
        **options: Any,
    ) -> None:
        self.render: Callable[[str], str] = render_url or _identity
        self.derender: Callable[[str], str] = derender_url or _identity
        self.query_override = query_params
        self.decode_base64_query = decode_base64_query
        self.ignored_names = frozenset(ignored_query_params or ())
        self.ignored_patterns = tuple(ignored_query_params_patterns or ())
        self.normalize_query_params = normalize_query_params
        super().__init__(raw, derender_url=derender_url, **options)

    # ---------------------------------------------------------------- parsing

    def _normalize_one(self, value: Any) -> Any:
        # URLs keep their case and characters: only surrounding blanks go.
        if isinstance(value, str):
            value = value.strip()
        return self._parse(value)

    def _parse(self, value: Any) -> UrlParts:
        if not isinstance(value, str):
            raise NormalizationError(f"a URL must be text, got {type(value).__name__}: {value!r}")
        if not value:
            raise NormalizationError("empty URL")
        if is_regexp(value):
            # Patterns keep their placeholders; they are rendered when compared.
            query = {} if self.query_override is None else self._clean_query(self.query_override)
            return UrlParts(base_url=value.rstrip("/"), query=query, is_regex=True)
        value = value.rstrip("/")
        if value.startswith("__"):
            value = self.render(value)
        if _is_ssh(value):
            return _ssh_parts(value)
        try:
            normalized = canonical_url(value)
        except Exception as error:  # the library raises assorted errors on malformed input
            raise NormalizationError(f"invalid URL {value!r}: {error}") from None
        if normalized is None:
            raise NormalizationError(f"invalid URL {value!r}")
        parsed = urlparse(self.derender(normalized))
        scheme = parsed.scheme.lower()
        netloc = parsed.netloc.lower()
        path = f"{parsed.path};{parsed.params}" if parsed.params else parsed.path
        if netloc:
            try:
                default_port = (scheme, parsed.port) in (("http", 80), ("https", 443))
            except ValueError:
                default_port = False
            if default_port and parsed.hostname:
                netloc = parsed.hostname.lower()
        if self.query_override is not None:
            raw_query: QueryParams = self.query_override
        else:
            queries: list[str] = []
            if self.decode_base64_query:
                path, queries = split_base64_query(path)
            if parsed.query:
                queries.append(parsed.query.strip())
            raw_query = parse_query("&".join(queries))
        base_url = urlunparse((scheme, netloc, path, "", "", parsed.fragment or ""))
        return UrlParts(base_url=base_url, query=self._clean_query(raw_query))

    def _ignored(self, name: str) -> bool:
        if name in self.ignored_names:
            return True
        for pattern in self.ignored_patterns:
            try:
                if re.search(pattern, name, re.IGNORECASE):
                    return True
            except re.error:  # a broken pattern ignores nothing, as in the reference
                continue
        return False

    def _clean_query(self, query: QueryParams) -> Mapping[str, Any]:
        """Drop ignored parameters, fold values (lower case, trimmed, sorted), then apply the schema."""
        if self.ignored_names or self.ignored_patterns:
            query = {name: values for name, values in query.items() if not self._ignored(name)}
        cleaned: Mapping[str, Any] = {
            name: tuple(sorted(v.lower().strip() if isinstance(v, str) else v for v in values))
            for name, values in query.items()
        }
        if self.normalize_query_params is not None:
            cleaned = self.normalize_query_params(cleaned) or {}
        return cleaned

    # ------------------------------------------------------------- comparing

    @property
    def parts(self) -> UrlParts:
        return self.alternatives[0]

    @property
    def normalized(self) -> Any:
        """Reports show `{"base_url": ..., "query_params": {...}}`."""
        return self.parts.to_json()

    def compare_path(self, other: Url | str) -> bool:
        """Base URLs match (query ignored) for some pair of alternatives; used to pick events."""
        if isinstance(other, Url):
            theirs: tuple[UrlParts, ...] = other.alternatives
        else:
            theirs = (UrlParts(base_url=other.rstrip("/")),)
        return any(mine.path_matches(alt, self.render) for mine in self.alternatives for alt in theirs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Url):
            return any(
                mine.path_matches(alt, self.render) and mine.query_matches(alt)
                for mine in self.alternatives
                for alt in other.alternatives
            )
        if isinstance(other, str):
            return any(str(mine) == other for mine in self.alternatives)
        return False

    def __hash__(self) -> int:
        return hash(str(self.parts))

    def __str__(self) -> str:
        return str(self.parts)

    def __repr__(self) -> str:
        shown = [str(alt) for alt in self.alternatives]
        return f"Url({self.raw!r} -> {shown[0] if len(shown) == 1 else shown!r})"

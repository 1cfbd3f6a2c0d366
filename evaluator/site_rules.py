"""A site's own rules for what changes it: the `reads` and `changes` keys of a site-map entry.

The replica pool resets a copy of a site only after something changed it, and names the changes in a
session's `interference` (`webarena_live.replicas.changes` judges each request). WebArena's own sites
have built-in rules (a GraphQL query, signing in); a site-map entry may add its own, each an object
whose every given key must match:

    "reads":   [{"method": "POST", "path": "^/search$"}, {"graphql_operations": ["IssuesList"]}],
    "changes": [{"path": "^/api/graphql$", "graphql_operations": ["markAsRead"]}]

- `method`: one HTTP method or a list of them (any POST, PUT, PATCH or DELETE when absent);
- `path`: a regular expression searched in the request's path below the replica's base URL (for
  `http://h/admin` and `http://h/admin/sales/order/`, `/sales/order/`; the query string is not part);
- `graphql_operations`: operation names; the request's body is a GraphQL request (one operation or a
  batch) and, in `reads`, every operation it runs is named here; in `changes`, one of them is;
- `graphql_queries: true` (in `reads` only): the path is a GraphQL endpoint whose `query` operations
  only read (as GitLab's `/api/graphql`, built in).

`changes` are checked first, then `reads`, then the built-in rules; anything no rule makes a read is a
change. The trace never sees any of it: its events keep the seeds' classification. The keys are this
project's own; the reference never reads them. Checked before anything runs (`site_checks`): an
unknown key gets a did-you-mean, a pattern that does not compile is one line naming it.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from webarena_live.evaluator.classify import MUTATION_METHODS


def _pattern(value: str) -> str:
    try:
        re.compile(value)
    except re.error as error:
        raise PydanticCustomError("site_config", f"{value!r} is not a regular expression: {error}") from None
    return value


def _methods(value: str | list[str]) -> list[str]:
    methods = [value] if isinstance(value, str) else value
    wrong = [m for m in methods if m.upper() not in MUTATION_METHODS]
    if wrong or not methods:
        raise PydanticCustomError(
            "site_config",
            f"{wrong[0] if wrong else methods!r} is not one of {', '.join(MUTATION_METHODS)} "
            "(other methods never change a site)",
        )
    return [m.upper() for m in methods]


Pattern = Annotated[str, AfterValidator(_pattern)]
Methods = Annotated[str | list[str], AfterValidator(_methods)]


class ConfigRule(BaseModel):
    """One rule as a person wrote it, checked strictly (`site_checks.ConfigEnvironment`)."""

    model_config = ConfigDict(extra="forbid")

    method: Methods | None = None
    path: Pattern | None = None
    graphql_operations: Annotated[list[str], Field(min_length=1)] | None = None
    graphql_queries: bool | None = None

    @model_validator(mode="after")
    def _matches_something(self) -> ConfigRule:
        if self.path is None and self.graphql_operations is None and not self.graphql_queries:
            raise PydanticCustomError(
                "site_config", 'a rule needs "path", "graphql_operations" or "graphql_queries"'
            )
        return self


class ConfigChangeRule(ConfigRule):
    """A rule of `changes`: a query only reads, so `graphql_queries` has no place here."""

    @field_validator("graphql_queries")
    @classmethod
    def _reads_only(cls, value: bool | None) -> bool | None:
        if value:
            raise PydanticCustomError(
                "site_config",
                'belongs in "reads" (a query only reads); name the operations that change with '
                '"graphql_operations"',
            )
        return value


RULE_KEYS = tuple(ConfigRule.model_fields)


class SiteRule(BaseModel):
    """One rule as the pool applies it (`SiteEnvironment.reads` and `.changes`)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    method: tuple[str, ...] = MUTATION_METHODS
    path: str | None = None
    graphql_operations: tuple[str, ...] = ()
    graphql_queries: bool = False

    @model_validator(mode="before")
    @classmethod
    def _one_method(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("method"), str):
            return {**data, "method": (data["method"],)}
        return data

    @model_validator(mode="after")
    def _upper(self) -> SiteRule:
        object.__setattr__(self, "method", tuple(m.upper() for m in self.method))
        return self

    def describe(self) -> str:
        """The rule as one short phrase (what `/health` counts reads under)."""
        parts = ["/".join(self.method) if self.method != MUTATION_METHODS else ""]
        parts.append(self.path or "")
        if self.graphql_operations:
            parts.append("graphql " + ",".join(self.graphql_operations))
        if self.graphql_queries:
            parts.append("graphql queries")
        return " ".join(p for p in parts if p)

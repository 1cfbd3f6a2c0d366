"""What a request does to a site: read it or change it, and by which rule (docs/architecture.md, Replicas).

The replica pool resets a copy only after something changed it and names every change in a session's
`interference`; a request it wrongly counts as a change costs a reset (GitLab's is a container restart)
and flags every other session on the copy as exposed. So the pool judges each request by what it does,
not by its method alone:

- a method other than POST, PUT, PATCH or DELETE reads;
- a site map entry's own `changes` rules, then its `reads` rules (evaluator `site_rules`), decide first;
- then the built-in rules of WebArena's sites (`BUILT_IN`, each from the site's own sources): a GraphQL
  request (one operation or a batch, parsed by graphql-core) that runs `query` operations only, and
  signing in and out;
- anything else changes: when in doubt, reset.

The trace never sees this judgement: its events keep the seeds' classification (a mutation event is a
POST, PUT, PATCH or DELETE) and every verdict stays the reference's. Pure: the evaluator's public names,
graphql-core and the standard library only (an import contract in pyproject.toml holds it so).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from webarena_live.evaluator import MUTATION_METHODS, SiteMap, SiteRule, placeholder

MAX_BODY = 1 << 20
"""A body larger than this (bytes) is not parsed: a change. GraphQL reads are small; parsing is not free."""


@dataclass(frozen=True)
class Judgement:
    """What a request does to its site, and the rule that said so."""

    change: bool
    rule: str


READ_BY_METHOD = Judgement(False, "method")
"""GET, HEAD, OPTIONS...: nothing is parsed for them."""
CHANGE_BY_DEFAULT = Judgement(True, "no rule makes it a read")
CHANGE_UNJUDGED = Judgement(True, "the judgement failed")
"""A request the rules could not judge (an error of ours): when in doubt, reset."""


@dataclass(frozen=True)
class Rule:
    """One rule: every given part must match (`methods`, a `path` pattern below the replica's base URL,
    a GraphQL body of queries only or of named operations, a form body of only `form_fields`)."""

    name: str
    methods: frozenset[str] = frozenset(MUTATION_METHODS)
    path: re.Pattern[str] | None = None
    graphql_queries: bool = False
    graphql_operations: frozenset[str] = frozenset()
    form_fields: frozenset[str] = frozenset()
    """With `form_required`: the body is a form whose fields are all among these (the admin's sign-in)."""
    form_required: str = ""
    source: str = field(default="", compare=False)
    """Where the site defines it (the table in docs/guides/shared-sites.md)."""


def _rule(name: str, methods: Iterable[str], path: str, source: str, **more: object) -> Rule:
    return Rule(name, frozenset(methods), re.compile(path), source=source, **more)  # type: ignore[arg-type]


GITLAB_ROUTES = "gitlabhq/gitlabhq config/routes/user.rb (devise_for :users)"
MAGENTO_ACCOUNT = "magento/magento2 app/code/Magento/Customer/Controller/Account/"
MAGENTO_ADMIN = "magento/magento2 app/code/Magento/Backend/"
POSTMILL_ROUTES = "Postmill config/app_routes/user.yaml"

BUILT_IN: dict[str, tuple[Rule, ...]] = {
    "gitlab": (
        _rule("gitlab graphql query", ["POST"], r"^/api/graphql/?$",
              "gitlabhq/gitlabhq config/routes/api.rb (post '/api/graphql')", graphql_queries=True),
        _rule("gitlab sign-in", ["POST"], r"^/users/sign_in/?$", GITLAB_ROUTES),
        # Devise signs out by DELETE (its default `sign_out_via`); GitLab's Geo routes draw a POST
        _rule("gitlab sign-out", ["POST", "DELETE"], r"^/users/sign_out/?$", GITLAB_ROUTES),
    ),
    "shopping": (
        _rule("storefront sign-in", ["POST"], r"^/customer/account/loginPost/?$",
              MAGENTO_ACCOUNT + "LoginPost.php (HttpPostActionInterface)"),
        _rule("storefront sign-out", ["POST"], r"^/customer/account/logout/?$",
              MAGENTO_ACCOUNT + "Logout.php (HttpGetActionInterface, HttpPostActionInterface)"),
    ),
    "shopping_admin": (
        # The admin's login form posts to the page it is shown on (`action=""`), and a body of the login
        # form's fields only carries nothing a controller could save; but a signed-in admin's POST to an
        # action's path runs that action whatever the body, so only the pages a sign-in lands on: the
        # admin's start page, its dashboard and the login page.
        Rule("admin sign-in", frozenset({"POST"}),
             path=re.compile(r"^/?(admin/?((index/index|auth/login|dashboard(/index)?)(/key/[0-9a-zA-Z]+)?/?)?)?$"),
             form_fields=frozenset({"form_key", "login[username]", "login[password]", "dummy"}),
             form_required="login[username]",
             source=MAGENTO_ADMIN + "view/adminhtml/templates/admin/login.phtml, "
                    "App/Action/Plugin/Authentication.php"),
        _rule("admin sign-out", ["POST"], r"^/admin/auth/logout(/|$)",
              MAGENTO_ADMIN + "Controller/Adminhtml/Auth/Logout.php"),
    ),
    "reddit": (
        _rule("forum sign-in", ["POST"], r"^/login_check$", POSTMILL_ROUTES + " (login_check)"),
        _rule("forum sign-out", ["POST"], r"^/log_out$", POSTMILL_ROUTES + " (log_out)"),
    ),
}  # fmt: skip
"""WebArena's sites' reads, by site (placeholder `__GITLAB__` is `gitlab`)."""


def from_site_rule(where: str, rule: SiteRule) -> Rule:
    """A site map entry's rule (`reads[0]`) as the pool applies it."""
    return Rule(
        f"{where} {rule.describe()}".strip(),
        frozenset(rule.method),
        re.compile(rule.path) if rule.path is not None else None,
        graphql_queries=rule.graphql_queries,
        graphql_operations=frozenset(rule.graphql_operations),
    )


@dataclass(frozen=True)
class Request:
    """What the judgement reads of a request: nothing is copied or decoded until a rule needs it."""

    method: str
    path: str
    """Below the replica's base URL, without the query string."""
    content_type: str
    body: bytes | None


def graphql_operations(content_type: str, body: bytes | None) -> list[tuple[str, str | None]] | None:
    """(type, name) of each operation a GraphQL request runs (one operation or a batch list); None when
    the body is no GraphQL request this can read: not JSON, a document that does not parse, an
    `operationName` the document lacks, several operations and none chosen, or a persisted query sent
    as its hash without the query text (what it runs is unknown here)."""
    if body is None or len(body) > MAX_BODY or (content_type and "json" not in content_type.lower()):
        return None
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):  # a body nested past the parser's depth too
        return None
    from graphql import GraphQLError, OperationDefinitionNode, parse  # cheap: ChangeRules loaded it

    items = document if isinstance(document, list) else [document]
    found: list[tuple[str, str | None]] = []
    for item in items:
        if not isinstance(item, dict) or not isinstance(item.get("query"), str):
            return None
        try:
            parsed = parse(item["query"], no_location=True)
        except (GraphQLError, RecursionError):
            return None
        operations = [d for d in parsed.definitions if isinstance(d, OperationDefinitionNode)]
        chosen = item.get("operationName")
        if chosen:
            operations = [o for o in operations if o.name is not None and o.name.value == chosen]
        if len(operations) != 1:  # the server runs none of them (an error), or which one is unknown
            return None
        operation = operations[0]
        found.append((operation.operation.value, operation.name.value if operation.name else None))
    return found or None


def _form(content_type: str, body: bytes | None) -> dict[str, str] | None:
    if body is None or len(body) > MAX_BODY or "x-www-form-urlencoded" not in content_type.lower():
        return None
    try:
        return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=True))
    except (ValueError, UnicodeDecodeError):
        return None


def matches(rule: Rule, request: Request, *, reading: bool) -> bool:
    """Whether `request` is one `rule` names. In reads, named GraphQL operations must be all it runs;
    in changes, one of them is enough."""
    if request.method not in rule.methods:
        return False
    if rule.path is not None and not rule.path.search(request.path):
        return False
    if rule.form_required:
        form = _form(request.content_type, request.body)
        if form is None or rule.form_required not in form or not set(form) <= rule.form_fields:
            return False
    if rule.graphql_queries or rule.graphql_operations:
        operations = graphql_operations(request.content_type, request.body)
        if operations is None:
            return False
        if rule.graphql_queries and any(kind != "query" for kind, _ in operations):
            return False
        if rule.graphql_operations:
            named = [name in rule.graphql_operations for _, name in operations]
            return all(named) if reading else any(named)
    return True


class ChangeRules:
    """Every site's rules of a site map, compiled once: its own `changes`, its own `reads`, then the
    built-in reads of its WebArena site."""

    def __init__(self, site_map: SiteMap) -> None:
        self.site_map = site_map
        self.changes: dict[str, tuple[Rule, ...]] = {}
        self.reads: dict[str, tuple[Rule, ...]] = {}
        for site, env in site_map.environments.items():
            self.changes[site] = tuple(
                from_site_rule(f"{placeholder(site)} changes[{i}]", r) for i, r in enumerate(env.changes)
            )
            own = tuple(from_site_rule(f"{placeholder(site)} reads[{i}]", r) for i, r in enumerate(env.reads))
            self.reads[site] = own + BUILT_IN.get(site, ())
        compiled = (rule for rules in (*self.changes.values(), *self.reads.values()) for rule in rules)
        if any(rule.graphql_queries or rule.graphql_operations for rule in compiled):
            # graphql-core is most of this module's import time, and `serve` imports the module whatever its
            # sites are: the parser loads with rules that need it, here (when the proxy is configured), so
            # no request waits on the import.
            import graphql  # noqa: F401

    def judge(self, method: str, url: str, content_type: str, body: bytes | None) -> Judgement:
        """What the request does to the site `url` is on. Only POST, PUT, PATCH and DELETE are looked
        at; for them, the body only when a rule of the site needs it."""
        method = method.upper()
        if method not in MUTATION_METHODS:
            return READ_BY_METHOD
        found = self.site_map.replicas_of(url)
        if not found:
            return CHANGE_BY_DEFAULT
        site, index = found[0]
        path = below_base(url, self.site_map.replicas(site)[index].urls)
        request = Request(method, path, content_type, body)
        for rule in self.changes.get(site, ()):
            if matches(rule, request, reading=False):
                return Judgement(True, rule.name)
        for rule in self.reads.get(site, ()):
            if matches(rule, request, reading=True):
                return Judgement(False, rule.name)
        return CHANGE_BY_DEFAULT


def below_base(url: str, bases: Iterable[str]) -> str:
    """`url`'s path below the longest of `bases` it is on (`/` at the base itself), no query string."""
    path = urlsplit(url).path
    longest = max((urlsplit(b).path.rstrip("/") for b in bases if url.startswith(b.rstrip("/"))),
                  key=len, default="")  # fmt: skip
    rest = path[len(longest) :] if path.startswith(longest) else path
    return rest if rest.startswith("/") else "/" + rest


_compiled: list[ChangeRules] = []


def rules_of(site_map: SiteMap) -> ChangeRules:
    """The compiled rules of `site_map`, kept while the proxy's site map stays the same object."""
    if not _compiled or _compiled[0].site_map is not site_map:
        _compiled[:] = [ChangeRules(site_map)]
    return _compiled[0]

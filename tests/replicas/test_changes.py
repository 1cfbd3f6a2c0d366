"""What changes a replica (`webarena_live.replicas.changes`): a pure judgement of each request.

GraphQL bodies are parsed by graphql-core (batches, `operationName`, fragments, syntax errors, persisted
queries); each WebArena site's sign-in and sign-out read; a site map's own rules come first; anything
else changes. The site map's rule keys are checked before anything runs (`config_problems`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from webarena_live.evaluator import SiteMap
from webarena_live.evaluator.site_checks import config_problems
from webarena_live.launch import free_ports
from webarena_live.replicas.changes import (
    CHANGE_BY_DEFAULT,
    READ_BY_METHOD,
    ChangeRules,
    below_base,
    graphql_operations,
    rules_of,
)

CLI = Path(sys.executable).parent / "webarena-live"
GITLAB = "http://127.0.0.1:8023"
SHOP = "http://127.0.0.1:7770"
ADMIN = "http://127.0.0.1:7780/admin"
FORUM = "http://127.0.0.1:9999"
JSON = "application/json"
FORM = "application/x-www-form-urlencoded"

ISSUES = "query issues($path: ID!) { project(fullPath: $path) { issues { nodes { ...issue } } } }"
FRAGMENT = "fragment issue on Issue { iid title }"
CREATE = 'mutation createIssue { createIssue(input: {projectPath: "a/b", title: "x"}) { errors } }'


def rules(**extra: object) -> ChangeRules:
    environments: dict[str, object] = {
        "__GITLAB__": {"urls": [GITLAB], **extra},
        "__SHOPPING__": {"urls": [SHOP]},
        "__SHOPPING_ADMIN__": {"urls": [ADMIN]},
        "__REDDIT__": {"urls": [FORUM]},
    }
    return ChangeRules(SiteMap.from_dict({"environments": environments}))


def graphql(body: object, *, site: ChangeRules | None = None, path: str = "/api/graphql") -> tuple[bool, str]:
    judged = (site or rules()).judge("POST", GITLAB + path, JSON, json.dumps(body).encode())
    return judged.change, judged.rule


def test_a_query_reads_with_its_fragments_and_variables() -> None:
    body = {"query": f"{ISSUES}\n{FRAGMENT}", "variables": {"path": "a/b"}, "operationName": "issues"}
    assert graphql(body) == (False, "gitlab graphql query")
    assert graphql({"query": "{ currentUser { username } }"}) == (False, "gitlab graphql query")


def test_a_mutation_or_a_subscription_changes() -> None:
    assert graphql({"query": CREATE}) == (True, CHANGE_BY_DEFAULT.rule)
    assert graphql({"query": "subscription s { issueUpdated(issuableId: 1) { id } }"})[0] is True


def test_a_batch_reads_only_when_every_operation_is_a_query() -> None:
    read = {"query": "{ currentUser { id } }"}
    assert graphql([read, {"query": f"{ISSUES} {FRAGMENT}", "operationName": "issues"}])[0] is False
    assert graphql([read, {"query": CREATE}])[0] is True
    assert graphql([])[0] is True  # runs nothing a server accepts: not a GraphQL request here


def test_operation_name_chooses_the_operation_that_runs() -> None:
    document = f"{ISSUES}\n{FRAGMENT}\n{CREATE}"
    assert graphql({"query": document, "operationName": "issues"})[0] is False
    assert graphql({"query": document, "operationName": "createIssue"})[0] is True
    assert graphql({"query": document})[0] is True  # two operations, none chosen: the server refuses
    assert graphql({"query": document, "operationName": "absent"})[0] is True


def test_what_does_not_parse_or_hides_its_text_changes() -> None:
    assert graphql({"query": "query { project(fullPath: "})[0] is True  # a syntax error
    persisted = {"extensions": {"persistedQuery": {"version": 1, "sha256Hash": "ab" * 32}}}
    assert graphql(persisted)[0] is True  # the hash alone: what it runs is unknown
    with_text = {"query": "{ currentUser { id } }", **persisted}
    assert graphql(with_text)[0] is False
    assert graphql("{ currentUser { id } }")[0] is True  # JSON, but no request object
    site = rules()
    assert site.judge("POST", GITLAB + "/api/graphql", JSON, b"{not json").change
    assert site.judge("POST", GITLAB + "/api/graphql", JSON, None).change
    # nested past the JSON parser's depth: no crash (capture must go on), a change
    assert site.judge("POST", GITLAB + "/api/graphql", JSON, b"[" * 200_000).change
    # a multipart upload (GraphQL's file uploads are mutations) is not read as JSON
    assert site.judge("POST", GITLAB + "/api/graphql", "multipart/form-data; boundary=x", b"{}").change


def test_a_query_elsewhere_on_the_site_is_still_a_change() -> None:
    elsewhere = graphql({"query": "{ currentUser { id } }"}, path="/api/v4/projects")
    assert elsewhere == (True, CHANGE_BY_DEFAULT.rule)


def test_graphql_operations_lists_type_and_name() -> None:
    body = json.dumps([{"query": CREATE}, {"query": "{ a }"}]).encode()
    assert graphql_operations(JSON, body) == [("mutation", "createIssue"), ("query", None)]
    assert graphql_operations("", body) is not None  # no content type: the body decides
    assert graphql_operations("text/html", body) is None


@pytest.mark.parametrize(
    ("method", "url", "content_type", "body", "rule"),
    [
        ("POST", GITLAB + "/users/sign_in", FORM, b"user%5Blogin%5D=root", "gitlab sign-in"),
        ("DELETE", GITLAB + "/users/sign_out", "", b"", "gitlab sign-out"),
        ("POST", GITLAB + "/users/sign_out", FORM, b"_method=delete", "gitlab sign-out"),
        ("POST", SHOP + "/customer/account/loginPost/", FORM, b"login%5Busername%5D=a", "storefront sign-in"),
        ("POST", SHOP + "/customer/account/logout/", FORM, b"", "storefront sign-out"),
        ("POST", ADMIN + "/", FORM, b"form_key=k&login%5Busername%5D=a", "admin sign-in"),
        ("POST", ADMIN + "/admin/dashboard/index/key/abc123/", FORM,
         b"login%5Busername%5D=a&login%5Bpassword%5D=x&dummy=", "admin sign-in"),
        ("POST", ADMIN + "/admin/auth/logout/key/abc/", FORM, b"", "admin sign-out"),
        ("POST", FORUM + "/login_check", FORM, b"_username=u&_password=p&_csrf_token=t", "forum sign-in"),
        ("POST", FORUM + "/log_out", FORM, b"", "forum sign-out"),
    ],
)  # fmt: skip
def test_signing_in_and_out_reads(method: str, url: str, content_type: str, body: bytes, rule: str) -> None:
    judged = rules().judge(method, url, content_type, body)
    assert (judged.change, judged.rule) == (False, rule)


@pytest.mark.parametrize(
    ("method", "url", "content_type", "body"),
    [
        ("POST", GITLAB + "/users/sign_in/extra", FORM, b""),  # not the route
        ("POST", GITLAB + "/users", FORM, b"user%5Bname%5D=x"),  # signing up creates a user
        ("GET", GITLAB + "/users/sign_in", "", b""),  # (a read by its method, not by the rule)
        ("POST", SHOP + "/customer/account/createpost/", FORM, b"email=a"),
        ("POST", SHOP + "/checkout/cart/add/", FORM, b"product=1"),
        # a save that carries the login fields too: more than the login form
        ("POST", ADMIN + "/catalog/product/save/", FORM, b"login%5Busername%5D=a&product%5Bname%5D=x"),
        # the login form's fields alone, but on an action's path: a signed-in admin's POST runs the action
        ("POST", ADMIN + "/sales/order/cancel/order_id/5/", FORM, b"form_key=k&login%5Busername%5D=x"),
        ("POST", ADMIN + "/mui/bookmark/save/", FORM, b"data=%7B%7D"),  # a saved grid view: a change
        ("POST", ADMIN + "/", JSON, b'{"login[username]": "a"}'),  # not a form
        ("POST", FORUM + "/submit", FORM, b"title=x"),
        ("PUT", FORUM + "/login_check", FORM, b""),  # the route is POST only
    ],
)  # fmt: skip
def test_everything_else_changes(method: str, url: str, content_type: str, body: bytes) -> None:
    judged = rules().judge(method, url, content_type, body)
    assert judged.change is (method != "GET"), judged


def test_methods_that_never_change_are_not_parsed() -> None:
    assert rules().judge("GET", GITLAB + "/api/graphql", JSON, b"not even json") is READ_BY_METHOD
    assert rules().judge("head", GITLAB + "/", "", None) is READ_BY_METHOD
    assert rules().judge("POST", "http://elsewhere.example/api/graphql", JSON, b"{}") is CHANGE_BY_DEFAULT


@pytest.mark.parametrize(
    ("site", "loaded"),
    [
        ({"__SHOPPING__": {"urls": [SHOP]}}, False),
        ({"__SHOPPING__": {"urls": [SHOP], "reads": [{"graphql_operations": ["markSeen"]}]}}, True),
        ({"__GITLAB__": {"urls": [GITLAB]}}, True),  # its built-in query rule
    ],
)
def test_graphql_core_loads_with_rules_that_need_it(site: dict[str, object], loaded: bool) -> None:
    """`serve` imports this module whatever its sites are; the parser loads when rules that need it are
    compiled (the proxy being configured), so no request waits on the import, and only then."""
    probe = (
        "import json, sys; from webarena_live.evaluator import SiteMap; "
        "from webarena_live.replicas.changes import ChangeRules; "
        "ChangeRules(SiteMap.from_dict({'environments': json.loads(sys.argv[1])})); "
        "print('graphql' in sys.modules)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(site)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(loaded)


def test_a_site_maps_own_reads_and_changes_come_first() -> None:
    site = rules(
        reads=[{"method": "POST", "path": "^/search$"}, {"graphql_operations": ["markSeen"]}],
        changes=[{"path": "^/api/graphql$", "graphql_operations": ["auditLog"]},
                 {"method": "DELETE", "path": "^/users/sign_out$"}],
    )  # fmt: skip
    assert not site.judge("POST", GITLAB + "/search", "", None).change
    assert site.judge("POST", GITLAB + "/search", FORM, b"q=x").rule == "__GITLAB__ reads[0] POST ^/search$"
    assert site.judge("PUT", GITLAB + "/search", FORM, b"q=x").change  # only the method it names
    seen = {"query": "mutation markSeen { a }", "operationName": "markSeen"}
    assert graphql(seen, site=site) == (False, "__GITLAB__ reads[1] graphql markSeen")
    # a batch reads by a named rule only when every operation is named there (or a built-in read)
    assert graphql([seen, {"query": CREATE}], site=site)[0] is True
    # a change rule wins over the built-in query rule when one operation is named
    audit = [{"query": "query auditLog { a }"}, {"query": "{ b }"}]
    assert graphql(audit, site=site) == (True, "__GITLAB__ changes[0] ^/api/graphql$ graphql auditLog")
    assert site.judge("DELETE", GITLAB + "/users/sign_out", "", None).change
    assert not site.judge("POST", GITLAB + "/users/sign_out", "", None).change  # the built-in, by POST


def test_paths_are_below_the_replicas_base_url() -> None:
    assert below_base("http://h/admin/sales/order/?a=1", ["http://h/admin"]) == "/sales/order/"
    assert below_base("http://h/admin", ["http://h/admin/"]) == "/"
    assert below_base("http://h/x", ["http://h", "http://h/admin"]) == "/x"


def test_compiled_rules_follow_the_site_map_in_use() -> None:
    first = SiteMap.from_dict({"environments": {"__GITLAB__": {"urls": [GITLAB]}}})
    assert rules_of(first) is rules_of(first)
    own = {"urls": [GITLAB], "reads": [{"path": "^/x$"}]}
    second = SiteMap.from_dict({"environments": {"__GITLAB__": own}})
    assert not rules_of(second).judge("POST", GITLAB + "/x", "", None).change


def test_rule_keys_are_checked_before_anything_runs() -> None:
    environment = {
        "urls": [GITLAB],
        "reads": [{"paht": "^/x$"}, {"path": "^/search("}, {"method": "GET", "path": "^/a$"}, {}, 3],
        "changes": [{"graphql_queries": True}],
    }
    problems = config_problems({"environments": {"__GITLAB__": environment}})
    assert problems == [
        "environments.__GITLAB__.reads[0]: unknown key 'paht' (did you mean 'path'?)",
        "environments.__GITLAB__.reads[1].path: '^/search(' is not a regular expression: "
        "missing ), unterminated subpattern at position 8",
        "environments.__GITLAB__.reads[2].method: 'GET' is not one of POST, PUT, PATCH, DELETE "
        "(other methods never change a site)",
        'environments.__GITLAB__.reads[3]: a rule needs "path", "graphql_operations" or "graphql_queries"',
        'environments.__GITLAB__.reads[4]: must be an object such as {"method": "POST", "path": "^/search$"}',
        'environments.__GITLAB__.changes[0].graphql_queries: belongs in "reads" (a query only reads); '
        'name the operations that change with "graphql_operations"',
    ]
    not_a_list = {"urls": [GITLAB], "reads": {"path": "x"}}
    assert config_problems({"environments": {"__GITLAB__": not_a_list}}) == [
        "environments.__GITLAB__.reads: must be a list of rules such as "
        '[{"method": "POST", "path": "^/search$"}]'
    ]


def test_serve_refuses_a_bad_rule_in_one_line_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    rule = {"method": "POST", "path": "^/search("}
    config.write_text(json.dumps({"environments": {"__GITLAB__": {"urls": [GITLAB], "reads": [rule]}}}))
    ports = [arg for port in free_ports(3) for arg in ("--port", str(port))]
    ports[2], ports[4] = "--session-port", "--control-port"
    done = subprocess.run([str(CLI), "serve", "--config", str(config), *ports],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"webarena-live serve: {config}: environments.__GITLAB__.reads[0].path: '^/search(' is not a "
        "regular expression: missing ), unterminated subpattern at position 8"
    ]

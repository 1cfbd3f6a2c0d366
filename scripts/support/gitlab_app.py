"""A GitLab-shaped site of our own (the tests' and scripts/bench_pool_gitlab.py's): what makes WebArena's
GitLab hard on a replica pool, in a few pages.

- Sign-in by form: `POST /users/sign_in` (`user[login]`, `user[password]`) sets a session cookie, as
  Devise does; `DELETE`/`POST /users/sign_out` ends it.
- Issue lists that load in the browser: the page `/<namespace>/<project>/-/issues/` is a shell whose
  script POSTs GraphQL queries to `/api/graphql` (a batch of two, then one more) and draws the list,
  as GitLab's Vue issue list does (the official navigation tasks expect that POST: tasks 102, 103).
- Changes by GraphQL mutation: `createIssue` and `updateIssue` (closing an issue).
- A real GraphQL endpoint: graphql-core's schema and execution (a batch is a JSON list of operations,
  `operationName` chooses one of a document's operations; fragments and variables work).

Every copy is a replica: its own server and port, its own in-memory issues, restored to the seed by its
reset endpoint in the environment-control shape (`scripts/support/reset_endpoint.py`).
"""

from __future__ import annotations

import copy
import json
import secrets
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from graphql import build_schema, graphql_sync

from scripts.support.reset_endpoint import ResetEndpoint, reset_endpoints

PROJECT = "a11y/trails"
USER, PASSWORD = "byteblaze", "hello1234"
SEED = [
    {"iid": "1", "title": "Ridge Loop signs are missing", "state": "opened", "labels": ["help wanted"]},
    {"iid": "2", "title": "Map tiles load slowly", "state": "opened", "labels": ["performance"]},
    {"iid": "3", "title": "Falcon Crag elevation is wrong", "state": "opened", "labels": ["question"]},
    {"iid": "4", "title": "Old trail page", "state": "closed", "labels": []},
]
SCHEMA = build_schema("""
type Query { currentUser: User  project(fullPath: ID!): Project }
type User { username: String! }
type Project { fullPath: ID!  issues(state: String, labelName: [String!]): IssueConnection! }
type IssueConnection { count: Int!  nodes: [Issue!]! }
type Issue { iid: ID!  title: String!  state: String!  labels: [String!]! }
input CreateIssueInput { projectPath: ID!  title: String! }
input UpdateIssueInput { projectPath: ID!  iid: ID!  stateEvent: String! }
type IssuePayload { issue: Issue  errors: [String!]! }
type Mutation {
  createIssue(input: CreateIssueInput!): IssuePayload!
  updateIssue(input: UpdateIssueInput!): IssuePayload!
}
""")
ISSUES_QUERY = """query getIssues($fullPath: ID!, $state: String, $labels: [String!]) {
  project(fullPath: $fullPath) { issues(state: $state, labelName: $labels) { count nodes { ...issue } } }
}
fragment issue on Issue { iid title state labels }
query countIssues($fullPath: ID!) { project(fullPath: $fullPath) { issues(state: "opened") { count } } }"""
"""The page's document: two operations and a fragment, `operationName` choosing one (as GitLab's client
sends its documents)."""

# What its tasks' agents send and answer (tests/gitlab/agents.py, scripts/bench_pool_gitlab.py).
NAVIGATED: dict[str, Any] = {"task_type": "navigate", "status": "SUCCESS", "retrieved_data": None}
MUTATED: dict[str, Any] = {"task_type": "mutate", "status": "SUCCESS", "retrieved_data": None}
CREATE = (
    "mutation createIssue($input: CreateIssueInput!) { createIssue(input: $input) { issue { iid } errors } }"
)


@dataclass
class Site:
    """One copy's data: its issues and who is signed in (cookie -> user)."""

    issues: list[dict[str, Any]] = field(default_factory=lambda: copy.deepcopy(SEED))
    sessions: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def restore(self) -> None:
        with self.lock:
            self.issues = copy.deepcopy(SEED)
            self.sessions.clear()

    def open_count(self) -> int:
        return sum(issue["state"] == "opened" for issue in self.issues)

    # --- GraphQL resolvers (graphql-core calls a root's callables with the field's arguments) ---

    def root(self, user: str | None) -> dict[str, Any]:
        def issues(
            _info: Any, state: str | None = None, labelName: list[str] | None = None
        ) -> dict[str, Any]:
            found = [i for i in self.issues if (state is None or i["state"] == state)
                     and all(label in i["labels"] for label in labelName or ())]  # fmt: skip
            return {"count": len(found), "nodes": found}

        def project(_info: Any, fullPath: str) -> dict[str, Any] | None:
            return {"fullPath": fullPath, "issues": issues} if fullPath == PROJECT else None

        def create_issue(_info: Any, input: dict[str, Any]) -> dict[str, Any]:
            if user is None:
                return {"issue": None, "errors": ["sign in first"]}
            with self.lock:
                issue = {
                    "iid": str(len(self.issues) + 1),
                    "title": input["title"],
                    "state": "opened",
                    "labels": [],
                }
                self.issues.append(issue)
            return {"issue": issue, "errors": []}

        def update_issue(_info: Any, input: dict[str, Any]) -> dict[str, Any]:
            found = next((i for i in self.issues if i["iid"] == input["iid"]), None)
            if user is None or found is None:
                return {"issue": None, "errors": ["sign in first" if user is None else "no such issue"]}
            with self.lock:
                found["state"] = "closed" if input["stateEvent"].upper() == "CLOSE" else "opened"
            return {"issue": found, "errors": []}

        return {
            "currentUser": {"username": user} if user else None,
            "project": project,
            "createIssue": create_issue,
            "updateIssue": update_issue,
        }

    def execute(self, operation: Any, user: str | None) -> dict[str, Any]:
        if not isinstance(operation, dict) or not isinstance(operation.get("query"), str):
            return {"errors": [{"message": "a GraphQL request needs its query text"}]}
        result = graphql_sync(SCHEMA, operation["query"], root_value=self.root(user),
                              variable_values=operation.get("variables"),
                              operation_name=operation.get("operationName"))  # fmt: skip
        return result.formatted


PAGE = (Path(__file__).resolve().parents[2] / "tests" / "gitlab" / "issues.html").read_text()


class Handler(BaseHTTPRequestHandler):
    server: GitLabServer
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _user(self) -> str | None:
        cookie = SimpleCookie(self.headers.get("Cookie", ""))
        token = cookie["_gitlab_session"].value if "_gitlab_session" in cookie else None
        return self.server.site.sessions.get(token or "")

    def _send(self, status: int, body: bytes = b"", kind: str = "text/html", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", f"{kind}; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        if path == "/users/sign_in":
            form = ('<form method="post" action="/users/sign_in">'
                    '<input name="authenticity_token" type="hidden" value="t">'
                    '<input id="user_login" name="user[login]">'
                    '<input id="user_password" name="user[password]" type="password">'
                    '<button id="sign-in" type="submit">Sign in</button></form>')  # fmt: skip
            return self._send(200, f"<!doctype html><title>Sign in</title>{form}".encode())
        if self._user() is None:
            return self._send(302, Location="/users/sign_in")
        if path == "/":
            link = f'<a id="issues" href="/{PROJECT}/-/issues/?state=opened">Issues</a>'
            return self._send(200, f"<!doctype html><title>Projects</title>{link}".encode())
        if path.rstrip("/") == f"/{PROJECT}/-/issues":
            page = PAGE.replace("__PROJECT__", PROJECT).replace("__QUERY__", json.dumps(ISSUES_QUERY))
            return self._send(200, page.encode())
        self._send(404, b"<!doctype html><title>Not found</title>")

    def do_POST(self) -> None:
        path, body = urlsplit(self.path).path, self._body()
        site = self.server.site
        if path == "/users/sign_in":
            form = parse_qs(body.decode())
            if form.get("user[login]") == [USER] and form.get("user[password]") == [PASSWORD]:
                token = secrets.token_hex(8)
                site.sessions[token] = USER
                return self._send(302, Location="/", Set_Cookie=f"_gitlab_session={token}; Path=/; HttpOnly")
            return self._send(302, Location="/users/sign_in")
        if path == "/users/sign_out":
            return self._sign_out()
        if path == "/api/graphql":
            try:
                document = json.loads(body)
            except ValueError:
                return self._send(400, b'{"errors": [{"message": "not JSON"}]}', "application/json")
            user = self._user()
            answer = ([site.execute(op, user) for op in document] if isinstance(document, list)
                      else site.execute(document, user))  # fmt: skip
            return self._send(200, json.dumps(answer).encode(), "application/json")
        self._send(404, b"{}", "application/json")

    def do_DELETE(self) -> None:
        self._body()
        if urlsplit(self.path).path == "/users/sign_out":
            return self._sign_out()
        self._send(404, b"")

    def _sign_out(self) -> None:
        cookie = SimpleCookie(self.headers.get("Cookie", ""))
        if "_gitlab_session" in cookie:
            self.server.site.sessions.pop(cookie["_gitlab_session"].value, None)
        self._send(302, Location="/users/sign_in", Set_Cookie="_gitlab_session=; Path=/; Max-Age=0")


class GitLabServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, site: Site) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.site = site

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@dataclass
class Replica:
    server: GitLabServer
    reset: ResetEndpoint

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def site(self) -> Site:
        return self.server.site


@contextmanager
def gitlab_replicas(count: int, *, reset_delay: float = 0.0) -> Iterator[list[Replica]]:
    """`count` seeded copies, each on its own port with a reset endpoint that restores its seed."""
    with ExitStack() as stack, reset_endpoints(count, delay=reset_delay) as endpoints:
        replicas = []
        for endpoint in endpoints:
            server = GitLabServer(Site())
            threading.Thread(target=server.serve_forever, daemon=True).start()
            stack.callback(server.server_close)
            stack.callback(server.shutdown)
            endpoint.on_reset = server.site.restore
            replicas.append(Replica(server, endpoint))
        yield replicas


def pool_config(replicas: list[Replica]) -> dict[str, Any]:
    """The site map: GitLab, these copies as its replicas."""
    return {"__GITLAB__": {"replicas": [{"urls": [r.url], "reset_url": r.reset.url} for r in replicas]}}

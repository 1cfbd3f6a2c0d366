#!/usr/bin/env bash
# Check the installed product, not the checkout: build the wheel, install it into a fresh virtual
# environment, and from a directory outside the repository (nothing of it on sys.path) run what a
# user runs: import, the demo, serve with one curl session through the proxy and a finish,
# evaluate on those outputs, and the `mitmdump -s` route; then the same venv with `pip install -e .`
# in setuptools' default mode, running the demo. Fails on the first thing that does not work.
# Everything is built from a copy of the sources (what the wheel is made of), so the check never
# writes into the checkout and runs beside the test suite, which builds wheels of its own.
#   scripts/check_wheel.sh            (uses .venv to build; PYTHON picks the interpreter of the new venv)
set -euo pipefail
checkout="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d "${TMPDIR:-/tmp}/webarena-live-wheel.XXXXXX")"
repo="$work/source"
mkdir "$repo"
cp -a "$checkout"/{addon,evaluator,tasks,pyproject.toml,README.md} "$repo/"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
step() { echo "==> wheel check: $*"; }
fail() { echo "wheel check FAILED: $*" >&2; exit 1; }

step "building the wheel"
"$checkout/.venv/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-deps -w "$work/dist" "$repo" \
    2> >(grep -v '^WARNING: Location' >&2)
wheel=("$work"/dist/webarena_live-*.whl)

step "installing $(basename "${wheel[0]}") into a fresh venv"
"$python" -m venv "$work/venv"
venv="$work/venv/bin"
# The same files as a user's `pip install`, without compiling every module of every dependency at install:
# Python compiles what the checks import, as they import it (about a quarter of the install's time).
"$venv/pip" install --quiet --disable-pip-version-check --no-compile "${wheel[0]}" 2> >(grep -v '^WARNING: Location' >&2)
"$venv/pip" check

mkdir "$work/away"
cd "$work/away"   # outside the checkout: nothing of the repository can be imported by accident
unset PYTHONPATH

step "import webarena_live, and it is the only top-level package the distribution installs"
"$venv/python" - "$checkout" <<'EOF'
import sys
from importlib.metadata import files
from pathlib import Path

import webarena_live
from webarena_live import evaluate_task, load_tasks  # noqa: F401  (the re-exported public API)

repo = Path(sys.argv[1]).resolve()
where = Path(webarena_live.__file__).resolve()
assert repo not in where.parents, f"imported from the checkout: {where}"
assert not any(Path(p or ".").resolve() == repo for p in sys.path), "the checkout is on sys.path"
tops = sorted({f.parts[0] for f in files("webarena-live") if f.parts[0] not in ("..",) and not f.parts[0].endswith(".dist-info")})
print("installed top-level packages:", ", ".join(tops))
assert tops == ["webarena_live"], f"the distribution installs more than webarena_live: {tops}"
print(f"webarena_live {webarena_live.__version__} from {where.parent}; {len(load_tasks())} demo tasks")
EOF

step "webarena-live demo"
"$venv/webarena-live" demo --output-dir "$work/demo" | tail -3

free_ports() {
    "$venv/python" -c 'import socket
socks = [socket.socket() for _ in range(int(__import__("sys").argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}
wait_health() {  # URL LOG PID
    for _ in $(seq 1 150); do
        curl -sf "$1/health" >/dev/null && return 0
        kill -0 "$3" 2>/dev/null || { cat "$2" >&2; fail "the proxy exited before it answered $1/health"; }
        sleep 0.2
    done
    cat "$2" >&2
    fail "no answer from $1/health"
}

read -r site_port proxy_port session_port control_port <<<"$(free_ports 4)"
step "the demo shop from the installed package on :$site_port"
"$venv/python" -m webarena_live.demo.site --port "$site_port" >"$work/site.log" 2>&1 &
pids+=($!)
demo_tasks="$("$venv/python" -c 'from webarena_live.evaluator.tasks import default_tasks_path; print(default_tasks_path())')"
printf '{"test_data_file": "%s", "environments": {"__SHOPPING__": {"urls": ["http://127.0.0.1:%s"]}}}\n' \
    "$demo_tasks" "$site_port" >"$work/config.json"

step "webarena-live serve: health, a curl session through the proxy, finish, outputs"
"$venv/webarena-live" serve --config "$work/config.json" --output-dir "$work/out" --port "$proxy_port" \
    --session-port "$session_port" --control-port "$control_port" --set "confdir=$work/conf" \
    >"$work/serve.log" 2>&1 &
serve_pid=$!
pids+=("$serve_pid")
control="http://127.0.0.1:$control_port"
wait_health "$control" "$work/serve.log" "$serve_pid"
curl -sf "$control/health"; echo
curl -sf -X POST "$control/sessions" -d '{"task_id": 1003, "session": "wheel"}' >/dev/null
curl -sf -x "http://wheel:x@127.0.0.1:$proxy_port" -H 'Accept: text/html' \
    "http://127.0.0.1:$site_port/enamel-camp-mug.html" >/dev/null
result="$(curl -sf -X POST "$control/sessions/wheel/finish" \
    -d '{"task_type": "navigate", "status": "SUCCESS", "retrieved_data": null}')"
echo "$result" | "$venv/python" -c 'import json, sys
r = json.load(sys.stdin)
assert r["status"] == "success" and r["score"] == 1, r
print("finish:", r["task_id"], r["status"], r["score"])'
for name in agent_response.json network.har eval_result.json; do
    [ -s "$work/out/1003/$name" ] || fail "serve wrote no out/1003/$name"
done
kill "$serve_pid"
wait "$serve_pid" 2>/dev/null || true

step "webarena-live evaluate on those outputs"
"$venv/webarena-live" evaluate --output-dir "$work/out" --config "$work/config.json" | tail -3
"$venv/python" -c 'import json, sys
r = json.load(open(sys.argv[1]))
assert r["status"] == "success", r' "$work/out/1003/eval_result.json"

step "the mitmdump -s route"
addon="$("$venv/webarena-live" addon-path)"
read -r proxy_port control_port <<<"$(free_ports 2)"
"$venv/mitmdump" -q -s "$addon" --mode "regular@$proxy_port" --set "webarena_control_port=$control_port" \
    --set "webarena_config=$work/config.json" --set "confdir=$work/conf" >"$work/mitmdump.log" 2>&1 &
dump_pid=$!
pids+=("$dump_pid")
control="http://127.0.0.1:$control_port"
wait_health "$control" "$work/mitmdump.log" "$dump_pid"
curl -sf -x "http://127.0.0.1:$proxy_port" "http://127.0.0.1:$site_port/" >/dev/null
curl -sf "$control/sessions/default" | "$venv/python" -c 'import json, sys
s = json.load(sys.stdin)
assert s["counts"]["total"] == 1, s
print("mitmdump -s: session default has", s["counts"]["total"], "event")'
kill "$dump_pid"
wait "$dump_pid" 2>/dev/null || true
if grep -qi "deprecat" "$work/mitmdump.log"; then cat "$work/mitmdump.log" >&2; fail "mitmdump printed a deprecation warning"; fi

step "serve --ray without the ray extra: one line naming it"
set +e
said="$("$venv/webarena-live" serve --workers 2 --ray auto 2>&1)"
code=$?
set -e
[ "$code" = 2 ] || fail "serve --ray without Ray exited $code: $said"
[ "$said" = "webarena-live serve: --ray needs Ray, which is not installed: pip install 'webarena-live[ray]'" ] \
    || fail "serve --ray without Ray said: $said"
echo "$said"

step "pip install -e . in setuptools' default editable mode (its import hook), into the same venv"
"$venv/pip" uninstall --quiet --yes webarena-live
"$venv/pip" install --quiet --disable-pip-version-check --no-compile --no-deps -e "$repo" 2> >(grep -v '^WARNING: Location' >&2)
"$venv/python" - "$repo" <<'EOF'
import sys
from pathlib import Path

import webarena_live
from webarena_live.evaluator.tasks import default_tasks_path, load_tasks

repo = Path(sys.argv[1]).resolve()
where = Path(webarena_live.__file__).resolve()
assert where == repo / "addon" / "__init__.py", where
assert default_tasks_path().is_file(), default_tasks_path()
print(f"editable: webarena_live from {where.parent}; {len(load_tasks())} demo tasks")
EOF
"$venv/webarena-live" demo --output-dir "$work/demo-editable" | tail -1

echo "==> wheel check: all passed"

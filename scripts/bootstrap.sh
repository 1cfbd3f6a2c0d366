#!/usr/bin/env bash
# Set up everything webarena-live needs on a fresh Debian/Ubuntu machine, then
# run one thing:  scripts/bootstrap.sh demo | test | setup
#   demo   run the embedded demo (webarena-live demo)
#   test   lint, type-check, check the built wheel installed in a fresh venv, run the whole test suite
#   setup  only install
# It creates .venv (the project) and .oracle-venv (the reference evaluator
# webarena-verified==1.2.3, used by the parity tests), and installs Debian's
# chromium with apt-get when it is missing and we are root (for test and setup also DokuWiki, which
# the wiki end-to-end tests run: scripts/install_test_apps.sh). For test and setup it also creates
# .venv-3.13 with the package installed (not editable) on Python 3.13, which takes mitmproxy 12: the
# proxy, control, fleet and end-to-end tests run there too (skipped with a warning outside CI when no
# Python 3.13 is found; in CI its absence fails the run). Beside them, on that Python 3.13, one venv per
# training framework the rewards are tested with (.venv-openenv, .venv-verifiers with the newest
# verifiers, .venv-verifiers03 with 0.3.1, .venv-harbor; with
# WEBARENA_LIVE_NEMO_GYM=1 also .venv-nemogym, nemo-gym being 1.4 GB), filled in the background
# while the rest installs, each from one wheel of the package, and each running its own test file.
# And on Python 3.12, .venv-browsergym: BrowserGym 0.14.3 beside the package (tests/browsergym).
set -euo pipefail
cd "$(dirname "$0")/.."

what="${1:-setup}"
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null 2>&1 || python=python3
if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))'; then
    echo "webarena-live needs Python 3.11 or newer (found $("$python" --version 2>&1)); set PYTHON=/path/to/python3" >&2
    exit 1
fi

pip_quiet=(--quiet --disable-pip-version-check)

# A Python 3.13 for the second interpreter (mitmproxy 12 needs 3.12 or newer): PYTHON313, else the
# first that runs of `python3.13` and pyenv's builds (pyenv's `python3.13` shim answers only when that
# version is selected).
newer_python() {
    local candidate
    for candidate in "${PYTHON313:-}" "$(command -v python3.13 || true)" "$HOME"/.pyenv/versions/3.13*/bin/python3.13 \
        /root/.pyenv/versions/3.13*/bin/python3.13 /usr/bin/python3.13 /usr/local/bin/python3.13; do
        if [ -n "$candidate" ] && [ -x "$candidate" ] && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 13))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

# Each step says what it starts and, when the next one starts (or the script ends), how long it took.
step_name=""
step_started=$SECONDS
step() {
    if [ -n "$step_name" ]; then
        echo "    ($step_name: $((SECONDS - step_started))s)"
    fi
    step_name="$1"
    step_started=$SECONDS
    [ -z "$1" ] || echo "==> $1"
}
trap 'status=$?; step ""; echo "==> $what finished with exit status $status after ${SECONDS}s"' EXIT

# Debian's packages (Chromium; for test and setup also DokuWiki and PHP) install in the background while
# pip fills the virtualenvs: the two wait on different servers. Their output is shown when they are done.
debian_packages() {
    if [ ! -x /usr/bin/chromium ]; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "==> installing Debian's chromium with apt-get"
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
        else
            echo "Chromium is missing: install it first (sudo apt-get install chromium), then run this again." >&2
            return 1
        fi
    fi
    if [ "$what" = test ] || [ "$what" = setup ]; then
        echo "==> the end-to-end tests' applications from Debian: DokuWiki, kiwix-serve, Redmine (scripts/install_test_apps.sh)"
        bash scripts/install_test_apps.sh
    fi
}
debian_log="$(mktemp "${TMPDIR:-/tmp}/webarena-live-debian.XXXXXX")"
debian_packages >"$debian_log" 2>&1 &
debian_pid=$!

if [ ! -x .venv/bin/python ]; then
    step "creating .venv"
    "$python" -m venv .venv
fi
step "installing webarena-live into .venv"
# Strict editable mode: a tree of links that mypy can read (the default finder is invisible to it).
.venv/bin/pip install "${pip_quiet[@]}" --config-settings editable_mode=strict -e '.[test,ray]'

# One venv per training framework, each with the package's wheel and its framework (tests/rewards/):
# started in the background once .venv exists (the wheel is built from a copy of the sources, so no
# other build shares the checkout's build/ folder), waited for before their tests run.
reward_frameworks=(openenv verifiers verifiers03 harbor)
[ "${WEBARENA_LIVE_NEMO_GYM:-}" = 1 ] && reward_frameworks+=(nemogym)
reward_venvs() {
    local py="$1" src wheel framework
    src="$(mktemp -d "${TMPDIR:-/tmp}/webarena-live-src.XXXXXX")"
    cp -a addon evaluator tasks pyproject.toml README.md "$src/"
    .venv/bin/pip wheel "${pip_quiet[@]}" --no-deps -w "$src/dist" "$src" 2> >(grep -v '^WARNING: Location' >&2)
    wheel="$(ls "$src"/dist/webarena_live-*.whl)"
    for framework in "${reward_frameworks[@]}"; do
        (
            local started=$SECONDS spec
            case "$framework" in
                openenv) spec=("$wheel[openenv]" verifiers) ;;  # verifiers beside: one `openenv` package
                verifiers) spec=("$wheel[verifiers]") ;;  # the newest: verifiers.v1 only
                verifiers03) spec=("$wheel[verifiers]" 'verifiers==0.3.1') ;;  # both APIs, the legacy rubric's
                harbor) spec=("$wheel" 'harbor==0.26.0') ;;
                nemogym) spec=("$wheel" 'nemo-gym==0.4.0') ;;
            esac
            [ -x ".venv-$framework/bin/python" ] || "$py" -m venv ".venv-$framework"
            ".venv-$framework/bin/pip" install "${pip_quiet[@]}" "${spec[@]}" 'pytest>=8' 'pytest-timeout>=2.3' \
                'requests>=2.31' 2> >(grep -v '^WARNING: Location' >&2)
            echo "    (.venv-$framework: $((SECONDS - started))s)"
        ) &
    done
    wait
    rm -rf "$src"
}

# BrowserGym (tests/browsergym/): .venv-browsergym on Python 3.12 with the package's wheel and its
# [browsergym] extra beside browsergym-webarena-verified 0.14.3, which must resolve to browsergym-core
# 0.14.3 (it pins playwright 1.44; a wider pin lets pip fall back to an older BrowserGym, so the
# resolution is checked). Filled in the background like the reward venvs; tqdm and pandas are what
# browsergym-experiments' loop and Benchmark import without declaring them.
python312() {
    local candidate
    for candidate in "${PYTHON312:-}" "$(command -v python3.12 || true)" "$HOME"/.pyenv/versions/3.12*/bin/python3.12 \
        /root/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12; do
        if [ -n "$candidate" ] && [ -x "$candidate" ] && "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}
browsergym_venv() {
    local py="$1" src wheel started=$SECONDS
    src="$(mktemp -d "${TMPDIR:-/tmp}/webarena-live-bgym.XXXXXX")"
    cp -a addon evaluator tasks pyproject.toml README.md "$src/"
    .venv/bin/pip wheel "${pip_quiet[@]}" --no-deps -w "$src/dist" "$src" 2> >(grep -v '^WARNING: Location' >&2)
    wheel="$(ls "$src"/dist/webarena_live-*.whl)"
    [ -x .venv-browsergym/bin/python ] || "$py" -m venv .venv-browsergym
    .venv-browsergym/bin/pip install "${pip_quiet[@]}" "$wheel[browsergym]" 'browsergym-webarena-verified==0.14.3' \
        'browsergym-experiments==0.14.3' tqdm pandas 'pytest>=8' 'pytest-timeout>=2.3' 'requests>=2.31' \
        2> >(grep -v '^WARNING: Location' >&2)
    rm -rf "$src"
    .venv-browsergym/bin/python -c 'from importlib.metadata import version as v
found = {name: v(name) for name in ("browsergym-core", "playwright", "webarena-verified")}
assert found["browsergym-core"] == "0.14.3", f"webarena-live[browsergym] resolved {found}, not browsergym-core 0.14.3"
print("    resolved:", ", ".join(f"{name} {version}" for name, version in found.items()))'
    echo "    (.venv-browsergym: $((SECONDS - started))s)"
}
if [ "$what" = test ] || [ "$what" = setup ]; then
    if python312_path="$(python312)"; then
        browsergym_log="$(mktemp "${TMPDIR:-/tmp}/webarena-live-bgym.XXXXXX")"
        browsergym_venv "$python312_path" >"$browsergym_log" 2>&1 &
        browsergym_pid=$!
    elif [ "${CI:-}" = true ]; then
        echo "no Python 3.12 found (python3.12, ~/.pyenv/versions/3.12*; or set PYTHON312): CI tests BrowserGym" >&2
        exit 1
    else
        echo "==> no Python 3.12 found: the BrowserGym tests are skipped (set PYTHON312=/path/to/python3.12)" >&2
    fi
fi
# The BrowserGym tests in their venv (the oracle's verdicts beside them).
browsergym_tests() {
    if ! wait "$browsergym_pid"; then
        cat "$browsergym_log" >&2
        return 1
    fi
    cat "$browsergym_log"
    WEBARENA_ORACLE="$PWD/.oracle-venv/bin/python" .venv-browsergym/bin/pytest -p no:cacheprovider tests/browsergym
}

python313=""
if [ "$what" = test ] || [ "$what" = setup ]; then
    if python313="$(newer_python)"; then
        rewards_log="$(mktemp "${TMPDIR:-/tmp}/webarena-live-rewards.XXXXXX")"
        reward_venvs "$python313" >"$rewards_log" 2>&1 &
        rewards_pid=$!
        step "creating .venv-3.13 ($("$python313" --version), mitmproxy 12) with the package installed"
        [ -x .venv-3.13/bin/python ] || "$python313" -m venv .venv-3.13
        .venv-3.13/bin/pip install "${pip_quiet[@]}" '.[test,ray]' 2> >(grep -v '^WARNING: Location' >&2)
        rm -rf build/lib build/bdist.* webarena_live.egg-info   # the regular install's build leftovers
    elif [ "${CI:-}" = true ]; then
        echo "no Python 3.13 found (python3.13, ~/.pyenv/versions/3.13*; or set PYTHON313): CI tests both interpreters" >&2
        exit 1
    else
        echo "==> no Python 3.13 found: the mitmproxy 12 tests are skipped (set PYTHON313=/path/to/python3.13)" >&2
    fi
    if [ ! -x .oracle-venv/bin/webarena-verified ]; then
        step "creating .oracle-venv with the reference evaluator webarena-verified==1.2.3"
        # A half-made venv or a dangling link from elsewhere would make `venv` fail: start clean.
        rm -rf .oracle-venv
        "$python" -m venv .oracle-venv
        .oracle-venv/bin/pip install "${pip_quiet[@]}" 'webarena-verified==1.2.3'
    fi
fi

# Each framework's test file in its venv, all at once; a file that collects nothing fails (exit 5).
rewards_tests() {
    if ! wait "$rewards_pid"; then
        cat "$rewards_log" >&2
        return 1
    fi
    cat "$rewards_log"
    local framework pids=() logs=() failed=0 i files
    for framework in "${reward_frameworks[@]}"; do
        logs+=("$(mktemp "${TMPDIR:-/tmp}/webarena-live-$framework.XXXXXX")")
        case "$framework" in
            verifiers) files=(tests/rewards/test_verifiers_v1.py) ;;
            verifiers03) files=(tests/rewards/test_verifiers.py tests/rewards/test_verifiers_v1.py) ;;
            *) files=("tests/rewards/test_$framework.py") ;;
        esac
        ".venv-$framework/bin/pytest" -p no:cacheprovider "${files[@]}" >"${logs[-1]}" 2>&1 &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || failed=1
        echo "--- ${reward_frameworks[$i]}:"
        tail -n 25 "${logs[$i]}"
        rm -f "${logs[$i]}"
    done
    return "$failed"
}

step "Debian's packages (installed in the background meanwhile)"
if ! wait "$debian_pid"; then
    cat "$debian_log" >&2
    exit 1
fi
cat "$debian_log"
rm -f "$debian_log"

case "$what" in
    demo)
        exec .venv/bin/webarena-live demo
        ;;
    test)
        step ruff
        .venv/bin/ruff check .
        step mypy
        .venv/bin/mypy
        step "import contracts (which part may import which: pyproject.toml, [tool.importlinter])"
        .venv/bin/lint-imports
        step "the installed product: wheel in a fresh venv, used from outside the checkout"
        bash scripts/check_wheel.sh
        step "pytest (test files spread over the cores: pytest-xdist, one file per process at a time)"
        export WEBARENA_ORACLE="$PWD/.oracle-venv/bin/python"
        .venv/bin/pytest -n auto --dist loadfile "${@:2}"
        if [ -n "$python313" ] && [ $# -le 1 ]; then
            step "the installed product on $("$python313" --version) with mitmproxy 12: wheel check"
            PYTHON="$python313" bash scripts/check_wheel.sh
            step "pytest on $("$python313" --version) with mitmproxy 12: the proxy, control, fleet and end-to-end tests"
            .venv-3.13/bin/pytest -n auto --dist loadfile tests/proxy tests/control tests/fleet tests/e2e
            step "the rewards with each training framework, in its own venv (${reward_frameworks[*]})"
            rewards_tests
        fi
        if [ -n "${browsergym_pid:-}" ] && [ $# -le 1 ]; then
            step "BrowserGym and its experiment loop on $("$python312_path" --version), in .venv-browsergym (tests/browsergym)"
            browsergym_tests
        fi
        ;;
    setup)
        if [ -n "${rewards_pid:-}" ]; then
            step "the training frameworks' venvs (installed in the background meanwhile)"
            wait "$rewards_pid" || { cat "$rewards_log" >&2; exit 1; }
            cat "$rewards_log"
        fi
        if [ -n "${browsergym_pid:-}" ]; then
            step "BrowserGym's venv (installed in the background meanwhile)"
            wait "$browsergym_pid" || { cat "$browsergym_log" >&2; exit 1; }
            cat "$browsergym_log"
        fi
        echo "==> ready: .venv/bin/webarena-live --help"
        ;;
    *)
        echo "usage: scripts/bootstrap.sh demo | test | setup" >&2
        exit 2
        ;;
esac

#!/usr/bin/env bash
# Set up everything webarena-live needs on a fresh Debian/Ubuntu machine, then
# run one thing:  scripts/bootstrap.sh demo | test [--quick] | setup
#   demo   run the embedded demo (webarena-live demo)
#   test   lint, type-check, build the documentation site (mkdocs build --strict), check the built wheel
#          installed in a fresh venv, run the whole test suite: what CI runs (.ci/run)
#   test --quick  for everyday work: ruff, mypy, the import contracts and the documentation site, then
#          every package's unit tests and the parity corpora on Python 3.11: no browser, no real
#          application, no Ray, no other venv but the reference's: pytest's plugin tests/support/quick.py
#          leaves out every test that starts a browser, a real application, Ray or machines made of
#          network namespaces (it reads the code)
#   setup  only install
#
# Virtual environments (uv fills them: it downloads and installs in parallel, so the set-up is a
# minute or two rather than several; uv itself comes from PyPI into .venv first):
#   .venv            the project, in setuptools' strict editable mode (a tree of links mypy can read)
#   .oracle-venv     the reference evaluator webarena-verified==1.2.3, for the parity tests
#   .venv-3.13       the package's wheel on Python 3.13, which takes mitmproxy 12 (test, setup)
#   .venv-openenv, .venv-verifiers (the newest), .venv-verifiers03 (0.3.1), .venv-harbor: one per
#                    training framework the rewards are tested with, on Python 3.13 (with
#                    WEBARENA_LIVE_NEMO_GYM=1 also .venv-nemogym, nemo-gym being 1.4 GB)
#   .venv-browsergym BrowserGym 0.14.3 beside the package, on Python 3.12 (tests/browsergym)
#   .venv-browseruse browser-use (the newest: it pins an mcp 2.1 whose HTTP stack mitmproxy 11 does not
#                    take) beside the package's wheel, on Python 3.13 (tests/browseruse)
# They fill side by side, with Debian's packages (chromium; for test and setup also the end-to-end
# tests' applications: scripts/install_test_apps.sh, and the container tests' images:
# scripts/build_site_images.sh) installing meanwhile when we are root.
#
# `test` then runs ruff, mypy and the import contracts while those fill; then, one after another, the
# wheel checks on both interpreters, the whole suite on Python 3.11 (mitmproxy 11), the proxy, control,
# fleet and end-to-end tests on Python 3.13 (mitmproxy 12), each training framework's tests (at once) and
# BrowserGym's. Outside CI a missing Python 3.12 or 3.13 skips its part with a warning; in CI it fails the run.
# Extra arguments (`test -k values`) go to the Python 3.11 suite, and only it runs.
set -euo pipefail
cd "$(dirname "$0")/.."
# Python keeps the bytecode of what it imports, so only what runs is compiled, once (compiling whole
# venvs at install was most of the set-up's CPU). Where PYTHONDONTWRITEBYTECODE is set (some machines set
# it for every process), every test process, and every reference evaluator the parity tests start, would
# compile all it imports again: it is unset for everything this script runs.
unset PYTHONDONTWRITEBYTECODE

what="${1:-setup}"
python="${PYTHON:-python3.11}"
command -v "$python" >/dev/null 2>&1 || python=python3
if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] < (3, 11))'; then
    echo "webarena-live needs Python 3.11 or newer (found $("$python" --version 2>&1)); set PYTHON=/path/to/python3" >&2
    exit 1
fi
case "$what" in demo | test | setup) ;; *) echo "usage: scripts/bootstrap.sh demo | test [--quick] | setup" >&2; exit 2 ;; esac
quick=false
if [ "$what" = test ] && [ "${2:-}" = --quick ]; then quick=true; fi
full=false
if { [ "$what" = test ] && ! $quick; } || [ "$what" = setup ]; then full=true; fi

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
logs="$(mktemp -d "${TMPDIR:-/tmp}/webarena-live-bootstrap.XXXXXX")"

# A background job: `job NAME command...` runs it with its output in $logs/NAME.log and its time and
# exit status noted; `finish NAME` waits for it, shows its output and returns its status.
declare -A job_pids
job() {
    local name="$1"
    shift
    (
        started=$SECONDS
        set +e
        "$@" >"$logs/$name.log" 2>&1
        status=$?
        echo "    ($name: $((SECONDS - started))s, exit status $status)" >>"$logs/$name.log"
        exit "$status"
    ) &
    job_pids[$name]=$!
}
finish() {
    local name="$1" status=0
    wait "${job_pids[$name]}" || status=$?
    echo "==> $name"
    cat "$logs/$name.log"
    return "$status"
}

# An interpreter of one minor version: the variable named first, else `pythonX.Y` on the PATH, else
# pyenv's builds (pyenv's shims answer only when that version is selected).
find_python() {
    local version="$1" override="$2" candidate
    for candidate in "$override" "$(command -v "python$version" || true)" "$HOME"/.pyenv/versions/"$version"*/bin/python"$version" \
        /root/.pyenv/versions/"$version"*/bin/python"$version" /usr/bin/python"$version" /usr/local/bin/python"$version"; do
        if [ -n "$candidate" ] && [ -x "$candidate" ] &&
            "$candidate" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$version'.split('.'))))" 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}
python313="" python312=""
if $full; then
    python313="$(find_python 3.13 "${PYTHON313:-}")" || python313=""
    python312="$(find_python 3.12 "${PYTHON312:-}")" || python312=""
    for found in "3.13:$python313:PYTHON313:the mitmproxy 12 and training framework tests" "3.12:$python312:PYTHON312:the BrowserGym tests"; do
        IFS=: read -r version path variable purpose <<<"$found"
        [ -n "$path" ] && continue
        if [ "${CI:-}" = true ]; then
            echo "no Python $version found (python$version, ~/.pyenv/versions/$version*; or set $variable): CI runs $purpose" >&2
            exit 1
        fi
        echo "==> no Python $version found: $purpose are skipped (set $variable=/path/to/python$version)" >&2
    done
fi

# Debian's packages (Chromium; for test and setup also the end-to-end tests' applications).
debian_packages() {
    if [ ! -x /usr/bin/chromium ]; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            echo "installing Debian's chromium with apt-get"
            apt-get update -qq
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
        else
            echo "Chromium is missing: install it first (sudo apt-get install chromium), then run this again." >&2
            return 1
        fi
    fi
    if $full; then
        echo "the end-to-end tests' applications: DokuWiki, kiwix-serve, Redmine, ... (scripts/install_test_apps.sh)"
        bash scripts/install_test_apps.sh
        # The container tests' images (tests/containers/), built with the podman just installed: a
        # failure fails the set-up, so the tests never meet an engine without them.
        echo "the container tests' site images (scripts/build_site_images.sh)"
        bash scripts/build_site_images.sh
    fi
}
$quick || job "Debian's packages" debian_packages  # the quick tests start no browser

step "creating .venv with uv in it"
[ -x .venv/bin/python ] || "$python" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check uv 2> >(grep -v '^WARNING: Location' >&2)
uv=.venv/bin/uv
# Installs into VENV (made with PYTHON when missing; `venv` keeps pip in it, which some tests call).
# Not compiled at install: Python compiles each module when it is first imported and keeps its bytecode
# (PYTHONDONTWRITEBYTECODE is unset above).
uv_install() {
    local interpreter="$1" venv="$2"
    shift 2
    [ -x "$venv/bin/python" ] || "$interpreter" -m venv "$venv"
    "$uv" pip install --quiet --python "$venv/bin/python" "$@"
}

wheel=""
if $full; then
    step "building the package's wheel once, for every venv that installs it"
    # From a copy of the sources, so no build shares the checkout's build/ folder with the editable install.
    source_copy="$logs/source"
    mkdir "$source_copy"
    cp -a addon evaluator tasks pyproject.toml README.md "$source_copy/"
    "$uv" build --quiet --wheel --out-dir "$logs/dist" "$source_copy"
    wheel="$(ls "$logs"/dist/webarena_live-*.whl)"

    job .oracle-venv uv_install "$python" .oracle-venv 'webarena-verified==1.2.3'
    # The guide's MCP client (tests/e2e/test_mcp_browsers.py) on the real MCP SDK, in a venv of its own:
    # mcp 2.3.0 needs h11>=0.16 (through httpx2), mitmproxy 11 pins h11<=0.14, so it cannot sit in .venv.
    job .venv-mcp uv_install "$python" .venv-mcp 'mcp==2.3.0' 'requests>=2.31'
    if [ -n "$python313" ]; then
        job .venv-3.13 uv_install "$python313" .venv-3.13 "$wheel[test,ray]"
        reward_frameworks=(openenv verifiers verifiers03 harbor)
        [ "${WEBARENA_LIVE_NEMO_GYM:-}" != 1 ] || reward_frameworks+=(nemogym)
        common=('pytest>=8' 'pytest-timeout>=2.3' 'requests>=2.31')
        job .venv-openenv uv_install "$python313" .venv-openenv "$wheel[openenv]" verifiers "${common[@]}"  # verifiers beside: one `openenv` package
        job .venv-verifiers uv_install "$python313" .venv-verifiers "$wheel[verifiers]" "${common[@]}"  # the newest: verifiers.v1 only
        job .venv-verifiers03 uv_install "$python313" .venv-verifiers03 "$wheel[verifiers]" 'verifiers==0.3.1' "${common[@]}"  # both APIs
        job .venv-harbor uv_install "$python313" .venv-harbor "$wheel" 'harbor==0.26.0' "${common[@]}"
        [ "${WEBARENA_LIVE_NEMO_GYM:-}" != 1 ] || job .venv-nemogym uv_install "$python313" .venv-nemogym "$wheel" 'nemo-gym==0.4.0' "${common[@]}"
        # browser-use, as its users install it, its own pins beside the package's wheel (the newest when
        # the recipe was written; the guide says which)
        job .venv-browseruse uv_install "$python313" .venv-browseruse "$wheel" 'browser-use==0.13.14' "${common[@]}"
    fi
    if [ -n "$python312" ]; then
        # browsergym-webarena-verified 0.14.3 must resolve to browsergym-core 0.14.3 (a wider pin of
        # playwright would let an older BrowserGym in, so the resolution is checked); tqdm and pandas are
        # what browsergym-experiments' loop and Benchmark import without declaring them.
        browsergym_venv() {
            # the extra brings browsergym-experiments, tqdm and pandas (the study recipe's), as a user gets them
            uv_install "$python312" .venv-browsergym "$wheel[browsergym]" 'browsergym-webarena-verified==0.14.3' \
                'pytest>=8' 'pytest-timeout>=2.3' 'requests>=2.31'
            .venv-browsergym/bin/python -c 'from importlib.metadata import version as v
found = {name: v(name) for name in ("browsergym-core", "playwright", "webarena-verified")}
assert found["browsergym-core"] == "0.14.3", f"webarena-live[browsergym] resolved {found}, not browsergym-core 0.14.3"
print("resolved:", ", ".join(f"{name} {version}" for name, version in found.items()))'
        }
        job .venv-browsergym browsergym_venv
    fi
fi

if $quick; then  # the parity corpora's judge; nothing else of the full set-up
    job .oracle-venv uv_install "$python" .oracle-venv 'webarena-verified==1.2.3'
fi

step "installing webarena-live into .venv (strict editable mode)"
"$uv" pip install --quiet --python .venv/bin/python --config-settings editable_mode=strict -e '.[test,ray,docs]'

if [ "$what" = test ]; then
    # Lint and type checks while the other venvs fill.
    step ruff
    .venv/bin/ruff check .
    step mypy
    .venv/bin/mypy
    step "import contracts (which part may import which: pyproject.toml, [tool.importlinter])"
    .venv/bin/lint-imports
    step "the documentation site (mkdocs build --strict: a broken link, a missing page or a reference that cannot be generated fails)"
    NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$logs/site"
fi

step "the venvs and Debian's packages (filled in the background meanwhile)"
failed=()
for name in "${!job_pids[@]}"; do
    finish "$name" || failed+=("$name")
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "set-up failed: ${failed[*]}" >&2
    exit 1
fi
job_pids=()

if $full; then
    # The guide's MCP browser servers (tests/e2e/test_mcp_browsers.py): @playwright/mcp and
    # chrome-devtools-mcp at the versions .npm-tools/package.json pins (its lockfile committed), with the
    # Node that scripts/install_test_apps.sh installed; they drive Debian's Chromium, nothing downloaded.
    step "the MCP browser servers from npm (npm ci in .npm-tools)"
    node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 19) ? 0 : 1)' ||
        { echo "chrome-devtools-mcp needs Node 20.19 or newer, not $(node --version)" >&2; exit 1; }
    npm ci --prefix .npm-tools --no-audit --no-fund --loglevel=error
fi

# The parts that run beside the Python 3.11 suite, one after the other.
wheel_checks() {
    # Both at once: each is pip installs and one process at a time, so two fit the two cores (each
    # works in a folder of its own).
    local status=0 other=""
    if [ -n "$python313" ]; then
        PYTHON="$python313" bash scripts/check_wheel.sh >"$logs/wheel-3.13.log" 2>&1 &
        other=$!
    fi
    bash scripts/check_wheel.sh || status=1
    if [ -n "$other" ]; then
        wait "$other" || status=1
        echo "==> the installed product on $("$python313" --version) with mitmproxy 12"
        cat "$logs/wheel-3.13.log"
    fi
    return "$status"
}
reward_tests() {
    local framework files i pids=() status=0
    for framework in "${reward_frameworks[@]}"; do
        case "$framework" in
            verifiers) files=(tests/rewards/test_verifiers_v1.py) ;;
            verifiers03) files=(tests/rewards/test_verifiers.py tests/rewards/test_verifiers_v1.py) ;;
            *) files=("tests/rewards/test_$framework.py") ;;
        esac
        # All at once, each in its venv; a file that collects nothing fails (exit 5).
        ".venv-$framework/bin/pytest" -p no:cacheprovider "${files[@]}" >"$logs/rewards-$framework.log" 2>&1 &
        pids+=($!)
    done
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || status=1
        echo "--- ${reward_frameworks[$i]} (.venv-${reward_frameworks[$i]}):"
        tail -n 25 "$logs/rewards-${reward_frameworks[$i]}.log"
    done
    return "$status"
}
browseruse_tests() {
    WEBARENA_ORACLE="$PWD/.oracle-venv/bin/python" .venv-browseruse/bin/pytest -p no:cacheprovider tests/browseruse
}
browsergym_tests() {
    WEBARENA_ORACLE="$PWD/.oracle-venv/bin/python" .venv-browsergym/bin/pytest -p no:cacheprovider tests/browsergym
}
case "$what" in
    demo)
        step ""
        exec .venv/bin/webarena-live demo
        ;;
    test)
        export WEBARENA_ORACLE="$PWD/.oracle-venv/bin/python"
        if $quick; then
            step "pytest on $("$python" --version), the quick tests (no browser, real application, Ray or namespace machines: tests/support/quick.py)"
            .venv/bin/pytest -p tests.support.quick -n auto --dist loadfile "${@:3}"
            exit
        fi
        if [ $# -gt 1 ]; then
            step "pytest ${*:2}"
            .venv/bin/pytest -n auto --dist loadfile "${@:2}"
            exit
        fi
        # One part after another: each suite keeps both cores to itself. Run side by side (the wheel checks
        # beside the first suite, the frameworks' tests beside the second) they took longer in all.
        failed=()
        step "the installed product: wheel in a fresh venv, used from outside the checkout"
        wheel_checks || failed+=("the wheel checks")
        step "pytest on $("$python" --version), the whole suite (test files spread over the cores: pytest-xdist)"
        .venv/bin/pytest -n auto --dist loadfile --junitxml "$logs/suite-3.11.xml" ||
            failed+=("pytest on $("$python" --version)")
        if [ -n "$python313" ]; then
            # What meets mitmproxy 12's API, the browsers and Ray: the proxy, the control API, the fleet, the
            # end-to-end tests of the proxy itself (tests/e2e/test_live_*.py and the guides' recipes), and
            # webarena-live mcp's (the mcp SDK needs Python 3.12 on). The pool's and the applications'
            # end-to-end files run on 3.11 only: they drive the same hooks, the pool being pure Python.
            e2e_313=(tests/e2e/test_live_*.py tests/e2e/test_browser_traffic.py tests/e2e/test_address_handover_browser.py
                tests/e2e/test_form_charsets.py tests/e2e/test_examples.py tests/e2e/test_readme_examples.py
                tests/e2e/test_mcp_browsers.py)
            step "pytest on $("$python313" --version) with mitmproxy 12: the proxy, control, fleet and proxy end-to-end tests, and webarena-live mcp's"
            .venv-3.13/bin/pytest -n auto --dist loadfile --junitxml "$logs/suite-3.13.xml" \
                tests/proxy tests/control tests/fleet "${e2e_313[@]}" tests/mcp ||
                failed+=("pytest on $("$python313" --version)")
            step "the rewards with each training framework, in its own venv; browser-use beside them, in .venv-browseruse (tests/browseruse)"
            browseruse_tests >"$logs/browseruse.log" 2>&1 &
            browseruse=$!
            reward_tests || failed+=("the training frameworks' tests")
            wait "$browseruse" || failed+=("browser-use's tests")
            echo "--- browser-use $(.venv-browseruse/bin/python -c 'from importlib.metadata import version; print(version("browser-use"))') (.venv-browseruse):"
            tail -n 25 "$logs/browseruse.log"
        fi
        if [ -n "$python312" ]; then
            step "BrowserGym and its experiment loop on $("$python312" --version), in .venv-browsergym (tests/browsergym)"
            browsergym_tests || failed+=("BrowserGym's tests")
        fi
        step "where the suites' time went (per test file, set-up included: scripts/test_times.py)"
        .venv/bin/python scripts/test_times.py "$logs"/suite-*.xml --most 15 || true
        if [ ${#failed[@]} -gt 0 ]; then
            step ""
            printf 'failed: %s\n' "${failed[@]}" >&2
            exit 1
        fi
        ;;
    setup)
        step ""
        echo "==> ready: .venv/bin/webarena-live --help"
        ;;
esac

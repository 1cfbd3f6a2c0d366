import json
import subprocess
import sys
from pathlib import Path

import pytest

from webarena_live.evaluator.errors import TaskFileError, UnknownTaskError
from webarena_live.evaluator.sites import SiteMap
from webarena_live.evaluator.tasks import (
    AgentResponseEvaluatorConfig,
    NetworkEventEvaluatorConfig,
    TaskType,
    load_tasks,
)


def test_all_official_tasks_load(official_dataset: Path) -> None:
    tasks = load_tasks(official_dataset)
    assert len(tasks) == 812
    assert all(isinstance(t.response_config, AgentResponseEvaluatorConfig) for t in tasks.values())
    assert sum(len(t.network_configs) for t in tasks.values()) == 663
    assert {t.task_type for t in tasks.values()} == set(TaskType)


def test_unknown_task_id_is_a_clear_error(official_dataset: Path) -> None:
    tasks = load_tasks(official_dataset)
    with pytest.raises(UnknownTaskError, match="task 99999 is not in"):
        tasks[99999]


def test_malformed_task_names_task_and_field(official_dataset: Path, tmp_path: Path) -> None:
    data = json.loads(official_dataset.read_text())[:3]
    data[1]["eval"][0]["expected"]["task_type"] = "explode"
    data[2]["revision"] = 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(TaskFileError) as caught:
        load_tasks(bad)
    message = str(caught.value)
    assert f"task {data[1]['task_id']}" in message
    assert "eval.0.AgentResponseEvaluator.expected.task_type" in message


def test_network_config_defaults(official_dataset: Path) -> None:
    tasks = load_tasks(official_dataset)
    cfg = next(c for t in tasks.values() for c in t.network_configs)
    assert isinstance(cfg, NetworkEventEvaluatorConfig)
    assert cfg.last_event_only is True and cfg.should_not_exist is False


def test_unreadable_and_non_json_files(tmp_path: Path) -> None:
    with pytest.raises(TaskFileError, match="cannot read"):
        load_tasks(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{nope")
    with pytest.raises(TaskFileError, match="not valid JSON"):
        load_tasks(tmp_path / "x.json")


def test_a_misspelled_site_is_refused_with_task_and_field(official_dataset: Path, tmp_path: Path) -> None:
    data = json.loads(official_dataset.read_text())[:2]
    data[1]["sites"] = ["shoping"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(TaskFileError) as caught:
        load_tasks(bad)
    message = str(caught.value)
    assert f"task {data[1]['task_id']}" in message and "sites" in message
    assert "'shoping' is not a WebArena site (did you mean 'shopping'?)" in message


def test_sites_missing_from_a_map(official_dataset: Path) -> None:
    tasks = load_tasks(official_dataset)
    missing = tasks.sites_missing_from(SiteMap.from_urls({"shopping": "http://127.0.0.1:7770"}))
    assert "__SHOPPING__" not in missing
    assert set(missing) >= {"__GITLAB__", "__REDDIT__", "__SHOPPING_ADMIN__"}
    assert sum(len(ids) for ids in missing.values()) > 500
    assert load_tasks().is_embedded_demo and not tasks.is_embedded_demo


def test_the_official_hard_subset_is_the_references_own(oracle_python: Path) -> None:
    """`webarena-verified-hard`: the 258 ids of the reference's own subset file, tasks as in the full set."""
    code = (
        "import json, sys; sys.path.append(sys.argv[1]); "
        "from webarena_live.evaluator.tasks import load_tasks; "
        "full, hard = load_tasks('webarena-verified'), load_tasks('webarena-verified-hard'); "
        "print(json.dumps([len(full), len(hard), all(full[i] == hard[i] for i in hard), "
        "full.checksum == hard.checksum]))"
    )
    site_packages = subprocess.run(
        [str(oracle_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # The reference package is made findable for a child process only, never imported into this one.
    done = subprocess.run(
        [sys.executable, "-c", code, site_packages], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(done.stdout) == [812, 258, True, True]

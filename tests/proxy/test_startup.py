"""`read_options`: the addon's options read into tasks, settings and a pool, every problem told at once."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from mitmproxy import exceptions

from tests.support.addon_helpers import write_config, write_tasks
from webarena_live.evaluator import SiteMap, WebArenaLiveError
from webarena_live.proxy.startup import JOURNAL_SUBDIR, read_options


def options(**given: Any) -> SimpleNamespace:
    values = {"webarena_tasks": "", "webarena_config": "", "webarena_output_dir": "",
              "webarena_journal_dir": "", "webarena_redact": False}  # fmt: skip
    return SimpleNamespace(**{**values, **given})


def test_the_options_become_tasks_settings_and_the_pool_built_on_them(tmp_path: Path) -> None:
    asked: list[tuple[SiteMap, Path | None, Path]] = []
    given = options(
        webarena_tasks=str(write_tasks(tmp_path)), webarena_config=str(write_config(tmp_path)),
        webarena_output_dir=str(tmp_path / "out"), webarena_redact=True,
    )  # fmt: skip
    tasks, settings, pool = read_options(given, lambda *made: asked.append(made))
    assert pool is None and len(tasks) == 3
    assert settings.output_dir == (tmp_path / "out").resolve() and settings.redact
    assert settings.journal_dir == tmp_path / "out" / JOURNAL_SUBDIR  # beside the outputs by default
    assert settings.data_checksum == tasks.checksum
    assert asked == [(settings.site_map, settings.output_dir, settings.journal_dir)]
    assert list(settings.site_map.urls) == ["__SHOPPING__"]


def test_every_problem_is_told_at_once_one_a_line(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text('{"environments": {')
    (tmp_path / "a-file").write_text("")

    def refusing_pool(*made: Any) -> None:
        raise WebArenaLiveError("replicas: two problems\nreplicas: the second")

    given = options(
        webarena_tasks=str(tmp_path / "nope.json"), webarena_config=str(tmp_path / "broken.json"),
        webarena_output_dir=str(tmp_path / "a-file"),
    )  # fmt: skip
    with pytest.raises(exceptions.OptionsError) as told:
        read_options(given, refusing_pool)
    lines = str(told.value).splitlines()
    assert len(lines) == 5, lines
    assert "nope.json" in lines[0] and "not valid JSON" in lines[1] and "is not a directory" in lines[2]
    assert lines[3:] == ["replicas: two problems", "replicas: the second"]

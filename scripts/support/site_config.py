"""A site map in the reference's config format, as the tests and the benchmarks write one."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def write_config(path: Path, environments: Mapping[str, Any], *, test_data_file: Path | None = None) -> Path:
    """A site map in the reference's config format (also read by the oracle)."""
    config: dict[str, Any] = {"environments": dict(environments)}
    if test_data_file is not None:
        config["test_data_file"] = str(test_data_file)
    path.write_text(json.dumps(config, indent=2))
    return path

"""Tasks in the WebArena-Verified dataset format, and loading them.

The models are frozen and reject unknown fields, so a typo in a task file is
an error that names the task and the field rather than a silently ignored key.
Evaluator configs are a discriminated union on the `evaluator` field.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator, Mapping
from enum import StrEnum
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from webarena_live.evaluator.errors import TaskFileError, UnknownTaskError
from webarena_live.evaluator.site_checks import placeholder, unknown_site_problem
from webarena_live.evaluator.sites import SiteMap

OFFICIAL_DATASET = "webarena-verified"
"""`--tasks` value that means the dataset shipped in the installed reference package."""
OFFICIAL_HARD_SUBSET = "webarena-verified-hard"
DEMO_DATASET = "demo"
"""The embedded demo tasks by name (`--tasks demo`): a pip user has no path for the packaged file."""
DATASET_NAMES = frozenset({DEMO_DATASET, OFFICIAL_DATASET, OFFICIAL_HARD_SUBSET})
"""The reference's hard subset: 258 official tasks, listed by id in its package's `subsets/` folder."""


class TaskType(StrEnum):
    RETRIEVE = "RETRIEVE"
    MUTATE = "MUTATE"
    NAVIGATE = "NAVIGATE"


class Status(StrEnum):
    SUCCESS = "SUCCESS"
    ACTION_NOT_ALLOWED_ERROR = "ACTION_NOT_ALLOWED_ERROR"
    PERMISSION_DENIED_ERROR = "PERMISSION_DENIED_ERROR"
    NOT_FOUND_ERROR = "NOT_FOUND_ERROR"
    DATA_VALIDATION_ERROR = "DATA_VALIDATION_ERROR"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


ANSWER_TASK_TYPES = tuple(kind.value for kind in TaskType)
"""The `task_type` values a final answer may give (any case)."""
ANSWER_STATUSES = tuple(status.value for status in Status)
"""The `status` values a final answer may give (any case)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


class ExpectedResponse(_Frozen):
    """The expected final response. A list inside `retrieved_data` lists alternatives."""

    task_type: TaskType = Field(validation_alias=AliasChoices("task_type", "performed_operation"))
    status: Status
    retrieved_data: list[Any] | None = None
    error_details: str | None = None

    _case = field_validator("task_type", "status", mode="before")(_upper)


class AgentResponseEvaluatorConfig(_Frozen):
    evaluator: Literal["AgentResponseEvaluator"] = "AgentResponseEvaluator"
    ordered: bool = False
    results_schema: dict[str, Any]
    expected: ExpectedResponse


class NetworkEventSpec(_Frozen):
    """What the matching network event must look like."""

    url: str | list[str] = Field(min_length=1)
    headers: dict[str, Any] | None = None
    query_params: dict[str, Any] | None = None
    post_data: dict[str, Any] | None = None
    response_content: dict[str, Any] | None = None
    response_status: int = 200
    http_method: str = "GET"
    response_cookies: dict[str, Any] | None = None

    @field_validator("url")
    @classmethod
    def _no_empty_urls(cls, value: str | list[str]) -> str | list[str]:
        urls = [value] if isinstance(value, str) else value
        if any(not url for url in urls):
            raise ValueError("URLs must be non-empty strings")
        return value


class NetworkEventEvaluatorConfig(_Frozen):
    evaluator: Literal["NetworkEventEvaluator"] = "NetworkEventEvaluator"
    expected: NetworkEventSpec
    last_event_only: bool = True
    ignored_query_params: tuple[str, ...] | None = None
    ignored_query_params_patterns: tuple[str, ...] | None = None
    decode_base64_query: bool = False
    query_params_schema: dict[str, Any] | None = None
    post_data_schema: dict[str, Any] | None = None
    ignored_post_data_params_patterns: tuple[str, ...] | None = None
    should_not_exist: bool = False


EvaluatorConfig = Annotated[
    AgentResponseEvaluatorConfig | NetworkEventEvaluatorConfig,
    Field(discriminator="evaluator"),
]


class Task(_Frozen):
    sites: tuple[str, ...] = Field(min_length=1)
    task_id: int
    intent_template_id: int
    start_urls: tuple[Annotated[str, Field(min_length=1)], ...]
    intent: str = Field(min_length=1)
    intent_template: str = Field(min_length=1)
    instantiation_dict: dict[str, Any]
    revision: int = Field(ge=1)
    eval: tuple[EvaluatorConfig, ...]

    @field_validator("sites", mode="before")
    @classmethod
    def _site_names(cls, value: Any) -> Any:
        # Accept "__SHOPPING__" as well as "shopping", like the reference does.
        if isinstance(value, list | tuple):
            return tuple(v.strip("_").lower() if isinstance(v, str) else v for v in value)
        return value

    @field_validator("sites")
    @classmethod
    def _valid_site_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for site in value:
            problem = unknown_site_problem(site)
            if problem:
                raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _one_response_evaluator(self) -> Task:
        count = sum(isinstance(cfg, AgentResponseEvaluatorConfig) for cfg in self.eval)
        if count != 1:
            raise ValueError(f"eval must hold exactly one AgentResponseEvaluator, found {count}")
        return self

    @property
    def response_config(self) -> AgentResponseEvaluatorConfig:
        return next(cfg for cfg in self.eval if isinstance(cfg, AgentResponseEvaluatorConfig))

    @property
    def network_configs(self) -> tuple[NetworkEventEvaluatorConfig, ...]:
        return tuple(cfg for cfg in self.eval if isinstance(cfg, NetworkEventEvaluatorConfig))

    @property
    def task_type(self) -> TaskType:
        return self.response_config.expected.task_type


def _describe(error: ValidationError, task_label: str) -> str:
    lines = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "(task)"
        lines.append(f"{task_label}: field '{where}': {item['msg']}")
    return "; ".join(lines)


def parse_task(data: Any, *, source: str = "<tasks>") -> Task:
    """Validate one task object, raising `TaskFileError` naming the task and field."""
    label = f"{source}: task {data.get('task_id', '?')}" if isinstance(data, dict) else source
    if not isinstance(data, dict):
        raise TaskFileError(f"{label}: a task must be a JSON object, got {type(data).__name__}")
    try:
        return Task.model_validate(data)
    except ValidationError as error:
        raise TaskFileError(_describe(error, label)) from None


class TaskSet(Mapping[int, Task]):
    """Tasks by id, with the checksum of the file they came from."""

    def __init__(self, tasks: list[Task], *, source: str, raw: bytes = b"") -> None:
        self._by_id: dict[int, Task] = {}
        for task in tasks:
            if task.task_id in self._by_id:
                raise TaskFileError(f"{source}: task {task.task_id} appears twice")
            self._by_id[task.task_id] = task
        self.source = source
        self._raw = raw

    def __getitem__(self, task_id: int) -> Task:
        try:
            return self._by_id[task_id]
        except KeyError:
            raise UnknownTaskError(f"task {task_id} is not in {self.source}") from None

    def __contains__(self, task_id: object) -> bool:
        # Mapping's default relies on KeyError, which UnknownTaskError is not.
        return task_id in self._by_id

    def __iter__(self) -> Iterator[int]:
        return iter(self._by_id)

    def sites_missing_from(self, site_map: SiteMap) -> dict[str, list[int]]:
        """The placeholders these tasks use that `site_map` has no URLs for, each with its tasks' ids."""
        missing: dict[str, list[int]] = {}
        for task in self._by_id.values():
            for site in task.sites:
                if site not in site_map:
                    missing.setdefault(placeholder(site), []).append(task.task_id)
        return missing

    @property
    def is_embedded_demo(self) -> bool:
        """True for the demo tasks shipped in the package (they run without a site map)."""
        return Path(self.source) == default_tasks_path()

    def __len__(self) -> int:
        return len(self._by_id)

    @cached_property
    def checksum(self) -> str:
        """SHA-256 of the dataset file, as the reference reports it."""
        import hashlib

        return hashlib.sha256(self._raw).hexdigest()


def official_dataset_installed() -> bool:
    """Whether the reference package (and so its official dataset) is installed."""
    return importlib.util.find_spec("webarena_verified") is not None


def official_subset_ids(name: str, dataset: Path | None = None) -> list[int]:
    """The task ids of one of the reference package's own subsets (`assets/dataset/subsets/<name>.json`,
    beside `dataset`, the official dataset file: the installed package's by default)."""
    file = (dataset or official_dataset_path()).parent / "subsets" / f"{name}.json"
    try:
        ids = json.loads(file.read_text(encoding="utf-8"))["task_ids"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise TaskFileError(f"{file}: cannot read the subset {name}: {error}") from None
    return [int(i) for i in ids]


def official_dataset_path() -> Path:
    """The dataset file inside the installed `webarena-verified` package."""
    # find_spec locates the package without importing it: the reference pins its own dependencies and
    # its import is slow; only its data file is wanted here.
    spec = importlib.util.find_spec("webarena_verified")
    if spec is None or not spec.submodule_search_locations:
        raise TaskFileError(
            "the official dataset ('webarena-verified') comes with the reference package, which is not "
            "installed: pip install 'webarena-live[official]'"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    return root / "assets" / "dataset" / "webarena-verified.json"


def default_tasks_path() -> Path:
    """The embedded demo tasks (`tasks/demo.json` in the repository, package data when installed)."""
    # The package is always installed as plain files (setuptools wheels are never imported zipped),
    # so the resource is a real file whose path can be shown to the user and read again.
    return Path(str(resources.files("webarena_live") / "tasks" / "demo.json"))


def load_tasks(path: str | Path | None = None) -> TaskSet:
    """Load a dataset file: a JSON list of tasks (or one task object).

    `None` or `demo` loads the embedded demo tasks; the string `webarena-verified` loads
    the official dataset from the installed reference package, `webarena-verified-hard`
    its 258-task hard subset (the full file's checksum, as the reference reports it). A
    file of that name in the current directory wins over a name.
    """
    subset: list[int] | None = None
    if path is not None and str(path) in DATASET_NAMES and Path(path).is_file():
        file = Path(path)
    elif path is None or str(path) == DEMO_DATASET:
        file = default_tasks_path()
    elif str(path) in (OFFICIAL_DATASET, OFFICIAL_HARD_SUBSET):
        file = official_dataset_path()
        if str(path) == OFFICIAL_HARD_SUBSET:
            subset = official_subset_ids(OFFICIAL_HARD_SUBSET)
    else:
        file = Path(path)
    try:
        raw = file.read_bytes()
    except OSError as error:
        raise TaskFileError(f"{file}: cannot read task file: {error.strerror or error}") from None
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise TaskFileError(f"{file}: not valid JSON: {error}") from None
    items = data if isinstance(data, list) else [data]
    if subset is not None:  # the subset's tasks exactly as the full dataset has them (same checksum)
        wanted = set(subset)
        items = [item for item in items if isinstance(item, dict) and item.get("task_id") in wanted]
    tasks = [parse_task(item, source=str(file)) for item in items]
    return TaskSet(tasks, source=str(file), raw=raw)

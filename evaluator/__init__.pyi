# The evaluator's public API: the one list of its exported names. `__init__.py` loads each on first use
# from this list (lazy_loader), type checkers read the names' types from it, and `webarena_live`
# re-exports all of them. Add a name here, and only here.
from .batch import BatchReport as BatchReport
from .batch import evaluate_directory as evaluate_directory
from .classify import STATIC_ASSET_SUFFIXES as STATIC_ASSET_SUFFIXES
from .errors import AgentResponseError as AgentResponseError
from .errors import NormalizationError as NormalizationError
from .errors import SiteConfigError as SiteConfigError
from .errors import TaskFileError as TaskFileError
from .errors import TraceFormatError as TraceFormatError
from .errors import UnknownTaskError as UnknownTaskError
from .errors import WebArenaLiveError as WebArenaLiveError
from .evaluate import evaluate_task as evaluate_task
from .evaluate import prepare_evaluation as prepare_evaluation
from .har import HAR_TAIL as HAR_TAIL
from .har import event_to_har_entry as event_to_har_entry
from .har import event_to_har_json as event_to_har_json
from .har import har_head as har_head
from .har import load_trace as load_trace
from .har import trace_to_har as trace_to_har
from .memo import BoundedMemo as BoundedMemo
from .progress import TaskProgress as TaskProgress
from .progress import task_progress as task_progress
from .responses import FinalAnswer as FinalAnswer
from .responses import parse_response as parse_response
from .results import REFERENCE_VERSION as REFERENCE_VERSION
from .results import EvalStatus as EvalStatus
from .results import TaskResult as TaskResult
from .run_dir import EARLIER_ATTEMPT as EARLIER_ATTEMPT
from .run_dir import RUN_FILE_MODE as RUN_FILE_MODE
from .run_dir import SUMMARY_FILE as SUMMARY_FILE
from .run_dir import discover_runs as discover_runs
from .run_dir import named_runs as named_runs
from .run_dir import prepare_output_dir as prepare_output_dir
from .run_dir import run_name_problem as run_name_problem
from .run_dir import write_run as write_run
from .run_dir import write_text_atomically as write_text_atomically
from .site_checks import placeholder as placeholder
from .site_checks import site_key as site_key
from .sites import SiteMap as SiteMap
from .sites import read_config_file as read_config_file
from .tasks import OFFICIAL_DATASET as OFFICIAL_DATASET
from .tasks import Task as Task
from .tasks import TaskSet as TaskSet
from .tasks import default_tasks_path as default_tasks_path
from .tasks import load_tasks as load_tasks
from .tasks import official_dataset_installed as official_dataset_installed
from .trace import EventRecord as EventRecord
from .trace import NetworkEvent as NetworkEvent
from .trace import NetworkTrace as NetworkTrace

__version__: str

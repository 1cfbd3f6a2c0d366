"""BrowserGym's own environment over a webarena-live session (`pip install 'webarena-live[browsergym]'`).

`make_env(task_id, control=URL)` is a BrowserGym `BrowserEnv` whose observations and actions are
BrowserGym's, unchanged: `reset()` starts a session (a lease on a replica when the site map has them),
launches the browser through the session's own proxy address and opens the task's start URLs there;
the agent's `send_msg_to_user` is its final response, judged by the proxy, and the official score is
the reward of that one step (NaN when the environment failed the episode: the rewards' rule).
`close()` of an unfinished episode gives the replica back at once (`POST /sessions/{s}/abandon`).
docs/browsergym.md.

Owns BrowserGym's side of a session: the environment (`env`), its task (`task`), the gym ids (`names`),
Playwright pointed at the system's Chromium (`chromium`), token counts that need no download
(`tokens`). May import the client, the rewards' rule, the evaluator's exported names, BrowserGym and
Playwright; never the server's parts (pyproject.toml, [tool.importlinter]).
"""

try:
    import browsergym.core  # noqa: F401
except ImportError as error:  # one line that names the fix, not a traceback through BrowserGym
    raise ImportError(
        "webarena_live.browsergym needs BrowserGym: pip install 'webarena-live[browsergym]' (Python 3.12+)"
    ) from error

from webarena_live.browsergym.chromium import some_chromium, use_debian_chromium
from webarena_live.browsergym.env import LiveBrowserEnv, make_env
from webarena_live.browsergym.names import ENV_PREFIX, ensure_registered, register_tasks, task_name
from webarena_live.browsergym.task import INFEASIBLE_STATUS, LiveTask
from webarena_live.browsergym.tokens import offline_token_counts

__all__ = [
    "ENV_PREFIX",
    "INFEASIBLE_STATUS",
    "LiveBrowserEnv",
    "LiveTask",
    "ensure_registered",
    "make_env",
    "offline_token_counts",
    "register_tasks",
    "some_chromium",
    "task_name",
    "use_debian_chromium",
]

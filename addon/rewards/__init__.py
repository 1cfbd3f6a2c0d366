"""Rewards: a session's verdict as the reward training frameworks read, never a silent 0.0.

Owns the reward of a session (`reward`: the verdict's score, or a masked sample with its reason),
`score` and `ascore` over the control API's client (`scoring`), and one adapter per framework, each an
optional extra imported only when used: OpenEnv (`openenv_env`, `openenv_rubric`), verifiers
(`verifiers_v1` for the `verifiers.v1` API, `verifiers_rubric` for 0.3's legacy rubric), Harbor
(`harbor`: the `verify` and `export harbor` commands' work), NeMo-Gym (`nemo_gym`) and verl (`verl`).
See docs/architecture.md, Rewards.

May import: `webarena_live.client`, the evaluator's exported names, httpx, pydantic, and each adapter
its own framework. Never the proxy, the control API, runs, the fleet or addresses: a reward is what
any client of the control API could compute.
"""

from webarena_live.rewards.reward import Reward, RewardUnavailable
from webarena_live.rewards.scoring import ascore, score

__all__ = ["Reward", "RewardUnavailable", "ascore", "score"]


def missing_extra(module: str, extra: str, package: str) -> ImportError:
    """The one line an adapter raises when its framework is not installed."""
    return ImportError(
        f"webarena_live.rewards.{module} needs {package} (Python 3.12 or newer): "
        f"pip install 'webarena-live[{extra}]'"
    )

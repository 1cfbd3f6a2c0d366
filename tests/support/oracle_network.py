"""Bridge to the oracle (webarena-verified), run *inside the oracle's venv* as a subprocess.

    python oracle_network.py <mode> <request.json>   -> JSON on stdout

Modes:
- `urls`: {"config": ..., "sites": [...], "cases": [{"url", "options"}]} -> normalized
  base URL / query of the oracle's URL type for each case (or "ERROR").
- `url_pairs`: {"config", "sites", "pairs": [{"expected", "actual", "options", "expected_query"}]}
  -> [compare_path, equal] per pair, as the network evaluator uses them.
- `evaluate`: {"config": ..., "runs": [{"task_id", "response", "har", "task"?}]} -> for each run the
  statuses of the oracle's evaluators, in task order. A run with a `task` (a task document of its
  own, outside the official dataset) is judged against that task.

Never imported by the test process: the oracle pins its own dependencies.
"""

from __future__ import annotations

import json
import logging
import sys
from functools import partial
from pathlib import Path


def _config(raw: dict):
    from webarena_verified.types.config import WebArenaVerifiedConfig

    return WebArenaVerifiedConfig.model_validate(raw)


def _url_kwargs(config, sites, options: dict, strict: bool) -> dict:
    from webarena_verified.core.evaluation.value_normalizer import ValueNormalizer

    schema = options.get("query_params_schema")
    return {
        "decode_base64_query": options.get("decode_base64_query", False),
        "ignored_query_parameters": tuple(options.get("ignored_query_params") or ()),
        "ignored_query_parameters_patterns": tuple(options.get("ignored_query_params_patterns") or ()),
        "render_url_fct": partial(config.render_url, sites=sites, strict=strict),
        "derender_url_fct": partial(config.derender_url, sites=sites, strict=strict),
        "normalize_query_params_fct": partial(ValueNormalizer().normalize, schema=schema, strict=strict)
        if schema
        else None,
    }


def _sites(names):
    from webarena_verified.types.task import WebArenaSite

    return tuple(WebArenaSite(name) for name in names)


def mode_urls(request: dict) -> list:
    from webarena_verified.core.evaluation.data_types import URL

    config, sites = _config(request["config"]), _sites(request["sites"])
    out = []
    for case in request["cases"]:
        try:
            url = URL(case["url"], **_url_kwargs(config, sites, case.get("options", {}), strict=False))
            out.append(
                {
                    "str": str(url.normalized),
                    "base_url": url.normalized.base_url,
                    "query": {k: [str(x) for x in v] for k, v in url.normalized.query_params.items()},
                }
            )
        except Exception as error:  # the oracle's failure is the result being compared
            out.append({"error": type(error).__name__})
    return out


def mode_url_pairs(request: dict) -> list:
    from webarena_verified.core.evaluation.data_types import URL

    config, sites = _config(request["config"]), _sites(request["sites"])
    out = []
    for pair in request["pairs"]:
        options = pair.get("options", {})
        try:
            expected = URL(
                pair["expected"],
                query_params=pair.get("expected_query"),
                **_url_kwargs(config, sites, options, strict=True),
            )
            actual = URL(pair["actual"], **_url_kwargs(config, sites, options, strict=False))
            out.append([expected.compare_path(actual), expected == actual])
        except Exception as error:
            out.append({"error": type(error).__name__})
    return out


def _evaluate_own_task(wav, run: dict):
    """A task outside the official dataset, handed to the evaluator in a context (as its batch does)."""
    from webarena_verified.types.eval import TaskEvalContext
    from webarena_verified.types.task import WebArenaVerifiedTask
    from webarena_verified.types.tracing import NetworkTrace

    context = TaskEvalContext(
        task=WebArenaVerifiedTask.model_validate(run["task"]),
        agent_response_raw=run["response"],
        network_trace=NetworkTrace.from_content(Path(run["har"])),
        config=wav.config,
    )
    return wav._evaluator.evaluate_task(context=context)


def mode_evaluate(request: dict) -> list:
    from webarena_verified.api.webarena_verified import WebArenaVerified

    config = _config(request["config"])
    wav = WebArenaVerified(config=config)
    out = []
    for run in request["runs"]:
        if "task" in run:
            result = _evaluate_own_task(wav, run)
        else:
            result = wav.evaluate_task(
                task_id=run["task_id"], agent_response=run["response"], network_trace=Path(run["har"])
            )
        out.append(
            {
                "status": str(result.status.value if hasattr(result.status, "value") else result.status),
                "score": result.score,
                "evaluators": [
                    {
                        "name": r.evaluator_name,
                        "status": str(r.status.value if hasattr(r.status, "value") else r.status),
                        "error_msg": r.error_msg,
                    }
                    for r in result.evaluators_results
                ],
                "error_msg": result.error_msg,
            }
        )
    return out


def main() -> None:
    logging.disable(logging.CRITICAL)
    mode, request_file = sys.argv[1], sys.argv[2]
    request = json.loads(Path(request_file).read_text())
    handler = {"urls": mode_urls, "url_pairs": mode_url_pairs, "evaluate": mode_evaluate}[mode]
    json.dump(handler(request), sys.stdout)


if __name__ == "__main__":
    main()

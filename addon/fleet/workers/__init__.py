"""The workers of `serve --workers N`: each a `webarena-live serve` process the front forwards to
(docs/architecture.md, Workers and Ray). `local`: the worker record (`Worker`), what the workers tell the
front (`WorkerEvents`) and the local processes, started, watched and started again (`Workers`,
`LocalWorkers`); `ray_workers`: Ray actors placed on a cluster's nodes and watched (`RayWorkers`);
`ray_actor`: one worker on its node (`ServeWorker`). Only `--ray` imports the Ray modules.
"""

"""The front of `serve --workers N`: one control port before every worker (docs/architecture.md, Workers).

`Front` (`front`) holds the parts, each with one job: the way to the workers with its deadlines
(`link`), what the front knows of each session (`registry`), each session's start, finish, abandon and
loss (`sessions`), the replica pool's leases (`leases`), what it does when a worker dies, returns or
leaves (`recovery`), which workers answer (`liveness`), files carried from other nodes (`carry`); its
control API (`app`, with `/health` and `/sessions` in `views` and the merged `/events` in `events`); the
router of the shared proxy ports (`router`) and the door for Ray workers on other machines (`door`).
It never imports Ray or mitmproxy.
"""

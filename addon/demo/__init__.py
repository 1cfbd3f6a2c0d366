"""The embedded demo: a small web shop, a scripted Chromium agent and `webarena-live demo`.

Owns the shop (`site`, `catalog` and its `site_assets`), the agent (`agent`), the processes the demo
starts (`stack`) and the command (`command`).

May import: the evaluator's exported names and `webarena_live.client` (it drives `serve` as any
user would, over the control API). Nothing but the CLI imports the demo.
"""

"""The script plain mitmproxy loads: `mitmdump -s "$(webarena-live addon-path)" --set webarena_tasks=...`.

`webarena-live addon-path` prints this file's path inside the installed
package, so the command is the same from a wheel, an editable install or a
checkout. Add the session port as a second mode and name it, for example:

    mitmdump -s "$(webarena-live addon-path)" --mode regular@8080 --mode regular@8082 \
        --set webarena_session_port=8082 --set webarena_tasks=tasks/demo.json

Loaded this way the addon changes no process-wide setting (garbage
collection stays as the host configured it); that tuning is
`webarena-live serve`'s, which owns its process.
"""

from webarena_live.proxy.addon import WebArenaLive

addons = [WebArenaLive()]

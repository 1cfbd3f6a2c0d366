// The workers strip of `serve --workers N` (local processes or Ray actors): each worker's state, node,
// sessions and restarts, from GET /health (which lists `workers` only when there are several). Drawn
// when the page is ready, then asked again every few seconds and after each finish. Uses app.js's
// `api()`.
"use strict";

const workers = { timer: 0, asking: false };
const WORKERS_EVERY = 3000; // ms between two asks while the strip is shown

function workerLine(worker) {
  const item = document.createElement("li");
  item.className = worker.state;
  item.dataset.index = worker.index;
  item.dataset.state = worker.state;
  const title = document.createElement("b");
  title.textContent = `worker ${worker.index}`;
  // A Ray worker's node id (shortened, as Ray prints it); a local worker runs on this machine.
  const node = worker.node ? `node ${String(worker.node).slice(0, 8)}, pid ${worker.pid}` : `this machine, pid ${worker.pid}`;
  const sessions = `${worker.sessions} session${worker.sessions === 1 ? "" : "s"} (${worker.running} running)`;
  const restarts = `${worker.restarts} restart${worker.restarts === 1 ? "" : "s"}`;
  item.append(title, [worker.state, node, sessions, restarts].join(" · "));
  item.title = [`pid ${worker.pid}`, worker.host && `host ${worker.host}`, worker.actor && `actor ${worker.actor}`,
    `proxy port ${worker.proxy_port}`].filter(Boolean).join("\n");
  return item;
}

function drawWorkers(list) {
  const panel = document.querySelector("#workers-panel");
  panel.hidden = !list || list.length === 0;
  if (panel.hidden) return;
  document.querySelector("#workers").replaceChildren(...list.map(workerLine));
  const up = list.filter((worker) => worker.state === "up").length;
  document.querySelector("#workers-summary").textContent = `${up} of ${list.length} up`;
}

async function refreshWorkers() {
  clearTimeout(workers.timer);
  if (workers.asking) return;
  workers.asking = true;
  let health = null;
  try {
    health = await api("health");
  } catch (error) {
    // the front is restarting or gone: ask again later
  } finally {
    workers.asking = false;
  }
  if (health) drawWorkers(health.workers);
  if (!health || health.workers) workers.timer = setTimeout(refreshWorkers, WORKERS_EVERY);
}

document.addEventListener("webarena-live:ready", (event) => {
  const health = event.detail || {};
  drawWorkers(health.workers);
  if (health.workers) workers.timer = setTimeout(refreshWorkers, WORKERS_EVERY);
});
document.addEventListener("webarena-live:finished", () => setTimeout(refreshWorkers, 500));

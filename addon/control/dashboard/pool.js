// The replica pool (docs/architecture.md, Replicas): a strip with each site's copies and what each is
// doing (free, leased and by whom, dirty, failing and why, resetting, out of service) and its resets (when, after whom,
// how long), the starts refused for want of a copy, from GET /health's `pool`; and,
// for the session shown, its lease, the traffic it sent outside it and the interference its verdict
// names. Drawn when the page is ready, then asked again every few seconds while there is a pool. Uses
// app.js's `api()` and `plural()`.
"use strict";

const pool = { timer: 0, asking: false };
const POOL_EVERY = 3000; // ms between two asks while the strip is shown

function replicaLine(site, replica) {
  const item = document.createElement("li");
  item.className = replica.state;
  item.dataset.site = site;
  item.dataset.state = replica.state;
  const title = document.createElement("b");
  title.textContent = `${site} ${replica.index}`;
  const who = replica.sessions.length ? ` (${replica.sessions.join(", ")})` : "";
  item.append(title, ` ${replica.state.replace(/_/g, " ")}${who}`);
  if (replica.failing) {  // its recent judged answers are mostly failures: no new lease until it answers
    const why = document.createElement("small");
    why.className = "failing";
    why.textContent = ` · failing: ${replica.failing}`;
    item.append(why);
  }
  const resets = replica.resets || [];
  if (resets.length) {
    const last = resets[resets.length - 1];
    const small = document.createElement("small");
    small.textContent = ` · ${plural(resets.length, "reset")}, last ${resetText(last)}`;
    item.append(small);
  }
  item.title = [replica.url, replica.failing && `failing: ${replica.failing}`, replica.reason,
    ...resets.map(resetText)].filter(Boolean).join("\n");
  return item;
}

// One reset: when, after which session (or why), how long, and how it went.
function resetText(reset) {
  const when = new Date(reset.at * 1000).toLocaleTimeString();
  const after = reset.after ? `after ${reset.after}` : reset.why || "";
  return `${when} ${after} in ${Number(reset.seconds).toFixed(1)} s${reset.ok ? "" : ` (failed: ${reset.detail})`}`;
}

// The starts refused for want of a copy (503 no_replica), newest first, with the pool's words.
function drawRefused(refused) {
  const box = document.querySelector("#pool-refused");
  box.hidden = !refused || refused.length === 0;
  if (box.hidden) return;
  box.querySelector("summary").textContent = `${plural(refused.length, "start")} refused for want of a copy`;
  box.querySelector("ul").replaceChildren(...[...refused].reverse().map((r) => {
    const item = document.createElement("li");
    item.textContent = `${new Date(r.at * 1000).toLocaleTimeString()} ${r.session} (task ${r.task_id}): ${r.detail}`;
    return item;
  }));
}

function drawPool(status) {
  const panel = document.querySelector("#pool-panel");
  const sites = status ? Object.entries(status.sites || {}) : [];
  panel.hidden = sites.length === 0;
  if (panel.hidden) return;
  const items = sites.flatMap(([site, entry]) => entry.replicas.map((replica) => replicaLine(site, replica)));
  document.querySelector("#pool").replaceChildren(...items);
  const counts = sites.map(([site, entry]) =>
    `${site}: ${entry.resets} reset${entry.resets === 1 ? "" : "s"}, ${entry.resets_skipped} skipped`);
  const waiting = status.waiting ? ` · ${status.waiting} waiting for a copy` : "";
  document.querySelector("#pool-summary").textContent = `--isolation ${status.isolation}${waiting} · ${counts.join(" · ")}`;
  drawRefused(status.refused);
}

async function refreshPool() {
  clearTimeout(pool.timer);
  if (pool.asking) return;
  pool.asking = true;
  let health = null;
  try {
    health = await api("health");
  } catch (error) {
    // restarting or gone: ask again later
  } finally {
    pool.asking = false;
  }
  if (health) drawPool(health.pool);
  if (!health || health.pool) pool.timer = setTimeout(refreshPool, POOL_EVERY);
}

// The lease of the session shown: its copies, what it sent elsewhere, and (finished) its interference.
function showLease(view) {
  const line = document.querySelector("#session-lease");
  const replicas = view && view.replicas ? Object.entries(view.replicas) : [];
  line.hidden = replicas.length === 0;
  if (line.hidden) return;
  const parts = [`on ${replicas.map(([site, url]) => `${site} ${url}`).join(", ")}`];
  if (view.lease_ended) parts.push(`lease ended: ${view.lease_ended}`);
  if (view.outside_lease) parts.push(`${plural(view.outside_lease.count, "request")} outside its lease`);
  const interference = view.interference;
  line.classList.toggle("exposed", Boolean(interference && interference.exposed));
  if (interference) {
    parts.push(interference.exposed
      ? `exposed: ${plural(interference.count, "change")} by other sessions on its copies while it ran`
      : "not exposed: no other session changed its copies while it ran");
  }
  line.textContent = parts.join(" · ");
  const listed = [...((view.outside_lease || {}).recent || []),
    ...((interference || {}).mutations || []).map((m) => `${m.session}: ${m.method} ${m.url}`)];
  line.title = listed.join("\n");
}

document.addEventListener("webarena-live:ready", (event) => {
  const health = event.detail || {};
  drawPool(health.pool);
  if (health.pool) pool.timer = setTimeout(refreshPool, POOL_EVERY);
});
document.addEventListener("webarena-live:finished", () => setTimeout(refreshPool, 500));

// The live dashboard: sessions, one session's events, its evaluators' progress and its verdict.
// Read-only; it talks to the control API it was served by (relative URLs, so the control port and
// the reserved host both work). Event streams are read with fetch() rather than EventSource so the
// control token, when there is one, can go in the Authorization header.
"use strict";

const state = {
  token: sessionStorage.getItem("webarena-live-token") || "",
  selected: null, // the session shown on the right
  sessionStream: null, // AbortController of its event stream
  eventCount: 0, // its events so far (only the last SHOWN_EVENTS stay on the page)
  pendingEvents: [], // received, not drawn yet
  counts: new Map(), // the latest event count of each session's current run, from the global stream
  sessionsAsked: 0, // refreshes of the list asked for (only the latest answer is drawn)
  progressShown: null, // the progress on the page, as JSON
  satisfying: new Set(), // indexes of the events that satisfy (or violate) a network evaluator
  finished: false,
  following: false, // the global stream is being read
  states: new Map(), // each listed session's state, from the latest list
};

const $ = (selector) => document.querySelector(selector);

// A long run has tens of thousands of events: the page keeps the newest rows only, so it stays fast.
const SHOWN_EVENTS = 1000;
// During a busy run notices arrive many times a second; the list and the progress are fetched again
// at most this often (ms), and always after the last notice.
const REFRESH_EVERY = 400;
// The progress is computed by the proxy on each ask: during a busy run, once a second is plenty.
const PROGRESS_EVERY = 1000;
const DRAW_EVERY = 250;
const FLASH_AT_MOST = 20;

// Calls fn at once, then at most once every `every` ms while it keeps being asked for, and once more
// after the last ask (so the page always ends up showing the latest state).
function throttled(fn, every) {
  let cooling = null;
  let again = false;
  const fire = () => {
    cooling = setTimeout(() => {
      cooling = null;
      if (again) {
        again = false;
        fire();
      }
    }, every);
    fn();
  };
  return () => {
    if (cooling === null) fire();
    else again = true;
  };
}

function headers() {
  return state.token ? { Authorization: `Bearer ${state.token}` } : {};
}

class Unauthorized extends Error {}

class HttpError extends Error {
  constructor(path, status) {
    super(`${path}: HTTP ${status}`);
    this.status = status;
  }
}

async function api(path) {
  const response = await fetch(path, { headers: headers() });
  if (response.status === 401) {
    askForToken();
    throw new Unauthorized(path);
  }
  if (!response.ok) throw new HttpError(path, response.status);
  return response.json();
}

function askForToken() {
  $("#token-form").hidden = false;
  $("#token").focus();
}

// One Server-Sent Events stream read through fetch: calls onMessage(kind, data, id) per message and
// resolves when the server ends the stream (or rejects when it fails).
async function readStream(path, signal, onMessage) {
  const response = await fetch(path, { headers: { ...headers(), Accept: "text/event-stream" }, signal });
  if (response.status === 401) {
    askForToken();
    throw new Unauthorized(path);
  }
  if (response.status === 204) return "done"; // nothing more will come (a finished session)
  if (!response.ok) throw new HttpError(path, response.status);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return "ended";
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let kind = "message";
      let id = null;
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) kind = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
        else if (line.startsWith("id:")) id = line.slice(3).trim();
      }
      if (data.length) onMessage(kind, JSON.parse(data.join("\n")), id);
    }
  }
}

function cell(row, text, className) {
  const td = row.insertCell();
  td.textContent = text == null ? "" : String(text);
  if (className) td.className = className;
  return td;
}

function plural(count, noun) {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

function verdictText(result) {
  return result ? `${result.status} (${result.score})` : "";
}

// --- the sessions list -----------------------------------------------------------------------

async function refreshSessions() {
  const ticket = ++state.sessionsAsked;
  let sessions;
  try {
    sessions = (await api("sessions")).sessions;
  } catch (error) {
    if (!(error instanceof Unauthorized)) console.warn(error);
    return;
  }
  if (ticket !== state.sessionsAsked) return; // a later refresh is on its way: its answer is newer
  const body = $("#sessions tbody");
  body.replaceChildren();
  state.states = new Map(sessions.map((view) => [view.session, view.state]));
  if (state.selected && state.states.get(state.selected) === "finished") scheduleProgress(); // "not matched"
  for (const view of sessions) {
    const row = body.insertRow();
    row.dataset.session = view.session;
    if (view.session === state.selected) {
      row.classList.add("selected");
      showBrowserRequests(view.browser_requests);
      showNothingCaptured(view.nothing_captured);
      showLease(view); // pool.js
    }
    cell(row, view.session).title = view.session;
    // A session whose lease ended before its finish (abandoned, timed out, lost) is not running.
    const ended = view.lease_ended && view.state !== "finished" && view.state !== "lost";
    const stateText = !ended ? view.state : view.lease_ended === "abandoned" ? "abandoned" : `lease ended (${view.lease_ended})`;
    cell(row, stateText, ended ? "ended" : "").title = ended ? `lease ended: ${view.lease_ended}` : "";
    cell(row, view.task_id);
    cell(row, view.intent, "intent").title = view.intent || "";
    const counts = view.counts || { total: view.events || 0 };
    // A counts notice newer than this answer may have been drawn already; within a run counts only grow.
    cell(row, Math.max(counts.total, state.counts.get(view.session) || 0));
    // A lost session (its worker's node left the cluster) says why where its verdict would be.
    const verdict = view.state === "lost" ? view.reason || "" : verdictText(view.result);
    cell(row, verdict, view.result ? view.result.status : view.state === "lost" ? "lost" : "").title = verdict;
    // After the verdict, so the events column keeps its place (drawCounts writes it by index).
    const copies = Object.entries(view.replicas || {}).map(([site, url]) => `${site} ${url}`).join(", ");
    const leaseEnd = view.lease_ended ? ` (lease ended: ${view.lease_ended})` : "";
    cell(row, copies + leaseEnd, view.lease_ended ? "lease-ended" : "");
    const interference = view.interference || (view.result || {}).interference;
    const exposed = interference ? (interference.exposed ? `exposed (${interference.count})` : "no") : "";
    cell(row, exposed, interference && interference.exposed ? "exposed" : "");
    row.addEventListener("click", () => select(view.session));
  }
  $("#no-sessions").hidden = sessions.length > 0;
}

const sessionsChanged = throttled(refreshSessions, REFRESH_EVERY);

// Every session's notices, for the list; polling where there is no such stream.
async function followAllSessions() {
  for (;;) {
    try {
      // Event counts rather than every event: the list needs no more, and the proxy sends far less.
      await readStream("events?events=counts", undefined, (kind, data) => {
        setLive(true);
        if (kind === "counts") showCount(data.session, data.counts);
        else {
          if (kind === "finished") document.dispatchEvent(new Event("webarena-live:finished"));
          if (kind === "session" || kind === "restarted") state.counts.delete(data.session); // a new run
          sessionsChanged();
        }
      });
    } catch (error) {
      if (error instanceof Unauthorized) return;
    }
    setLive(false);
    sessionsChanged();
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

function showCount(session, counts) {
  state.counts.set(session, counts.total);
  drawCounts();
}

const drawCounts = throttled(() => {
  const rows = [...document.querySelectorAll("#sessions tbody tr")];
  for (const row of rows) {
    const total = state.counts.get(row.dataset.session);
    if (total !== undefined) row.cells[4].textContent = String(total);
  }
  const listed = new Set(rows.map((row) => row.dataset.session));
  if ([...state.counts.keys()].some((name) => !listed.has(name))) sessionsChanged(); // not in the list yet
}, REFRESH_EVERY);

function setLive(on) {
  const badge = $("#live");
  badge.textContent = on ? "live" : "offline";
  badge.className = `badge ${on ? "on" : "off"}`;
}

// --- one session ------------------------------------------------------------------------------

function select(name) {
  if (state.sessionStream) state.sessionStream.abort();
  state.selected = name;
  clearEvents();
  state.finished = false;
  for (const row of document.querySelectorAll("#sessions tbody tr")) {
    row.classList.toggle("selected", row.dataset.session === name);
  }
  $("#session-panel").hidden = false;
  $("#session-name").textContent = name;
  $("#session-task").textContent = "";
  $("#browser-requests").hidden = true;
  $("#nothing-captured").hidden = true;
  sessionsChanged(); // its row's view: what the proxy saw of it so far
  showTimes(null, null);
  state.satisfying = new Set();
  $("#progress tbody").replaceChildren();
  state.progressShown = null;
  $("#verdict").hidden = true;
  const base = `sessions/${encodeURIComponent(name)}`;
  setDownload($("#har-link"), `${base}/har`, `${name}.har`);
  setDownload($("#trace-link"), `${base}/trace`, `${name}-trace.json`);
  history.replaceState(null, "", `#${encodeURIComponent(name)}`);
  followSession(name);
  showProgress(); // at once, whatever the throttle last did for another session
}

// The browser's own requests (update and connectivity checks): never events, but not hidden either.
function showBrowserRequests(info) {
  const line = $("#browser-requests");
  line.hidden = !info;
  if (!info) return;
  line.textContent = `${plural(info.count, "request")} of the browser itself (update and connectivity checks) kept out of the trace`;
  line.title = info.recent.join("\n");
}

// A running session without an event: what the proxy saw of it, the words its finish would answer
// with `409 no_events` (the session's view, `nothing_captured`).
function showNothingCaptured(text) {
  const line = $("#nothing-captured");
  line.hidden = !text;
  line.textContent = text || "";
}

function setDownload(link, path, filename) {
  link.href = path;
  link.download = filename;
  link.onclick = state.token
    ? async (event) => {
        event.preventDefault(); // a plain link cannot carry the token
        const response = await fetch(path, { headers: headers() });
        const url = URL.createObjectURL(await response.blob());
        const temporary = Object.assign(document.createElement("a"), { href: url, download: filename });
        temporary.click();
        URL.revokeObjectURL(url);
      }
    : null;
}

async function followSession(name) {
  const controller = new AbortController();
  state.sessionStream = controller;
  let lastId = null; // the last event received: a reconnection goes on from the next
  while (!controller.signal.aborted && !state.finished) {
    // A long session's stream would open with every event so far: the first asks for those the page keeps.
    const from = lastId === null ? `?tail=${SHOWN_EVENTS}` : `?since=${Number(lastId) + 1}`;
    try {
      const how = await readStream(`sessions/${encodeURIComponent(name)}/events${from}`, controller.signal,
        (kind, data, id) => {
          if (kind === "restarted") lastId = null; // a new run: its events start again at 0
          if (id !== null) lastId = id;
          onSessionMessage(kind, data);
        });
      if (how === "done") return;
    } catch (error) {
      if (controller.signal.aborted || error instanceof Unauthorized) return;
      if (error instanceof HttpError && error.status === 404) {
        $("#session-task").textContent = "(no such session)";
        return;
      }
    }
    if (!state.finished) await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

function onSessionMessage(kind, data) {
  if (kind === "session" || kind === "restarted") {
    if (kind === "restarted") {
      clearEvents();
      $("#verdict").hidden = true;
    }
    $("#session-task").textContent = data.task_id == null ? "(no task)" : `task ${data.task_id}: ${data.intent}`;
    showTimes(data.started, data.finished);
    scheduleProgress();
  } else if (kind === "finished") {
    state.finished = true;
    showTimes(state.started, Date.now() / 1000); // until the server's own finish time arrives
    const shown = state.selected;
    api(`sessions/${encodeURIComponent(shown)}`).then((view) => {
      if (state.selected === shown && view.finished) showTimes(view.started, view.finished);
    }, () => {});
    showVerdict(data);
    scheduleProgress();
    sessionsChanged();
  } else {
    addEvent(data);
    scheduleProgress();
  }
}

// When the run started, and how long it took (or has taken so far: drawn again every second).
function showTimes(started, finished) {
  state.started = started;
  state.ended = finished;
  drawTimes();
}

function drawTimes() {
  const line = $("#session-time");
  if (!state.started) {
    line.textContent = "";
    return;
  }
  const end = state.ended || Date.now() / 1000;
  const seconds = Math.max(0, end - state.started);
  const took = seconds < 120 ? `${seconds.toFixed(1)} s` : `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
  line.textContent = `started ${new Date(state.started * 1000).toLocaleTimeString()} · ${state.ended ? "took" : "running for"} ${took}`;
}
setInterval(() => state.started && !state.ended && drawTimes(), 1000);

function shownTypes() {
  return new Set([...document.querySelectorAll(".filters input:checked")].map((input) => input.value));
}

// Events are drawn newest first, in batches (a busy run brings hundreds a second): at once after a quiet
// spell, then at most every DRAW_EVERY ms, only the newest SHOWN_EVENTS of a batch, in one insertion.
function addEvent(view) {
  state.eventCount = view.index + 1;
  state.pendingEvents.push(view);
  drawSoon();
}

const drawSoon = throttled(() => setTimeout(drawEvents, 0), DRAW_EVERY); // after the rest of the chunk

function drawEvents() {
  const views = state.pendingEvents.slice(-SHOWN_EVENTS);
  state.pendingEvents = [];
  const types = shownTypes();
  const flash = views.length <= FLASH_AT_MOST; // a burst cannot be read row by row: no flashing then
  const rows = document.createDocumentFragment();
  for (const view of views.reverse()) {
    const row = document.createElement("tr");
    row.dataset.index = view.index;
    row.dataset.type = view.type;
    if (flash) {
      row.className = "new";
      // Only once: unhiding a row (the type filter) would replay the animation otherwise.
      row.addEventListener("animationend", () => row.classList.remove("new"), { once: true });
    }
    row.hidden = !types.has(view.type);
    if (state.satisfying.has(view.index)) row.classList.add("satisfies");
    cell(row, view.index);
    cell(row, view.type);
    cell(row, view.method);
    cell(row, view.url, "url");
    cell(row, view.status);
    rows.append(row);
  }
  const body = $("#events tbody");
  if (views.length === SHOWN_EVENTS) body.replaceChildren(rows);
  else {
    body.prepend(rows);
    for (let excess = body.rows.length - SHOWN_EVENTS; excess > 0; excess--) body.deleteRow(-1);
  }
  $("#event-count").textContent =
    state.eventCount > body.rows.length ? `the last ${body.rows.length} of ${state.eventCount}` : String(state.eventCount);
}

function clearEvents() {
  state.pendingEvents = [];
  state.eventCount = 0;
  $("#events tbody").replaceChildren();
  $("#event-count").textContent = "0";
}

function applyFilter() {
  const types = shownTypes();
  for (const row of document.querySelectorAll("#events tbody tr")) row.hidden = !types.has(row.dataset.type);
}

const scheduleProgress = throttled(() => showProgress(), PROGRESS_EVERY);

async function showProgress() {
  const name = state.selected;
  let progress;
  try {
    progress = await api(`sessions/${encodeURIComponent(name)}/progress`);
  } catch (error) {
    return; // a session without a task has no progress
  }
  if (name !== state.selected) return;
  // Once the session is finished, an evaluator nothing satisfied will never be: "not matched", not "not yet".
  const over = state.finished || state.states.get(name) === "finished";
  const shown = JSON.stringify([name, progress.network, progress.last_navigation, over]);
  if (shown === state.progressShown) return; // unchanged: nothing to lay out again
  state.progressShown = shown;
  const body = $("#progress tbody");
  body.replaceChildren();
  for (const item of progress.network) {
    const row = body.insertRow();
    row.dataset.satisfied = String(item.satisfied);
    cell(row, item.evaluator + 1);
    const urls = Array.isArray(item.url) ? item.url.join(" | ") : item.url;
    cell(row, `${item.should_not_exist ? "no " : ""}${item.http_method} ${urls}`, "url");
    const verdict = item.error ? `error: ${item.error}` : item.satisfied ? "yes" : over ? "not matched" : "not yet";
    cell(row, verdict, item.error ? "error" : item.satisfied ? "success" : "failure");
    const what = item.should_not_exist ? "violated by" : "by";
    cell(row, item.event == null ? "" : `${what} event ${item.event}`);
  }
  // The events an evaluator is satisfied (or violated) by stand out in the list.
  state.satisfying = new Set(progress.network.filter((item) => item.event != null).map((item) => item.event));
  for (const row of $("#events tbody").rows) {
    row.classList.toggle("satisfies", state.satisfying.has(Number(row.dataset.index)));
  }
  $("#no-evaluators").hidden = progress.network.length > 0;
  const last = progress.last_navigation;
  $("#last-navigation").hidden = !last;
  if (last) {
    $("#last-navigation").textContent =
      `last navigation: event ${last.event}, ${last.url} — ${last.matches ? "matches" : "does not match"}`;
  }
}

function showVerdict(result) {
  const box = $("#verdict");
  box.replaceChildren();
  const title = document.createElement("strong");
  title.className = result.status;
  title.textContent = `Verdict: ${result.status} (score ${result.score})`;
  box.append(title);
  const list = document.createElement("ul");
  for (const evaluator of result.evaluators_results || []) {
    const item = document.createElement("li");
    const name = document.createElement("span");
    name.className = evaluator.status;
    name.textContent = `${evaluator.evaluator_name}: ${evaluator.status}`;
    item.append(name);
    const notes = [];
    if (evaluator.error_msg) notes.push(evaluator.error_msg);
    for (const assertion of evaluator.assertions || []) {
      notes.push(`${assertion.assertion_name}: ${(assertion.assertion_msgs || []).join("; ")}`);
    }
    if (notes.length) item.append(` — ${notes.join(" · ")}`);
    list.append(item);
  }
  for (const warning of result.warnings || []) {
    const item = document.createElement("li");
    item.className = "muted";
    item.textContent = `warning: ${warning}`;
    list.append(item);
  }
  box.append(list);
  box.hidden = false;
}

// --- start --------------------------------------------------------------------------------------

async function start() {
  let health = {};
  try {
    health = await api("health");
    $("#health").textContent = `v${health.version} · ${health.tasks} tasks · ${plural(Object.keys(health.sites || {}).length, "site")} mapped`;
    // /health is public and says whether a token is needed: ask before any request that would be
    // refused (a 401 shows as an error in the browser's console).
    if (health.control_token && !state.token) return askForToken();
  } catch (error) {
    console.warn(error);
  }
  await refreshSessions();
  document.dispatchEvent(new CustomEvent("webarena-live:ready", { detail: health }));
  if (!state.following) {
    state.following = true;
    followAllSessions().finally(() => (state.following = false));
  }
  const wanted = decodeURIComponent(location.hash.slice(1));
  if (wanted) select(wanted);
}

$("#token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  state.token = $("#token").value;
  sessionStorage.setItem("webarena-live-token", state.token);
  $("#token-form").hidden = true;
  start();
});
for (const input of document.querySelectorAll(".filters input")) input.addEventListener("change", applyFilter);
start();

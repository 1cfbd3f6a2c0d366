// The run view: the figures `webarena-live report` gives on the output directory (GET /report, the
// same function), drawn again each time a session finishes (app.js passes on the `finished` notices
// of GET /events as a "webarena-live:finished" event). Every attempt counts: the rates are per
// attempt, beside the tasks with a successful attempt and the mean of the tasks' rates. A run with no
// verdict yet says so (no rate of nothing). Uses app.js's `headers()`.
"use strict";

const run = { name: "", timer: 0, enabled: false };
const TEMPLATES_SHOWN = 10;

function percentOf(value) {
  return `${(value * 100).toFixed(1)}%`;
}

function rateText(rate) {
  const [low, high] = rate.interval;
  return `${percentOf(rate.rate)} [${percentOf(low)}-${percentOf(high)}]`;
}

// `rows`: [name, figures] pairs, in the order shown (an object would put template ids in numeric order);
// `label(name)`: what the first column says (a template: its id and its intent template's text).
function fillRates(table, rows, label = (name) => name) {
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const [name, rate] of rows) {
    const row = body.insertRow();
    row.dataset.name = name;
    row.dataset.success = rate.success;
    row.dataset.tasks = rate.tasks;
    row.dataset.attempts = rate.attempts;
    const tasks = rate.per_task;
    const cells = [label(name), `${rate.success}/${rate.attempts}`, rateText(rate),
      `${tasks.any.success}/${tasks.any.tasks}`, percentOf(tasks.mean), rate.errors, rate.environment];
    for (const text of cells) row.insertCell().textContent = text;
  }
}

// The run in one sentence, as `webarena-live report` says it.
function overallText(figures) {
  if (!figures.attempts) {
    const waiting = figures.missing ? ` ${figures.missing} tasks of the dataset wait for one` : "";
    return `No verdict yet: no session of this run has finished.${waiting}`;
  }
  if (figures.attempts === figures.tasks) {
    return `${figures.success} of ${figures.tasks} judged tasks succeed: ${rateText(figures)}`;
  }
  const tasks = figures.per_task;
  return `${figures.success} of ${figures.attempts} judged attempts of ${figures.tasks} tasks succeed: ` +
    `${rateText(figures)} per attempt · per task: any ${rateText(tasks.any)}, all ${rateText(tasks.all)}, ` +
    `mean ${percentOf(tasks.mean)}`;
}

// Plotly, as `report --html` draws: loaded once, from this server, when there is a run to show.
let plotly = null;

function loadPlotly() {
  plotly ??= new Promise((resolve, reject) => {
    const script = document.createElement("script");
    script.src = "dashboard/plotly.min.js";
    script.onload = () => resolve(window.Plotly);
    script.onerror = reject;
    document.head.append(script);
  });
  return plotly;
}

async function drawChart(bySite) {
  const names = Object.keys(bySite);
  const rates = names.map((name) => bySite[name].rate * 100);
  const bar = {
    type: "bar",
    x: names,
    y: rates,
    customdata: names.map((name) => `${bySite[name].success}/${bySite[name].attempts}`),
    hovertemplate: "%{x}: %{y:.1f}% (%{customdata})<extra></extra>",
    error_y: {
      type: "data",
      symmetric: false,
      array: names.map((name, i) => bySite[name].interval[1] * 100 - rates[i]),
      arrayminus: names.map((name, i) => rates[i] - bySite[name].interval[0] * 100),
    },
  };
  // Each bar's success/attempts above its interval's whisker, where no error bar crosses it.
  const annotations = names.map((name) => ({
    x: name, y: bySite[name].interval[1] * 100 + 3, yanchor: "bottom", showarrow: false,
    text: `${bySite[name].success}/${bySite[name].attempts}`,
  }));
  const layout = {
    title: { text: "Success rate per attempt by site (95% interval)" },
    yaxis: { range: [0, 112], tickvals: [0, 20, 40, 60, 80, 100], title: { text: "%" } },
    annotations,
    height: 280,
    margin: { t: 40, b: 40, l: 50, r: 10 },
  };
  (await loadPlotly()).react("run-chart", [bar], layout, { displayModeBar: false });
}

async function refreshRun() {
  if (!run.enabled) return; // without an output directory there is no run to report
  const path = run.name ? `report?run=${encodeURIComponent(run.name)}` : "report";
  const response = await fetch(path, { headers: headers() });
  if (!response.ok) return; // no output directory: the view stays hidden
  const figures = await response.json();
  const panel = document.querySelector("#run-panel");
  panel.hidden = false;
  const overall = document.querySelector("#run-overall");
  overall.dataset.tasks = figures.tasks;
  overall.dataset.attempts = figures.attempts;
  overall.dataset.success = figures.success;
  overall.textContent = overallText(figures);
  const notes = [];
  if (figures.missing && figures.attempts) notes.push(`${figures.missing} missing (not failures)`);
  if (figures.errors) notes.push(`${figures.errors} evaluation errors`);
  if (figures.environment) notes.push(`${figures.environment} environment problems`);
  document.querySelector("#run-notes").textContent = notes.join(" · ");
  document.querySelector("#run-figures").hidden = !figures.attempts; // nothing to draw before a verdict
  fillRates(document.querySelector("#run-sites"), Object.entries(figures.by_site));
  if (Object.keys(figures.by_site).length) drawChart(figures.by_site);
  fillRates(document.querySelector("#run-actions"), Object.entries(figures.by_action));
  // As the terminal report: the templates that fail most, lowest rate first (ties: most tasks first).
  const templates = Object.entries(figures.by_template);
  const lowest = templates.sort(([, a], [, b]) => a.rate - b.rate || b.tasks - a.tasks).slice(0, TEMPLATES_SHOWN);
  document.querySelector("#run-templates-note").textContent =
    templates.length > TEMPLATES_SHOWN ? `(the ${TEMPLATES_SHOWN} lowest rates of ${templates.length})` : "";
  const texts = figures.templates || {};
  fillRates(document.querySelector("#run-templates"), lowest, (id) => (texts[id] ? `${id} · ${texts[id]}` : id));
  const chooser = document.querySelector("#run-name");
  const names = ["", ...figures.named_runs];
  if (chooser.options.length !== names.length) {
    chooser.replaceChildren(...names.map((name) => new Option(name || "(the output directory)", name)));
    chooser.value = run.name;
  }
  chooser.hidden = names.length === 1;
}

function runChanged() {
  clearTimeout(run.timer);
  run.timer = setTimeout(refreshRun, 300); // several finishes at once: one report
}

document.querySelector("#run-name").addEventListener("change", (event) => {
  run.name = event.target.value;
  refreshRun();
});
document.addEventListener("webarena-live:finished", runChanged);
document.addEventListener("webarena-live:ready", (event) => {
  run.enabled = Boolean(event.detail && event.detail.output_dir);
  refreshRun();
});

// The run view: the figures `webarena-live report` gives on the output directory (GET /report, the
// same function), drawn again each time a session finishes (app.js passes on the `finished` notices
// of GET /events as a "webarena-live:finished" event). Uses app.js's `headers()`.
"use strict";

const run = { name: "", timer: 0, enabled: false };

function percentOf(value) {
  return `${(value * 100).toFixed(1)}%`;
}

function rateText(rate) {
  const [low, high] = rate.interval;
  return `${percentOf(rate.rate)} [${percentOf(low)}-${percentOf(high)}]`;
}

// `rows`: [name, figures] pairs, in the order shown (an object would put template ids in numeric order).
function fillRates(table, rows) {
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const [name, rate] of rows) {
    const row = body.insertRow();
    row.dataset.name = name;
    row.dataset.success = rate.success;
    row.dataset.tasks = rate.tasks;
    for (const text of [name, `${rate.success}/${rate.tasks}`, rateText(rate), rate.errors, rate.environment]) {
      row.insertCell().textContent = text;
    }
  }
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
    text: names.map((name) => `${bySite[name].success}/${bySite[name].tasks}`),
    error_y: {
      type: "data",
      symmetric: false,
      array: names.map((name, i) => bySite[name].interval[1] * 100 - rates[i]),
      arrayminus: names.map((name, i) => rates[i] - bySite[name].interval[0] * 100),
    },
  };
  const layout = {
    title: { text: "Success rate by site (95% interval)" },
    yaxis: { range: [0, 100], title: { text: "%" } },
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
  overall.dataset.success = figures.success;
  overall.textContent = `${figures.success} of ${figures.tasks} judged tasks succeed: ${rateText(figures)}`;
  const notes = [];
  if (figures.missing) notes.push(`${figures.missing} missing (not failures)`);
  if (figures.errors) notes.push(`${figures.errors} evaluation errors`);
  if (figures.environment) notes.push(`${figures.environment} environment problems`);
  document.querySelector("#run-notes").textContent = notes.join(" · ");
  fillRates(document.querySelector("#run-sites"), Object.entries(figures.by_site));
  if (Object.keys(figures.by_site).length) drawChart(figures.by_site);
  fillRates(document.querySelector("#run-actions"), Object.entries(figures.by_action));
  // As the terminal report: the templates that fail most, lowest rate first (ties: most tasks first).
  const lowest = Object.entries(figures.by_template)
    .sort(([, a], [, b]) => a.rate - b.rate || b.tasks - a.tasks)
    .slice(0, 10);
  fillRates(document.querySelector("#run-templates"), lowest);
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

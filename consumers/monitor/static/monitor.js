// The monitor's only script: live updates of the grid (server-sent events) and the step
// viewer's keys. It never builds markup from data: every value goes in as textContent.
"use strict";

// Event -> DOM latencies (ms from the record's Kafka timestamp to the row's update), for
// bench/monitor_latency.py and the browser test; bounded.
window.__monitorLatencies = [];

function text(el, value) {
  el.textContent = value === null || value === undefined ? "" : String(value);
}

function cell(tr, col) {
  return tr.querySelector('[data-col="' + col + '"]');
}

function newRow(row) {
  const tr = document.createElement("tr");
  tr.dataset.id = row.id;
  const first = document.createElement("td");
  const a = document.createElement("a");
  a.href = "/episodes/" + encodeURIComponent(row.id);
  text(a, row.id);
  first.appendChild(a);
  tr.appendChild(first);
  for (const col of ["task", "state", "step", "action", "version", "reward"]) {
    const td = document.createElement("td");
    td.dataset.col = col;
    tr.appendChild(td);
  }
  return tr;
}

function applyRow(grid, row) {
  const body = grid.tBodies[0];
  let tr = Array.from(body.rows).find((r) => r.dataset.id === row.id);
  if (!tr) {
    if (String(row.iteration) !== grid.dataset.iteration) return false;
    tr = newRow(row);
    body.appendChild(tr);
  }
  tr.className = "state-" + row.state;
  text(cell(tr, "task"), row.task);
  text(cell(tr, "state"), row.state);
  text(cell(tr, "step"), row.step >= 0 ? row.step : "");
  text(cell(tr, "action"), row.action);
  text(cell(tr, "version"), row.version);
  text(cell(tr, "reward"), row.reward);
  recount(grid);
  return true;
}

// The progress counts follow the rows at once (the server's stats come once a second).
function recount(grid) {
  const counts = {};
  for (const r of grid.tBodies[0].rows) {
    const state = r.className.replace("state-", "");
    counts[state] = (counts[state] || 0) + 1;
  }
  for (const el of document.querySelectorAll("[data-count]")) {
    if (el.dataset.count !== "requested") text(el, counts[el.dataset.count] || 0);
  }
}

function applyStats(stats) {
  for (const [key, n] of Object.entries(stats.progress)) {
    const el = document.querySelector('[data-count="' + key + '"]');
    if (el) text(el, n);
  }
  text(document.getElementById("rate"), stats.steps_per_s.toFixed(2));
  text(document.getElementById("latency"),
       stats.latency_ms === null ? "–" : Math.round(stats.latency_ms));
  text(document.getElementById("closed"), stats.closed ? "closed" : "");
  const phases = document.getElementById("phases");
  if (phases) {
    phases.replaceChildren();
    const top = Math.max(1, ...Object.values(stats.phases));
    for (const [phase, ms] of Object.entries(stats.phases)) {
      const tr = document.createElement("tr");
      for (const v of [phase.replace("_", " "), ms.toFixed(1)]) {
        const td = document.createElement("td");
        text(td, v);
        tr.appendChild(td);
      }
      const bar = document.createElement("span");
      bar.className = "bar";
      bar.style.width = Math.round(100 * ms / top) + "px";
      const td = document.createElement("td");
      td.appendChild(bar);
      tr.appendChild(td);
      phases.appendChild(tr);
    }
  }
  const lag = document.getElementById("lag");
  lag.replaceChildren();
  for (const [group, topics] of Object.entries(stats.lag)) {
    for (const [topic, n] of Object.entries(topics)) {
      const tr = document.createElement("tr");
      for (const v of [group, topic, n]) {
        const td = document.createElement("td");
        text(td, v);
        tr.appendChild(td);
      }
      lag.appendChild(tr);
    }
  }
}

function live(grid) {
  const source = new EventSource("/live/events");
  source.addEventListener("episode", (e) => {
    const row = JSON.parse(e.data);
    if (applyRow(grid, row)) {
      const lat = window.__monitorLatencies;
      lat.push({id: row.id, cause: row.cause, ms: Date.now() - row.ts});
      if (lat.length > 100000) lat.shift();
    }
  });
  // On every (re)connection: the rows as they are now (no latency: not a live change).
  source.addEventListener("row", (e) => applyRow(grid, JSON.parse(e.data)));
  source.addEventListener("stats", (e) => applyStats(JSON.parse(e.data)));
  source.addEventListener("iteration", (e) => {
    if (String(JSON.parse(e.data).iteration) !== grid.dataset.iteration) location.reload();
  });
}

function viewer(section) {
  const steps = Array.from(section.querySelectorAll("article.step"));
  if (!steps.length) return;
  let at = 0;
  function show(i) {
    at = Math.max(0, Math.min(steps.length - 1, i));
    steps.forEach((s, k) => { s.hidden = k !== at; });
    text(document.getElementById("at"), steps[at].dataset.step);
  }
  document.addEventListener("keydown", (e) => {
    if (e.key === "ArrowRight") { show(at + 1); e.preventDefault(); }
    if (e.key === "ArrowLeft") { show(at - 1); e.preventDefault(); }
  });
  document.getElementById("next").addEventListener("click", () => show(at + 1));
  document.getElementById("prev").addEventListener("click", () => show(at - 1));
  show(0);
}

document.addEventListener("DOMContentLoaded", () => {
  const grid = document.getElementById("grid");
  if (grid && document.getElementById("progress")) live(grid);
  const section = document.getElementById("viewer");
  if (section) viewer(section);
});

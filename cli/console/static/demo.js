// The demo: two panes (A: cancel into the request queue, B: cancel on its own queue) and the
// latest `concierge bench cancel` results drawn as plain SVG.

import { t } from "./i18n.js";
import { authHeaders, el, post } from "./util.js";

const SVG = "http://www.w3.org/2000/svg";
const COLOURS = { fifo: "#c2410c", cancel_queue: "#15803d" };
const PANE_MODE = { a: "fifo", b: "cancel_queue" };
let results = null;
let loading = false;
let panes = null; // the newest demo state

export function setupDemo() {
  const slider = document.getElementById("depth");
  const shown = document.getElementById("depth-value");
  slider.addEventListener("input", () => { shown.textContent = slider.value; });
  for (const pane of document.querySelectorAll(".pane[data-pane]")) {
    const key = pane.dataset.pane;
    pane.querySelector(".ask").addEventListener("click", async () => {
      await post(`/api/demo/${key}/ask`, { depth: Number(slider.value) });
    });
    pane.querySelector(".cancel").addEventListener("click", async () => {
      await post(`/api/demo/${key}/cancel`);
    });
  }
}

async function loadResults() {
  // Once the state stream is read (with the token, where one is needed), so is this.
  if (results || loading) return;
  loading = true;
  try {
    const response = await fetch("/api/bench/cancel", { headers: authHeaders(), cache: "no-store" });
    if (response.ok) results = await response.json();
  } finally {
    loading = false;
  }
  redrawChart();
}

// --- panes --------------------------------------------------------------------------------

export function renderDemo(demo) {
  panes = demo;
  loadResults();
  document.getElementById("depth").max = String(demo.max_depth);
  for (const key of ["a", "b"]) renderPane(document.getElementById(`pane-${key}`), demo[key]);
  redrawChart();
}

function renderPane(pane, state) {
  const busy = Boolean(state.busy);
  pane.dataset.phase = state.phase;
  pane.querySelector(".ask").disabled = busy;
  pane.querySelector(".cancel").disabled = !busy || Boolean(state.cancel) || !state.tokens;
  const status = [t(`phase_${state.phase}`)];
  if (state.phase !== "idle") {
    status.push(`${state.tokens} ${t("tokens")}`);
    status.push(`${state.behind} / ${state.depth} ${t("behind")}`);
  }
  pane.querySelector(".status").textContent = status.join(" · ");
  renderAnswer(pane.querySelector(".answer"), state);
  const effect = pane.querySelector(".effect");
  effect.textContent = state.error ?? effectText(state);
  effect.dataset.tokensAfter = state.effect?.tokens_after ?? "";
  effect.dataset.outcome = state.effect?.outcome ?? "";
}

function renderAnswer(box, state) {
  const text = state.text ?? "";
  if (!state.cancel) {
    box.replaceChildren(text);
    return;
  }
  const at = Math.min(state.cancel.chars, text.length);
  const mark = el("mark", { class: "cancel-mark" }, t("cancel_mark"));
  box.replaceChildren(text.slice(0, at), mark, el("span", { class: "after" }, text.slice(at)));
}

function ms(value) {
  if (value === null || value === undefined) return "–";
  if (value >= 1000) return `${(value / 1000).toFixed(2)} s`;
  return `${value >= 100 ? Math.round(value) : value} ms`;
}

function effectText(state) {
  const cancel = state.cancel;
  const effect = state.effect;
  const parts = [];
  if (cancel) parts.push(`${t("cancel_sent_after")} ${cancel.tokens_before} ${t("tokens")}`);
  if (!effect) return parts.join(" · ");
  if (!effect.cancelled) return t("finished_no_cancel");
  if (effect.outcome === "cancelled") {
    parts.push(`${t("took_effect")} ${ms(effect.stop_ms)} ${t("later")}`);
  } else {
    parts.push(`${t("ran_to_end")} (${ms(effect.stop_ms)} ${t("later")})`);
    parts.push(
      effect.seen_ms !== null
        ? `${t("engine_reached")} ${ms(effect.seen_ms)} ${t("later")}`
        : t("never_reached"),
    );
  }
  parts.push(`${effect.tokens_after} ${t("tokens_after")}`);
  return parts.join(" · ");
}

// --- the chart ----------------------------------------------------------------------------

function svg(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== null) node.textContent = text;
  return node;
}

export function redrawChart() {
  const box = document.getElementById("chart");
  if (!results) return;
  const width = 460, height = 280, left = 56, right = 12, top = 14, bottom = 40;
  const depths = [...new Set(results.rows.map((row) => row.depth))].sort((a, b) => a - b);
  const low = -3, high = 1; // 1 ms to 10 s
  const x = (depth) => left + (depths.indexOf(depth) + 0.5) * ((width - left - right) / depths.length);
  const y = (s) => {
    const clamped = Math.min(high, Math.max(low, Math.log10(Math.max(s, 1e-3))));
    return top + ((high - clamped) / (high - low)) * (height - top - bottom);
  };
  const chart = svg("svg", { viewBox: `0 0 ${width} ${height}`, role: "img", class: "chart" });
  for (let power = low; power <= high; power++) {
    const at = y(10 ** power);
    chart.append(svg("line", { x1: left, x2: width - right, y1: at, y2: at, stroke: "#ddd" }));
    const label = power < 0 ? `${10 ** (power + 3)} ms` : `${10 ** power} s`;
    chart.append(svg("text", { x: left - 6, y: at + 4, "text-anchor": "end", class: "tick" }, label));
  }
  for (const depth of depths) {
    chart.append(svg("text", { x: x(depth), y: height - 22, "text-anchor": "middle", class: "tick" }, depth));
  }
  chart.append(svg("text", { x: (width + left) / 2, y: height - 4, "text-anchor": "middle", class: "tick" }, t("depth")));
  for (const mode of ["fifo", "cancel_queue"]) {
    const rows = results.rows.filter((row) => row.mode === mode && row.stop_s !== null);
    const points = rows.map((row) => `${x(row.depth)},${y(row.stop_s)}`).join(" ");
    chart.append(svg("polyline", { points, fill: "none", stroke: COLOURS[mode], "stroke-width": 2 }));
    for (const row of rows) {
      const dot = svg("circle", { cx: x(row.depth), cy: y(row.stop_s), r: 4, fill: COLOURS[mode] });
      dot.append(svg("title", {}, `${mode} depth ${row.depth}: ${row.stop_s} s, ${row.tokens_after} ${t("tokens_after")}`));
      chart.append(dot);
    }
  }
  drawOwnRuns(chart, depths, x, y);
  const legend = [["fifo", t("pane_a")], ["cancel_queue", t("pane_b")]];
  legend.forEach(([mode, label], index) => {
    const at = top + 8 + index * 16;
    chart.append(svg("rect", { x: left + 10, y: at - 8, width: 10, height: 10, fill: COLOURS[mode] }));
    chart.append(svg("text", { x: left + 26, y: at + 1, class: "legend" }, label));
  });
  box.replaceChildren(chart);
  const source = [`${t("stop_median")}`, `${t("source")}: ${results.source}`];
  if (results.note) source.push(results.note);
  document.getElementById("chart-source").textContent = source.join(" · ");
}

function drawOwnRuns(chart, depths, x, y) {
  // This page's runs, where their depth is one the benchmark measured.
  if (!panes) return;
  for (const key of ["a", "b"]) {
    const state = panes[key];
    const effect = state?.effect;
    if (!effect?.cancelled || !depths.includes(state.depth)) continue;
    const cx = x(state.depth), cy = y(effect.stop_ms / 1000);
    const star = svg("path", {
      d: `M${cx},${cy - 7} L${cx + 6},${cy + 5} L${cx - 6},${cy + 5} Z`,
      fill: "none", stroke: COLOURS[PANE_MODE[key]], "stroke-width": 2,
    });
    star.append(svg("title", {}, `${t("your_run")}: ${effect.stop_ms} ms`));
    chart.append(star);
  }
}

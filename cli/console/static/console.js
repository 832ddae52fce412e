// The console page: reads the state stream (server-sent events, read with fetch so the token
// can go in a header), draws it, and sends actions as POSTs with the token.

import { applyLanguage, setLanguage, t } from "./i18n.js";
import { renderDemo, setupDemo, redrawChart } from "./demo.js";
import { TOKEN_KEY, authHeaders, clock, el, post, say, seconds } from "./util.js";

const RETRY_MS = 1000;
let last = null; // the newest state, redrawn when the language changes

async function stop(sessionId) {
  if (await post("/api/stop", { session_id: sessionId })) say(`${t("stop_sent")}: ${sessionId}`);
}

async function rescrape(space) {
  const body = space ? { space } : {};
  if (await post("/api/rescrape", body)) say(space ? `${t("rescrape_sent")}: ${space}` : t("rescrape_sent"));
}

// One button per session, kept from one drawing to the next: the views are redrawn at every
// state (many a second while an answer streams), and a click pressed on one button and
// released on its redrawn copy is no click at all.
const stopButtons = new Map();

function stopButton(sessionId) {
  let button = stopButtons.get(sessionId);
  if (!button) {
    button = el("button", { type: "button", class: "stop", "data-session": sessionId });
    button.addEventListener("click", () => stop(sessionId));
    stopButtons.set(sessionId, button);
  }
  button.textContent = t("stop");
  return button;
}

function forgetStopButtons(queue) {
  // Only the sessions still waiting or running keep theirs.
  const live = new Set([...queue.running, ...queue.waiting].map((row) => row.session_id));
  for (const sessionId of stopButtons.keys()) if (!live.has(sessionId)) stopButtons.delete(sessionId);
}

// --- the queue view -----------------------------------------------------------------------

function renderEngine(state) {
  // What it does now from the copies of its events (at once); /healthz every few seconds.
  const engine = state.engine ?? {};
  const workers = state.queue.workers;
  const kinds = state.queue.running.map((row) => row.kind);
  let word = t("not_seen");
  if (kinds.includes("rescrape")) word = t("rescraping");
  else if (kinds.length) word = t("answering_now");
  else if (engine.reachable ? engine.ok : workers > 0) word = t("idle");
  document.getElementById("engine-state").textContent = word;
  const parts = [`${workers ?? "–"} ${t("workers")}`];
  if (engine.reachable) {
    parts.push(`${engine.engine} · ${t("up_for")} ${seconds(engine.uptime_s)}`);
    if (engine.backend) parts.push(`${engine.backend.kind}: ${engine.backend.model ?? ""}`);
  } else {
    parts.push(t("no_health"));
  }
  document.getElementById("engine-detail").textContent = parts.join(" · ");
}

function renderCounts(queue) {
  // From the copies (at once); the broker's count, read each second, beside it.
  const total = queue.unknown_before + queue.waiting_listed;
  document.getElementById("waiting-count").textContent = String(total);
  const parts = [];
  if (queue.broker_waiting !== null) parts.push(`${t("broker_count")}: ${queue.broker_waiting}`);
  if (queue.unknown_before) parts.push(`${queue.unknown_before} ${t("before_console")}`);
  if (queue.waiting_listed > queue.waiting.length) {
    parts.push(`${queue.waiting.length} ${t("listed")}`);
  }
  const bySpace = spacesText(queue.spaces ?? {});
  if (bySpace) parts.push(bySpace);
  document.getElementById("waiting-detail").textContent = parts.join(" · ");
  const rate = queue.tokens_per_s;
  document.getElementById("rate-now").textContent = rate.now ?? rate.recent_median ?? "–";
  document.getElementById("rate-detail").textContent =
    rate.recent_median !== null ? `${t("recent")}: ${rate.recent_median}` : "";
}

// Waiting per space, of the requests the console saw queued ("?": queued before it started);
// shown once a named space appears (a deployment without a spaces file has only "default").
function spacesText(spaces) {
  const named = Object.keys(spaces).some((name) => name !== "default" && name !== "?");
  if (!named) return "";
  const shares = Object.entries(spaces)
    .filter(([, share]) => share.waiting > 0)
    .map(([name, share]) => `${name === "?" ? t("unknown_space") : name} ${share.waiting}`);
  return shares.length ? `${t("by_space")}: ${shares.join(", ")}` : "";
}

// The platform, and the space when it is a named one.
function where(row) {
  return row.space && row.space !== "default" ? `${row.platform} · ${row.space}` : row.platform;
}

// One knowledge base's passages, last and next rescrape, and where the figures come from.
function kbText(kb) {
  if (kb.missing) return t("no_kb");
  return `${kb.passages ?? "–"} ${t("passages")} · ${t("last_rescrape")} ${kb.last_rescrape ?? t("never")}` +
    // with CONCIERGE_RESCRAPE_EVERY; null while the scheduled one waits or runs
    ("next_rescrape" in kb ? ` · ${t("next_rescrape")} ${kb.next_rescrape ?? t("now")}` : "") +
    (kb.source === "local" ? ` · ${t("local_file")}` : "");
}

// With spaces (docs/spaces.md): every space's knowledge base, each with its own Rescrape.
function renderSpacesKnowledge(spaces) {
  const entries = Object.entries(spaces);
  const total = entries.reduce((sum, [, kb]) => sum + (kb.articles ?? 0), 0);
  document.getElementById("kb-articles").textContent = `${total} ${t("articles")}`;
  document.getElementById("kb-detail").textContent = `${entries.length} ${t("spaces")}`;
  document.getElementById("kb-spaces").replaceChildren(
    ...entries.map(([name, kb]) => {
      const button = el("button", { type: "button", class: "action", "data-space": name });
      button.textContent = t("rescrape");
      button.addEventListener("click", () => rescrape(name));
      const articles = kb.articles !== undefined ? `${kb.articles} ${t("articles")} · ` : "";
      return el(
        "li", { "data-space": name },
        el("strong", {}, name), " ", el("span", { class: "dim" }, articles + kbText(kb)), " ", button,
      );
    }),
  );
}

function renderKnowledge(state) {
  const spaces = state.kb_spaces;
  document.getElementById("kb-spaces").hidden = !spaces;
  document.getElementById("rescrape").hidden = Boolean(spaces);
  if (spaces) {
    renderSpacesKnowledge(spaces);
  } else {
    const kb = state.kb ?? {};
    document.getElementById("kb-articles").textContent =
      kb.articles !== undefined ? `${kb.articles} ${t("articles")}` : "–";
    document.getElementById("kb-detail").textContent = kbText(kb);
  }
  const scraping = state.queue.running.find((row) => row.kind === "rescrape");
  const progress = document.getElementById("rescrape-progress");
  progress.hidden = !scraping;
  if (scraping) progress.textContent = scraping.text || t("rescraping");
}

function renderRunning(queue) {
  const box = document.getElementById("running");
  const answers = queue.running.filter((row) => row.kind !== "rescrape");
  if (!answers.length) {
    box.replaceChildren(el("p", { class: "dim" }, t("nothing_running")));
    return;
  }
  box.replaceChildren(
    ...answers.map((row) => {
      const meta = [
        where(row), row.asker, `${t("waited_for")} ${seconds(row.waited_s)}`,
        `${t("running_for")} ${seconds(row.running_s)}`, `${row.tokens} ${t("tokens")}`,
        row.tokens_per_s !== null ? `${row.tokens_per_s} ${t("per_s")}` : null,
        row.stop_by ? `${t("stop_asked")} ${row.stop_by}` : null,
      ].filter(Boolean);
      return el(
        "div", { class: "running", "data-session": row.session_id },
        el("p", { class: "question" }, row.question),
        el("p", { class: "dim" }, meta.join(" · ")),
        el("pre", { class: "answer" }, row.text),
        stopButton(row.session_id),
      );
    }),
  );
}

function renderWaiting(queue) {
  const rows = queue.waiting.map((row) =>
    el(
      "tr", { "data-session": row.session_id },
      el("td", {}, String(row.position)),
      el("td", {}, where(row)),
      el("td", {}, row.asker),
      el("td", { class: "question" }, row.kind === "rescrape" ? t("rescrape") : row.question),
      el("td", {}, seconds(row.waited_s)),
      el("td", {}, row.stop_by ? `${t("stop_asked")} ${row.stop_by}` : stopButton(row.session_id)),
    ),
  );
  document.querySelector("#waiting tbody").replaceChildren(...rows);
  document.getElementById("waiting-empty").hidden = rows.length > 0 || queue.unknown_before > 0;
}

function renderOutcomes(queue) {
  const rows = queue.outcomes.map((row) =>
    el(
      "tr", { "data-session": row.session_id, "data-outcome": row.outcome },
      el("td", {}, clock(row.ended_at)),
      el("td", {}, el("span", { class: `badge ${row.outcome}` }, t(row.outcome))),
      el("td", {}, where(row)),
      el("td", {}, row.asker),
      el("td", { class: "question" }, row.kind === "rescrape" ? t("rescrape") : row.question),
      el("td", {}, String(row.tokens)),
      el("td", {}, row.tokens_per_s ?? "–"),
      el("td", {}, seconds(row.elapsed_s)),
      el("td", {}, seconds(row.waited_s)),
      el("td", { class: "dim" }, row.detail),
    ),
  );
  document.querySelector("#outcomes tbody").replaceChildren(...rows);
}

function render(state) {
  last = state;
  renderEngine(state);
  renderCounts(state.queue);
  renderKnowledge(state);
  renderRunning(state.queue);
  renderWaiting(state.queue);
  forgetStopButtons(state.queue);
  renderOutcomes(state.queue);
  renderDemo(state.demo);
  document.body.dataset.actions = state.actions_enabled ? "on" : "off";
}

// --- the stream ---------------------------------------------------------------------------

function setLive(word, on) {
  const live = document.getElementById("live");
  live.dataset.i18n = word;
  live.textContent = t(word);
  live.className = `live ${on ? "on" : "off"}`;
}

async function follow() {
  for (;;) {
    try {
      const response = await fetch("/api/events", { headers: authHeaders(), cache: "no-store" });
      if (response.status === 401) {
        setLive("needs_token", false);
      } else if (response.ok) {
        setLive("live", true);
        await readEvents(response.body.getReader());
        setLive("reconnecting", false);
      }
    } catch {
      setLive("reconnecting", false);
    }
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
  }
}

async function readEvents(reader) {
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = frame.split("\n").filter((line) => line.startsWith("data: "));
      if (data.length) render(JSON.parse(data.map((line) => line.slice(6)).join("\n")));
    }
  }
}

// --- set-up -------------------------------------------------------------------------------

function showView() {
  const demo = location.hash === "#demo";
  document.getElementById("view-queue").hidden = demo;
  document.getElementById("view-demo").hidden = !demo;
  document.getElementById("tab-queue").classList.toggle("chosen", !demo);
  document.getElementById("tab-demo").classList.toggle("chosen", demo);
}

function setup() {
  const input = document.getElementById("token");
  input.value = sessionStorage.getItem(TOKEN_KEY) ?? "";
  input.addEventListener("input", () => sessionStorage.setItem(TOKEN_KEY, input.value.trim()));
  document.getElementById("rescrape").addEventListener("click", () => rescrape());
  for (const button of document.querySelectorAll("[data-lang]")) {
    button.addEventListener("click", () => {
      setLanguage(button.dataset.lang);
      if (last) render(last);
      redrawChart();
    });
  }
  window.addEventListener("hashchange", showView);
  showView();
  applyLanguage();
  setupDemo();
  follow();
}

setup();

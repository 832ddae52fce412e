// Helpers the console's scripts share: elements, durations, the token, POSTs.

import { t } from "./i18n.js";

export const TOKEN_KEY = "concierge-console-token";

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

export function seconds(value) {
  if (value === null || value === undefined) return "–";
  if (value < 60) return `${value.toFixed(1)} s`;
  const minutes = Math.floor(value / 60);
  if (minutes < 60) return `${minutes} min ${String(Math.floor(value % 60)).padStart(2, "0")} s`;
  return `${Math.floor(minutes / 60)} h ${String(minutes % 60).padStart(2, "0")} min`;
}

export function clock(unixSeconds) {
  return new Date(unixSeconds * 1000).toLocaleTimeString([], { hour12: false });
}

function token() {
  return document.getElementById("token").value.trim();
}

export function authHeaders() {
  return token() ? { Authorization: `Bearer ${token()}` } : {};
}

export function say(text, kind = "info") {
  const message = document.getElementById("message");
  message.textContent = text;
  message.className = `message ${kind}`;
  message.hidden = false;
}

// --- actions ------------------------------------------------------------------------------

export async function post(path, body = {}) {
  let response;
  try {
    response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json", ...authHeaders() },
      body: JSON.stringify(body),
    });
  } catch (error) {
    say(`${t("refused")}: ${error}`, "error");
    return null;
  }
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    say(`${t("refused")} (${response.status}): ${answer.error ?? response.statusText}`, "error");
    return null;
  }
  return answer;
}


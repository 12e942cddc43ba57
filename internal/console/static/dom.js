// Small DOM and formatting helpers shared by the pages. Text is always
// set as text, never parsed as HTML.

// h builds an element: h("a", {href: "/x"}, "text", child...).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// money formats {amount, currency}.
export function money(m) {
  if (!m) return "";
  const n = Number(m.amount);
  try {
    return new Intl.NumberFormat("en-US", { style: "currency", currency: m.currency || "USD" }).format(n);
  } catch {
    return `${m.amount} ${m.currency}`;
  }
}

// saving says how much below on-demand a fee is.
export function saving(fee, onDemand) {
  const f = Number(fee.amount), o = Number(onDemand.amount);
  if (!(o > 0)) return "";
  const pct = Math.round((1 - f / o) * 100);
  return `${money({ amount: (o - f).toFixed(2), currency: fee.currency })} (${pct}%)`;
}

const dateFmt = new Intl.DateTimeFormat("en-GB", { weekday: "short", day: "numeric", month: "short", hour: "2-digit", minute: "2-digit", timeZone: "UTC", hour12: false });
const dayFmt = new Intl.DateTimeFormat("en-GB", { weekday: "short", day: "numeric", month: "short", timeZone: "UTC" });

// when formats a time in UTC, as the API speaks.
export function when(t) { return `${dateFmt.format(new Date(t))} UTC`; }
export function day(t) { return dayFmt.format(new Date(t)); }

// span formats milliseconds as "2d 3h 04m 05s".
export function span(ms) {
  if (ms <= 0) return "0s";
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400), hh = Math.floor((s % 86400) / 3600), mm = Math.floor((s % 3600) / 60), ss = s % 60;
  const p = (n) => String(n).padStart(2, "0");
  return d > 0 ? `${d}d ${hh}h ${p(mm)}m ${p(ss)}s` : hh > 0 ? `${hh}h ${p(mm)}m ${p(ss)}s` : `${mm}m ${p(ss)}s`;
}

// toast announces a message in the polite live region.
let toastTimer = 0;
export function toast(msg, kind) {
  const t = document.getElementById("toast");
  t.className = kind || "";
  t.textContent = msg;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.textContent = ""; }, 10000);
}

// errorBox renders an error where a page's content would be.
export function errorBox(err) {
  return h("p", { class: "error", role: "alert" }, err.message || String(err));
}

// scroller wraps a wide table so that it scrolls on its own, focusable
// from the keyboard.
export function scroller(label, table) {
  return h("div", { class: "scroll", tabindex: "0", role: "region", "aria-label": label }, table);
}

// table builds a table from a header row and rows of cells.
export function table(caption, heads, rows) {
  return h("table", {},
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, heads.map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c, i) => (i === 0 ? h("th", { scope: "row" }, c) : h("td", {}, c)))))));
}

// confirmDialog asks a yes/no question in a modal dialog; it resolves to
// true when confirmed. lines are the terms repeated to the user.
export function confirmDialog(title, lines, yes) {
  return new Promise((resolve) => {
    const dlg = h("dialog", { "aria-labelledby": "dlg-title", class: "confirm" },
      h("h2", { id: "dlg-title" }, title),
      h("dl", {}, lines.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
      h("div", { class: "actions" },
        h("button", { type: "button", class: "primary", id: "dlg-yes" }, yes),
        h("button", { type: "button", id: "dlg-no" }, "Go back")));
    document.body.append(dlg);
    const done = (v) => { dlg.close(); dlg.remove(); resolve(v); };
    dlg.querySelector("#dlg-yes").addEventListener("click", () => done(true));
    dlg.querySelector("#dlg-no").addEventListener("click", () => done(false));
    dlg.addEventListener("cancel", (e) => { e.preventDefault(); done(false); });
    dlg.showModal();
    dlg.querySelector("#dlg-yes").focus();
  });
}

// isoLocal formats a time for a datetime-local input, in UTC.
export function isoLocal(ms) { return new Date(ms).toISOString().slice(0, 16); }
// fromLocal reads a datetime-local input's value as UTC.
export function fromLocal(v) { return new Date(`${v}:00Z`).toISOString(); }

// Fleet calendar: per GPU model and zone, the next 8 weeks as a heat map
// of free GPUs per hour, zoomable from weeks to hours, with the team's
// blocks as bars and other teams' as anonymous "taken".
import { get } from "../api.js";
import { h, day, when, scroller, table } from "../dom.js";
import { draw, cellAt, heat } from "../heatmap.js";
import { onLeave } from "../app.js";

const zooms = [
  { label: "8 weeks", hours: 1344 },
  { label: "2 weeks", hours: 336 },
  { label: "3 days", hours: 72 },
  { label: "1 day", hours: 24 },
];

export async function calendarPage(root) {
  const cal = await get("/v1/fleet-calendar", { hours: 1344 });
  const view = { first: 0, hours: 1344 };
  const cursor = { row: 0, hour: 0 };
  const canvas = h("canvas", { id: "heatmap", tabindex: "0", role: "img",
    "aria-label": "Heat map of free GPUs per hour by GPU model and zone. Arrow keys move between hours and pools; + and - zoom; the cell under the cursor is described below.",
    "aria-describedby": "cell-info" });
  const info = h("p", { id: "cell-info", class: "cell-info", "aria-live": "polite" });
  const rangeText = h("span", { class: "range" });
  const redraw = () => {
    draw(canvas, cal, view, cursor);
    const from = Date.parse(cal.from);
    rangeText.textContent = `${day(from + view.first * 3600e3)} – ${day(from + (view.first + view.hours - 1) * 3600e3)}`;
    describe();
  };
  const describe = () => {
    const p = cal.pools[cursor.row];
    if (!p) { info.textContent = "The fleet has no nodes."; return; }
    const t = Date.parse(cal.from) + cursor.hour * 3600e3;
    const mine = p.blocks.filter((b) => Date.parse(b.startTime) <= t && t < Date.parse(b.endTime));
    info.textContent = `${p.gpuModel} in ${p.zone}, ${when(t)}: ${p.free[cursor.hour]} of ${p.gpus} GPUs free, ` +
      `${p.own[cursor.hour]} yours, ${p.taken[cursor.hour]} taken by other teams` +
      (mine.length ? `; your blocks: ${mine.map((b) => b.name || b.id).join(", ")}` : "") +
      (p.unhealthy.length ? `; failed nodes: ${p.unhealthy.map((n) => n.name).join(", ")}` : "") + ".";
  };
  const setZoom = (i) => {
    const center = cursor.hour;
    view.hours = zooms[i].hours;
    view.first = clamp(center - Math.floor(view.hours / 2), 0, cal.hours - view.hours);
    zoomButtons.forEach((b, j) => b.setAttribute("aria-pressed", String(i === j)));
    redraw();
  };
  const pan = (dir) => {
    view.first = clamp(view.first + dir * Math.max(1, Math.floor(view.hours / 2)), 0, cal.hours - view.hours);
    cursor.hour = clamp(cursor.hour, view.first, view.first + view.hours - 1);
    redraw();
  };
  const zoomButtons = zooms.map((z, i) => h("button", { type: "button", "aria-pressed": String(i === 0), onclick: () => setZoom(i) }, z.label));
  const zoomIndex = () => zooms.findIndex((z) => z.hours === view.hours);

  canvas.addEventListener("keydown", (e) => {
    const moves = { ArrowLeft: [0, -1], ArrowRight: [0, 1], ArrowUp: [-1, 0], ArrowDown: [1, 0], PageUp: [0, -24], PageDown: [0, 24] };
    if (moves[e.key]) {
      const [dr, dh] = moves[e.key];
      cursor.row = clamp(cursor.row + dr, 0, cal.pools.length - 1);
      cursor.hour = clamp(cursor.hour + dh, 0, cal.hours - 1);
      if (cursor.hour < view.first) view.first = cursor.hour;
      if (cursor.hour >= view.first + view.hours) view.first = cursor.hour - view.hours + 1;
      redraw();
    } else if (e.key === "+" || e.key === "=") {
      setZoom(Math.min(zooms.length - 1, zoomIndex() + 1));
    } else if (e.key === "-") {
      setZoom(Math.max(0, zoomIndex() - 1));
    } else return;
    e.preventDefault();
  });
  canvas.addEventListener("click", (e) => {
    const r = canvas.getBoundingClientRect();
    const c = cellAt(canvas, cal, view, e.clientX - r.left, e.clientY - r.top);
    if (c) { cursor.row = c.row; cursor.hour = c.hour; redraw(); }
  });
  const onResize = () => redraw();
  window.addEventListener("resize", onResize);
  onLeave(() => window.removeEventListener("resize", onResize));

  root.replaceChildren(
    h("div", { class: "toolbar", role: "group", "aria-label": "Zoom and scroll" },
      h("span", { class: "label" }, "Zoom"), ...zoomButtons,
      h("button", { type: "button", "aria-label": "Earlier", onclick: () => pan(-1) }, "◀ Earlier"),
      h("button", { type: "button", "aria-label": "Later", onclick: () => pan(1) }, "Later ▶"),
      rangeText),
    legend(),
    h("div", { class: "canvas-wrap" }, canvas),
    info,
    h("h2", {}, "Summary"),
    scroller("Fleet summary", summary(cal)));
  redraw();
}

function legend() {
  const swatch = (color, text) => {
    const s = h("span", { class: "swatch" });
    s.style.background = color;
    return h("li", {}, s, text);
  };
  return h("ul", { class: "legend", "aria-label": "Legend" },
    swatch(heat(1), "all free"), swatch(heat(0.5), "half free"), swatch(heat(0), "none free"),
    swatch("#3b82f6", "your blocks"), swatch("#3e4c59", "taken by other teams"), swatch("#b91c1c", "failed nodes"));
}

// summary is the heat map as text: per pool, what is free now and at the
// tightest hour, what the team holds, what failed.
function summary(cal) {
  const rows = cal.pools.map((p) => {
    let min = Infinity, minAt = 0;
    p.free.forEach((f, i) => { if (i > 0 && f < min) { min = f; minAt = i; } });
    const t = Date.parse(cal.from) + minAt * 3600e3;
    return [`${p.gpuModel} · ${p.zone}`, `${p.nodes} nodes, ${p.gpus} GPUs`, String(p.free[0] ?? 0),
      p.free.length > 1 ? `${min} (${when(t)})` : "",
      p.blocks.length ? p.blocks.map((b, i) => [i ? "; " : "", h("a", { href: `/blocks/${b.id}` }, b.name || b.id), ` (${b.gpus} GPUs, ${b.state})`]) : "none",
      p.unhealthy.length ? p.unhealthy.map((n) => n.name).join(", ") : "none"];
  });
  return table("Free GPUs per GPU model and zone over the next 8 weeks", ["Pool", "Size", "Free now", "Fewest free", "Your blocks", "Failed nodes"], rows);
}

function clamp(v, lo, hi) { return Math.max(lo, Math.min(hi, v)); }

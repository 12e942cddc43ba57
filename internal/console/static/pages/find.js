// Find capacity: the offering search as a form, its results with the
// saving against on-demand, and a price calendar of every start in the
// window, from which a cheaper or sooner start is one click away.
import { get, post, serverNow } from "../api.js";
import { h, money, saving, when, day, scroller, errorBox, confirmDialog, toast, isoLocal, fromLocal } from "../dom.js";
import { session, teamName } from "../app.js";

export async function findPage(root) {
  const types = (await get("/v1/instance-types")).instanceTypes;
  const zones = [...new Set(types.flatMap((t) => t.zones))].sort();
  const now = serverNow();
  const start = Math.ceil(now / 3600e3) * 3600e3 + 3600e3;
  const field = (id, label, input, hint) => h("div", { class: "field" }, h("label", { for: id }, label), input, hint ? h("small", { id: `${id}-hint` }, hint) : null);
  const typeSel = h("select", { id: "type", name: "type" }, types.map((t) => h("option", { value: t.name }, `${t.name} (${t.gpusPerInstance} × ${t.gpuModel}, ${money(t.onDemandPrice)}/h on demand)`)));
  const count = h("input", { id: "count", name: "count", type: "number", min: "1", value: "1", required: true });
  const mode = h("select", { id: "mode", name: "mode" }, h("option", { value: "exact" }, "Exactly"), h("option", { value: "range" }, "Between"));
  const hours = h("input", { id: "hours", name: "hours", type: "number", min: "1", value: "24", required: true });
  const maxHours = h("input", { id: "max-hours", name: "maxHours", type: "number", min: "1", value: "48" });
  const maxField = field("max-hours", "and at most (hours)", maxHours);
  maxField.hidden = true;
  mode.addEventListener("change", () => { maxField.hidden = mode.value !== "range"; });
  const from = h("input", { id: "from", name: "from", type: "datetime-local", value: isoLocal(start), required: true, "aria-describedby": "from-hint" });
  const to = h("input", { id: "to", name: "to", type: "datetime-local", value: isoLocal(start + 14 * 86400e3), required: true, "aria-describedby": "to-hint" });
  const zoneSel = h("select", { id: "zone", name: "zone" }, h("option", { value: "" }, "Any zone"), zones.map((z) => h("option", { value: z }, z)));
  const results = h("section", { id: "results", "aria-label": "Offerings", "aria-live": "polite" });
  const calendar = h("section", { id: "price-calendar", "aria-label": "Price calendar" });
  const form = h("form", { class: "search" },
    h("fieldset", {}, h("legend", {}, "What"), field("type", "Instance type", typeSel), field("count", "Instances", count)),
    h("fieldset", {}, h("legend", {}, "How long"), field("mode", "Duration", mode), field("hours", mode.value === "exact" ? "Hours" : "Hours", hours), maxField),
    h("fieldset", {}, h("legend", {}, "When and where"),
      field("from", "Start after (UTC)", from, "Blocks start on the hour, at most 8 weeks ahead."),
      field("to", "End before (UTC)", to, "The block ends by then."),
      field("zone", "Zone", zoneSel)),
    h("button", { type: "submit", class: "primary", id: "search" }, "Search"));

  const request = () => {
    const q = { instanceType: typeSel.value, instanceCount: count.value, startAfter: fromLocal(from.value), endBefore: fromLocal(to.value), zone: zoneSel.value };
    if (mode.value === "exact") q.durationHours = hours.value;
    else { q.minDurationHours = hours.value; q.maxDurationHours = maxHours.value; }
    return q;
  };
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const q = request();
    results.replaceChildren(h("p", {}, "Searching…"));
    calendar.replaceChildren();
    try {
      const { offerings } = await get("/v1/offerings", q);
      results.replaceChildren(offeringTable(offerings));
    } catch (err) {
      results.replaceChildren(errorBox(err));
      return;
    }
    if (q.durationHours) {
      try {
        const { starts } = await get("/v1/offerings/price-calendar", q);
        calendar.replaceChildren(priceCalendar(starts, q));
      } catch (err) {
        calendar.replaceChildren(errorBox(err));
      }
    } else {
      calendar.replaceChildren(h("p", {}, "The price calendar is for one exact duration: choose “Exactly” to see every start."));
    }
  });
  root.replaceChildren(form, results, calendar);
}

// canBuy: a viewer reads and searches; buying is for members and admins.
function canBuy() { return session.user.role !== "viewer"; }

function offeringTable(offerings) {
  if (offerings.length === 0) return h("p", {}, "Nothing fits in that window. Widen it, pick another zone or fewer instances.");
  const rows = offerings.map((o, i) => h("tr", {},
    h("th", { scope: "row" }, `${o.instanceCount} × ${o.instanceType}${o.alternative ? " (alternative)" : ""}`),
    h("td", {}, o.zone), h("td", {}, when(o.startTime)), h("td", {}, when(o.endTime)), h("td", {}, `${o.durationHours} h`),
    h("td", { class: "num" }, money(o.upfrontFee)), h("td", { class: "num" }, money(o.onDemandFee)), h("td", { class: "num" }, saving(o.upfrontFee, o.onDemandFee)),
    h("td", {}, canBuy() ? h("button", { type: "button", class: "buy", id: `buy-${i}`, onclick: () => buy(o) }, "Buy…") : "")));
  return h("div", {}, h("h2", {}, "Offerings"),
    canBuy() ? null : h("p", {}, "You are a viewer: a member of your team can buy these."),
    scroller("Offerings", h("table", {},
    h("caption", {}, "Best first: earliest start, then lowest fee"),
    h("thead", {}, h("tr", {}, ["Offering", "Zone", "Start", "End", "Length", "Fee", "On demand", "Saving", ""].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows))));
}

// priceCalendar lays the starts out a day per row, an hour per cell, as
// a grid that the arrow keys move through (one tab stop).
function priceCalendar(starts, q) {
  if (starts.length === 0) return h("p", {}, "No start fits in that window.");
  const fees = starts.filter((s) => s.available).map((s) => Number(s.fee.amount));
  const lo = Math.min(...fees), hi = Math.max(...fees);
  const cheapest = starts.find((s) => s.available && Number(s.fee.amount) === lo);
  const byDay = new Map();
  for (const s of starts) {
    const d = s.start.slice(0, 10);
    if (!byDay.has(d)) byDay.set(d, new Array(24).fill(null));
    byDay.get(d)[new Date(s.start).getUTCHours()] = s;
  }
  const cells = [];
  const rows = [...byDay.entries()].map(([d, hoursOf]) => h("div", { role: "row", class: "pc-row" },
    h("span", { role: "rowheader", class: "pc-day" }, day(`${d}T00:00:00Z`)),
    hoursOf.map((s, hr) => {
      if (!s) return h("span", { role: "gridcell", class: "pc-cell pc-none" });
      const level = hi > lo ? Math.round(((Number(s.fee.amount) - lo) / (hi - lo)) * 4) : 0;
      const label = `${when(s.start)}: ${money(s.fee)} in ${s.zone}, ${s.available ? "available" : "not available"}`;
      const btn = h("button", { type: "button", class: `pc-cell ${s.available ? `lvl${level}` : "pc-taken"}`, tabindex: "-1",
        "aria-label": label, title: label, "aria-disabled": s.available ? "false" : "true", dataset: { start: s.start },
        onclick: () => { if (s.available && canBuy()) pick(s, q); } }, String(hr).padStart(2, "0"));
      cells.push(btn);
      return h("span", { role: "gridcell" }, btn);
    })));
  const first = cells.find((c) => c.dataset.start === cheapest?.start) || cells[0];
  first.tabIndex = 0;
  const grid = h("div", { role: "grid", class: "pc-grid", "aria-label": "Fee of every start; arrow keys move, Enter picks" }, rows);
  grid.addEventListener("keydown", (e) => {
    const i = cells.indexOf(document.activeElement);
    if (i < 0) return;
    const step = { ArrowRight: 1, ArrowLeft: -1, ArrowDown: 24, ArrowUp: -24, Home: -i, End: cells.length - 1 - i }[e.key];
    if (step === undefined) return;
    e.preventDefault();
    const j = Math.max(0, Math.min(cells.length - 1, i + step));
    cells[i].tabIndex = -1;
    cells[j].tabIndex = 0;
    cells[j].focus();
  });
  return h("div", {},
    h("h2", {}, "Price calendar"),
    h("p", {}, `Every start of ${q.instanceCount} × ${q.instanceType} for ${q.durationHours} h. Cheapest: `,
      cheapest ? h("button", { type: "button", class: "link", id: "pick-cheapest", onclick: () => pick(cheapest, q) }, `${money(cheapest.fee)} from ${when(cheapest.start)}`) : "none available",
      ". Darker is dearer; hatched is taken."),
    scroller("Price calendar", grid));
}

// pick turns a start of the price calendar into an offering (a search of
// that start alone, in its zone) and offers to buy it.
async function pick(s, q) {
  try {
    const end = new Date(Date.parse(s.start) + q.durationHours * 3600e3).toISOString();
    const { offerings } = await get("/v1/offerings", { instanceType: q.instanceType, instanceCount: q.instanceCount, durationHours: q.durationHours,
      startAfter: s.start, endBefore: end, zone: s.zone, maxResults: 1 });
    const o = offerings.find((x) => x.startTime === s.start.replace(".000", "") || Date.parse(x.startTime) === Date.parse(s.start));
    if (!o) { toast("That start was just taken: pick another.", "error"); return; }
    await buy(o);
  } catch (err) {
    toast(err.message, "error");
  }
}

// buy repeats the terms and the fee and buys only when confirmed.
async function buy(o) {
  const ok = await confirmDialog(`Buy ${o.instanceCount} × ${o.instanceType}?`, [
    ["Zone", o.zone], ["Start", when(o.startTime)], ["End", when(o.endTime)], ["Length", `${o.durationHours} hours`],
    ["Fee", money(o.upfrontFee)], ["On demand", money(o.onDemandFee)], ["Saving", saving(o.upfrontFee, o.onDemandFee)],
    ["Team", teamName(session.user.team)]], `Buy for ${money(o.upfrontFee)}`);
  if (!ok) return;
  try {
    const b = await post("/v1/blocks", { offeringId: o.offeringId, clientToken: crypto.randomUUID() });
    const out = document.getElementById("results");
    out.replaceChildren(h("p", { class: "ok", role: "status" }, `Bought block ${b.id} (${b.state}) for ${money(b.upfrontFee)}. `,
      h("a", { href: `/blocks/${b.id}` }, "Open the block"), " · ", h("a", { href: "/calendar" }, "See it on the calendar")));
    out.querySelector("a").focus();
  } catch (err) {
    toast(err.message, "error");
  }
}

// Blocks and plans: the lists of blocks, training plans, series and
// orders, each with its filters (and sort) kept in the URL; a block's
// state, a live countdown, and what it cost: charged, refunded, credited
// and net, from the ledger. Each thing listed has a page of its own
// (block.js, plan.js, series.js, order.js).
import { get, serverNow } from "../api.js";
import { h, money, when, scroller, span } from "../dom.js";
import { onLeave, session, teamName } from "../app.js";
import { cashBySubject, cashOf, startOf } from "../things.js";
import { filteredList, byRank } from "../lists.js";
import { seriesTable } from "./series.js";
import { orderTable } from "./order.js";

const blockStates = ["payment-pending", "scheduled", "active", "expired", "payment-failed", "cancelled", "failed"];
const liveStates = ["payment-pending", "scheduled", "active"];
const planStates = ["pending", "scheduled", "active", "expired", "failed", "cancelled"];
const seriesStates = ["scheduled", "active", "ended", "cancelled"];
const orderStates = ["open", "notified", "bought", "expired", "cancelled"];
// stateRanks orders states for sorting: what is running or coming first.
const stateRanks = ["active", "scheduled", "payment-pending", "pending", "expired", "cancelled", "payment-failed", "failed"];

export async function blocksPage(root) {
  const [{ blocks }, { plans }, { series }, { orders }] = await Promise.all([get("/v1/blocks"), get("/v1/plans"), get("/v1/series"), get("/v1/orders")]);
  const currency = blocks[0]?.upfrontFee.currency || "USD";
  const cash = await cashBySubject(currency);
  const admin = session.user.role === "admin";
  root.replaceChildren(
    blocks.length ? filteredList({ label: "Filter blocks", noun: "blocks", rows: blocks, fields: blockFields(admin),
      draw: (shown) => scroller("Blocks", blockTable(shown, cash, admin)) })
      : h("p", {}, "No blocks yet: ", h("a", { href: "/find" }, "find capacity"), "."),
    h("h2", {}, "Training plans"),
    plans.length ? filteredList({ label: "Filter training plans", noun: "plans", rows: plans, fields: planFields(admin),
      draw: (shown) => scroller("Training plans", planTable(shown, cash, admin)) })
      : h("p", {}, "No training plans yet."),
    h("h2", {}, "Series"),
    series.length ? filteredList({ label: "Filter series", noun: "series", rows: series, fields: listFields("series-", seriesStates, ["scheduled", "active"], admin, true),
      draw: (shown) => scroller("Series", seriesTable(shown, cash, admin, moneyHeads)) })
      : h("p", {}, "No recurring blocks yet."),
    h("h2", {}, "Orders"),
    orders.length ? filteredList({ label: "Filter orders", noun: "orders", rows: orders, fields: listFields("order-", orderStates, ["open", "notified"], admin, false, "Waiting (open or notified)"),
      draw: (shown) => scroller("Orders", orderTable(shown, admin)) })
      : h("p", {}, "No orders waiting."));
  // Refresh the states as the clock moves blocks along; the filters see
  // the new states when next applied.
  const byId = new Map(blocks.map((b) => [b.id, b]));
  const timer = setInterval(async () => {
    try {
      const fresh = (await get("/v1/blocks")).blocks;
      for (const b of fresh) {
        const was = byId.get(b.id);
        if (was) was.state = b.state;
        const cell = root.querySelector(`[data-state-of="${b.id}"]`);
        if (cell && cell.textContent !== b.state) {
          cell.textContent = b.state;
          const left = root.querySelector(`[data-left-of="${b.id}"]`);
          if (left) left.replaceChildren(countdown(b));
        }
      }
    } catch { /* the next tick tries again */ }
  }, 5000);
  onLeave(() => clearInterval(timer));
}

// stateField filters by one state, or by the live ones.
function stateField(key, states, live, liveLabel) {
  return { key, label: "State", options: [["", "All states"], ["live", liveLabel], ...states.map((s) => [s, s])],
    match: (r, v) => (v === "live" ? live.includes(r.state) : r.state === v) };
}

// teamField filters by team; only an administrator sees several teams.
function teamField(key) {
  return { key, label: "Team", options: [["", "All teams"], ...session.teams.map((t) => [t.id, t.name])], match: (r, v) => r.team === v };
}

const byStart = (a, b) => Date.parse(startOf(a) || a.createdAt) - Date.parse(startOf(b) || b.createdAt);

function sortField(key) {
  return { key, label: "Sort by", options: [["start", "Start, earliest first"], ["-start", "Start, latest first"], ["state", "State, live first"]],
    order: { start: byStart, "-start": (a, b) => byStart(b, a), state: byRank("state", stateRanks, byStart) } };
}

// listFields are a list's filters: by state (or the live ones), by team
// for an administrator, and a sort order where asked; prefix keeps the
// keys of the lists on one page apart.
function listFields(prefix, states, live, admin, sorted, liveLabel = "Live (to come or running)") {
  return [stateField(`${prefix}state`, states, live, liveLabel), ...(admin ? [teamField(`${prefix}team`)] : []), ...(sorted ? [sortField(`${prefix}sort`)] : [])];
}

const blockFields = (admin) => listFields("", blockStates, liveStates, admin, true);
const planFields = (admin) => listFields("plan-", planStates, ["pending", "scheduled", "active"], admin, true);

// countdown counts to the block's start while scheduled, to its end while
// active.
export function countdown(b) {
  const now = serverNow();
  if (b.state === "scheduled" || b.state === "payment-pending") {
    return h("span", { dataset: { until: b.startTime, prefix: "starts in " } }, `starts in ${span(Date.parse(b.startTime) - now)}`);
  }
  if (b.state === "active") {
    return h("span", { class: "countdown", dataset: { until: b.endTime, prefix: "ends in " } }, `ends in ${span(Date.parse(b.endTime) - now)}`);
  }
  return h("span", {}, "—");
}

// moneyCells are a thing's charged, refunds, credits and net.
function moneyCells(c) {
  return [c.charged, c.refunds, c.credits, c.net].map((m) => h("td", { class: "num" }, money(m)));
}

const moneyHeads = ["Charged", "Refunds", "Credits", "Net"];

function blockTable(blocks, cash, admin) {
  if (blocks.length === 0) return h("p", {}, "No block matches these filters.");
  const currency = blocks[0].upfrontFee.currency;
  return h("table", { class: "compact", id: "blocks-list" },
    h("caption", {}, `${admin ? "Every team's blocks" : "Your team's blocks"}: what each was charged, refunded and credited, from the ledger`),
    h("thead", {}, h("tr", {}, ["Block", ...(admin ? ["Team"] : []), "Shape", "Zone", "State", "Time left", "Start", "End", ...moneyHeads].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, blocks.map((b) => h("tr", { dataset: { block: b.id } },
      h("th", { scope: "row" }, h("a", { href: `/blocks/${b.id}` }, b.name || b.id)), admin ? h("td", {}, teamName(b.team)) : null,
      h("td", {}, `${b.instanceCount} × ${b.instanceType}`), h("td", {}, b.zone),
      h("td", { dataset: { stateOf: b.id } }, b.state),
      h("td", { dataset: { leftOf: b.id } }, countdown(b)),
      h("td", { class: "time" }, when(b.startTime)), h("td", { class: "time" }, when(b.endTime)), moneyCells(cashOf(cash, [b.id], currency))))));
}

function planTable(plans, cash, admin) {
  if (plans.length === 0) return h("p", {}, "No plan matches these filters.");
  return h("table", { id: "plans-list" },
    h("caption", {}, "Training plans and their segments"),
    h("thead", {}, h("tr", {}, ["Plan", ...(admin ? ["Team"] : []), "State", "Segments", "Total", "Available", "In use", "Unhealthy", ...moneyHeads].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, plans.map((p) => h("tr", {},
      h("th", { scope: "row" }, h("a", { href: `/plans/${p.id}` }, p.name || p.id)), admin ? h("td", {}, teamName(p.team)) : null, h("td", {}, p.state),
      h("td", {}, h("ul", { class: "plain" }, p.segments.map((s) => h("li", {}, h("a", { href: `/blocks/${s.blockId}` }, `${s.instanceCount} × ${s.instanceType}`), ` ${when(s.startTime)} – ${when(s.endTime)} (${s.state})`)))),
      h("td", {}, String(p.total)), h("td", {}, String(p.available)), h("td", {}, String(p.inUse)), h("td", {}, String(p.unhealthy)),
      moneyCells(cashOf(cash, p.segments.map((s) => s.blockId), p.upfrontFee.currency))))));
}

// Recurring blocks: the series list (on the blocks page) and a series'
// own page with its schedule, its occurrences (each a block with a page
// of its own), what they cost (from the ledger), its events, and cancel,
// with the refund of every occurrence left summed before confirming. The
// URL names a series by id or by name.
import { get, post } from "../api.js";
import { h, money, when, scroller, confirmDialog, toast } from "../dom.js";
import { navigate, session, setTitle, teamName } from "../app.js";
import { kinds, resolve, eventsOf, cashBySubject, cashOf, Cash } from "../things.js";
import { eventTable, fact } from "./block.js";

const liveBlock = ["payment-pending", "scheduled", "active"];

// schedule says when a series' occurrences are, in its time zone.
function schedule(s) {
  const d = s.schedule;
  return `${d.daysOfWeek.join(", ")} ${d.startTime}–${d.endTime} ${d.timeZone}, ${d.fromDate} to ${d.toDate}`;
}

// seriesTable lists series with what their occurrences cost.
export function seriesTable(series, cash, admin, heads) {
  if (series.length === 0) return h("p", {}, "No series matches these filters.");
  return h("table", { id: "series-list" },
    h("caption", {}, "Recurring blocks: each occurrence is a block"),
    h("thead", {}, h("tr", {}, ["Series", ...(admin ? ["Team"] : []), "State", "Shape", "Schedule", "Occurrences", ...heads].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, series.map((s) => h("tr", {},
      h("th", { scope: "row" }, h("a", { href: `/series/${s.id}` }, s.name || s.id)), admin ? h("td", {}, teamName(s.team)) : null,
      h("td", {}, s.state), h("td", {}, `${s.instanceCount} × ${s.instanceType} in ${s.zone}`), h("td", {}, schedule(s)),
      h("td", {}, `${s.occurrences.filter((o) => liveBlock.includes(o.state)).length} live of ${s.occurrences.length}`),
      cells(cashOf(cash, s.occurrences.map((o) => o.blockId), s.upfrontFee.currency))))));
}

// local writes "2027-03-22T09:00:00+01:00" as "2027-03-22 09:00 (UTC+01:00)".
function local(t) {
  const m = /^(\d{4}-\d\d-\d\d)T(\d\d:\d\d)(?::\d\d(?:\.\d+)?)?(Z|[+-]\d\d:\d\d)$/.exec(t || "");
  return m ? `${m[1]} ${m[2]} (UTC${m[3] === "Z" ? "" : m[3]})` : t;
}

function cells(c) { return [c.charged, c.refunds, c.credits, c.net].map((m) => h("td", { class: "num" }, money(m))); }

export async function seriesPage(root, ref) {
  const id = await resolve(kinds.series, ref);
  const s = await get(`/v1/series/${encodeURIComponent(id)}`);
  const blockIds = s.occurrences.map((o) => o.blockId);
  const [events, cash] = await Promise.all([eventsOf([s.id, ...blockIds]), cashBySubject()]);
  setTitle(root, `Series ${s.name || s.id}`);
  const c = cashOf(cash, blockIds, s.upfrontFee.currency);
  const left = s.occurrences.filter((o) => liveBlock.includes(o.state));
  const live = left.length > 0 && session.user.role !== "viewer";
  root.replaceChildren(
    h("section", { id: "series-detail", "aria-label": "Series" },
      h("p", { class: "crumbs" }, h("a", { href: "/blocks" }, "All blocks, plans and series")),
      h("dl", { class: "facts" },
        fact("Id", s.id), fact("Name", s.name || "—"), fact("Team", teamName(s.team)), fact("State", h("span", { id: "series-state" }, s.state)),
        fact("Shape", `${s.instanceCount} × ${s.instanceType} in ${s.zone}`), fact("Schedule", schedule(s)),
        fact("Occurrences", `${left.length} live of ${s.occurrences.length}`), fact("Bought", when(s.createdAt))),
      h("h2", {}, "Money"),
      h("dl", { class: "facts", id: "series-money" },
        fact("Fee", money(s.upfrontFee)), fact("Charged", money(c.charged)), fact("Refunds", money(c.refunds)),
        fact("Credits", money(c.credits)), fact("Net", h("strong", {}, money(c.net)))),
      live ? h("div", { class: "actions" }, h("button", { type: "button", id: "cancel-series", class: "danger", onclick: () => cancel(s, left, c) }, "Cancel what is left…")) : null,
      h("h2", {}, "Occurrences"),
      scroller("Occurrences", h("table", { id: "series-occurrences" }, h("caption", {}, `Every occurrence, in time order, local times in ${s.schedule.timeZone}`),
        h("thead", {}, h("tr", {}, ["Block", "Local start", "Local end", "State", "Charged", "Refunds", "Credits", "Net"].map((x) => h("th", { scope: "col" }, x)))),
        h("tbody", {}, s.occurrences.map((o) => h("tr", {},
          h("th", { scope: "row" }, h("a", { href: `/blocks/${o.blockId}` }, o.blockId)),
          h("td", { class: "time" }, local(o.localStartTime)), h("td", { class: "time" }, local(o.localEndTime)), h("td", {}, o.state),
          cells(cashOf(cash, [o.blockId], s.upfrontFee.currency))))))),
      h("h2", {}, "Events"),
      eventTable("What happened to the series and its occurrences", events, true)));
}

// cancel sums the refund of every occurrence left before confirming.
async function cancel(s, left, c) {
  try {
    const quotes = await Promise.all(left.map((o) => get(`/v1/blocks/${o.blockId}/cancel-quote`)));
    const refund = new Cash(s.upfrontFee.currency);
    for (const q of quotes) refund.add({ kind: "refund", amount: q.refund });
    const ok = await confirmDialog(`Cancel what is left of ${s.name || s.id}?`, [
      ["Occurrences", `${left.length}: those to come cancelled, an active one released`],
      ["Paid", money(c.net)], ["Refund", money(refund.refunds)], ["Net after", money(c.less(refund.refunds))]], `Cancel and refund ${money(refund.refunds)}`);
    if (!ok) return;
    await post(`/v1/series/${s.id}/cancel`);
    toast(`Series ${s.id} is cancelled; refunded ${money(refund.refunds)}.`, "ok");
    navigate(`/series/${s.id}`);
  } catch (err) {
    toast(err.message, "error");
  }
}

// A block's own page: its state and countdown, what it cost (fee,
// charged, refunds, credits, net, from the ledger), its hand-overs,
// capacity and placements, jobs and events; cancel and extend, with the
// refund or the fee shown before confirming, and the hand-ons (release
// for resale, transfer, lend: handon.js). The URL names the block by
// id or by name.
import { get, post } from "../api.js";
import { h, money, when, scroller, confirmDialog, toast } from "../dom.js";
import { navigate, session, setTitle, teamName } from "../app.js";
import { kinds, resolve, eventsOf, cashBySubject, cashOf } from "../things.js";
import { countdown } from "./blocks.js";
import { handOnActions, handedOn } from "./handon.js";

export async function blockPage(root, ref) {
  const id = await resolve(kinds.block, ref);
  const path = `/v1/blocks/${encodeURIComponent(id)}`;
  const [b, status, events, cash, { jobs }, { series }, { orders }] = await Promise.all([get(path), get(`${path}/status`), eventsOf([id]),
    cashBySubject(), get("/v1/jobs"), get("/v1/series"), get("/v1/orders")]);
  const inSeries = series.find((s) => s.occurrences.some((o) => o.blockId === id));
  const byOrder = orders.find((o) => o.blockId === id);
  setTitle(root, `Block ${b.name || b.id}`);
  const c = cashOf(cash, [b.id], b.upfrontFee.currency);
  const live = ["payment-pending", "scheduled", "active"].includes(b.state) && session.user.role !== "viewer" && !handedOn(b);
  const hoursIn = h("input", { id: "extend-hours", type: "number", min: "1", value: "1" });
  const mine = jobs.filter((j) => j.blockId === b.id);
  root.replaceChildren(
    h("section", { id: "block-detail", "aria-label": "Block" },
      h("p", { class: "crumbs" }, h("a", { href: "/blocks" }, "All blocks and plans")),
      h("dl", { class: "facts" },
        fact("Id", b.id), fact("Name", b.name || "—"), fact("Team", teamName(b.team)),
        fact("State", h("span", { id: "block-state" }, b.state)), fact("Time left", h("span", { id: "block-left" }, countdown(b))),
        fact("Shape", `${b.instanceCount} × ${b.instanceType} in ${b.zone}`), fact("Start", when(b.startTime)), fact("End", when(b.endTime)),
        b.planId ? fact("Plan", h("a", { href: `/plans/${b.planId}` }, b.planId)) : null,
        inSeries ? fact("Series", h("a", { href: `/series/${inSeries.id}` }, inSeries.name || inSeries.id)) : null,
        byOrder ? fact("Bought by order", h("a", { href: `/orders/${byOrder.id}` }, byOrder.name || byOrder.id)) : null,
        fact("Capacity", `${status.totalCapacity} total, ${status.availableCapacity} available, ${status.unavailableCapacity} unavailable${status.degraded ? " (degraded)" : ""}`),
        fact("Placement", status.placementFinal ? "final" : `may still move until ${when(status.lockInTime)}`)),
      h("h2", {}, "Money"),
      h("dl", { class: "facts", id: "block-money" },
        fact("Fee", money(b.upfrontFee)), fact("Charged", money(c.charged)), fact("Refunds", money(c.refunds)),
        fact("Credits", money(c.credits)), fact("Net", h("strong", {}, money(c.net)))),
      h("p", { class: "note" }, "Charged, refunds and credits are the team's ledger lines about this block; net is charged less refunds and credits."),
      handovers(b),
      live ? h("div", { class: "actions" },
        h("button", { type: "button", id: "cancel-block", class: "danger", onclick: () => cancel(b, c) }, b.state === "active" ? "Release early…" : "Cancel…"),
        h("label", { for: "extend-hours" }, "Extend by (hours)"), hoursIn,
        h("button", { type: "button", id: "extend-block", onclick: () => extend(b, hoursIn.value) }, "Extend…"),
        handOnActions(b)) : null,
      h("h2", {}, "Placements"),
      status.placements.length ? h("ul", { class: "plain" }, status.placements.map((p) => h("li", {}, `${p.node}: GPUs ${p.gpus.join(", ")}`))) : h("p", {}, "None yet."),
      h("h2", {}, "Jobs"),
      mine.length ? h("ul", { class: "plain", id: "block-jobs" }, mine.map((j) => h("li", {}, h("a", { href: `/jobs/${j.id}` }, j.name || j.id), ` (${j.state})`)))
        : h("p", {}, "No job runs on this block."),
      h("h2", {}, "Events"),
      eventTable("What happened to this block", events, false)));
}

// handovers lists the hours the block handed on, or received.
function handovers(b) {
  if (!b.handovers || b.handovers.length === 0) return null;
  return [h("h2", {}, "Hours handed on"), h("ul", { class: "plain", id: "block-handovers" }, b.handovers.map((x) => {
    const received = x.toBlockId === b.id;
    const what = x.kind === "transfer"
      ? (received ? `Received from ${teamName(x.team)}` : [`Transferred to ${teamName(x.toTeam)}`, x.toBlockId ? [" as ", h("a", { href: `/blocks/${x.toBlockId}` }, x.toBlockId)] : ""])
      : `Released for resale (${x.resoldGpuHours} of ${x.gpuHours} GPU-hours resold, credited ${money(x.credited)}, the operator keeps ${x.resaleFeePercent}%)`;
    const price = x.kind !== "transfer" ? "" : received ? `, for ${money(x.price)} (the fee above is what the holder had paid for these hours)` : `, price ${money(x.price)}`;
    return h("li", {}, what, `: ${x.gpuHours} GPU-hours from ${when(x.from)} to ${when(x.until)}`, price);
  }))];
}

// eventTable lists events, with their subject when they are about
// several things.
export function eventTable(caption, events, subjects) {
  if (events.length === 0) return h("p", {}, "No events.");
  return scroller("Events", h("table", { id: "events" }, h("caption", {}, caption),
    h("thead", {}, h("tr", {}, ["Time", ...(subjects ? ["Subject"] : []), "Event", "Details"].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, events.map((e) => h("tr", {}, h("th", { scope: "row" }, when(e.time)),
      subjects ? h("td", {}, e.subject) : null, h("td", {}, e.type),
      h("td", {}, Object.entries(e.data || {}).map(([k, v]) => `${k}: ${short(typeof v === "object" ? JSON.stringify(v) : String(v))}`).join(", ")))))));
}

// short cuts a long value (an offering id) to what a reader needs.
function short(v) { return v.length > 32 ? `${v.slice(0, 16)}…` : v; }

export function fact(k, v) { return [h("dt", {}, k), h("dd", {}, v)]; }

async function cancel(b, c) {
  try {
    const { refund } = await get(`/v1/blocks/${b.id}/cancel-quote`);
    const ok = await confirmDialog(`${b.state === "active" ? "Release" : "Cancel"} ${b.name || b.id}?`, [
      ["Block", `${b.instanceCount} × ${b.instanceType} in ${b.zone}`], ["From", when(b.startTime)], ["To", when(b.endTime)],
      ["Paid", money(c.net)], ["Refund", money(refund)], ["Net after", money(c.less(refund))]], `Cancel and refund ${money(refund)}`);
    if (!ok) return;
    const done = await post(`/v1/blocks/${b.id}/cancel`);
    toast(`Block ${done.id} is ${done.state}; refunded ${money(refund)}.`, "ok");
    navigate(`/blocks/${b.id}`);
  } catch (err) {
    toast(err.message, "error");
  }
}

async function extend(b, hours) {
  try {
    const { offerings } = await get(`/v1/blocks/${b.id}/extension-offerings`, { durationHours: hours });
    if (offerings.length === 0) { toast(`No room to extend ${b.id} by ${hours} hours.`, "error"); return; }
    const o = offerings[0];
    const ok = await confirmDialog(`Extend ${b.name || b.id} by ${o.durationHours} hours?`, [
      ["New end", when(o.endTime)], ["Fee", money(o.upfrontFee)], ["On demand", money(o.onDemandFee)]], `Extend for ${money(o.upfrontFee)}`);
    if (!ok) return;
    await post(`/v1/blocks/${b.id}/extensions`, { offeringId: o.offeringId });
    toast(`Block ${b.id} now ends ${when(o.endTime)}.`, "ok");
    navigate(`/blocks/${b.id}`);
  } catch (err) {
    toast(err.message, "error");
  }
}

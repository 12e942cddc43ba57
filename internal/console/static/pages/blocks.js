// Blocks and plans: each block's state, a live countdown, capacity,
// placements and events; cancel and extend, with the refund or the fee
// shown before confirming.
import { get, post, serverNow } from "../api.js";
import { h, money, when, scroller, confirmDialog, toast, span } from "../dom.js";
import { navigate, onLeave, session, teamName } from "../app.js";

export async function blocksPage(root, id) {
  const [{ blocks }, { plans }] = await Promise.all([get("/v1/blocks"), get("/v1/plans")]);
  blocks.sort((a, b) => Date.parse(a.startTime) - Date.parse(b.startTime));
  const detail = h("section", { id: "block-detail", "aria-label": "Block" });
  root.replaceChildren(
    scroller("Blocks", blockTable(blocks)),
    detail,
    h("h2", {}, "Training plans"),
    plans.length ? scroller("Training plans", planTable(plans)) : h("p", {}, "No training plans yet."));
  if (id) await showBlock(detail, id);
  // Refresh the list as the clock moves blocks along.
  const timer = setInterval(async () => {
    try {
      const fresh = (await get("/v1/blocks")).blocks;
      for (const b of fresh) {
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

function blockTable(blocks) {
  if (blocks.length === 0) return h("p", {}, "No blocks yet: ", h("a", { href: "/find" }, "find capacity"), ".");
  const admin = session.user.role === "admin";
  return h("table", { class: "compact" },
    h("caption", {}, admin ? "Every team's blocks" : "Your team's blocks"),
    h("thead", {}, h("tr", {}, ["Block", ...(admin ? ["Team"] : []), "Shape", "Zone", "State", "Time left", "Start", "End", "Fee"].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, blocks.map((b) => h("tr", {},
      h("th", { scope: "row" }, h("a", { href: `/blocks/${b.id}` }, b.name || b.id)), admin ? h("td", {}, teamName(b.team)) : null,
      h("td", {}, `${b.instanceCount} × ${b.instanceType}`), h("td", {}, b.zone),
      h("td", { dataset: { stateOf: b.id } }, b.state),
      h("td", { dataset: { leftOf: b.id } }, countdown(b)),
      h("td", {}, when(b.startTime)), h("td", {}, when(b.endTime)), h("td", { class: "num" }, money(b.upfrontFee))))));
}

function planTable(plans) {
  return h("table", {},
    h("caption", {}, "Training plans and their segments"),
    h("thead", {}, h("tr", {}, ["Plan", "State", "Segments", "Total", "Available", "In use", "Unhealthy", "Fee"].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, plans.map((p) => h("tr", {},
      h("th", { scope: "row" }, p.name || p.id), h("td", {}, p.state),
      h("td", {}, h("ul", { class: "plain" }, p.segments.map((s) => h("li", {}, h("a", { href: `/blocks/${s.blockId}` }, `${s.instanceCount} × ${s.instanceType}`), ` ${when(s.startTime)} – ${when(s.endTime)} (${s.state})`)))),
      h("td", {}, String(p.total)), h("td", {}, String(p.available)), h("td", {}, String(p.inUse)), h("td", {}, String(p.unhealthy)),
      h("td", { class: "num" }, money(p.upfrontFee))))));
}

async function showBlock(root, id) {
  const [b, status, events] = await Promise.all([get(`/v1/blocks/${id}`), get(`/v1/blocks/${id}/status`), blockEvents(id)]);
  const live = ["payment-pending", "scheduled", "active"].includes(b.state) && session.user.role !== "viewer";
  const hoursIn = h("input", { id: "extend-hours", type: "number", min: "1", value: "1" });
  root.replaceChildren(
    h("h2", { id: "block-title", tabindex: "-1" }, `${b.name || b.id}`),
    h("dl", { class: "facts" },
      fact("Id", b.id), fact("State", h("span", { id: "block-state" }, b.state)), fact("Time left", h("span", { id: "block-left" }, countdown(b))),
      fact("Shape", `${b.instanceCount} × ${b.instanceType} in ${b.zone}`), fact("Start", when(b.startTime)), fact("End", when(b.endTime)),
      fact("Fee", money(b.upfrontFee)),
      fact("Capacity", `${status.totalCapacity} total, ${status.availableCapacity} available, ${status.unavailableCapacity} unavailable${status.degraded ? " (degraded)" : ""}`),
      fact("Placement", status.placementFinal ? "final" : `may still move until ${when(status.lockInTime)}`)),
    h("h3", {}, "Placements"),
    status.placements.length ? h("ul", { class: "plain" }, status.placements.map((p) => h("li", {}, `${p.node}: GPUs ${p.gpus.join(", ")}`))) : h("p", {}, "None yet."),
    live ? h("div", { class: "actions" },
      h("button", { type: "button", id: "cancel-block", class: "danger", onclick: () => cancel(b) }, b.state === "active" ? "Release early…" : "Cancel…"),
      h("label", { for: "extend-hours" }, "Extend by (hours)"), hoursIn,
      h("button", { type: "button", id: "extend-block", onclick: () => extend(b, hoursIn.value) }, "Extend…")) : null,
    h("h3", {}, "Events"),
    events.length ? scroller("Events", h("table", {}, h("caption", {}, "What happened to this block"),
      h("thead", {}, h("tr", {}, ["Time", "Event", "Details"].map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, events.map((e) => h("tr", {}, h("th", { scope: "row" }, when(e.time)), h("td", {}, e.type),
        h("td", {}, Object.entries(e.data).map(([k, v]) => `${k}: ${short(typeof v === "object" ? JSON.stringify(v) : String(v))}`).join(", "))))))) : h("p", {}, "No events."));
}

// short cuts a long value (an offering id) to what a reader needs.
function short(v) { return v.length > 32 ? `${v.slice(0, 16)}…` : v; }

function fact(k, v) { return [h("dt", {}, k), h("dd", {}, v)]; }

// blockEvents reads the team's events and keeps the block's.
async function blockEvents(id) {
  const out = [];
  let after = "";
  for (let page = 0; page < 20; page++) {
    const r = await get("/v1/events", { after });
    out.push(...r.events.filter((e) => e.subject === id));
    if (r.events.length === 0 || r.next === after) break;
    after = r.next;
  }
  return out;
}

async function cancel(b) {
  try {
    const { refund } = await get(`/v1/blocks/${b.id}/cancel-quote`);
    const ok = await confirmDialog(`${b.state === "active" ? "Release" : "Cancel"} ${b.name || b.id}?`, [
      ["Block", `${b.instanceCount} × ${b.instanceType} in ${b.zone}`], ["From", when(b.startTime)], ["To", when(b.endTime)],
      ["Paid", money(b.upfrontFee)], ["Refund", money(refund)]], `Cancel and refund ${money(refund)}`);
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


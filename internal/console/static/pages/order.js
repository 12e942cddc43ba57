// Standing orders: the list (on the blocks page) and an order's own page
// with what it waits for, the block it bought, its events, and cancel.
// The URL names an order by id or by name.
import { get, post } from "../api.js";
import { h, money, when, confirmDialog, toast } from "../dom.js";
import { navigate, session, setTitle, teamName } from "../app.js";
import { kinds, resolve, eventsOf } from "../things.js";
import { eventTable, fact } from "./block.js";

// orderTable lists orders.
export function orderTable(orders, admin) {
  if (orders.length === 0) return h("p", {}, "No order matches these filters.");
  return h("table", { id: "orders-list" },
    h("caption", {}, "Orders waiting for capacity: told when it fits, or bought within a fee"),
    h("thead", {}, h("tr", {}, ["Order", ...(admin ? ["Team"] : []), "State", "Mode", "Wants", "Between", "Most fee", "Block"].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, orders.map((o) => h("tr", {},
      h("th", { scope: "row" }, h("a", { href: `/orders/${o.id}` }, o.name || o.id)), admin ? h("td", {}, teamName(o.team)) : null,
      h("td", {}, o.state), h("td", {}, o.mode), h("td", {}, wants(o)), h("td", { class: "time" }, `${when(o.startAfter)} – ${when(o.endBefore)}`),
      h("td", { class: "num" }, o.maxFee ? money(o.maxFee) : "—"), h("td", {}, o.blockId ? h("a", { href: `/blocks/${o.blockId}` }, o.blockId) : "—")))));
}

function wants(o) { return `${o.instanceCount} × ${o.instanceType} for ${o.durationHours} h${o.zone ? ` in ${o.zone}` : ""}`; }

export async function orderPage(root, ref) {
  const id = await resolve(kinds.order, ref);
  const [o, events] = await Promise.all([get(`/v1/orders/${encodeURIComponent(id)}`), eventsOf([id])]);
  setTitle(root, `Order ${o.name || o.id}`);
  const live = o.state === "open" && session.user.role !== "viewer";
  root.replaceChildren(
    h("section", { id: "order-detail", "aria-label": "Order" },
      h("p", { class: "crumbs" }, h("a", { href: "/blocks" }, "All blocks, plans and orders")),
      h("dl", { class: "facts" },
        fact("Id", o.id), fact("Name", o.name || "—"), fact("Team", teamName(o.team)), fact("State", h("span", { id: "order-state" }, o.state)),
        o.reason ? fact("Waiting because", o.reason) : null,
        fact("Mode", o.mode === "buy" ? "buy the block when it fits" : "tell when it fits"), fact("Wants", wants(o)),
        fact("Between", `${when(o.startAfter)} and ${when(o.endBefore)}`), fact("Until", when(o.deadline)),
        fact("Most fee", o.maxFee ? money(o.maxFee) : "—"),
        o.blockId ? fact("Block", h("a", { href: `/blocks/${o.blockId}` }, o.blockId)) : null,
        fact("Made", when(o.createdAt))),
      live ? h("div", { class: "actions" }, h("button", { type: "button", id: "cancel-order", class: "danger", onclick: () => cancel(o) }, "Cancel…")) : null,
      h("h2", {}, "Events"),
      eventTable("What happened to this order", events, false)));
}

// cancel says what cancelling costs before it is done: an order holds no
// money, so nothing is charged or refunded.
async function cancel(o) {
  try {
    const ok = await confirmDialog(`Cancel ${o.name || o.id}?`, [["Order", wants(o)], ["Money", "nothing: an order holds no money until it buys"]], "Cancel the order");
    if (!ok) return;
    await post(`/v1/orders/${o.id}/cancel`);
    toast(`Order ${o.id} is cancelled.`, "ok");
    navigate(`/orders/${o.id}`);
  } catch (err) {
    toast(err.message, "error");
  }
}

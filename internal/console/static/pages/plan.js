// A training plan's own page: its state and instances, its segments (each
// a block with a page of its own), what its blocks cost (from the
// ledger), its jobs and the events of the plan and its segments. The URL
// names the plan by id or by name.
import { get } from "../api.js";
import { h, money, when, scroller } from "../dom.js";
import { setTitle, teamName } from "../app.js";
import { kinds, resolve, eventsOf, cashBySubject, cashOf } from "../things.js";
import { eventTable, fact } from "./block.js";

export async function planPage(root, ref) {
  const id = await resolve(kinds.plan, ref);
  const p = await get(`/v1/plans/${encodeURIComponent(id)}`);
  const blockIds = p.segments.map((s) => s.blockId);
  const [events, cash, { jobs }] = await Promise.all([eventsOf([p.id, ...blockIds]), cashBySubject(), get("/v1/jobs")]);
  setTitle(root, `Plan ${p.name || p.id}`);
  const c = cashOf(cash, blockIds, p.upfrontFee.currency);
  const mine = jobs.filter((j) => j.planId === p.id);
  root.replaceChildren(
    h("section", { id: "plan-detail", "aria-label": "Training plan" },
      h("p", { class: "crumbs" }, h("a", { href: "/blocks" }, "All blocks and plans")),
      h("dl", { class: "facts" },
        fact("Id", p.id), fact("Name", p.name || "—"), fact("Team", teamName(p.team)), fact("Target", p.target),
        fact("State", h("span", { id: "plan-state" }, p.state)),
        fact("Instances", `${p.total} in the current or next segment, ${p.available} available, ${p.inUse} in use, ${p.unhealthy} unhealthy`),
        fact("Bought", when(p.createdAt))),
      h("h2", {}, "Money"),
      h("dl", { class: "facts", id: "plan-money" },
        fact("Fee", money(p.upfrontFee)), fact("Charged", money(c.charged)), fact("Refunds", money(c.refunds)),
        fact("Credits", money(c.credits)), fact("Net", h("strong", {}, money(c.net)))),
      h("p", { class: "note" }, "The ledger's lines about the plan's blocks, summed; net is charged less refunds and credits."),
      h("h2", {}, "Segments"),
      scroller("Segments", h("table", { id: "plan-segments" }, h("caption", {}, "The plan's blocks, in time order; gaps between them are not reserved"),
        h("thead", {}, h("tr", {}, ["Block", "Shape", "Zone", "Start", "End", "State", "Net"].map((x) => h("th", { scope: "col" }, x)))),
        h("tbody", {}, p.segments.map((s) => h("tr", {},
          h("th", { scope: "row" }, h("a", { href: `/blocks/${s.blockId}` }, s.blockId)),
          h("td", {}, `${s.instanceCount} × ${s.instanceType}`), h("td", {}, s.zone), h("td", {}, when(s.startTime)), h("td", {}, when(s.endTime)),
          h("td", {}, s.state), h("td", { class: "num" }, money(cashOf(cash, [s.blockId], p.upfrontFee.currency).net))))))),
      h("h2", {}, "Jobs"),
      mine.length ? h("ul", { class: "plain", id: "plan-jobs" }, mine.map((j) => h("li", {}, h("a", { href: `/jobs/${j.id}` }, j.name || j.id), ` (${j.state}, ${j.restarts} restarts)`)))
        : h("p", {}, "No job runs on this plan."),
      h("h2", {}, "Events"),
      eventTable("What happened to the plan and its segments", events, true)));
}

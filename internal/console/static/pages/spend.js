// Spend and budget: spend per month and instance type against the budget:
// what each team was charged, refunded and credited, and what the hours it
// held cost against on demand (hours handed on take their cost with them
// to the team that received them); the quota in use. A member sees its own
// team; an administrator every team.
import { get } from "../api.js";
import { h, money, scroller, table } from "../dom.js";
import { session, teamName } from "../app.js";

export async function spendPage(root) {
  const admin = session.user.role === "admin";
  const [spend, { teams }, { blocks }] = await Promise.all([get("/v1/spend"), get("/v1/teams"), get("/v1/blocks")]);
  const shown = admin ? teams : teams.filter((t) => t.id === session.user.team);
  const ledgers = await Promise.all(shown.map((t) => get(`/v1/teams/${t.id}/ledger`)));
  const quotas = await Promise.all(shown.map((t) => get(`/v1/teams/${t.id}/quotas`)));
  const held = (team) => blocks.filter((b) => b.team === team && ["payment-pending", "scheduled", "active"].includes(b.state))
    .reduce((n, b) => n + b.instanceCount, 0);

  const budgetRows = shown.map((t, i) => {
    const l = ledgers[i];
    const spent = Number(l.spent.amount);
    const budget = l.budget && l.budget.period !== "none" ? Number(l.budget.amount.amount) : 0;
    const meter = budget > 0 ? h("meter", { min: "0", max: String(budget), value: String(Math.min(spent, budget)), "aria-label": `Spent of ${t.name}'s budget` }) : null;
    return [t.name, money(l.spent), budget > 0 ? `${money(l.budget.amount)} per ${l.budget.period === "month" ? "month" : "all time"}` : "no budget",
      budget > 0 ? h("span", {}, meter, ` ${Math.round((spent / budget) * 100)}%`) : "—"];
  });
  const quotaRows = shown.flatMap((t, i) => {
    const qs = quotas[i].quotas.length ? quotas[i].quotas : [{ maxInstancesHeld: 0, maxInstancesPerBlock: 0, maxDurationHours: 0, maxLeadDays: 0 }];
    return qs.map((q) => [`${t.name}${q.instanceType ? ` (${q.instanceType})` : ""}`, `${held(t.id)} of ${q.maxInstancesHeld || 256}`,
      String(q.maxInstancesPerBlock || 64), q.maxDurationHours ? `${q.maxDurationHours} h` : "operator's limit", q.maxLeadDays ? `${q.maxLeadDays} days` : "operator's limit"]);
  });
  const spendRows = spend.rows.map((r) => [r.month, ...(admin ? [teamName(r.team)] : []), r.instanceType,
    money(r.gross), money(r.refunds), money(r.credits), money(r.net), money(r.spent), money(r.onDemand), money(r.savings)]);

  root.replaceChildren(
    h("p", {}, admin ? "Every team's spend: you are an administrator." : `Your team's spend (${teamName(session.user.team)}).`),
    h("h2", {}, "Budget"),
    scroller("Budget", table("Spent in the current budget period", ["Team", "Spent", "Budget", "Used"], budgetRows)),
    h("h2", {}, "Spend per month and type"),
    spendRows.length ? scroller("Spend", table(`Charged ${money(spend.total.gross)}, refunded ${money(spend.total.refunds)}, credited ${money(spend.total.credits)}: `
      + `net ${money(spend.total.net)}. The hours held cost ${money(spend.total.spent)} against ${money(spend.total.onDemand)} on demand, saving ${money(spend.total.savings)}`,
      ["Month", ...(admin ? ["Team"] : []), "Type", "Charged", "Refunds", "Credits", "Net", "Hours held cost", "On demand", "Saving"], spendRows)) : h("p", {}, "Nothing spent yet."),
    h("h2", {}, "Quota in use"),
    scroller("Quota", table("Instances held against the quota", ["Team", "Instances held", "Per block", "Longest block", "Lead time"], quotaRows)));
}

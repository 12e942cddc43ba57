// What every thing's page reads: the id a name in the URL stands for,
// the thing's events, and the money the ledger moved for it.
import { get } from "./api.js";
import { h, when } from "./dom.js";
import { session } from "./app.js";

// kinds say how a thing is named in URLs and looked up by name.
export const kinds = {
  block: { noun: "block", prefix: "cb-", list: "/v1/blocks", key: "blocks", page: "/blocks" },
  plan: { noun: "plan", prefix: "tp-", list: "/v1/plans", key: "plans", page: "/plans" },
  job: { noun: "job", prefix: "job-", list: "/v1/jobs", key: "jobs", page: "/jobs" },
  series: { noun: "series", plural: "series", prefix: "cs-", list: "/v1/series", key: "series", page: "/series" },
  order: { noun: "order", prefix: "ord-", list: "/v1/orders", key: "orders", page: "/orders" },
};

// NotResolved is a name that no thing has, or that several have; its
// element says so and links to what to open instead.
export class NotResolved extends Error {
  constructor(message, element) {
    super(message);
    this.element = element;
  }
}

// resolve returns the id that ref stands for, as the CLI reads its
// arguments: ref itself when it has the kind's id prefix, else the id of
// the one thing of that kind named ref among those the caller sees (its
// team's; every team's for an admin).
export async function resolve(kind, ref) {
  if (ref.startsWith(kind.prefix)) return ref;
  const things = (await get(kind.list))[kind.key];
  const found = things.filter((t) => t.name === ref);
  if (found.length === 1) return found[0].id;
  if (found.length === 0) {
    const msg = `No ${kind.noun} is named “${ref}”. An id starts with ${kind.prefix}; the list shows ids and names.`;
    throw new NotResolved(msg, h("div", { role: "alert" }, h("p", { class: "error" }, msg),
      h("p", {}, h("a", { href: kind.page }, `All ${kind.plural || `${kind.noun}s`}`))));
  }
  const msg = `${found.length} ${kind.plural || `${kind.noun}s`} are named “${ref}”: open one by its id.`;
  throw new NotResolved(msg, h("div", { role: "alert" }, h("p", { class: "error" }, msg),
    h("ul", { class: "plain", id: "ambiguous" }, found.map((t) => h("li", {},
      h("a", { href: `${kind.page}/${t.id}` }, t.id), ` (${t.state}, ${startOf(t) ? `from ${when(startOf(t))}` : `made ${when(t.createdAt)}`})`)))));
}

// startOf is when a thing starts: a block's start, a plan's first
// segment's, a series' first occurrence's.
export function startOf(t) { return t.startTime || t.segments?.[0]?.startTime || t.occurrences?.[0]?.startTime || ""; }

// eventsOf reads the caller's events and keeps those about the subjects
// given, oldest first.
export async function eventsOf(subjects) {
  const want = new Set(subjects);
  const out = [];
  let after = "";
  for (let page = 0; page < 20; page++) {
    const r = await get("/v1/events", { after });
    out.push(...r.events.filter((e) => want.has(e.subject)));
    if (r.events.length === 0 || r.next === after) break;
    after = r.next;
  }
  return out;
}

// Amounts are summed exactly, as integers of millionths: the API's
// amounts are decimal strings, never floats.
const scale = 6;

function units(amount) {
  const neg = amount.startsWith("-");
  const [whole, frac = ""] = amount.replace(/^-/, "").split(".");
  const v = BigInt(whole || "0") * 10n ** BigInt(scale) + BigInt((frac + "0".repeat(scale)).slice(0, scale));
  return neg ? -v : v;
}

function decimal(v) {
  const neg = v < 0n;
  const s = (neg ? -v : v).toString().padStart(scale + 1, "0");
  return `${neg ? "-" : ""}${s.slice(0, -scale)}.${s.slice(-scale)}`;
}

// Cash is what the ledger moved for one or more things: charged, refunded,
// credited and the net of them (charged − refunds − credits), as the
// ledger's own totals count them.
export class Cash {
  constructor(currency) {
    this.currency = currency;
    this.v = { charge: 0n, refund: 0n, credit: 0n };
  }
  add(entry) {
    if (!(entry.kind in this.v)) return;
    this.v[entry.kind] += units(entry.amount.amount);
    this.currency = entry.amount.currency || this.currency;
  }
  plus(other) {
    for (const k of Object.keys(this.v)) this.v[k] += other.v[k];
    this.currency = other.currency || this.currency;
    return this;
  }
  m(v) { return { amount: decimal(v), currency: this.currency }; }
  get charged() { return this.m(this.v.charge); }
  get refunds() { return this.m(this.v.refund); }
  get credits() { return this.m(this.v.credit); }
  get net() { return this.m(this.v.charge - this.v.refund - this.v.credit); }
  // less is the net once m more is refunded (a quote).
  less(m) { return this.m(this.v.charge - this.v.refund - this.v.credit - units(m.amount)); }
}

// cashBySubject reads the ledgers of the teams the caller sees (its own;
// every team's for an admin) and sums their lines per subject (a block).
// A thing with no line is absent: cashOf answers zero for it.
export async function cashBySubject(currency) {
  const teams = session.user.role === "admin" ? session.teams.map((t) => t.id) : [session.user.team];
  const ledgers = await Promise.all(teams.map((t) => get(`/v1/teams/${encodeURIComponent(t)}/ledger`)));
  const out = new Map();
  for (const l of ledgers) {
    for (const e of l.entries) {
      if (!out.has(e.subject)) out.set(e.subject, new Cash(currency));
      out.get(e.subject).add(e);
    }
  }
  return out;
}

// cashOf is the cash of the subjects given, summed.
export function cashOf(bySubject, subjects, currency) {
  const c = new Cash(currency);
  for (const s of subjects) if (bySubject.has(s)) c.plus(bySubject.get(s));
  return c;
}

// Handing a block's hours on, from its page: release them for resale,
// transfer them to another team (an administrator, by the fleet's default
// policy), or lend the block's idle GPUs to backfill. Each says first
// what moves and what it is paid or credited, from the hour the server
// will hand on (the start of a block not yet started, else the next whole
// hour), as the service computes it.
import { post, serverNow } from "../api.js";
import { h, money, when, confirmDialog, toast } from "../dom.js";
import { navigate, session, teamName } from "../app.js";
import { Cash } from "../things.js";

// handOnFrom is the first hour handed on now, or null when none is left.
function handOnFrom(b) {
  const now = serverNow();
  const start = Date.parse(b.startTime), end = Date.parse(b.endTime);
  if (b.state !== "scheduled" && b.state !== "active") return null;
  if (b.state === "scheduled" && now < start) return start;
  const next = Math.floor(now / 3600e3) * 3600e3 + 3600e3;
  return next < end ? next : null;
}

// share is the part of the block's fee for its hours from h: what the
// operator was paid for them (the service's feeShare, in whole cents).
function share(b, h) {
  const start = Date.parse(b.startTime), end = Date.parse(b.endTime);
  const c = new Cash(b.upfrontFee.currency);
  const cents = Math.floor(Math.round(Number(b.upfrontFee.amount) * 100) * (end - h) / (end - start));
  c.add({ kind: "charge", amount: { amount: (cents / 100).toFixed(2), currency: b.upfrontFee.currency } });
  return c.charged;
}

// handedOn reports whether the block handed its hours on: it keeps only
// hours already paid for, and can be neither cancelled nor extended.
export function handedOn(b) { return (b.handovers || []).some((x) => x.blockId === b.id && x.toBlockId !== b.id); }

// handOnActions are the block's hand-on controls; none for a plan's
// segment (handed on with its plan only) or a block with no whole hour
// left.
export function handOnActions(b) {
  if (b.planId || handOnFrom(b) === null) return [];
  const out = [h("button", { type: "button", id: "release-block", onclick: () => release(b) }, "Release for resale…"),
    h("button", { type: "button", id: "lend-block", "aria-pressed": String(Boolean(b.lending)), onclick: () => lend(b) }, b.lending ? "Stop lending…" : "Lend idle GPUs…")];
  if (session.user.role === "admin") {
    const others = session.teams.filter((t) => t.id !== b.team);
    if (others.length) {
      const team = h("select", { id: "transfer-team" }, others.map((t) => h("option", { value: t.id }, t.name)));
      const price = h("input", { id: "transfer-price", type: "text", inputmode: "decimal", value: "0.00", size: "8" });
      out.push(h("label", { for: "transfer-team" }, "Transfer to"), team, h("label", { for: "transfer-price" }, "for"), price,
        h("button", { type: "button", id: "transfer-block", onclick: () => transfer(b, team.value, price.value.trim()) }, "Transfer…"));
    }
  }
  return out;
}

// terms are the lines every hand-on repeats: what leaves the block.
function terms(b, from) {
  const whole = from === Date.parse(b.startTime);
  return [["Hours handed on", `${when(from)} to ${when(b.endTime)}`],
    ["The block", whole ? "is cancelled: it keeps no hour" : `keeps its hours until ${when(from)} and ends then`],
    ["Worth", `${money(share(b, from))} of the ${money(b.upfrontFee)} paid`],
    ["Refund", `none: the block can no longer be cancelled`]];
}

async function release(b) {
  const from = handOnFrom(b);
  const ok = await confirmDialog(`Release ${b.name || b.id} for resale?`, [...terms(b, from),
    ["Credit", `up to ${money(share(b, from))}, for the hours bought again, less the operator's resale fee; nothing if none are`]], "Release for resale");
  if (ok) await act(b, "release", {}, (r) => `Block ${r.block.id} is ${r.block.state}; its hours from ${when(r.handover.from)} are for sale.`);
}

async function transfer(b, team, price) {
  if (!/^\d+(\.\d{1,2})?$/.test(price)) { toast("The price is an amount such as 500.00.", "error"); return; }
  const from = handOnFrom(b);
  const p = { amount: Number(price).toFixed(2), currency: b.upfrontFee.currency };
  const ok = await confirmDialog(`Transfer ${b.name || b.id} to ${teamName(team)}?`, [...terms(b, from),
    ["Price", `${money(p)}, charged to ${teamName(team)} and credited to ${teamName(b.team)}`]], `Transfer for ${money(p)}`);
  if (ok) await act(b, "transfer", { team, price: p.amount }, (r) => `Block ${r.block.id} is ${r.block.state}; ${teamName(team)} received ${r.received?.id}.`);
}

async function lend(b) {
  const on = !b.lending;
  const ok = await confirmDialog(on ? `Lend the idle GPUs of ${b.name || b.id}?` : `Stop lending ${b.name || b.id}?`, on ? [
    ["While", "no job of yours runs on them: backfill (preemptible jobs) may"],
    ["Credit", "a share of the spot price of each GPU-hour backfill runs there"],
    ["Your jobs", "start once the backfill there is gone, within the fleet's notice"], ["Refund", "none: the block stays yours and paid"]] : [
    ["Backfill", "no more is placed on the block's GPUs"], ["Credit", "what was lent so far stays credited"]], on ? "Lend the GPUs" : "Stop lending");
  if (ok) await act(b, "lending", { enabled: on }, (r) => `Block ${r.id} ${r.lending ? "lends" : "no longer lends"} its idle GPUs.`);
}

// act posts one hand-on and shows the block again.
async function act(b, what, body, say) {
  try {
    const r = await post(`/v1/blocks/${b.id}/${what}`, body);
    toast(say(r), "ok");
    navigate(`/blocks/${b.id}`);
  } catch (err) {
    toast(err.message, "error");
  }
}

// Jobs: the list, filtered by state (kept in the URL); each job's own
// page with its state, what it runs on, its events, the live log of each
// instance, and stop, confirmed first. The URL names a job by id or name.
import { get, post } from "../api.js";
import { h, when, scroller, confirmDialog, toast } from "../dom.js";
import { navigate, onLeave, session, setTitle, teamName } from "../app.js";
import { filteredList } from "../lists.js";
import { kinds, resolve, eventsOf } from "../things.js";
import { eventTable, fact } from "./block.js";

const jobStates = ["pending", "running", "interrupted", "succeeded", "failed", "stopped"];
const runningStates = ["pending", "running", "interrupted"];

export async function jobsPage(root) {
  const { jobs } = await get("/v1/jobs");
  root.replaceChildren(
    jobs.length ? filteredList({ label: "Filter jobs", noun: "jobs", rows: jobs, draw: jobTable,
      fields: [{ key: "state", label: "State", options: [["", "All states"], ...jobStates.map((x) => [x, x])], match: (j, v) => j.state === v }] }) :
      h("p", {}, "No jobs yet: ", h("code", {}, "capblock jobs run"), " starts one on a block."));
}

function jobTable(jobs) {
  if (jobs.length === 0) return h("p", {}, "No job matches these filters.");
  return scroller("Jobs", h("table", { class: "compact", id: "jobs-list" },
    h("caption", {}, "Your team's jobs"),
    h("thead", {}, h("tr", {}, ["Job", "State", "Restarts", "Instances", "Runs on", "Started", "Reason"].map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, jobs.map((j) => h("tr", {},
      h("th", { scope: "row" }, h("a", { href: `/jobs/${j.id}` }, j.name || j.id)),
      h("td", {}, j.state), h("td", {}, `${j.restarts} of ${j.maxRestarts}`), h("td", {}, String(j.instanceCount)),
      h("td", {}, runsOn(j)), h("td", {}, j.startedAt ? when(j.startedAt) : "—"), h("td", {}, j.reason || ""))))));
}

// runsOn links to the plan or block a job runs on; a preemptible job runs
// on backfill.
function runsOn(j) {
  if (j.planId) return [h("a", { href: `/plans/${j.planId}` }, j.planId), j.blockId ? [" (", h("a", { href: `/blocks/${j.blockId}` }, j.blockId), ")"] : ""];
  if (j.blockId) return h("a", { href: `/blocks/${j.blockId}` }, j.blockId);
  return `backfill${j.instanceType ? ` (${j.instanceType})` : ""}`;
}

export async function jobPage(root, ref) {
  const id = await resolve(kinds.job, ref);
  const [j, events] = await Promise.all([get(`/v1/jobs/${encodeURIComponent(id)}`), eventsOf([id])]);
  setTitle(root, `Job ${j.name || j.id}`);
  const logs = h("section", { id: "job-logs", "aria-label": "Job logs" });
  const live = runningStates.includes(j.state) && session.user.role !== "viewer";
  root.replaceChildren(
    h("section", { id: "job-detail", "aria-label": "Job" },
      h("p", { class: "crumbs" }, h("a", { href: "/jobs" }, "All jobs")),
      h("dl", { class: "facts" },
        fact("Id", j.id), fact("Name", j.name || "—"), fact("Team", teamName(j.team)),
        fact("State", h("span", { id: "job-state" }, j.state)), j.reason ? fact("Reason", j.reason) : null,
        fact("Runs on", runsOn(j)), fact("Instances", String(j.instanceCount)), fact("Restarts", `${j.restarts} of ${j.maxRestarts}`),
        fact("Command", h("code", {}, j.command.map(shellWord).join(" "))),
        fact("Made", when(j.createdAt)), j.startedAt ? fact("Started", when(j.startedAt)) : null, j.endedAt ? fact("Ended", when(j.endedAt)) : null),
      live ? h("div", { class: "actions" }, h("button", { type: "button", id: "stop-job", class: "danger", onclick: () => stop(j) }, "Stop…")) : null,
      h("h2", {}, "Events"),
      eventTable("What happened to this job", events, false),
      logs));
  showLogs(logs, j);
}

// shellWord quotes an argument as a shell would need it.
function shellWord(a) { return /^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replaceAll("'", "'\\''")}'`; }

// stop says what stopping costs before it is done: the GPUs stay the
// block's, paid for; nothing is refunded.
async function stop(j) {
  try {
    const ok = await confirmDialog(`Stop ${j.name || j.id}?`, [
      ["Job", `${j.instanceCount} instance${j.instanceCount === 1 ? "" : "s"}, ${j.state}`],
      ["Stopping", "SIGTERM, then SIGKILL after the grace period; no restart"],
      ["Money", j.preemptible ? "backfill is charged for the GPU-hours used until it stops" : "nothing is refunded: the GPUs stay the block's, already paid for"]], "Stop the job");
    if (!ok) return;
    const done = await post(`/v1/jobs/${j.id}/stop`);
    toast(`Job ${done.id} is ${done.state}.`, "ok");
    navigate(`/jobs/${j.id}`);
  } catch (err) {
    toast(err.message, "error");
  }
}

function showLogs(root, job) {
  const sel = h("select", { id: "instance" }, Array.from({ length: Math.max(1, job.instanceCount) }, (_, i) => h("option", { value: String(i) }, `instance ${i}`)));
  const pre = h("pre", { class: "log", tabindex: "0", "aria-label": "Log output" });
  let offset = 0, timer = 0;
  const follow = async () => {
    try {
      const r = await get(`/v1/jobs/${job.id}/logs`, { instance: sel.value, offset });
      if (r.data) {
        pre.append(r.data);
        pre.scrollTop = pre.scrollHeight;
      }
      offset = r.next;
    } catch (err) {
      pre.append(`\n[${err.message}]\n`);
      clearInterval(timer);
    }
  };
  sel.addEventListener("change", () => { offset = 0; pre.textContent = ""; follow(); });
  root.replaceChildren(h("h2", {}, "Logs"), h("label", { for: "instance" }, "Instance "), sel, pre);
  follow();
  timer = setInterval(follow, 2000);
  onLeave(() => clearInterval(timer));
}

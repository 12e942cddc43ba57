// Jobs: their state and restarts, and the live log of each instance.
import { get } from "../api.js";
import { h, when, scroller } from "../dom.js";
import { onLeave } from "../app.js";
import { filteredList } from "../lists.js";

const jobStates = ["pending", "running", "interrupted", "succeeded", "failed", "stopped"];

export async function jobsPage(root, id) {
  const { jobs } = await get("/v1/jobs");
  const logs = h("section", { id: "job-logs", "aria-label": "Job logs" });
  root.replaceChildren(
    jobs.length ? filteredList({ label: "Filter jobs", noun: "jobs", rows: jobs, draw: jobTable,
      fields: [{ key: "state", label: "State", options: [["", "All states"], ...jobStates.map((x) => [x, x])], match: (j, v) => j.state === v }] }) :
      h("p", {}, "No jobs yet: ", h("code", {}, "capblock jobs run"), " starts one on a block."),
    logs);
  const job = jobs.find((j) => j.id === id);
  if (job) showLogs(logs, job);
}

function jobTable(jobs) {
  if (jobs.length === 0) return h("p", {}, "No job matches these filters.");
  return scroller("Jobs", h("table", { class: "compact" },
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
  root.replaceChildren(h("h2", {}, `Logs of ${job.name || job.id}`), h("label", { for: "instance" }, "Instance "), sel, pre);
  follow();
  timer = setInterval(follow, 2000);
  onLeave(() => clearInterval(timer));
}

// Jobs: their state and restarts, and the live log of each instance.
import { get } from "../api.js";
import { h, when, scroller } from "../dom.js";
import { onLeave } from "../app.js";

export async function jobsPage(root, id) {
  const { jobs } = await get("/v1/jobs");
  const logs = h("section", { id: "job-logs", "aria-label": "Job logs" });
  root.replaceChildren(
    jobs.length ? scroller("Jobs", h("table", { class: "compact" },
      h("caption", {}, "Your team's jobs"),
      h("thead", {}, h("tr", {}, ["Job", "State", "Restarts", "Instances", "Block", "Started", "Reason"].map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, jobs.map((j) => h("tr", {},
        h("th", { scope: "row" }, h("a", { href: `/jobs/${j.id}` }, j.name || j.id)),
        h("td", {}, j.state), h("td", {}, `${j.restarts} of ${j.maxRestarts}`), h("td", {}, String(j.instanceCount)),
        h("td", {}, h("a", { href: `/blocks/${j.blockId}` }, j.blockId)), h("td", {}, j.startedAt ? when(j.startedAt) : "—"), h("td", {}, j.reason || "")))))) :
      h("p", {}, "No jobs yet: ", h("code", {}, "capblock jobs run"), " starts one on a block."),
    logs);
  const job = jobs.find((j) => j.id === id);
  if (job) showLogs(logs, job);
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

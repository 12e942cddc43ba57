// The console's shell: sign-in, navigation between pages without a
// reload (history API), and the live countdowns every page shares.
import { ApiError, call, clearToken, setToken, token, serverNow } from "./api.js";
import { h, errorBox, span } from "./dom.js";
import { calendarPage } from "./pages/calendar.js";
import { findPage } from "./pages/find.js";
import { blocksPage } from "./pages/blocks.js";
import { blockPage } from "./pages/block.js";
import { planPage } from "./pages/plan.js";
import { seriesPage } from "./pages/series.js";
import { orderPage } from "./pages/order.js";
import { NotResolved } from "./things.js";
import { jobsPage, jobPage } from "./pages/jobs.js";
import { spendPage } from "./pages/spend.js";

// pages are the console's routes; nav is the link of the menu that a
// page belongs to. A block, plan, series, order or job is named in its
// URL by id or by name.
const pages = [
  { path: /^\/(?:calendar)?$/, title: "Fleet calendar", nav: "/calendar", render: calendarPage },
  { path: /^\/find$/, title: "Find capacity", nav: "/find", render: findPage },
  { path: /^\/(?:blocks|plans|series|orders)$/, title: "Blocks and plans", nav: "/blocks", render: blocksPage },
  { path: /^\/blocks\/([^/]+)$/, title: "Block", nav: "/blocks", render: blockPage },
  { path: /^\/plans\/([^/]+)$/, title: "Plan", nav: "/blocks", render: planPage },
  { path: /^\/series\/([^/]+)$/, title: "Series", nav: "/blocks", render: seriesPage },
  { path: /^\/orders\/([^/]+)$/, title: "Order", nav: "/blocks", render: orderPage },
  { path: /^\/jobs$/, title: "Jobs", nav: "/jobs", render: jobsPage },
  { path: /^\/jobs\/([^/]+)$/, title: "Job", nav: "/jobs", render: jobPage },
  { path: /^\/spend$/, title: "Spend and budget", nav: "/spend", render: spendPage },
];

// session is who is signed in (GET /v1/whoami), once known.
export const session = { user: null, teams: [] };

// teamName is a team's name, or its id when it is not known.
export function teamName(id) { return (session.teams.find((t) => t.id === id) || { name: id }).name; }

// stop ends the current page's timers when another page is shown.
let stops = [];
export function onLeave(fn) { stops.push(fn); }

export function navigate(path) {
  history.pushState(null, "", path);
  window.scrollTo(0, 0);
  route();
}

// setTitle names the page in its heading and the tab's title once its
// thing is read (a block's page): root is the page's content, so that a
// page left while it was loading renames nothing.
export function setTitle(root, text) {
  if (!root.isConnected) return;
  const heading = document.querySelector("#main h1");
  if (heading) heading.textContent = text;
  document.title = `${text} · capblock`;
}

async function route() {
  stops.forEach((f) => f());
  stops = [];
  const main = document.getElementById("main");
  const path = location.pathname;
  if (!token()) {
    signIn(main);
    return;
  }
  if (!session.user) {
    try {
      session.user = (await call("GET", "/v1/whoami")).user;
      session.teams = (await call("GET", "/v1/teams")).teams;
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) {
        clearToken();
        signIn(main, "That token is no longer valid: sign in again.");
        return;
      }
      main.replaceChildren(errorBox(err));
      return;
    }
  }
  showWho();
  const page = pages.find((p) => p.path.test(path)) || pages[0];
  const m = path.match(page.path);
  document.title = `${page.title} · capblock`;
  for (const a of document.querySelectorAll("#nav a")) {
    if (a.getAttribute("href") === page.nav) a.setAttribute("aria-current", m && m[1] ? "true" : "page");
    else a.removeAttribute("aria-current");
  }
  const heading = h("h1", { tabindex: "-1" }, page.title);
  const body = h("div", { class: "page" });
  main.replaceChildren(heading, body);
  try {
    await page.render(body, m && m[1] !== undefined ? decodeURIComponent(m[1]) : undefined);
  } catch (err) {
    body.replaceChildren(err instanceof NotResolved ? err.element : errorBox(err));
  }
}

function showWho() {
  const u = session.user;
  document.getElementById("who").textContent = `${u.name} (${u.role}, ${teamName(u.team)})`;
  document.getElementById("signout").hidden = false;
}

function signIn(main, message) {
  document.title = "Sign in · capblock";
  document.getElementById("who").textContent = "";
  document.getElementById("signout").hidden = true;
  const input = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true, spellcheck: "false" });
  const status = h("p", { class: "error", role: "alert" }, message || "");
  const form = h("form", { class: "signin" },
    h("p", {}, "Sign in with an API token (cbt_…). The first administrator's is in admin.token beside the server's database; ",
      h("code", {}, "capblock tokens create"), " makes more. It is kept in this tab only and forgotten when the tab closes."),
    h("label", { for: "token" }, "API token"), input,
    h("button", { type: "submit", class: "primary" }, "Sign in"), status);
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const t = input.value.trim();
    try {
      await call("GET", "/v1/whoami", undefined, t);
      setToken(t);
      session.user = null;
      route();
    } catch (err) {
      status.textContent = err.status === 401 ? "The server does not know that token." : err.message;
    }
  });
  main.replaceChildren(h("h1", {}, "Sign in"), form);
  input.focus();
}

// Links within the console change the page without a reload.
document.addEventListener("click", (e) => {
  const a = e.target.closest("a[href]");
  if (!a || a.target || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  const href = a.getAttribute("href");
  if (!href.startsWith("/") || href.startsWith("/v1/")) return;
  e.preventDefault();
  navigate(href);
  document.querySelector("#main h1")?.focus();
});
window.addEventListener("popstate", route);
document.getElementById("signout").addEventListener("click", () => {
  clearToken();
  session.user = null;
  session.teams = [];
  navigate("/");
});

// Countdowns: every element with data-until counts down to it, each second.
setInterval(() => {
  const now = serverNow();
  for (const el of document.querySelectorAll("[data-until]")) {
    const left = Date.parse(el.dataset.until) - now;
    el.textContent = `${el.dataset.prefix || ""}${span(left)}`;
  }
}, 1000);

route();

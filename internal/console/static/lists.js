// Filters and sort orders of the console's lists, kept in the page's URL
// query (a reload or a shared link shows the same list). Every list uses
// this one implementation.
import { h } from "./dom.js";

// filteredList returns a list with its controls: one select per field,
// whose value is kept in the URL query under the field's key (left out
// while it is the first option, the default). A field either filters
// (match(row, value) keeps a row) or sorts (order[value] compares two
// rows). draw(rows) renders the rows shown; noun names them in the count.
export function filteredList({ label, noun, fields, rows, draw }) {
  const params = new URLSearchParams(location.search);
  const values = {};
  for (const f of fields) {
    const v = params.get(f.key);
    values[f.key] = f.options.some(([o]) => o === v) ? v : f.options[0][0];
  }
  const count = h("p", { class: "count", "aria-live": "polite" });
  const body = h("div", {});
  const update = () => {
    let shown = rows.filter((r) => fields.every((f) => !f.match || values[f.key] === "" || f.match(r, values[f.key])));
    for (const f of fields) if (f.order) shown = [...shown].sort(f.order[values[f.key]]);
    body.replaceChildren(draw(shown));
    count.textContent = `${shown.length} of ${rows.length} ${noun} shown.`;
  };
  const controls = fields.map((f) => {
    const id = `filter-${f.key}`;
    const sel = h("select", { id, name: f.key }, f.options.map(([v, text]) => h("option", { value: v, selected: v === values[f.key] }, text)));
    sel.addEventListener("change", () => {
      values[f.key] = sel.value;
      keep(f.key, sel.value === f.options[0][0] ? "" : sel.value);
      update();
    });
    return h("span", { class: "field" }, h("label", { for: id }, f.label), sel);
  });
  update();
  return h("div", { class: "filtered" },
    h("form", { class: "filters", role: "search", "aria-label": label, onsubmit: (e) => e.preventDefault() }, controls),
    count, body);
}

// keep writes one value into the URL query, replacing the history entry:
// a filter is the page's state, not a step back.
function keep(key, value) {
  const q = new URLSearchParams(location.search);
  if (value) q.set(key, value);
  else q.delete(key);
  const s = q.toString();
  history.replaceState(history.state, "", `${location.pathname}${s ? `?${s}` : ""}`);
}

// byRank compares rows by where their field's value comes in ranks, then
// by tie.
export const byRank = (field, ranks, tie) => (a, b) => (rank(ranks, a[field]) - rank(ranks, b[field])) || tie(a, b);

function rank(ranks, v) {
  const i = ranks.indexOf(v);
  return i < 0 ? ranks.length : i;
}

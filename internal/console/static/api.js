// The HTTP API, called with the token kept in this tab's session storage.
const tokenKey = "capblock.token";

// Offset of the server's clock (its Capblock-Now header; simulated on a
// server run with --sim-clock) from this browser's.
let clockOffset = 0;

export function token() { return sessionStorage.getItem(tokenKey); }
export function setToken(t) { sessionStorage.setItem(tokenKey, t); }
export function clearToken() { sessionStorage.removeItem(tokenKey); }

// serverNow is the server's time now, in milliseconds.
export function serverNow() { return Date.now() + clockOffset; }

// ApiError carries a problem+json answer.
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.code = problem.code || "";
  }
}

// call sends one request and returns the decoded JSON body.
export async function call(method, path, body, tok) {
  const headers = { Accept: "application/json" };
  const t = tok || token();
  if (t) headers.Authorization = `Bearer ${t}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const now = r.headers.get("Capblock-Now");
  if (now) clockOffset = Date.parse(now) - Date.now();
  const text = await r.text();
  const data = text ? JSON.parse(text) : {};
  if (!r.ok) throw new ApiError(r.status, data);
  return data;
}

export const get = (path, params) => call("GET", params ? `${path}?${query(params)}` : path);
export const post = (path, body) => call("POST", path, body ?? {});

// query encodes params, repeating arrays and leaving out empty values.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === "") continue;
    for (const one of Array.isArray(v) ? v : [v]) q.append(k, String(one));
  }
  return q.toString();
}

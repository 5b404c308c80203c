// The console's one way to the API: same-origin fetch, JSON in and out,
// the contract's error body turned into an ApiError, and the token prompt
// when the server answers 401 (the token lives in sessionStorage, this tab
// only, and goes out as a Bearer token).

const TOKEN_KEY = "timemachine.token";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message || ("HTTP " + status));
    this.status = status;
    this.code = code || "";
  }
  // notServed: the server has no such endpoint (an older or newer build),
  // as opposed to a 404 about a collection or job that does not exist.
  get notServed() {
    return this.status === 404 && /^no such endpoint/.test(this.message);
  }
}

export function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }
export function forgetToken() { sessionStorage.removeItem(TOKEN_KEY); }

let asking = null; // one prompt at a time; concurrent 401s wait for it

function askToken(reason) {
  if (asking) return asking;
  const dlg = document.getElementById("token-dialog");
  const input = document.getElementById("token-input");
  document.getElementById("token-reason").textContent = reason;
  input.value = "";
  asking = new Promise((resolve) => {
    const form = document.getElementById("token-form");
    const done = (ev) => {
      ev.preventDefault();
      const t = input.value.trim();
      if (!t) return;
      sessionStorage.setItem(TOKEN_KEY, t);
      form.removeEventListener("submit", done);
      dlg.close();
      asking = null;
      document.dispatchEvent(new CustomEvent("tm-token"));
      resolve();
    };
    form.addEventListener("submit", done);
    dlg.showModal();
    input.focus();
  });
  return asking;
}

// request sends one API request. raw: answer the Response's text instead
// of parsed JSON (for /metrics).
export async function request(method, path, body, opts = {}) {
  for (let tries = 0; ; tries++) {
    const headers = { "Accept": opts.raw ? "text/plain" : "application/json" };
    const t = token();
    if (t) headers["Authorization"] = "Bearer " + t;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (opts.ifMatch !== undefined) headers["If-Match"] = String(opts.ifMatch);
    const res = await fetch(path, {
      method, headers, credentials: "omit", cache: "no-store",
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.status === 401 && tries < 5) {
      const e = await errorOf(res);
      await askToken(t ? "The token was refused: " + e.message : "The API answered 401 (" + e.message + "). Enter an API token.");
      continue;
    }
    if (!res.ok) throw await errorOf(res);
    if (res.status === 204) return null;
    const text = await res.text();
    if (opts.raw) return text;
    return text ? JSON.parse(text) : null;
  }
}

async function errorOf(res) {
  let code = "", message = "HTTP " + res.status;
  try {
    const b = await res.json();
    if (b && b.error) { code = b.error.code; message = b.error.message; }
  } catch (_) { /* not the contract's body */ }
  return new ApiError(res.status, code, message);
}

export const get = (p, o) => request("GET", p, undefined, o);
export const put = (p, b, o) => request("PUT", p, b, o);
export const post = (p, b, o) => request("POST", p, b, o);
export const del = (p, o) => request("DELETE", p, undefined, o);
export const enc = encodeURIComponent;

// The timemachine console: a hash-routed single page. Every page is a
// function that renders into <main> and may return a stop function (for
// its polling timer). Pages build the DOM with h(), never innerHTML, so no
// value from the API is ever parsed as markup.

import { ApiError, get, post, put, del, enc, token, forgetToken } from "./api.js";
import * as prom from "./prom.js";

// ---- DOM helpers ----

function h(tag, attrs, ...children) {
  const el = tag === "svg" || attrs?.svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false || k === "svg") continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.setAttribute("class", v);
    else if (k === "value") el.value = v;
    else if (k === "checked") el.checked = !!v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
const s = (tag, attrs, ...children) => h(tag, { ...attrs, svg: true }, ...children);

const main = () => document.getElementById("main");
// fill replaces el's children, skipping absent ones (null, undefined, false).
function fill(el, ...kids) { el.replaceChildren(...kids.flat(Infinity).filter((k) => k !== null && k !== undefined && k !== false)); }
function render(...nodes) { fill(main(), ...nodes); }

// navGen counts navigations: a page that awaited the API checks that it is
// still the page shown before drawing (a quick click elsewhere wins).
let navGen = 0;
const stale = (gen) => gen !== navGen;

function banner(msg, kind = "error") {
  const b = document.getElementById("banner");
  if (!msg) { b.classList.add("hidden"); return; }
  b.className = "banner " + kind;
  b.textContent = msg;
}

function notice(text, kind = "info", testid) {
  return h("div", { class: "notice " + kind, "data-testid": testid }, text);
}

function errorBox(e) {
  const code = e instanceof ApiError ? (e.code || e.status) : "error";
  return h("div", { class: "notice error", "data-testid": "error" }, h("strong", {}, String(code)), ": ", e.message);
}

function fmtTime(ms) {
  if (!ms) return "—";
  const d = new Date(ms);
  const pad = (n, w = 2) => String(n).padStart(w, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

function fmtRel(ms) {
  if (!ms) return "";
  const d = ms - Date.now();
  const a = Math.abs(d);
  const txt = a < 1000 ? `${a} ms` : a < 60e3 ? `${(a / 1e3).toFixed(1)} s` : a < 3600e3 ? `${(a / 60e3).toFixed(1)} min` : a < 86400e3 ? `${(a / 3600e3).toFixed(1)} h` : `${(a / 86400e3).toFixed(1)} d`;
  return d >= 0 ? `in ${txt}` : `${txt} ago`;
}

function fmtSeconds(sec) {
  if (sec === null || sec === undefined || Number.isNaN(sec)) return "—";
  if (sec < 1e-3) return `${(sec * 1e6).toFixed(0)} µs`;
  if (sec < 1) return `${(sec * 1e3).toFixed(1)} ms`;
  return `${sec.toFixed(2)} s`;
}

function badge(status) {
  return h("span", { class: "badge " + String(status || "unknown").replace(/[^a-z_-]/gi, "") }, status || "unknown");
}

function params() {
  const q = location.hash.split("?")[1] || "";
  return new URLSearchParams(q);
}

function go(path, q) {
  const qs = q ? new URLSearchParams(Object.entries(q).filter(([, v]) => v !== "" && v !== undefined && v !== null)).toString() : "";
  const target = "#" + path + (qs ? "?" + qs : "");
  if (location.hash === target) route(); else location.hash = target;
}

// poll runs fn now and then every ms while the page is shown; it returns the
// stop function. A failed run shows its error and polling goes on.
function poll(ms, fn) {
  let stopped = false, timer = null;
  const tick = async () => {
    try { await fn(); } catch (e) { if (!stopped) banner(e.message); }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}

let collectionsCache = null;
async function collectionNames() {
  if (!collectionsCache) {
    const r = await get("/v1/collections");
    collectionsCache = (r.collections || []).map((c) => c.name);
  }
  return collectionsCache;
}

async function collectionSelect(current, onChange, testid) {
  let names = [];
  try { names = await collectionNames(); } catch (e) { if (!(e instanceof ApiError)) throw e; }
  if (current && !names.includes(current)) names = [current, ...names];
  return h("select", { name: "c", "data-testid": testid || "collection", onchange: onChange },
    names.map((n) => h("option", { value: n, selected: n === current ? true : undefined }, n)));
}

// ---- pages ----

const NODE_COLORS = 8;
function nodeColor(ids, id) { return "n" + (Math.max(0, ids.indexOf(id)) % NODE_COLORS); }

async function pageCluster() {
  const summary = h("div", { class: "cards" });
  const nodes = h("div");
  const slots = h("div", { class: "slots", "data-testid": "slot-map" });
  const moves = h("div");
  const updated = h("span", { class: "muted small" });
  render(h("h1", {}, "Cluster ", updated), summary, moves, h("h2", {}, "Nodes"), nodes, h("h2", {}, "Slots"),
    h("p", { class: "muted small" }, "Each tile is a slot (a raft group): its leader, its replicas as they are (the raft configuration, replicas still being filled in italics), its state. A moving slot shows the replicas it is heading for. Live: refreshed every 2 s."), slots);
  return poll(2000, async () => {
    const c = await get("/v1/cluster");
    banner("");
    const ids = (c.nodes || []).map((n) => n.id);
    const leaderless = c.slots.filter((x) => !x.leader).length;
    const moving = c.slots.filter((x) => x.state === "moving" || (x.target && x.target.length)).length;
    const unhealthy = c.slots.filter((x) => x.state !== "healthy" && x.state !== "moving").length;
    const under = c.slots.filter((x) => (x.replicas || []).length < c.replication_factor).length;
    const pending = c.slots.reduce((a, x) => a + (x.pending || 0), 0);
    fill(summary, 
      card("Nodes", `${c.nodes.filter((n) => n.status === "alive").length} / ${c.nodes.length} alive`, "nodes"),
      card("Slots", `${c.slot_count} × ${c.replication_factor} replicas`, "slots"),
      card("Without leader", leaderless, "leaderless", leaderless ? "bad" : "good"),
      card("Under-replicated", under, "under", under ? "warn" : "good"),
      card("Moving", moving, "moving", moving ? "warn" : ""),
      card("Not healthy", unhealthy, "unhealthy", unhealthy ? "warn" : "good"),
      card("Scheduled jobs", pending, "pending"),
    );
    fill(moves, movesProgress(c.moves));
    fill(nodes, table(["Node", "HTTP", "Status", "Slots led", "Replicas", ""], c.nodes.map((n) => [
      h("span", {}, h("span", { class: "dot " + nodeColor(ids, n.id) }), " ", n.id),
      n.http_addr, badge(n.status), n.slots_led, n.replicas,
      [n.id === c.self ? h("span", { class: "tag" }, "this node") : null, n.id === c.meta_leader ? h("span", { class: "tag" }, "meta leader") : null],
    ]), "nodes"));
    fill(slots, ...c.slots.map((x) => {
      const state = x.leader ? x.state : "leaderless";
      return h("div", { class: "slot " + String(state).replace(/[^a-z-]/g, ""), "data-testid": "slot" },
        h("div", { class: "slot-head" }, h("strong", {}, "slot " + x.slot), badge(state)),
        h("div", { class: "small" }, "leader ", x.leader ? h("span", { class: "dot " + nodeColor(ids, x.leader) }) : null, " ", x.leader || "none"),
        h("div", { class: "replicas" },
          (x.replicas || []).map((r) => h("span", { class: "rep " + nodeColor(ids, r) + (r === x.leader ? " leader" : ""), title: r }, r)),
          (x.nonvoters || []).map((r) => h("span", { class: "rep filling " + nodeColor(ids, r), title: r + " (being filled, not voting yet)" }, r))),
        x.target && x.target.length ? h("div", { class: "small moving-to", "data-testid": "slot-target", title: "the replicas this slot is heading for" }, "→ ", x.target.join(", ")) : null,
        x.preferred_leader ? h("div", { class: "muted small", title: "set by admin transfer; kept until the next rebalance" }, "preferred leader " + x.preferred_leader) : null,
        x.pending !== undefined ? h("div", { class: "muted small" }, x.pending + " scheduled") : null);
    }));
    updated.textContent = "· " + fmtTime(Date.now()) + (c.self ? " · served by " + c.self : "");
  });
}

// movesProgress draws the meta leader's round of slot moves (GET
// /v1/cluster "moves"): done of total, how many are being worked on and
// how many wait. Nothing when no round was reported.
function movesProgress(m) {
  if (!m || !m.total) return null;
  const running = m.pending > 0;
  const text = running
    ? `Moving slots: ${m.done} of ${m.total} done, ${m.active} moving now, ${m.pending - m.active} waiting` + (m.started_at ? ` · started ${fmtTime(m.started_at)}` : "")
    : `Slot moves finished: ${m.done} of ${m.total}` + (m.finished_at ? ` at ${fmtTime(m.finished_at)}` : "");
  return h("div", { class: "notice " + (running ? "warn" : "info") + " moves", "data-testid": "moves" },
    h("progress", { max: m.total, value: m.done, "data-testid": "moves-progress" }), " ", text);
}

function card(label, value, testid, kind = "") {
  return h("div", { class: "card " + kind, "data-testid": "card-" + testid }, h("div", { class: "card-value" }, String(value)), h("div", { class: "card-label" }, label));
}

function table(headers, rows, testid, empty = "Nothing here.") {
  if (!rows.length) return h("p", { class: "muted", "data-testid": testid ? testid + "-empty" : undefined }, empty);
  return h("table", { "data-testid": testid },
    h("thead", {}, h("tr", {}, headers.map((x) => h("th", {}, x)))),
    h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c))))));
}

function policy(p) {
  if (!p) return "—";
  return `${p.max_attempts} attempt${p.max_attempts === 1 ? "" : "s"}, ${p.initial_interval} ×${p.multiplier} ≤ ${p.max_interval}, max age ${p.max_age}`;
}

async function pageCollections() {
  const gen = navGen;
  render(h("h1", {}, "Collections & routes"), h("p", { class: "muted" }, "Loading…"));
  const [cs, rs] = await Promise.allSettled([get("/v1/collections"), get("/v1/routes")]);
  if (stale(gen)) return;
  const out = [h("h1", {}, "Collections & routes"), h("h2", {}, "Collections")];
  if (cs.status === "fulfilled") {
    collectionsCache = cs.value.collections.map((c) => c.name);
    out.push(table(["Name", "Retry policy", "Callback timeout", "Retention", "Signing secret", "Status", ""], cs.value.collections.map((c) => [
      h("a", { href: "#/jobs?c=" + enc(c.name) }, c.name), policy(c.retry_policy), c.callback_timeout, c.retention,
      c.signing_secret_set ? "set" : "—", badge(c.status),
      h("span", { class: "links" }, h("a", { href: "#/jobs?c=" + enc(c.name) }, "jobs"), " · ", h("a", { href: "#/dead?c=" + enc(c.name) }, "dead letters"), " · ", h("a", { href: "#/schedules?c=" + enc(c.name) }, "schedules")),
    ]), "collections"));
  } else out.push(errorBox(cs.reason));
  out.push(h("h2", {}, "Routes"), h("p", { class: "muted small" }, "Named webhook targets; a job naming a route is delivered to the route's URL as it is at fire time."));
  if (rs.status === "fulfilled") {
    out.push(table(["Name", "Webhook URL", "Headers", "Timeout", "Signing secret"], rs.value.routes.map((r) => [
      r.name, h("code", {}, r.webhook_url), Object.entries(r.headers || {}).map(([k, v]) => h("div", { class: "small" }, h("code", {}, k + ": " + v))),
      r.timeout || "—", r.signing_secret_set ? "set" : "—",
    ]), "routes", "No routes yet (PUT /v1/routes/{name})."));
  } else out.push(errorBox(rs.reason));
  render(...out);
}

// Cursor paging: the page keeps the cursors it came through, so "Previous"
// goes back without the server keeping any state.
function localInput(ms) {
  if (!ms) return "";
  const d = new Date(Number(ms));
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function jobRows(jobs, c, selectable) {
  return jobs.map((j) => [
    selectable ? h("input", { type: "checkbox", class: "pick", "data-id": j.id, "data-version": j.version, "aria-label": "select " + j.id }) : null,
    h("a", { href: `#/job/${enc(c)}/${enc(j.id)}`, "data-testid": "job-link" }, j.id), badge(j.status),
    h("span", { title: fmtRel(j.trigger_time) }, fmtTime(j.trigger_time)), j.attempts,
    j.route ? "route " + j.route : h("code", { class: "small" }, j.callback_url || ""),
    h("span", { class: "small err" }, j.last_error || ""),
  ].filter((x) => x !== null));
}

async function pageJobs() {
  const gen = navGen;
  const q = params();
  const c = q.get("c") || (await collectionNames().catch(() => ["default"]))[0] || "default";
  const status = q.get("status") || "";
  const from = q.get("from") || "", to = q.get("to") || "";
  const limit = q.get("limit") || "50";
  const cursor = q.get("cursor") || "";
  const back = q.get("back") ? q.get("back").split(",") : [];
  const form = h("form", { class: "filters", "data-testid": "job-filters", onsubmit: (ev) => {
    ev.preventDefault();
    const f = new FormData(ev.target);
    const ms = (v) => (v ? String(new Date(v).getTime()) : "");
    go("/jobs", { c: f.get("c"), status: f.get("status"), from: ms(f.get("from")), to: ms(f.get("to")), limit: f.get("limit") });
  } },
  h("label", {}, "Collection ", await collectionSelect(c)),
  h("label", {}, "Status ", h("select", { name: "status", "data-testid": "status" }, ["", "scheduled", "succeeded", "failed"].map((v) => h("option", { value: v, selected: v === status ? true : undefined }, v || "any")))),
  h("label", {}, "Trigger from ", h("input", { type: "datetime-local", name: "from", value: localInput(from) })),
  h("label", {}, "to ", h("input", { type: "datetime-local", name: "to", value: localInput(to) })),
  h("label", {}, "Page size ", h("input", { type: "number", name: "limit", min: 1, max: 1000, value: limit, class: "narrow" })),
  h("button", { type: "submit", class: "primary" }, "Search"));
  const list = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  if (stale(gen)) return;
  render(h("h1", {}, "Jobs"), form, list, newJobForm(c));
  const qs = new URLSearchParams({ limit });
  if (status) qs.set("status", status);
  if (from) qs.set("from", from);
  if (to) qs.set("to", to);
  if (cursor) qs.set("cursor", cursor);
  try {
    const r = await get(`/v1/collections/${enc(c)}/jobs?${qs}`);
    const base = { c, status, from, to, limit };
    fill(list, 
      table(["Id", "Status", "Trigger time", "Attempts", "Target", "Last error"], jobRows(r.jobs, c, false), "jobs", "No jobs match."),
      h("div", { class: "pager" },
        back.length || cursor ? h("button", { type: "button", onclick: () => go("/jobs", { ...base, cursor: back[back.length - 1] || "", back: back.slice(0, -1).join(",") }) }, "← Previous") : null,
        h("span", { class: "muted small" }, `${r.jobs.length} shown`),
        r.next_cursor ? h("button", { type: "button", "data-testid": "next-page", onclick: () => go("/jobs", { ...base, cursor: r.next_cursor, back: [...back, cursor].join(",") }) }, "Next →") : null));
  } catch (e) {
    fill(list, errorBox(e));
  }
}

function newJobForm(c) {
  const out = h("div", { class: "muted small" });
  return h("details", { class: "panel", "data-testid": "new-job" },
    h("summary", {}, "Create a job in ", h("strong", {}, c)),
    h("form", { class: "grid", onsubmit: async (ev) => {
      ev.preventDefault();
      const f = new FormData(ev.target);
      const spec = {};
      if (f.get("id")) spec.id = f.get("id");
      if (f.get("delay")) spec.delay = f.get("delay");
      const target = String(f.get("target") || "").trim();
      if (/^https?:\/\//.test(target)) spec.callback_url = target; else if (target) spec.route = target;
      if (f.get("meta")) {
        try { spec.meta = JSON.parse(f.get("meta")); } catch (e) { out.textContent = "meta is not JSON: " + e.message; return; }
      }
      if (f.get("attempts")) spec.retry_policy = { max_attempts: Number(f.get("attempts")), initial_interval: "200ms" };
      try {
        const j = await post(`/v1/collections/${enc(c)}/jobs`, spec);
        go(`/job/${enc(c)}/${enc(j.id)}`);
      } catch (e) { fill(out, errorBox(e)); }
    } },
    h("label", {}, "Id (optional) ", h("input", { name: "id", placeholder: "generated", "data-testid": "new-id" })),
    h("label", {}, "Delay ", h("input", { name: "delay", value: "5s", "data-testid": "new-delay" })),
    h("label", {}, "Callback URL or route ", h("input", { name: "target", required: true, placeholder: "https://example.com/hook or a route name", "data-testid": "new-target" })),
    h("label", {}, "Max attempts ", h("input", { name: "attempts", type: "number", min: 1, class: "narrow", placeholder: "default", "data-testid": "new-attempts" })),
    h("label", { class: "wide" }, "Meta (JSON) ", h("textarea", { name: "meta", rows: 2, placeholder: '{"user": 42}', "data-testid": "new-meta" })),
    h("div", {}, h("button", { type: "submit", class: "primary", "data-testid": "create-job" }, "Create job"))), out);
}

async function pageJob(c, id) {
  const box = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  render(h("h1", {}, h("a", { href: "#/jobs?c=" + enc(c) }, c), " / ", id), box);
  return poll(1500, async () => {
    let j;
    try { j = await get(`/v1/collections/${enc(c)}/jobs/${enc(id)}`); } catch (e) {
      if (e instanceof ApiError) { fill(box, errorBox(e)); return; }
      throw e;
    }
    const msg = h("div");
    const actions = h("div", { class: "actions" },
      j.status === "failed" ? h("button", { class: "primary", "data-testid": "redrive", onclick: async () => {
        try { await redrive(c, [j], msg); } catch (e) { fill(msg, errorBox(e)); }
      } }, "Redrive") : null,
      j.status === "scheduled" ? h("button", { class: "danger", "data-testid": "cancel", onclick: async () => {
        if (!confirm(`Cancel job ${j.id}?`)) return;
        try { await del(`/v1/collections/${enc(c)}/jobs/${enc(j.id)}`); go("/jobs", { c }); } catch (e) { fill(msg, errorBox(e)); }
      } }, "Cancel job") : null);
    const rp = j.retry_policy || {};
    fill(box, 
      h("div", { class: "cards" }, card("Status", j.status, "status", j.status === "failed" ? "bad" : j.status === "succeeded" ? "good" : ""),
        card("Attempts", `${j.attempts} of ${rp.max_attempts ?? "?"}`, "attempts"), card("Version", j.version, "version")),
      j.last_error ? h("div", { class: "notice error", "data-testid": "last-error" }, h("strong", {}, "Last error: "), j.last_error) : null,
      actions, msg,
      h("h2", {}, "Spec"),
      h("dl", { class: "kv", "data-testid": "job-spec" },
        kv("Trigger time", fmtTime(j.trigger_time) + "  (" + fmtRel(j.trigger_time) + ")"),
        j.next_attempt_at ? kv("Next attempt", fmtTime(j.next_attempt_at) + "  (" + fmtRel(j.next_attempt_at) + ")") : null,
        kv("Target", j.route ? "route " + j.route : j.callback_url),
        kv("Retry policy", policy(rp)), kv("Callback timeout", j.callback_timeout),
        kv("Created", fmtTime(j.created_at)), kv("Updated", fmtTime(j.updated_at)), kv("Finished", fmtTime(j.finished_at))),
      h("h2", {}, "Meta"), h("pre", {}, j.meta === undefined ? "—" : JSON.stringify(j.meta, null, 2)),
      h("details", {}, h("summary", {}, "Raw JSON"), h("pre", { "data-testid": "job-json" }, JSON.stringify(j, null, 2))));
  });
}

function kv(k, v) { return [h("dt", {}, k), h("dd", {}, v ?? "—")]; }

// redrive sends dead letters again. The contract's bulk endpoint is POST
// /v1/collections/{c}/redrive; a server without it (404 "no such endpoint")
// gets one PUT per job with the job's own spec and its version as If-Match,
// which the contract also defines as a redrive ("a PUT redrives one").
async function redrive(c, jobs, msg) {
  let n = 0;
  try {
    const r = await post(`/v1/collections/${enc(c)}/redrive`, { ids: jobs.map((j) => j.id) });
    n = r.redriven;
    fill(msg, notice(`Redriven: ${n}.`, "good", "redrive-done"));
    return n;
  } catch (e) {
    if (!(e instanceof ApiError) || !e.notServed) throw e;
  }
  const errors = [];
  for (const j of jobs) {
    const spec = { delay: "0s", retry_policy: j.retry_policy, callback_timeout: j.callback_timeout };
    if (j.route) spec.route = j.route; else spec.callback_url = j.callback_url;
    if (j.meta !== undefined) spec.meta = j.meta;
    try { await put(`/v1/collections/${enc(c)}/jobs/${enc(j.id)}`, spec, { ifMatch: j.version }); n++; } catch (e) { errors.push(`${j.id}: ${e.message}`); }
  }
  fill(msg, 
    notice("Bulk redrive (POST /v1/collections/{c}/redrive) is not available on this server; each job was redriven with its own PUT.", "info", "redrive-fallback"),
    notice(`Redriven: ${n}.` + (errors.length ? " Failed: " + errors.join("; ") : ""), errors.length ? "error" : "good", "redrive-done"));
  return n;
}

async function pageDead() {
  const gen = navGen;
  const q = params();
  const c = q.get("c") || (await collectionNames().catch(() => ["default"]))[0] || "default";
  const cursor = q.get("cursor") || "";
  const msg = h("div");
  const list = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const picker = await collectionSelect(c, (ev) => go("/dead", { c: ev.target.value }));
  if (stale(gen)) return;
  render(h("h1", {}, "Dead letters"),
    h("p", { class: "muted" }, "Jobs whose retries ran out or whose receiver refused them (status=failed). They stay for the collection's retention. Redrive sends them again now, with attempts reset."),
    h("form", { class: "filters" }, h("label", {}, "Collection ", picker)),
    msg, list);
  let r;
  try {
    r = await get(`/v1/collections/${enc(c)}/jobs?status=failed&limit=100${cursor ? "&cursor=" + enc(cursor) : ""}`);
  } catch (e) { fill(list, errorBox(e)); return; }
  const byId = new Map(r.jobs.map((j) => [j.id, j]));
  const picked = () => [...list.querySelectorAll("input.pick:checked")].map((el) => byId.get(el.dataset.id));
  const run = async (jobs) => {
    if (!jobs.length) { fill(msg, notice("Select dead letters first.", "info")); return; }
    try { await redrive(c, jobs, msg); setTimeout(() => route(), 1200); } catch (e) { fill(msg, errorBox(e)); }
  };
  fill(list, 
    r.jobs.length ? h("div", { class: "actions" },
      h("button", { type: "button", class: "primary", "data-testid": "redrive-selected", onclick: () => run(picked()) }, "Redrive selected"),
      h("button", { type: "button", "data-testid": "redrive-all", onclick: () => run(r.jobs) }, `Redrive all ${r.jobs.length} shown`)) : null,
    table(["", "Id", "Status", "Trigger time", "Attempts", "Target", "Last error"], jobRows(r.jobs, c, true), "dead", "No dead letters in this collection."),
    r.next_cursor ? h("div", { class: "pager" }, h("button", { type: "button", onclick: () => go("/dead", { c, cursor: r.next_cursor }) }, "Next →")) : null);
}

async function pageSchedules() {
  const gen = navGen;
  const q = params();
  const c = q.get("c") || (await collectionNames().catch(() => ["default"]))[0] || "default";
  const cursor = q.get("cursor") || "";
  const list = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const picker = await collectionSelect(c, (ev) => go("/schedules", { c: ev.target.value }));
  if (stale(gen)) return;
  render(h("h1", {}, "Schedules"), h("form", { class: "filters" }, h("label", {}, "Collection ", picker)), list);
  try {
    const r = await get(`/v1/collections/${enc(c)}/schedules?limit=100${cursor ? "&cursor=" + enc(cursor) : ""}`);
    const items = r.schedules || [];
    fill(list, table(["Id", "When", "Timezone", "Target", "Next fire", "Last fire", "Last status", "Paused"], items.map((x) => [
      h("a", { href: `#/jobs?c=${enc(c)}` }, x.id), x.cron ? h("code", {}, x.cron) : "every " + x.every, x.timezone || "UTC",
      x.route ? "route " + x.route : h("code", { class: "small" }, x.callback_url || ""), fmtTime(x.next_fire_at), fmtTime(x.last_fire_at),
      x.last_status ? badge(x.last_status) : "—", x.paused ? "paused" : "",
    ]), "schedules", "No schedules in this collection."),
    r.next_cursor ? h("div", { class: "pager" }, h("button", { type: "button", onclick: () => go("/schedules", { c, cursor: r.next_cursor }) }, "Next →")) : null);
  } catch (e) {
    if (e instanceof ApiError && e.notServed) {
      fill(list, notice("Schedules are not available on this server: it does not serve GET /v1/collections/{c}/schedules (recurring jobs come with a later version). One-shot jobs work as usual.", "info", "schedules-unavailable"));
    } else fill(list, errorBox(e));
  }
}

// The fire rate and lateness of the node serving the console, from its
// /metrics: counters become rates between successive scrapes, and the
// lateness histogram's increase over the window gives percentiles.
const WINDOW = 60; // scrapes kept (2 s apart: two minutes)
const history = [];

async function pageMetrics() {
  const cards = h("div", { class: "cards" });
  const chart = h("div", { class: "chart" });
  const tbl = h("div");
  render(h("h1", {}, "Fire rate & lateness"),
    h("p", { class: "muted" }, "From this node's /metrics, scraped every 2 s and computed in the browser: rates between scrapes, lateness percentiles from the histogram's increase over the last minute. Each node reports the slots it leads; open the console on another node to see its share."),
    cards, h("h2", {}, "Callback attempts per second"), chart, tbl);
  return poll(2000, async () => {
    const text = await get("/metrics", { raw: true });
    banner("");
    const samples = prom.parse(text);
    history.push({ t: Date.now() / 1000, samples, lateness: prom.buckets(samples, "timemachine_fire_lateness_seconds") });
    while (history.length > WINDOW) history.shift();
    const cur = history[history.length - 1], prev = history[history.length - 2];
    const dt = prev ? cur.t - prev.t : 0;
    const r = (name, match) => prev ? prom.rate(prom.sum(cur.samples, name, match), prom.sum(prev.samples, name, match), dt) : null;
    const fmtRate = (x) => (x === null ? "—" : x.toFixed(x < 10 ? 2 : 0) + "/s");
    const base = history[Math.max(0, history.length - 31)];
    const win = prom.delta(cur.lateness, base === cur ? [] : base.lateness);
    const all = cur.lateness;
    const fire = r("timemachine_jobs_fired_total");
    cur.fire = fire;
    fill(cards, 
      card("Fire rate", fmtRate(fire), "fire-rate"),
      card("First attempts", fmtRate(r("timemachine_jobs_fired_first_total")), "first-rate"),
      card("Created", fmtRate(r("timemachine_jobs_created_total")), "create-rate"),
      card("Lateness p50", fmtSeconds(prom.quantile(0.5, win)), "p50"),
      card("Lateness p90", fmtSeconds(prom.quantile(0.9, win)), "p90"),
      card("Lateness p99", fmtSeconds(prom.quantile(0.99, win)), "p99"));
    fill(chart, sparkline(history.map((x) => x.fire ?? 0)));
    const outcomes = ["succeeded", "retried", "rescheduled", "failed"];
    fill(tbl, h("h2", {}, "Since this node started"), table(["", "Value"], [
      ["Callback attempts", prom.sum(cur.samples, "timemachine_jobs_fired_total") ?? "—"],
      ...outcomes.map((o) => [OUTCOME_LABEL[o], prom.sum(cur.samples, "timemachine_job_attempt_outcomes_total", { outcome: o }) ?? "—"]),
      ["Lateness p50 / p99 (all time)", fmtSeconds(prom.quantile(0.5, all)) + " / " + fmtSeconds(prom.quantile(0.99, all))],
      ["Scheduled jobs on this node's slots", prom.sum(cur.samples, "timemachine_pending_jobs", { role: "leader" }) ?? "—"],
    ], "metrics-table"));
  });
}

const OUTCOME_LABEL = {
  succeeded: "Attempts that succeeded",
  retried: "Attempts to be retried",
  rescheduled: "Attempts answered with a reschedule",
  failed: "Attempts that made a dead letter",
};

function sparkline(values) {
  const w = 600, hgt = 120, n = Math.max(values.length, 2);
  const max = Math.max(1, ...values);
  const pts = values.map((v, i) => `${(i / (n - 1)) * w},${hgt - (v / max) * (hgt - 10) - 5}`).join(" ");
  return [h("div", { class: "muted small" }, `last ${values.length} scrapes · top of the chart ${max.toFixed(1)}/s`),
    s("svg", { viewBox: `0 0 ${w} ${hgt}`, preserveAspectRatio: "none", class: "spark", role: "img", "aria-label": "fire rate over the last two minutes" },
      s("line", { x1: 0, y1: hgt - 5, x2: w, y2: hgt - 5, class: "axis" }),
      s("polyline", { points: pts, class: "series" }))];
}

// ---- routing ----

let stop = null;
async function route() {
  if (stop) { stop(); stop = null; }
  const gen = ++navGen;
  banner("");
  const [path] = location.hash.slice(1).split("?");
  const parts = (path || "/cluster").split("/").filter(Boolean).map(decodeURIComponent);
  const page = parts[0] || "cluster";
  for (const a of document.querySelectorAll("#nav a")) a.classList.toggle("active", a.dataset.page === (page === "job" ? "jobs" : page));
  let halt;
  try {
    switch (page) {
      case "cluster": halt = await pageCluster(); break;
      case "collections": halt = await pageCollections(); break;
      case "jobs": halt = await pageJobs(); break;
      case "job": halt = await pageJob(parts[1], parts.slice(2).join("/")); break;
      case "dead": halt = await pageDead(); break;
      case "schedules": halt = await pageSchedules(); break;
      case "metrics": halt = await pageMetrics(); break;
      default: render(h("h1", {}, "Not found"), h("p", {}, "No such page: ", path));
    }
  } catch (e) {
    if (!stale(gen)) render(errorBox(e));
  }
  // A page left while it loaded stops its polling at once.
  if (stale(gen)) { if (halt) halt(); return; }
  stop = halt || null;
  document.body.dataset.page = page;
}

function whoami() {
  const has = !!token();
  document.getElementById("whoami").textContent = has ? "token set" : "";
  document.getElementById("signout").classList.toggle("hidden", !has);
}

// The footer's links to the API description and /metrics need a token
// under --auth-file, which a plain link does not send: the console fetches
// them with its token (asking for one on a 401) and opens the answer.
for (const a of document.querySelectorAll("a[data-api]")) {
  a.addEventListener("click", async (ev) => {
    ev.preventDefault();
    try {
      const text = await get(a.getAttribute("href"), { raw: true });
      window.open(URL.createObjectURL(new Blob([text], { type: a.dataset.api })), "_blank");
    } catch (e) {
      banner(e.message);
    }
  });
}

window.addEventListener("hashchange", route);
document.addEventListener("tm-token", () => { collectionsCache = null; whoami(); });
document.getElementById("signout").addEventListener("click", () => { forgetToken(); whoami(); location.reload(); });
// The browser test drives the parser through this (no globals otherwise).
document.documentElement.dataset.ready = "1";
window.timemachineConsole = { prom };
whoami();
route();

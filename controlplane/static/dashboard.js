// LUMION dashboard: plain JS + SVG, no build step, no external requests.
// Data: GET /dashboard/geometry.json (the chip drawing, no token), and the service's
// authenticated GET /api/v1/status and GET /api/v1/events?since=N (bearer token from
// the URL fragment #token=..., else asked for once; kept in this tab's sessionStorage).
"use strict";

const POLL_MS = 1000;          // status/events refresh period: a person reads, 1 s is live enough
const EVENTS_SHOWN = 60;       // newest events listed; older ones stay in the service's log
const RECOVERIES_SHOWN = 6;    // newest recoveries drawn on the timeline
const EVENTS_PAGE = 500;       // events fetched per refresh (the service pages its log)
const RECOVERY_KINDS = /recover|failover/;   // events whose stages are drawn on the timeline
const SVG_NS = "http://www.w3.org/2000/svg";
const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
                 "#17becf", "#bcbd22", "#393b79", "#637939", "#843c39", "#7b4173", "#3182bd"];
const STAGES = ["detect", "reference", "compute", "write", "settle", "relock", "verify", "light", "restore"];
const STAGE_COLOURS = {detect: "#d62728", reference: "#17becf", compute: "#1f77b4", write: "#ff7f0e",
                       settle: "#9467bd", relock: "#8c564b", verify: "#2ca02c", light: "#bcbd22",
                       restore: "#7f7f7f"};
const BAD_KINDS = /fail|dark|error|refus|abort|lost|never/;

const state = {token: null, geometry: null, lastEventId: 0, events: [], status: null};

// ---------------------------------------------------------------------------- auth + fetch
function takeToken() {
  const hash = new URLSearchParams(window.location.hash.replace(/^#/, ""));
  if (hash.get("token")) {
    sessionStorage.setItem("lumion-token", hash.get("token"));
    history.replaceState(null, "", window.location.pathname + window.location.search);
  }
  let token = sessionStorage.getItem("lumion-token");
  if (!token) {
    token = window.prompt("Bearer token of this control plane (the service's token file):") || "";
    if (token) sessionStorage.setItem("lumion-token", token);
  }
  return token;
}

async function api(path) {
  const reply = await fetch(path, {headers: {"Authorization": "Bearer " + state.token}, cache: "no-store"});
  if (reply.status === 401 || reply.status === 403) {
    sessionStorage.removeItem("lumion-token");
    throw new Error("the token was refused (HTTP " + reply.status + "); reload with #token=<token>");
  }
  if (!reply.ok) throw new Error(path + ": HTTP " + reply.status);
  return reply.json();
}

function setConnection(kind, text) {
  const el = document.getElementById("connection");
  el.dataset.state = kind;
  el.textContent = text;
}

// ---------------------------------------------------------------------------- SVG helpers
function el(name, attrs, parent) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}
function text(parent, x, y, content, attrs) {
  const t = el("text", Object.assign({x: x, y: y}, attrs || {}), parent);
  t.textContent = content;
  return t;
}
const P = (xy) => [xy[0], -xy[1]];               // topology y points up, SVG y points down
const pts = (list) => list.map((xy) => P(xy).map((v) => v.toFixed(3)).join(",")).join(" ");
const fmt = (v, digits) => (v === null || v === undefined || Number.isNaN(v)) ? "–"
  : (Number(Number(v).toFixed(digits)) || 0).toFixed(digits);   // no "-0.0"
const portNumber = (name) => Number(String(name).replace(/^port:/, ""));

// ---------------------------------------------------------------------------- the mesh
function drawMesh(g) {
  const svg = document.getElementById("mesh");
  svg.textContent = "";
  const [x0, y0, x1, y1] = g.bounds;
  const m = 2.2;                                    // room around the chip for port and accelerator labels
  svg.setAttribute("viewBox", `${x0 - m} ${-y1 - m} ${x1 - x0 + 2 * m} ${y1 - y0 + 2 * m}`);
  const chip = el("g", {id: "chip"}, svg);
  for (const [a, b] of g.links) el("polyline", {class: "wg", points: pts([a, b])}, chip);
  g.tbuIndex = {};
  g.tbus.forEach((t, i) => {
    g.tbuIndex[t.name] = t;
    el("line", {class: "tbu", "data-tbu": t.name, x1: P(t.a)[0], y1: P(t.a)[1], x2: P(t.b)[0], y2: P(t.b)[1]},
       chip).appendChild(el("title", {})).textContent = t.name;
  });
  const ports = el("g", {id: "ports"}, svg);
  g.ports.forEach((p, n) => {
    const [x, y] = P(p.xy);
    el("circle", {class: "port", cx: x, cy: y, r: 0.07, "data-port": p.name}, ports);
    const [ox, oy] = P(p.out);
    text(ports, x + 0.45 * ox, y + 0.45 * oy + 0.07, String(n), {class: "port-label", "text-anchor": "middle"});
  });
  el("g", {id: "routes"}, svg);
  el("g", {id: "accelerators-layer"}, svg);
  document.getElementById("mesh-name").textContent = "— " + g.mesh + ", " + g.n_tbus + " TBUs, " + g.n_ports + " ports";
}

function routePoints(g, route) {
  const out = [];
  for (const hop of (route && route.tbus) || []) {
    const t = g.tbuIndex[hop.tbu];
    if (!t) continue;
    out.push(t.ports[hop.entry], t.ports[hop.exit]);
  }
  return out;
}

// ---------------------------------------------------------------------------- status views
function allLinks(status) {
  if (Array.isArray(status.links) && status.links.length) return status.links.map((lk) => ({...lk}));
  const out = [];
  for (const job of status.jobs || []) for (const lk of job.links || []) out.push({job: job.id, ...lk});
  return out;
}
function accelerators(status) {
  const fab = status.fabric || (status.fabrics && status.fabrics[0]) || {};
  return status.accelerators || fab.accelerators || [];
}
function failedAccelerators(status) {
  const out = new Set(status.failed_accelerators || []);
  for (const job of status.jobs || []) for (const a of job.failed_accelerators || []) out.add(a);
  for (const a of accelerators(status)) if (a.failed || a.state === "failed" || a.state === "dead") out.add(a.name);
  return out;
}
function failedTbus(status) {
  const out = new Set(Object.keys(status.failed_tbus || {}));
  for (const chip of status.chips || []) for (const t of Object.keys(chip.failed_tbus || {})) out.add(t);
  for (const job of status.jobs || []) for (const t of Object.keys(job.failed_tbus || {})) out.add(t);
  return out;
}
const linkName = (lk) => lk.link || `${lk.src}->${lk.dst}`;
const linkRx = (lk) => lk.live_rx_power_dbm;              // telemetry's last RX power reading (dBm)
const linkDark = (lk) => lk.los === true;                  // the receiver reports loss of signal
const linkMargin = (lk) => lk.margin_db;                   // planned: the link budget's margin (dB)
const liveMargin = (lk) => lk.live_margin_db;              // measured RX power minus sensitivity (dB)

function drawRoutes(status) {
  const g = state.geometry;
  const layer = document.getElementById("routes");
  layer.textContent = "";
  const links = allLinks(status);
  links.forEach((lk, i) => {
    const colour = PALETTE[i % PALETTE.length];
    lk.colour = colour;
    const points = routePoints(g, lk.route);
    if (points.length < 2) return;
    const line = el("polyline", {class: "route" + (linkDark(lk) ? " dark" : ""), points: pts(points),
                                 stroke: colour, "data-link": linkName(lk), "data-job": lk.job || ""}, layer);
    el("title", {}, line).textContent = `${linkName(lk)}: ${lk.route.tbus.length} TBUs, margin ${fmt(linkMargin(lk), 2)} dB`;
  });
  for (const t of document.querySelectorAll("#chip .tbu")) {
    t.classList.toggle("failed", failedTbus(status).has(t.dataset.tbu));
  }
  return links;
}

function drawAccelerators(status) {
  const g = state.geometry;
  const layer = document.getElementById("accelerators-layer");
  layer.textContent = "";
  const failed = failedAccelerators(status);
  const tbody = document.querySelector("#accelerators tbody");
  tbody.textContent = "";
  for (const acc of accelerators(status)) {
    const ports = [...(acc.tx || []), ...(acc.rx || [])].map(portNumber).filter((n) => g.ports[n]);
    const role = failed.has(acc.name) ? "failed" : (acc.spare ? "spare" : "worker");
    if (ports.length) {
      const mid = [0, 1].map((k) => ports.reduce((s, n) => s + g.ports[n].xy[k], 0) / ports.length);
      const out = [0, 1].map((k) => ports.reduce((s, n) => s + g.ports[n].out[k], 0) / ports.length);
      const norm = Math.hypot(out[0], out[1]) || 1;
      const [x, y] = P([mid[0] + 1.25 * out[0] / norm, mid[1] + 1.25 * out[1] / norm]);
      const label = text(layer, x, y + 0.1, acc.name, {class: "acc-label " + role, "text-anchor": "middle",
                                                        "data-accelerator": acc.name, "data-role": role});
      el("title", {}, label).textContent = `${acc.name} (${role}): TX ${(acc.tx || []).join(", ")}; RX ${(acc.rx || []).join(", ")}`;
      if (role === "failed") {
        for (const n of ports) {
          const [px, py] = P(g.ports[n].xy);
          el("path", {class: "acc-mark failed", d: `M${px - 0.15},${py - 0.15}L${px + 0.15},${py + 0.15}M${px - 0.15},${py + 0.15}L${px + 0.15},${py - 0.15}`}, layer);
        }
      }
    }
    const row = document.createElement("tr");
    row.dataset.accelerator = acc.name;
    if (role === "failed") row.className = "failed";
    cells(row, [acc.name, (acc.tx || []).join(" "), (acc.rx || []).join(" "),
                `${role}${acc.job ? " (" + acc.job + ")" : ""}`]);
    tbody.appendChild(row);
  }
}

// Names (accelerators, jobs, ports) come from the fabric file and the API: they go into the
// page as text nodes only, never as HTML, so a name like <img onerror=...> stays a name.
function cells(row, texts) {
  return texts.map((t) => {
    const td = document.createElement("td");
    td.textContent = String(t);
    row.appendChild(td);
    return td;
  });
}

function fillLinks(links) {
  const tbody = document.querySelector("#links tbody");
  tbody.replaceChildren();
  for (const lk of links) {
    const tr = document.createElement("tr");
    tr.dataset.link = linkName(lk);
    if (linkDark(lk)) tr.className = "dark";
    const n = lk.n_tbus !== undefined ? lk.n_tbus : ((lk.route && lk.route.tbus) || []).length;
    const live = linkRx(lk) === undefined ? "no reading" : (linkDark(lk) ? "dark (LOS)" : "lit");
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = lk.colour;
    const first = cells(tr, [linkName(lk)])[0];
    first.prepend(swatch);
    for (const td of cells(tr, [n, fmt(linkMargin(lk), 1), fmt(linkRx(lk), 1), fmt(liveMargin(lk), 1)])) {
      td.className = "num";
    }
    cells(tr, [live]);
    tbody.appendChild(tr);
  }
}

function fillLegend() {
  const ul = document.getElementById("legend");
  if (ul.childElementCount) return;
  const items = [
    ["tbu", "TBU (idle)", (s) => el("line", {x1: 2, y1: 7, x2: 26, y2: 7, stroke: "#b0bac3", "stroke-width": 4}, s)],
    ["failed-tbu", "failed TBU", (s) => el("line", {x1: 2, y1: 7, x2: 26, y2: 7, stroke: "#c62828", "stroke-width": 4, "stroke-dasharray": "5 3"}, s)],
    ["route", "route (one colour per link)", (s) => el("line", {x1: 2, y1: 7, x2: 26, y2: 7, stroke: PALETTE[0], "stroke-width": 4}, s)],
    ["dark", "dark link (no light at RX)", (s) => el("line", {x1: 2, y1: 7, x2: 26, y2: 7, stroke: PALETTE[3], "stroke-width": 4, "stroke-dasharray": "6 4"}, s)],
    ["port", "mesh port (number)", (s) => el("circle", {cx: 14, cy: 7, r: 4, fill: "#fff", stroke: "#7b8791"}, s)],
    ["worker", "accelerator in a job", (s) => text(s, 2, 11, "gpu", {fill: "#0d47a1", "font-size": 11, "font-weight": 600})],
    ["spare", "spare accelerator", (s) => text(s, 2, 11, "spare", {fill: "#6a1b9a", "font-size": 10, "font-weight": 600})],
    ["failed", "failed accelerator", (s) => el("path", {d: "M8,2L20,12M8,12L20,2", stroke: "#c62828", "stroke-width": 2}, s)],
  ];
  for (const [key, label, draw] of items) {
    const li = document.createElement("li");
    li.dataset.legend = key;
    const s = el("svg", {width: 34, height: 14}, li);
    draw(s);
    li.appendChild(document.createTextNode(label));
    ul.appendChild(li);
  }
}

// ---------------------------------------------------------------------------- timeline
function stagesOf(ev) {
  const st = ev.stages;
  if (!st) return [];
  const list = Array.isArray(st) ? st : Object.entries(st).map(([name, v]) => ({name: name, ...v}));
  return list.map((s) => ({name: s.name || s.stage, start_s: Number(s.start_s), end_s: Number(s.end_s)}))
             .filter((s) => Number.isFinite(s.start_s) && Number.isFinite(s.end_s));
}

function drawTimeline() {
  const svg = document.getElementById("timeline");
  svg.textContent = "";
  const recs = state.events.filter((e) => RECOVERY_KINDS.test(e.kind) && stagesOf(e).length)
                           .slice(-RECOVERIES_SHOWN);
  const W = 1000, left = 230, right = 20, row = 30, top = 28;
  const H = top + Math.max(1, recs.length) * row + 46;
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  if (!recs.length) {
    text(svg, left, top + 18, "no recovery yet", {class: "tl-muted", "data-empty": "1"});
    return;
  }
  const spans = recs.map((e) => {
    const s = stagesOf(e);
    const t0 = Math.min(...s.map((x) => x.start_s));
    return {ev: e, stages: s, t0: t0, total: Math.max(...s.map((x) => x.end_s)) - t0};
  });
  const maxMs = Math.max(...spans.map((s) => s.total * 1000), 1e-3);
  const step = niceStep(maxMs / 6);
  const axisMs = Math.ceil(maxMs / step) * step;
  const X = (ms) => left + (W - left - right) * ms / axisMs;
  for (let v = 0; v <= axisMs + 1e-9; v += step) {
    el("line", {class: "tl-grid", x1: X(v), y1: top - 6, x2: X(v), y2: top + recs.length * row}, svg);
    text(svg, X(v), top + recs.length * row + 14, fmt(v, step < 1 ? 1 : 0), {class: "tl-muted", "text-anchor": "middle"});
  }
  text(svg, X(axisMs / 2), top + recs.length * row + 28, "time since the recovery started (ms)", {class: "tl-muted", "text-anchor": "middle"});
  el("line", {class: "tl-axis", x1: left, y1: top + recs.length * row, x2: W - right, y2: top + recs.length * row}, svg);
  spans.forEach((sp, i) => {
    const y = top + i * row;
    const e = sp.ev;
    const who = e.accelerator || e.failed || "";
    const label = `#${e.id} ${e.job ? "job " + e.job + " " : ""}${who}${e.spare ? " → " + e.spare : ""}`;
    text(svg, left - 8, y + 17, label, {class: "tl-text", "text-anchor": "end"});
    const g = el("g", {class: "recovery", "data-event": e.id, "data-job": e.job || ""}, svg);
    for (const s of sp.stages) {
      const x = X((s.start_s - sp.t0) * 1000), w = Math.max(1.5, X((s.end_s - sp.t0) * 1000) - x);
      const r = el("rect", {x: x, y: y + 6, width: w, height: row - 12, fill: STAGE_COLOURS[s.name] || "#999",
                            "data-stage": s.name}, g);
      el("title", {}, r).textContent = `${s.name}: ${fmt((s.end_s - s.start_s) * 1000, 2)} ms`;
    }
    text(svg, X(sp.total * 1000) + 4, y + 17, `${fmt(sp.total * 1000, 1)} ms`, {class: "tl-muted"});
  });
  let lx = left;                                   // the stage legend sits under the axis, off the bars
  const ly = top + recs.length * row + 40;
  const present = new Set(spans.flatMap((sp) => sp.stages.map((s) => s.name)));
  for (const name of STAGES.filter((n) => present.has(n))) {
    el("rect", {x: lx, y: ly - 9, width: 12, height: 10, fill: STAGE_COLOURS[name]}, svg);
    text(svg, lx + 16, ly, name, {class: "tl-text"});
    lx += 30 + 7 * name.length;
  }
}

function niceStep(raw) {
  const p = Math.pow(10, Math.floor(Math.log10(raw)));
  for (const m of [1, 2, 5, 10]) if (m * p >= raw) return m * p;
  return 10 * p;
}

function fillEvents() {
  const ol = document.getElementById("events");
  ol.replaceChildren();
  for (const e of state.events.slice(-EVENTS_SHOWN).reverse()) {
    const li = document.createElement("li");
    li.value = e.id;
    li.dataset.kind = e.kind;
    if (BAD_KINDS.test(e.kind)) li.className = "bad";
    const skip = new Set(["id", "time", "t_s", "kind", "stages", "recovery", "links"]);
    const detail = Object.entries(e)                 // instants (*_s, epoch s) are in the time column already
      .filter(([k, v]) => !skip.has(k) && !k.endsWith("_s") && v !== null && typeof v !== "object")
      .map(([k, v]) => `${k}=${typeof v === "number" ? +v.toFixed(3) : v}`).join(" ");
    li.textContent = `${String(e.time || "").replace("T", " ").slice(0, 19)} ${e.kind} ${detail}${lightOf(e)}`;
    ol.appendChild(li);
  }
}

// What light measured on a recovery's new links (and any link off its plan): measured vs planned dBm.
// A recovery event carries one verification, a refusal the list of its attempts (the last is shown).
function lightOf(e) {
  const v = Array.isArray(e.verification) ? e.verification[e.verification.length - 1] : e.verification;
  if (!v || !Array.isArray(v.links)) return "";
  const rows = v.links.filter((r) => r.rerouted || r.status !== "ok").map((r) => r.measured_dbm === null
    ? `${r.link} not measured`
    : `${r.link} measured ${fmt(r.measured_dbm, 2)} dBm vs planned ${fmt(r.planned_dbm, 2)} dBm (${r.status})`);
  return rows.length ? ` · light: ${rows.join("; ")}` : "";
}

// ---------------------------------------------------------------------------- refresh loop
async function refresh() {
  try {
    const [status, events] = await Promise.all([
      api("/api/v1/status"), api(`/api/v1/events?since=${state.lastEventId}&limit=${EVENTS_PAGE}`)]);
    const list = Array.isArray(events) ? events : (events.events || []);
    for (const e of list) if (e.id > state.lastEventId) { state.events.push(e); state.lastEventId = e.id; }
    state.status = status;
    const links = drawRoutes(status);
    drawAccelerators(status);
    fillLinks(links);
    drawTimeline();
    fillEvents();
    setConnection("live", "live · " + new Date().toLocaleTimeString());
    document.body.dataset.updated = String(Date.now());
  } catch (err) {
    setConnection("error", String(err.message || err));
  }
}

async function main() {
  state.token = takeToken();
  fillLegend();
  try {
    const reply = await fetch("/dashboard/geometry.json", {cache: "no-store"});
    state.geometry = await reply.json();
    drawMesh(state.geometry);
  } catch (err) {
    setConnection("error", "cannot load the mesh drawing: " + err);
    return;
  }
  await refresh();
  setInterval(refresh, POLL_MS);
}

main();

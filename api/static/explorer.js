// mnemolog explorer: recall, a neighbourhood graph, history with diffs, one correlation, all as of any moment.
// No library, no build step. Data is only ever rendered as text (text nodes, never parsed as markup), and the
// API key stays in sessionStorage: it is sent as "Authorization: Bearer" on every data call.

import { EDGE_COLOURS, layout } from "./explorer_graph.js";

const KEY = "mnemolog.explorer.key";
const TENANT = "mnemolog.explorer.tenant";
// One sign-in: the tab's history entries it made carry it, and Back restores none made by another sign-in.
const SIGNIN = "mnemolog.explorer.signin";
const SVG = "http://www.w3.org/2000/svg";
const PAGE = 40; // nodes per neighbourhood page

const state = {
  scopes: [],
  marks: [],
  asOf: null, // null: the head
  query: "",
  graph: null, // {node, kind, depth, direction, types, offset, position}: fixed when opened (position by its first page), so that every page is of one walk
  historyId: null,
  correlationId: null,
  correlation: null, // the open correlation's first page: {revertible, next_after, more, shown}
};

// The views: where each reports a failure, and how each is emptied (a view that cannot be drawn as of a moment shows
// nothing of another moment).
const VIEWS = {
  recall: { info: "search-info", clear: () => { $("results").replaceChildren(); $("relationships").replaceChildren(); } },
  neighbourhood: {
    info: "graph-info",
    clear: () => {
      $("graph").replaceChildren();
      $("graph-legend").replaceChildren();
      $("graph-nodes").replaceChildren();
      $("graph-prev").disabled = true;
      $("graph-next").disabled = true;
    },
  },
  history: { info: "history-info", clear: () => $("history").replaceChildren() },
  correlation: {
    info: "correlation-info",
    clear: () => {
      $("correlation-events").tBodies[0].replaceChildren();
      $("revert").hidden = true;
      $("correlation-more").hidden = true;
    },
  },
};

const $ = (id) => document.getElementById(id);

// -- DOM helpers: text only --------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (value !== null && value !== undefined && value !== false) node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  if (text !== null) node.textContent = text;
  return node;
}

function linkButton(label, action, extra = {}) {
  return el("button", { type: "button", class: "link", onclick: action, ...extra }, label);
}

function plural(n, word, many = `${word}s`) {
  return `${n} ${n === 1 ? word : many}`;
}

// At most n characters (code points: an emoji or a rare CJK character is never cut in half).
function shorten(text, n) {
  const chars = Array.from(String(text ?? ""));
  return chars.length > n ? chars.slice(0, n - 1).join("") + "…" : chars.join("");
}

function status(message, error = false) {
  const line = $("status");
  line.textContent = message;
  line.classList.toggle("error", error);
}

// -- the API -----------------------------------------------------------------------------------

class ApiError extends Error {}

// The key was refused (revoked, expired, never valid): keep nothing of it, show nothing read with it, ask again.
class SessionEnded extends ApiError {}

async function api(path, { method = "GET", body = undefined, params = {} } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [name, value] of Object.entries(params)) {
    if (value === null || value === undefined || value === "") continue;
    for (const one of Array.isArray(value) ? value : [value]) url.searchParams.append(name, String(one));
  }
  const headers = { Authorization: headerBytes(`Bearer ${sessionStorage.getItem(KEY) || ""}`) };
  const tenant = sessionStorage.getItem(TENANT);
  if (tenant) headers["X-Mnemolog-Tenant"] = headerBytes(tenant);
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
  } catch {
    throw new ApiError("the server could not be reached");
  }
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const e = (data && data.error) || {};
    const message = `${response.status} ${e.code || ""}: ${e.message || response.statusText || "refused"}${e.field ? ` (${e.field})` : ""}`;
    if (response.status === 401) {
      endSession();
      throw new SessionEnded(`${message}; sign in again`);
    }
    throw new ApiError(message);
  }
  if (data === null || typeof data !== "object") throw new ApiError(`${response.status}: the answer is not the API's JSON`);
  return data;
}

// A header value as its UTF-8 bytes, one character each: a browser sends only ISO-8859-1 characters in a header,
// each as its byte, and the server reads the header as UTF-8 (a tenant may be named in any script).
function headerBytes(text) {
  return String.fromCharCode(...new TextEncoder().encode(text));
}

// Runs one step of the page, reporting on the status line how long it took or what went wrong; a message
// the step returns replaces the timing. A step that draws a view (``what`` names one of VIEWS) empties it when it
// fails, and says why in the view itself: the status line is shared, and the next step's report would hide it.
async function guarded(what, fn) {
  const view = VIEWS[what];
  try {
    const began = performance.now();
    const message = await fn();
    if (view) $(view.info).classList.remove("error");
    status(message || `${what} (${Math.round(performance.now() - began)} ms)`);
  } catch (error) {
    if (!(error instanceof ApiError)) console.error(error); // a fault of the page itself: its trace goes to the console only
    const message = `${what}: ${error instanceof ApiError ? error.message : `the page failed (${error.name})`}`;
    if (view && !(error instanceof SessionEnded)) {
      view.clear();
      $(view.info).textContent = message;
      $(view.info).classList.add("error");
    }
    status(message, true);
  }
}

// -- sign-in -----------------------------------------------------------------------------------

async function signIn() {
  const me = await api("/v1/whoami");
  state.scopes = me.scopes;
  $("who").textContent = `tenant ${me.tenant} · ${me.scopes.join(", ")}${me.name ? ` · ${me.name}` : ""}`;
  $("signin").hidden = true;
  $("identity").hidden = false;
  $("timeline").hidden = false;
  $("views").hidden = false;
  await loadTimeline();
  remember(true);
}

function signOut() {
  forgetSignIn();
  window.location.reload();
}

// The key, its tenant and the sign-in they made: what the next person to use the tab must not inherit.
function forgetSignIn() {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(TENANT);
  sessionStorage.removeItem(SIGNIN);
}

// Back to the sign-in form, the key forgotten and every view closed.
function endSession() {
  forgetSignIn();
  Object.assign(state, { scopes: [], asOf: null, query: "", graph: null, historyId: null, correlationId: null, correlation: null });
  wipeViews();
  $("signin").hidden = false;
  $("identity").hidden = true;
  $("timeline").hidden = true;
  $("views").hidden = true;
}

// Every piece of data off the page (the views' state is kept, to draw them again).
function wipeViews() {
  for (const view of Object.values(VIEWS)) {
    view.clear();
    $(view.info).textContent = "";
    $(view.info).classList.remove("error");
  }
  $("history-id").textContent = "";
  $("moment").textContent = "";
}

// -- the timeline: a slider over the tenant's commits ------------------------------------------------

async function loadTimeline() {
  const timeline = await api("/v1/timeline", { params: { limit: 1000 } });
  state.marks = timeline.marks;
  const slider = $("slider");
  slider.max = String(Math.max(state.marks.length - 1, 0));
  slider.disabled = state.marks.length === 0;
  slider.value = String(markIndex(state.asOf));
  showMoment(timeline);
}

// The slider's place for a moment: the last mark at or before it (the head: the last mark).
function markIndex(asOf) {
  if (asOf === null) return Math.max(state.marks.length - 1, 0);
  let found = 0;
  state.marks.forEach((m, i) => { if (m.position <= asOf) found = i; });
  return found;
}

function showMoment(timeline = null) {
  const out = $("moment");
  if (state.asOf === null) {
    const last = state.marks[state.marks.length - 1];
    out.textContent = last ? `head · position ${last.position} · ${last.recorded_at}` : "head · no events yet";
    return;
  }
  const mark = state.marks[markIndex(state.asOf)];
  out.textContent = mark
    ? `as of position ${state.asOf} · ${mark.recorded_at} · ${mark.correlation_id || "no correlation"}`
    : `as of position ${state.asOf}`;
}

let redrawTimer = null;

function moveSlider() {
  const i = Number($("slider").value);
  state.asOf = i >= state.marks.length - 1 ? null : state.marks[i].position;
  if (state.graph) state.graph = { ...state.graph, offset: 0 }; // another moment, another walk: from its first page
  showMoment();
  clearTimeout(redrawTimer);
  redrawTimer = setTimeout(() => {
    remember(true);
    redrawAll();
  }, 120);
}

async function backToNow() {
  state.asOf = null;
  if (state.graph) state.graph = { ...state.graph, offset: 0 };
  remember(true);
  await guarded("timeline", loadTimeline);
  await redrawAll();
}

// Every open view, as of the slider's moment: the calls go out together.
async function redrawAll() {
  const asOf = state.asOf;
  await Promise.all([
    state.query ? guarded("recall", search) : null,
    state.graph ? guarded("neighbourhood", drawGraph) : null,
    state.historyId ? guarded("history", showHistory) : null,
    state.correlationId ? guarded("correlation", showCorrelation) : null,
  ]);
  if (asOf === state.asOf) document.body.dataset.asOf = asOf === null ? "head" : String(asOf);
}

// -- recall with its explanation -----------------------------------------------------------------

async function search() {
  const asOf = state.asOf;
  const answer = await api("/v1/recall", { method: "POST", body: { query: state.query, limit: 10, as_of: asOf } });
  if (asOf !== state.asOf) return; // the slider moved on: a newer call draws
  const channels = Object.entries(answer.channels).map(([name, c]) => `${name}: ${c.status}${c.status === "ok" ? ` ${c.count}` : ""}`);
  $("search-info").textContent = `${plural(answer.hits.length, "result")} · ${answer.fusion} fusion · ${channels.join(" · ")}${answer.degraded ? " · degraded" : ""}` +
    (answer.as_of !== null ? ` · as of ${answer.as_of}` : "");
  $("results").replaceChildren(...answer.hits.map(hitItem));
  $("relationships").replaceChildren(
    ...answer.relationships.slice(0, 20).map((r) => el("li", { class: "meta" }, `${r.kind}: ${r.a} ↔ ${r.b}${r.detail && r.detail.edge_type ? ` (${r.detail.edge_type})` : ""}`)),
  );
}

function hitItem(hit) {
  const why = Object.entries(hit.channels).map(([name, c]) => el("span", { class: "chip" }, `${name} #${c.rank} (${Number(c.score).toPrecision(3)})`));
  const extra = [];
  const priors = Object.entries(hit.priors || {});
  if (priors.length) extra.push(`priors ${priors.map(([k, v]) => `${k}×${v}`).join(", ")}`);
  if (hit.graph_path && hit.graph_path.length) extra.push(`path ${hit.graph_path.join(" → ")}`);
  if (hit.context && hit.context.length) extra.push(`context ${hit.context.map((c) => `${c.relation} ${c.source} +${c.amount.toFixed(3)}`).join(", ")}`);
  if (hit.kind === "entity") return entityHitItem(hit, why, extra);
  const m = hit.memory;
  if (hit.document) extra.push(`document ${hit.document.title} v${hit.document.version}`);
  return el(
    "li",
    { class: "hit", "data-id": hit.id, "data-kind": "memory" },
    el("div", { class: "text" }, m.memory),
    el("div", { class: "why" }, why, extra.length ? el("span", { class: "meta" }, extra.join(" · ")) : null),
    el(
      "div",
      { class: "meta" },
      `${hit.id} · v${m.version} · ${m.status} · score ${hit.score.toFixed(4)} `,
      linkButton("history", () => openHistory(hit.id), { "data-action": "history" }),
      linkButton("graph", () => openGraph(hit.id, "memory"), { "data-action": "graph" }),
    ),
  );
}

// An entity hit: its card, and the relations walked to it from an entity the question names.
function entityHitItem(hit, why, extra) {
  const e = hit.entity;
  if (hit.named_as) extra.push(`named as "${hit.named_as}"`);
  if (hit.path && hit.path.length) {
    extra.push(`via ${hit.path.map((r) => `${r.source_id} —${r.relation_type} ${r.weight}→ ${r.target_id}`).join(", ")} (×${Number(hit.path_score).toPrecision(3)})`);
  }
  return el(
    "li",
    { class: "hit entity", "data-id": hit.id, "data-kind": "entity" },
    el("div", { class: "text" }, `${e.name}${e.entity_type ? ` (${e.entity_type})` : ""}${e.description ? ` — ${e.description}` : ""}`),
    el("div", { class: "why" }, why, extra.length ? el("span", { class: "meta" }, extra.join(" · ")) : null),
    el(
      "div",
      { class: "meta" },
      `entity ${hit.id} · score ${hit.score.toFixed(4)} `,
      linkButton("graph", () => openGraph(hit.id, "entity"), { "data-action": "graph" }),
    ),
  );
}

// -- the neighbourhood graph ---------------------------------------------------------------------

function openGraph(node, kind) {
  const types = $("types").value.split(",").map((t) => t.trim()).filter(Boolean);
  state.graph = { node, kind, depth: $("depth").value, direction: $("direction").value, types, offset: 0 };
  $("node").value = node;
  $("kind").value = kind;
  remember();
  return guarded("neighbourhood", drawGraph);
}

async function drawGraph() {
  const g = state.graph;
  const asOf = state.asOf;
  // At the head, the pages after the first read the graph as of the first page's position: one walk, whatever is written meanwhile.
  const readAt = asOf !== null ? asOf : g.offset > 0 && g.position != null ? g.position : null;
  const page = await api("/v1/graph/neighborhood", {
    params: { node: g.node, kind: g.kind, depth: g.depth, direction: g.direction, type: g.types, limit: PAGE, offset: g.offset, as_of: readAt },
  });
  if (asOf !== state.asOf || g !== state.graph) return;
  if (g.offset === 0) g.position = page.position;
  const shown = page.nodes.length - 1;
  const total = page.total === null ? `more than ${page.offset + shown}` : String(page.total);
  const range = shown > 0 ? `nodes ${page.offset + 1}–${page.offset + shown} of ${total}` : `no neighbours${page.offset > 0 ? ` past ${page.offset}` : ""}`;
  const edges = `${plural(page.edges.length, "edge")}${page.edges_truncated ? " drawn, more between these nodes" : ""}`;
  $("graph-info").textContent = `${page.kind} ${page.node}: ${range} · ${edges}` + (page.as_of !== null ? ` · as of ${page.as_of}` : "");
  $("graph-prev").disabled = page.offset === 0;
  $("graph-next").disabled = !page.more;
  render(page);
}

function render(page) {
  const drawing = $("graph");
  // One unit of the drawing is one pixel of the page at the width it is drawn: its labels read at their CSS sizes
  // (a fixed 640-unit drawing shrunk them to 5 px in a third of the page).
  const width = Math.max(320, Math.round(drawing.clientWidth || 640));
  const height = Math.round(width * 0.75);
  drawing.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const at = layout(page.nodes, width, height, page.edges);
  const parts = [];
  // Each edge type its colour (the legend names them); an edge's type is written along it only where it fits and the
  // drawing holds few edges, else its title (hover) and the legend say it.
  const types = [...new Set(page.edges.map((e) => e.type))].sort();
  const colour = (type) => `t${types.indexOf(type) % EDGE_COLOURS}`;
  for (const e of page.edges) {
    const a = at.get(e.source);
    const b = at.get(e.target);
    if (!a || !b) continue;
    const line = svg("line", { x1: a[0], y1: a[1], x2: b[0], y2: b[1], class: colour(e.type) });
    line.append(svg("title", {}, `${e.type} ${e.source} → ${e.target} (weight ${e.weight})`));
    parts.push(line);
    if (page.edges.length <= 8 && Math.hypot(b[0] - a[0], b[1] - a[1]) >= 7 * e.type.length + 24) {
      parts.push(svg("text", { x: (a[0] + b[0]) / 2 + 4, y: (a[1] + b[1]) / 2, class: "edge" }, e.type));
    }
  }
  $("graph-legend").replaceChildren(
    ...types.flatMap((type, i) => [...(i ? [" "] : []), el("span", { class: "legend" }, el("span", { class: `swatch ${colour(type)}` }), type)]),
  );
  page.nodes.forEach((n, i) => {
    const [x, y] = at.get(n.id);
    const r = i === 0 ? 9 : 6;
    const dot = svg("circle", { cx: x, cy: y, r, class: `${n.kind}${i === 0 ? " seed" : ""}`, "data-id": n.id });
    dot.append(svg("title", {}, `${n.id}\n${n.label}`));
    dot.addEventListener("click", () => openGraph(n.id, n.kind === "entity" ? "entity" : state.graph.kind === "entity" ? "entity" : "memory"));
    parts.push(dot, svg("text", { x: x + r + 3, y: y + 4 }, shorten(n.label, 28)));
  });
  drawing.replaceChildren(...parts);
  $("graph-nodes").replaceChildren(
    ...page.nodes.map((n) =>
      el(
        "li",
        { class: "meta" },
        `${n.kind} ${n.id} (depth ${n.depth}): `,
        el("span", { class: "text" }, shorten(n.label, 120)),
        " ",
        n.kind === "memory" ? linkButton("history", () => openHistory(n.id)) : null,
      ),
    ),
  );
}

function graphPage(delta) {
  state.graph = { ...state.graph, offset: Math.max(0, state.graph.offset + delta * PAGE) };
  remember();
  return guarded("neighbourhood", drawGraph);
}

// -- history with a word-level diff --------------------------------------------------------------

function openHistory(id) {
  state.historyId = id;
  remember();
  return guarded("history", showHistory);
}

async function showHistory() {
  const id = state.historyId;
  $("history-id").textContent = id;
  const asOf = state.asOf;
  const answer = await api(`/v1/memories/${encodeURIComponent(id)}/history`, { params: { as_of: asOf } });
  if (asOf !== state.asOf || id !== state.historyId) return;
  $("history-info").textContent = plural(answer.versions.length, "version") + (asOf !== null ? ` · as of ${asOf}` : "");
  const items = answer.versions.map((v, i) => {
    const before = i > 0 ? answer.versions[i - 1].memory : "";
    return el(
      "li",
      { class: "version", "data-version": v.version },
      el("div", { class: "meta" },
        `v${v.version} · ${v.event_type} · position ${v.position} · ${v.recorded_at} · ${v.status} · actor ${v.actor || "?"} · correlation `,
        v.correlation_id ? linkButton(v.correlation_id, () => openCorrelation(v.correlation_id), { "data-action": "correlation" }) : "none"),
      v.reason ? el("div", { class: "why" }, `reason: ${v.reason}`) : null,
      (v.changed || []).length ? el("div", { class: "changed" }, `changed: ${v.changed.join(", ")}`) : null,
      el("div", { class: "text diff" }, diffWords(before, v.memory)),
    );
  });
  // A forget that erased it: by whom, when, why (the text above is the marker, never what was erased).
  const forgets = (answer.forgotten || []).map((f) =>
    el("li", { class: "version forgotten" },
      el("div", { class: "meta" }, `${f.event_type} · subject ${f.subject} · position ${f.position} · ${f.recorded_at} · actor ${f.actor || "?"}`),
      f.reason ? el("div", { class: "why" }, `reason: ${f.reason}`) : null),
  );
  $("history").replaceChildren(...forgets.reverse(), ...items.reverse());
}

// Word-level diff (longest common subsequence over words and the spaces between them), as ins/del nodes.
function diffWords(before, after) {
  const a = before ? before.split(/(\s+)/).filter((t) => t !== "") : [];
  const b = after ? after.split(/(\s+)/).filter((t) => t !== "") : [];
  if (a.length * b.length > 4_000_000) return [el("del", {}, before), el("ins", {}, after)];
  const table = Array.from({ length: a.length + 1 }, () => new Uint32Array(b.length + 1));
  for (let i = a.length - 1; i >= 0; i--)
    for (let j = b.length - 1; j >= 0; j--)
      table[i][j] = a[i] === b[j] ? table[i + 1][j + 1] + 1 : Math.max(table[i + 1][j], table[i][j + 1]);
  const out = [];
  const push = (kind, text) => {
    const last = out[out.length - 1];
    if (last && last.kind === kind) last.text += text;
    else out.push({ kind, text });
  };
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) { push("same", a[i]); i++; j++; }
    else if (i < a.length && (j >= b.length || table[i + 1][j] >= table[i][j + 1])) { push("del", a[i]); i++; }
    else { push("ins", b[j]); j++; }
  }
  return out.map((part) => (part.kind === "same" ? document.createTextNode(part.text) : el(part.kind, {}, part.text)));
}

// -- one correlation, and its revert behind a confirmation ----------------------------------------

function openCorrelation(id) {
  state.correlationId = id;
  $("correlation-id").value = id;
  remember();
  return guarded("correlation", showCorrelation);
}

// What an event without a text of its own did, by type: an edge's or relation's ends, a document's version, where a
// memory went (the others read as their text, name or reason).
const arrow = (source, type, target) => `${source} —${type}→ ${target}`;
const because = (p) => (p.reason ? ` (${p.reason})` : "");
const weighing = (weight) => (weight !== undefined && weight !== 1 ? ` ×${weight}` : "");
const leftWorking = (p) => `${plural(p.memory_ids.length, "memory", "memories")} out of working memory${because(p)}`;
const SUMMARIES = {
  EdgeLinked: (p) => arrow(p.edge.source, p.edge.edge_type, p.edge.target) + weighing(p.edge.weight),
  EdgeUnlinked: (p) => arrow(p.edge.source, p.edge.edge_type, p.edge.target) + because(p),
  RelationSet: (p) => arrow(p.source_id, p.relation_type, p.target_id) + weighing(p.weight),
  RelationRemoved: (p) => arrow(p.source_id, p.relation_type, p.target_id) + because(p),
  DocumentImported: (p) => `${p.doc_id} v${p.version}: ${p.title} (${plural(p.chunk_ids.length, "chunk")})`,
  MemoryMergedInto: (p) => `${p.memory_id} merged into ${p.merged_into}`,
  MemorySuperseded: (p) => `${p.memory_id} superseded by ${p.superseded_by}`,
  MemoryArchived: (p) => `${p.memory_id} archived${because(p)}`,
  MemorySoftDeleted: (p) => `${p.memory_id} deleted${because(p)}`,
  MemoryRestored: (p) => `${p.memory_id} restored${because(p)}`,
  WorkingMemoryEvicted: leftWorking,
  WorkingMemoryWithdrawn: leftWorking,
};

function eventSummary(e) {
  const p = e.payload || {};
  let text = p.content?.memory ?? p.memory ?? p.name ?? p.text ?? p.reason ?? p.correlation_id ?? "";
  if (SUMMARIES[e.type] && !p.content) {
    try {
      text = SUMMARIES[e.type](p);
    } catch {
      // a payload of another shape (an older event version): its text as before
    }
  }
  return shorten(typeof text === "string" ? text : JSON.stringify(text), 160);
}

const CORRELATION_PAGE = 200; // events a page; "More events" reads the next

async function showCorrelation() {
  const id = state.correlationId;
  const answer = await api("/v1/correlation", { params: { correlation_id: id, limit: CORRELATION_PAGE } });
  if (id !== state.correlationId) return;
  const reverted = answer.reverted_by.map((r) => `reverted at position ${r.position} by ${r.actor || "?"} (${r.correlation_id})`);
  // A revert that was reverted in turn leaves the correlation in effect again: the chain says which stands.
  const chain = answer.revert_chain.length > 1 ? ` · revert chain ${answer.revert_chain.join(" → ")}: ${answer.reverted ? "reverted" : "in effect again"}` : "";
  state.correlation = {
    summary: (answer.reverts ? ` · a revert of ${answer.reverts}` : "") + (reverted.length ? ` · ${reverted.join("; ")}` : " · not reverted") + chain,
    shown: 0,
  };
  $("correlation-events").tBodies[0].replaceChildren();
  appendCorrelation(answer);
  const canWrite = state.scopes.includes("write");
  const forget = answer.events.some((e) => e.type === "SubjectForgotten"); // a forget cannot be reverted
  $("revert").hidden = !(canWrite && !answer.reverted && !answer.reverts && !forget && answer.events.length > 0);
}

// The next page of the open correlation, below the rows shown.
async function moreCorrelation() {
  const id = state.correlationId;
  const c = state.correlation;
  const answer = await api("/v1/correlation", { params: { correlation_id: id, after: c.next_after, limit: CORRELATION_PAGE } });
  if (id !== state.correlationId || c !== state.correlation) return;
  appendCorrelation(answer);
}

function appendCorrelation(answer) {
  const c = state.correlation;
  $("correlation-events").tBodies[0].append(
    ...answer.events.map((e) =>
      el("tr", { class: state.asOf !== null && e.position > state.asOf ? "later" : "" },
        el("td", {}, e.position), el("td", {}, e.recorded_at), el("td", {}, e.type), el("td", {}, e.stream_id),
        el("td", {}, e.metadata.actor || ""), el("td", { class: "text" }, eventSummary(e))),
    ),
  );
  c.shown += answer.events.length;
  c.next_after = answer.next_after;
  $("correlation-info").textContent = `${plural(c.shown, "event")}${answer.more ? " shown, more follow" : ""}${c.summary}`;
  $("correlation-more").hidden = !answer.more;
}

async function askRevert() {
  const id = state.correlationId;
  const preview = await api("/v1/reverts", { method: "POST", body: { correlation_id: id, dry_run: true } });
  const d = preview.data || {};
  $("confirm-id").textContent = id;
  $("confirm-text").textContent = d.already_reverted
    ? "It was already reverted."
    : `${plural(d.would_revert ?? 0, "event")} would be compensated, touching ${plural(preview.memory_ids.length, "memory", "memories")}` +
      (d.conflicts && d.conflicts.length ? `; later changes conflict: ${d.conflicts.join("; ")} (it will be refused)` : ".");
  $("confirm-revert").showModal();
}

async function confirmRevert(event) {
  event.preventDefault();
  $("confirm-revert").close();
  const id = state.correlationId;
  await guarded(`revert of ${id}`, async () => {
    const done = await api("/v1/reverts", { method: "POST", body: { correlation_id: id } });
    await loadTimeline();
    await redrawAll();
    const data = done.data || {};
    if (!done.positions.length) return `${id}: nothing reverted${data.already_reverted ? ", it was already reverted" : ""}`; // reverted meanwhile
    const [first, last] = [done.positions[0], done.positions[done.positions.length - 1]];
    return `reverted ${id}: ${plural(data.reverted ?? 0, "event")} compensated at ${first === last ? `position ${first}` : `positions ${first}–${last}`}`;
  });
}

// -- back and forward: each view opened is an entry of the tab's history --------------------------------------
// The entry holds what is open (its state object), never in the address: queries and ids stay out of the URL and
// out of the browser's history of addresses.

function snapshot() {
  return { explorer: 1, signin: sessionStorage.getItem(SIGNIN), query: state.query, graph: state.graph, historyId: state.historyId, correlationId: state.correlationId, asOf: state.asOf };
}

// A new entry for a view just opened (``replace``: the same entry, now at another moment).
function remember(replace = false) {
  if (replace) window.history.replaceState(snapshot(), "");
  else window.history.pushState(snapshot(), "");
}

// Back or forward: the views of that entry, as of its moment; a view it did not have is emptied. An entry another
// sign-in made (the person before, with another key) restores nothing: what they searched for and opened is theirs.
function restore(saved) {
  if ($("views").hidden) return;
  const mine = saved && saved.explorer && saved.signin === sessionStorage.getItem(SIGNIN);
  const entry = mine ? saved : { query: "", graph: null, historyId: null, correlationId: null, asOf: null };
  clearTimeout(redrawTimer);
  state.query = entry.query;
  state.graph = entry.graph;
  state.historyId = entry.historyId;
  state.correlationId = entry.correlationId;
  state.asOf = entry.asOf;
  $("query").value = state.query;
  $("node").value = state.graph ? state.graph.node : "";
  $("correlation-id").value = state.correlationId || "";
  $("slider").value = String(markIndex(state.asOf));
  showMoment();
  for (const [name, open] of [["recall", state.query], ["neighbourhood", state.graph], ["history", state.historyId], ["correlation", state.correlationId]]) {
    if (open) continue;
    VIEWS[name].clear();
    $(VIEWS[name].info).textContent = "";
    if (name === "history") $("history-id").textContent = "";
  }
  return redrawAll();
}

// -- wiring ----------------------------------------------------------------------------------------

function start() {
  $("signin").addEventListener("submit", async (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY, $("key").value.trim());
    sessionStorage.setItem(SIGNIN, Array.from(crypto.getRandomValues(new Uint8Array(8)), (b) => b.toString(16).padStart(2, "0")).join(""));
    const tenant = $("tenant").value.trim();
    if (tenant) sessionStorage.setItem(TENANT, tenant);
    else sessionStorage.removeItem(TENANT);
    $("key").value = "";
    await guarded("signed in", signIn);
    if ($("identity").hidden) forgetSignIn(); // refused: keep nothing
  });
  $("signout").addEventListener("click", signOut);
  $("slider").addEventListener("input", moveSlider);
  $("now").addEventListener("click", backToNow);
  $("search").addEventListener("submit", (event) => {
    event.preventDefault();
    state.query = $("query").value.trim();
    if (!state.query) return;
    remember();
    guarded("recall", search);
  });
  $("graph-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const node = $("node").value.trim();
    if (node) openGraph(node, $("kind").value);
  });
  $("graph-prev").addEventListener("click", () => graphPage(-1));
  $("graph-next").addEventListener("click", () => graphPage(1));
  $("correlation-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const id = $("correlation-id").value.trim();
    if (id) openCorrelation(id);
  });
  $("correlation-more").addEventListener("click", () => guarded("correlation", moreCorrelation));
  $("revert").addEventListener("click", () => guarded("revert preview", askRevert));
  $("confirm-ok").addEventListener("click", confirmRevert);
  window.addEventListener("popstate", (event) => restore(event.state));
  // Leaving the page takes its data along: a page kept in the back/forward cache holds none (a subject forgotten
  // meanwhile must not come back from it); shown again, it reads everything anew, the key checked first.
  window.addEventListener("pagehide", wipeViews);
  window.addEventListener("pageshow", (event) => {
    if (event.persisted && sessionStorage.getItem(KEY)) guarded("signed in", async () => { await signIn(); await redrawAll(); });
  });
  if (sessionStorage.getItem(KEY)) guarded("signed in", signIn);
  document.body.dataset.ready = "yes";
}

start();

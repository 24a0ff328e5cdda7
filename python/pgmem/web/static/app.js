// pgmem memory explorer: one page over pgmem serve's REST API (no build step, no framework).
// Every call carries the bearer token of this tab (sessionStorage); every view is built with
// DOM nodes and textContent, never with HTML from the server.
"use strict";

const $ = (sel) => document.querySelector(sel);
const state = { token: null, me: null, conversation: null, mapTimer: null, lastMapAt: 0 };

// ------------------------------------------------------------------ DOM helpers
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "style") el.setAttribute("style", v);
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
const fill = (el, ...nodes) => { el.replaceChildren(...nodes.flat(Infinity).filter((n) => n !== null && n !== undefined)); };
const pct = (x) => (x === null || x === undefined ? "–" : `${Math.round(Math.max(0, Math.min(1, x)) * 100)}%`);
const num = (x, d = 3) => (x === null || x === undefined ? "–" : Number(x).toFixed(d));
const when = (t) => (t ? new Date(t).toLocaleString() : "–");
const plain = (v) => (typeof v === "string" ? v : JSON.stringify(v));

function toast(text) {
  const t = $("#toast");
  t.textContent = text;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 3500);
}

// ------------------------------------------------------------------ the API
class ApiError extends Error {
  constructor(status, body) {
    super((body && (body.message || body.error)) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

async function api(path, { method = "GET", body, raw = false } = {}) {
  const headers = { Authorization: `Bearer ${state.token}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (r.status === 401) { signOut("This token was refused: sign in again."); throw new ApiError(401, null); }
  if (raw && r.ok) return r;
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = text; }
  if (!r.ok) throw new ApiError(r.status, data);
  return data;
}

function failed(el, e) {
  fill(el, h("p", { class: "error" }, e.message + (e.body && e.body.hint ? ` (${e.body.hint})` : "")));
}

// ------------------------------------------------------------------ sign in
function signOut(message) {
  sessionStorage.removeItem("pgmem.token");
  state.token = null;
  $("#app").hidden = true;
  $("#login").hidden = false;
  $("#who").textContent = "not signed in";
  const err = $("#login-error");
  err.hidden = !message;
  err.textContent = message || "";
}

async function signIn(token) {
  state.token = token;
  try {
    state.me = await api("/api/session");
  } catch (e) {
    if (!(e instanceof ApiError && e.status === 401)) signOut(e.message);
    return;
  }
  sessionStorage.setItem("pgmem.token", token);
  $("#login").hidden = true;
  $("#app").hidden = false;
  $("#who").textContent = `tenant ${state.me.tenant}` + (state.me.user ? ` · user ${state.me.user}` : "") + ` · ${state.me.via}`;
  if (state.me.user) {
    $("#chat-user").value = state.me.user;
    $("#chat-user").disabled = true;
    $("#profile-user").value = state.me.user;
  }
  newConversation();
  route();
}

// ------------------------------------------------------------------ tabs
function show(tab) {
  $("#toast").hidden = true;
  document.querySelectorAll("#tabs button").forEach((b) => b.classList.toggle("active", b.dataset.tab === tab));
  document.querySelectorAll(".tab").forEach((s) => s.classList.toggle("active", s.id === `tab-${tab}`));
  if (tab === "map") startMap(); else stopMap();
  if (tab === "health") loadHealth();
  if (tab === "settings") loadKeyStatus();
  if (tab === "threads" && !$("#threads-conversation").value) $("#threads-conversation").value = state.conversation;
}

function route() {
  // #memory/42 opens a memory; #search, #profile, ... a tab
  const m = location.hash.match(/^#memory\/(\d+)$/);
  if (m) { show("memory"); openMemory(Number(m[1])); return; }
  const tab = location.hash.replace(/^#/, "");
  show(document.querySelector(`#tabs button[data-tab="${tab}"]`) ? tab : "chat");
}

// ------------------------------------------------------------------ chat
function newConversation() {
  state.conversation = `web-${Math.random().toString(36).slice(2, 10)}`;
  $("#chat-conversation").value = state.conversation;
  fill($("#chat-log"), h("p", { class: "hint" },
    "Ask anything. Each reply shows the memories Shadow's activation considered: ✓ activated (sent to the model), ○ candidates below the threshold."));
  fill($("#chat-stages"));
  fill($("#chat-context"), h("p", { class: "hint" }, "The last reply's memories appear here."));
}

function memoryItem(m) {
  const sig = m.signals || {};
  return h("div", { class: "mem-item", dataset: { activated: String(!!m.activated), memoryId: String(m.memoryId) },
                    title: "open this memory", onclick: () => { location.hash = `#memory/${m.memoryId}`; } },
    h("span", { class: "mark" }, m.activated ? "✓" : "○"),
    h("span", { class: "score" }, pct(m.activationScore)),
    h("span", { class: "sum" }, m.summary || m.content || ""),
    h("span", { class: "sigs" }, `embedding ${num(sig.embedding, 2)} · metadata ${num(sig.metadata, 2)} · summary ${num(sig.summary, 2)} · temporal ${num(sig.temporal, 2)} · ${m.relevanceType || ""}`));
}

function showMemoryContext(mc) {
  const list = (mc.candidateMemories || []).map(memoryItem);
  fill($("#chat-context"),
    h("p", { class: "summary-line" },
      `${(mc.activatedMemories || []).length} activated of ${mc.totalMemories} considered · threshold ${pct(mc.threshold)} (${mc.contextType}) · average activation ${pct(mc.avgActivationScore)}`
      + (mc.injected ? " · sent to the model" : " · not sent (the policy needs no memories)")),
    list.length ? list : h("p", { class: "hint" }, "No memory was considered."));
}

function stageChip(a) {
  const label = a.stage === "classified" ? `classified: ${a.intent} (${num(a.confidence, 2)})`
    : a.stage === "retrieved" ? `retrieved: ${a.retrieval_info.num_docs} memories, ${a.retrieval_info.similar_queries} similar questions`
    : a.stage === "complete" ? "complete" : a.stage;
  return h("span", { class: "stage done", dataset: { stage: a.stage } }, label);
}

async function sendChat(ev) {
  ev.preventDefault();
  const input = $("#chat-input");
  const message = input.value.trim();
  if (!message) return;
  input.value = "";
  const log = $("#chat-log");
  log.querySelector(".hint")?.remove();
  log.append(h("div", { class: "msg user" }, message));
  const reply = h("div", { class: "msg assistant pending" }, "…");
  log.append(reply);
  log.scrollTop = log.scrollHeight;
  $("#chat-send").disabled = true;
  fill($("#chat-stages"));
  state.conversation = $("#chat-conversation").value.trim() || state.conversation;
  const body = { message, conversation_id: state.conversation, stream: true };
  const user = $("#chat-user").value.trim();
  if (user && !(state.me && state.me.user)) body.user_id = user;
  let text = "";
  try {
    const r = await api("/api/chat", { method: "POST", body, raw: true });
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const event = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        if (!event.startsWith("data: ")) continue;
        const line = event.slice(6);
        const code = line.slice(0, line.indexOf(":"));
        const value = JSON.parse(line.slice(line.indexOf(":") + 1));
        if (code === "0") {
          text += value;
          reply.textContent = text;
          reply.classList.remove("pending");
        } else if (code === "8") {
          for (const a of value) {
            $("#chat-stages").append(stageChip(a));
            if (a.stage === "complete") {
              showMemoryContext(a.memoryContext);
              reply.append(h("span", { class: "meta" },
                `${a.intent} · ${(a.memoryContext.activatedMemories || []).length} memories activated` +
                (a.storedMemoryId ? ` · your message is memory #${a.storedMemoryId}` : "")));
            }
          }
        } else if (code === "3") {
          reply.classList.add("error");
          reply.textContent = (text ? text + "\n\n" : "") + value;
        }
      }
      log.scrollTop = log.scrollHeight;
    }
    reply.dataset.done = "true";
  } catch (e) {
    reply.classList.add("error");
    reply.textContent = e.message;
    reply.dataset.done = "true";
  } finally {
    $("#chat-send").disabled = false;
    input.focus();
  }
}

// ------------------------------------------------------------------ search
const SIGNAL_ORDER = ["semantic", "lexical", "recency", "actor", "spatial", "usage", "time", "session", "neighbour"];

async function runSearch(ev) {
  ev && ev.preventDefault();
  const out = $("#search-results");
  const query = $("#search-query").value.trim();
  if (!query) return;
  fill(out, h("p", { class: "hint" }, "searching…"));
  try {
    const k = Number($("#search-k").value) || 8;
    const { explain } = await api("/api/search", { method: "POST", body: { query, k, explain: true } });
    const byId = new Map();
    for (const r of explain) {
      if (!byId.has(r.id)) byId.set(r.id, { id: r.id, rank: r.rank, score: r.score, content: r.content, signals: [] });
      byId.get(r.id).signals.push(r);
    }
    const hits = [...byId.values()].sort((a, b) => a.rank - b.rank);
    if (!hits.length) { fill(out, h("p", { class: "hint" }, "No memory matches.")); return; }
    fill(out, hits.map((hit) => {
      const sigs = hit.signals.sort((a, b) => SIGNAL_ORDER.indexOf(a.signal) - SIGNAL_ORDER.indexOf(b.signal));
      const parts = sigs.filter((s) => s.weight > 0).map((s) => `${s.signal} ${num(s.value, 2)}×${num(s.weight, 2)}`);
      return h("div", { class: "hit", dataset: { memoryId: String(hit.id) } },
        h("div", { class: "hit-head" }, h("span", { class: "rank" }, `#${hit.rank}`), h("span", { class: "score" }, num(hit.score)),
          h("a", { href: `#memory/${hit.id}` }, `memory ${hit.id}`)),
        h("div", { class: "hit-content", onclick: () => { location.hash = `#memory/${hit.id}`; } }, hit.content),
        h("div", { class: "signals" }, sigs.map((s) => [
          h("span", { class: "signal-name" }, s.signal),
          h("div", { class: "bar signal-bar", dataset: { signal: s.signal, value: String(s.value ?? 0) },
                     title: `value ${num(s.value)}, weight ${num(s.weight)}` },
            h("span", { style: `width:${Math.round(Math.max(0, Math.min(1, s.value || 0)) * 100)}%` })),
          h("span", { class: "signal-val" }, `+${num(s.contribution)} (w ${num(s.weight, 2)})`)])),
        h("div", { class: "explanation" }, `score ${num(hit.score)} = ${parts.join(" + ")}`));
    }));
  } catch (e) { failed(out, e); }
}

// ------------------------------------------------------------------ a memory
async function openMemory(id) {
  $("#memory-id").value = id;
  const out = $("#memory-view");
  fill(out, h("p", { class: "hint" }, "loading…"));
  try {
    const [m, hist, binds] = await Promise.all([api(`/api/memories/${id}`), api(`/api/memories/${id}/history`),
                                                api(`/api/memories/${id}/bindings`)]);
    const w5h1 = [["who", m.who], ["what", m.what], ["when", when(m.happened_at || m.created_at)], ["where", m.location],
                  ["why", m.why], ["how", m.how]];
    const deleted = m.state === "deleted" || m.state === "archived";
    const action = deleted
      ? h("button", { id: "memory-restore", onclick: () => changeMemory(id, "restore") }, "Restore")
      : h("button", { id: "memory-forget", class: "danger", onclick: () => changeMemory(id, "forget") }, "Forget");
    fill(out, h("div", { class: `mem state-${m.state}`, dataset: { state: m.state, memoryId: String(m.id) } },
      h("div", { class: "row" }, h("span", { class: `badge ${deleted ? "bad" : "ok"}`, id: "memory-state" }, m.state),
        h("span", { class: "badge" }, m.category), h("span", { class: "badge" }, m.tier),
        h("span", { class: "small muted" }, `importance ${num(m.importance, 2)} · salience ${num(m.salience, 2)} · used ${m.access_count}× · created ${when(m.created_at)}`),
        action),
      h("p", { class: "mem-title" }, m.content),
      m.summary ? h("p", { class: "small muted" }, `summary: ${m.summary}`) : null,
      h("div", { class: "two" },
        h("div", {}, h("h3", {}, "5W1H"), h("table", { class: "w5h1" }, w5h1.map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", {}, v || "–")))),
          (m.topics && m.topics.length) ? h("p", { class: "small" }, "topics: ", m.topics.map((t) => h("span", { class: "badge accent" }, t))) : null,
          (m.entities && m.entities.length) ? h("p", { class: "small" }, "entities: ", m.entities.map((t) => h("span", { class: "badge" }, t))) : null),
        h("div", {}, h("h3", {}, `Bindings (${binds.bindings.length})`),
          binds.bindings.length ? h("table", {}, h("tr", {}, h("th", {}, "memory"), h("th", {}, "kind"), h("th", {}, "strength"), h("th", {}, "content")),
            binds.bindings.map((b) => h("tr", {},
              h("td", {}, h("a", { href: `#memory/${b.other_id}` }, `${b.direction === "out" ? "→" : "←"} ${b.other_id}`)),
              h("td", {}, b.kind), h("td", {}, num(b.strength, 2)), h("td", { class: "small" }, b.other_content))))
            : h("p", { class: "hint" }, "No bindings yet."))),
      h("h3", {}, `History (${hist.history.length} changes)`),
      h("div", { id: "memory-history" }, hist.history.map((x) => h("div", { class: "hist-item", dataset: { op: x.op } },
        h("span", { class: "op" }, x.op), ` · ${when(x.at)} · ${x.actor}`,
        x.details && x.details.reason ? h("span", { class: "muted" }, ` · “${x.details.reason}”`) : null,
        (state.me && !state.me.user && x.before) ? [" ", h("a", { class: "link", onclick: () => revert(id, x.id) }, "revert to before")] : null)))));
  } catch (e) { failed(out, e); }
}

async function changeMemory(id, what) {
  try {
    const reason = what === "forget" ? "forgotten in the memory explorer" : "restored in the memory explorer";
    const m = await api(`/api/memories/${id}/${what}`, { method: "POST", body: { reason } });
    toast(`memory ${id}: ${m.state}`);
    await openMemory(id);
  } catch (e) { toast(e.message); }
}

async function revert(id, historyId) {
  try {
    await api(`/api/history/${historyId}/revert`, { method: "POST" });
    toast(`memory ${id} reverted`);
    await openMemory(id);
  } catch (e) { toast(e.message); }
}

// ------------------------------------------------------------------ profile
async function loadProfile(ev) {
  ev && ev.preventDefault();
  const user = $("#profile-user").value.trim();
  const out = $("#profile-view");
  if (!user) return;
  try {
    const { facts } = await api(`/api/profile/${encodeURIComponent(user)}/history`);
    if (!facts.length) { fill(out, h("p", { class: "hint" }, `Nothing is known about ${user} yet.`)); return; }
    const byKey = new Map();
    for (const f of facts) { if (!byKey.has(f.key)) byKey.set(f.key, []); byKey.get(f.key).push(f); }
    fill(out, [...byKey.entries()].map(([key, rows]) => h("div", { class: "fact-group", dataset: { key } },
      h("div", { class: "fact-key" }, key),
      h("div", { class: "timeline" }, rows.map((f) => {
        const superseded = f.status === "past" || f.status === "retired";
        return h("div", { class: `fact ${superseded ? "superseded" : "current"}`, dataset: { status: f.status, value: plain(f.value) } },
          h("span", { class: "value" }, plain(f.value)), " ",
          h("span", { class: `badge ${superseded ? "" : "ok"}` }, superseded ? `superseded (${f.status})` : f.status),
          h("div", { class: "when" }, (f.status === "retired"
              ? `known ${when(f.recorded_from)} → retired ${when(f.recorded_to)}`
              : `${when(f.valid_from)} → ${f.valid_to ? when(f.valid_to) : "now"}`) + ` · confidence ${num(f.confidence, 2)} · ${f.source}`
            + (f.statement ? ` · “${f.statement}”` : ""),
            f.source_memory_id ? [" · ", h("a", { href: `#memory/${f.source_memory_id}` }, `memory ${f.source_memory_id}`)] : null));
      })))));
  } catch (e) { failed(out, e); }
}

// ------------------------------------------------------------------ threads and insights
async function loadThreads(ev) {
  ev && ev.preventDefault();
  const conv = $("#threads-conversation").value.trim();
  const out = $("#threads-view");
  try {
    const { threads } = await api(`/api/conversations/${encodeURIComponent(conv)}/threads?include_archived=true`);
    if (!threads.length) { fill(out, h("p", { class: "hint" }, "No threads in this conversation yet.")); return; }
    fill(out, threads.map((t) => {
      const msgs = h("div", { class: "small" });
      return h("div", { class: "hit thread", dataset: { threadId: String(t.thread_id) } },
        h("div", { class: "hit-head" }, h("b", {}, t.label || `thread ${t.thread_id}`), h("span", { class: "badge" }, t.status),
          h("span", { class: "small muted" }, `${t.message_count} messages`),
          h("a", { class: "link", onclick: async () => {
            const { messages } = await api(`/api/threads/${t.thread_id}/messages?conversation_id=${encodeURIComponent(conv)}`);
            fill(msgs, messages.map((m) => h("div", {}, h("b", {}, `${m.role}: `), m.content)));
          } }, "messages")),
        t.summary ? h("p", { class: "small" }, t.summary) : null, msgs);
    }));
  } catch (e) { failed(out, e); }
}

async function loadInsights(ev) {
  ev && ev.preventDefault();
  const out = $("#insights-view");
  try {
    const q = $("#insights-query").value.trim();
    const { insights } = await api("/api/insights/search", { method: "POST", body: { query: q || null, k: 20 } });
    if (!insights.length) { fill(out, h("p", { class: "hint" }, "No insights yet.")); return; }
    fill(out, insights.map((i) => h("div", { class: "hit" }, h("span", { class: "badge accent" }, i.type), " ", i.content,
      h("div", { class: "small muted" }, `confidence ${num(i.confidence, 2)}` + (i.concepts && i.concepts.length ? ` · ${i.concepts.join(", ")}` : "")))));
  } catch (e) { failed(out, e); }
}

// ------------------------------------------------------------------ map and clusters
async function refreshMap() {
  const status = $("#map-status");
  status.textContent = "projecting…";
  try {
    const method = $("#map-method").value;
    await api("/api/map/project", { method: "POST", body: { method } });
    const r = await api(`/api/map?method=${method}&color=${$("#map-color").value}`, { raw: true });
    $("#map-frame").srcdoc = await r.text();
    state.lastMapAt = Date.now();
    status.textContent = `refreshed ${new Date().toLocaleTimeString()} · every minute while this tab is open`;
    const { clusters } = await api("/api/clusters");
    fill($("#clusters-view"), clusters.length ? h("table", {},
      h("tr", {}, h("th", {}, "cluster"), h("th", {}, "label"), h("th", {}, "size"), h("th", {}, "energy"), h("th", {}, "nearest members")),
      clusters.map((c) => h("tr", {}, h("td", {}, c.cluster_id), h("td", {}, c.label || (c.top_terms || []).join(", ")), h("td", {}, c.size),
        h("td", {}, h("span", { class: "energy" }, h("span", { style: `width:${Math.round((c.energy || 0) * 100)}%` })), ` ${num(c.energy, 2)}`),
        h("td", { class: "small" }, (c.top_members || []).map((m) => h("div", {}, h("a", { href: `#memory/${m.id}` }, `#${m.id}`), ` ${m.content || ""}`))))))
      : h("p", { class: "hint" }, "No clusters yet: the cluster job (pgmem.run_job('cluster'), scheduled by pg_cron) makes them."));
  } catch (e) { status.textContent = e.message; }
}

function startMap() {
  if (!state.mapTimer) {
    if (Date.now() - state.lastMapAt > 5000) refreshMap();
    state.mapTimer = setInterval(() => { if (!document.hidden) refreshMap(); }, 60000);
  }
}
function stopMap() { clearInterval(state.mapTimer); state.mapTimer = null; }

// ------------------------------------------------------------------ jobs and health
async function loadHealth() {
  try {
    // a token bound to a user sees the health only: statistics and jobs are the whole tenant's
    const whole = !state.me.user;
    const [hl, st, jb] = await Promise.all([api("/api/health"), whole ? api("/api/stats") : null, whole ? api("/api/jobs") : null]);
    const badge = (ok, yes, no) => h("span", { class: `badge ${ok === null || ok === undefined ? "" : ok ? "ok" : "bad"}` }, ok === null || ok === undefined ? "unknown" : ok ? yes : no);
    fill($("#health-view"),
      h("p", { id: "health-status" }, h("span", { class: `badge ${hl.status === "ok" ? "ok" : "warn"}` }, hl.status), ` checked ${when(hl.timestamp)}`),
      hl.problems.length ? h("ul", {}, hl.problems.map((p) => h("li", { class: "error" }, p))) : null,
      h("table", {},
        h("tr", {}, h("td", {}, "database"), h("td", {}, badge(hl.database.reachable, "reachable", "down"), ` PostgreSQL ${hl.database.server_version}`)),
        h("tr", {}, h("td", {}, "migrations"), h("td", {}, badge(hl.migrations.current, "current", "behind"), ` ${hl.migrations.installed || "?"} (server expects ${hl.migrations.expected || "?"})`)),
        h("tr", {}, h("td", {}, "embedding worker"), h("td", {}, badge(hl.worker.alive, "alive", "stalled"), ` ${hl.worker.queue} waiting`)),
        h("tr", {}, h("td", {}, "pg_cron"), h("td", {}, badge(hl.cron.running ?? hl.cron.preloaded, "running", "stopped"), hl.cron.scheduled_jobs === null ? " (its schedule lives in the cron database)" : ` ${hl.cron.scheduled_jobs} pgmem jobs scheduled`)),
        h("tr", {}, h("td", {}, "LLM key"), h("td", {}, badge(hl.hasApiKey, "set", "none"), ` model ${hl.server.model}`)),
        h("tr", {}, h("td", {}, "server"), h("td", {}, `pgmem ${hl.server.version} · MCP ${hl.server.mcp ? "at /mcp" : "off"} · embeddings ${hl.server.embeddings ? "on" : "off"}`))));
    if (!whole) {
      fill($("#stats-view"), h("p", { class: "hint" }, "Statistics and jobs belong to the whole tenant: sign in with a token made without --user."));
      fill($("#jobs-view"));
      return;
    }
    const tiers = Object.entries(st.tiers || {});
    fill($("#stats-view"),
      h("p", { id: "stats-summary" }, h("b", {}, st.totalMemories), " active memories · average activation ", h("b", {}, pct(st.averageActivationScore)),
        ` (${st.activations30d.count} activations in 30 days) · ${st.embeddingQueue} waiting for embeddings`),
      h("table", {}, h("tr", {}, h("th", {}, "tier"), h("th", {}, "count")), tiers.map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", {}, v)))),
      h("p", { class: "small muted" }, `by state: ${Object.entries(st.memories).filter(([k]) => ["active", "archived", "merged", "deleted"].includes(k)).map(([k, v]) => `${k} ${v}`).join(" · ")}`));
    fill($("#jobs-view"), jb.jobs.length ? h("table", { id: "jobs-table" },
      h("tr", {}, ["job", "scope", "last status", "started", "duration", "examined", "changed", "runs 7d", "failures 7d", "error"].map((x) => h("th", {}, x))),
      jb.jobs.map((j) => h("tr", {}, h("td", {}, j.job), h("td", {}, j.scope),
        h("td", {}, h("span", { class: `badge ${j.last_status === "ok" ? "ok" : j.last_status === "failed" || j.last_status === "interrupted" ? "bad" : "warn"}` }, j.last_status)),
        h("td", {}, when(j.last_started_at)), h("td", {}, j.last_duration_s === null ? "–" : `${num(j.last_duration_s, 2)} s`),
        h("td", {}, j.last_examined), h("td", {}, j.last_changed), h("td", {}, j.runs_7d), h("td", {}, j.failures_7d),
        h("td", { class: "small error" }, j.last_error || ""))))
      : h("p", { class: "hint" }, "No job has run for this tenant yet (pgmem jobs schedule, or pgmem.run_job)."));
  } catch (e) { failed($("#health-view"), e); }
}

// ------------------------------------------------------------------ settings
async function loadKeyStatus() {
  if (state.me && state.me.user) {
    $("#apikey-status").textContent = "The LLM key is the whole tenant's: a token bound to a user may not change it.";
    return;
  }
  try {
    const st = await api("/api/stats");
    $("#apikey-status").textContent = st.hasStoredApiKey ? "A key is stored for your tenant."
      : st.hasApiKey ? "No key stored for your tenant: the server's own key (OPENAI_API_KEY) is used." : "No key: chat works only with a local model server.";
  } catch (e) { $("#apikey-status").textContent = e.message; }
}

async function saveKey(ev) {
  ev.preventDefault();
  const input = $("#apikey-input");
  try {
    const r = await api("/api/config/apikey", { method: "POST", body: { apiKey: input.value.trim() } });
    input.value = "";
    toast(r.success ? `key saved (fingerprint ${r.fingerprint})` : "the key was not saved");
    loadKeyStatus();
  } catch (e) { toast(e.message); }
}

// ------------------------------------------------------------------ start
document.addEventListener("DOMContentLoaded", () => {
  $("#tabs").addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-tab]");
    if (b) location.hash = `#${b.dataset.tab}`;
  });
  window.addEventListener("hashchange", route);
  $("#login-form").addEventListener("submit", (ev) => { ev.preventDefault(); signIn($("#login-token").value.trim()); });
  $("#chat-form").addEventListener("submit", sendChat);
  $("#chat-input").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("#chat-form").requestSubmit(); }
  });
  $("#chat-new").addEventListener("click", newConversation);
  $("#search-form").addEventListener("submit", runSearch);
  $("#memory-form").addEventListener("submit", (ev) => { ev.preventDefault(); location.hash = `#memory/${$("#memory-id").value}`; });
  $("#profile-form").addEventListener("submit", loadProfile);
  $("#threads-form").addEventListener("submit", loadThreads);
  $("#insights-form").addEventListener("submit", loadInsights);
  $("#map-refresh").addEventListener("click", refreshMap);
  $("#map-method").addEventListener("change", refreshMap);
  $("#map-color").addEventListener("change", refreshMap);
  $("#apikey-form").addEventListener("submit", saveKey);
  $("#apikey-clear").addEventListener("click", async () => {
    try { await api("/api/config/apikey", { method: "DELETE" }); toast("key removed"); loadKeyStatus(); } catch (e) { toast(e.message); }
  });
  $("#logout").addEventListener("click", () => signOut("Signed out."));
  // a token in the URL's fragment (never sent to the server): make demo prints such a link
  const m = location.hash.match(/token=([^&]+)/);
  if (m) {
    const token = decodeURIComponent(m[1]);
    history.replaceState(null, "", location.pathname);
    signIn(token);
  } else if (sessionStorage.getItem("pgmem.token")) {
    signIn(sessionStorage.getItem("pgmem.token"));
  } else {
    signOut();
  }
});

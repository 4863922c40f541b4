// kueue-es dashboard: plain JavaScript, no build step. Reads /api/* and follows /api/events (SSE);
// docs/dashboard.md describes both. Every text from the log goes in through textContent.
"use strict";

const $ = (id) => document.querySelector(`[data-testid="${id}"]`);
const view = { at: null, latest: null, route: route(), pending: null };

function route() {
  const m = location.pathname.match(/^\/workloads\/([^/]+)\/([^/]+)\/?$/);
  return m ? { page: "workload", namespace: decodeURIComponent(m[1]), name: decodeURIComponent(m[2]) } : { page: "overview" };
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined) continue;
    if (k === "text") node.textContent = v;
    else if (k === "class") node.className = v;
    else node.setAttribute(k, v);
  }
  for (const child of children) if (child !== null && child !== undefined) node.append(child);
  return node;
}

async function getJSON(url) {
  const response = await fetch(url);
  const body = await response.json();
  if (!response.ok && response.status !== 404) throw new Error(body.error || response.statusText);
  return { status: response.status, body };
}

function atQuery() { return view.at === null ? "" : `?at=${view.at}`; }

function showAsOf(asOf) {
  const badge = $("live-status");
  const live = view.at === null;
  badge.textContent = live ? (asOf.caughtUp ? "live" : "catching up") : "history";
  badge.className = "badge " + (live ? "live" : "past");
  $("as-of").textContent = `as of #${asOf.seq}${asOf.time ? " (" + asOf.time + ")" : ""} of #${asOf.lastSeq}`;
  const slider = $("history-slider");
  slider.max = String(asOf.lastSeq);
  if (live) slider.value = String(asOf.lastSeq);
  $("history-position").textContent = live ? "live" : `#${view.at}`;
}

// --- overview ----------------------------------------------------------------------------------------

function bar(cq, row) {
  const percent = row.nominal ? Math.round((100 * row.used) / row.nominal) : (row.used ? 100 : 0);
  const width = Math.min(100, percent);
  const d = row.display;
  const label = `${row.flavor} ${row.resource}: ${d.used}/${d.nominal}` +
    (row.borrowed ? `, borrowed ${d.borrowed}` : "") + (row.lent ? `, lent ${d.lent}` : "");
  return el("div", { class: "bar", "data-testid": `usage-bar-${cq}-${row.flavor}-${row.resource}`, title: label,
    "data-used": String(row.used), "data-nominal": String(row.nominal) },
    el("div", { class: "fill" + (row.used > row.nominal ? " over" : ""), style: `width:${width}%` }),
    el("span", { class: "label", "data-testid": "usage-label", text: `${label} (${percent}%)` }));
}

function renderClusterQueues(queues) {
  const box = $("cluster-queues");
  box.replaceChildren(...queues.map((cq) => el("div", { class: "card", "data-testid": "cluster-queue", "data-name": cq.name },
    el("h3", { "data-testid": "cluster-queue-name", text: cq.name }),
    el("div", { class: "muted", text: `cohort ${cq.cohort || "-"} · ${cq.queueingStrategy}` +
      (cq.stopPolicy !== "None" ? ` · stopped (${cq.stopPolicy})` : "") }),
    el("div", { "data-testid": "cluster-queue-counts", text: `pending ${cq.pendingActive} · inadmissible ${cq.pendingInadmissible}` +
      ` · reserved ${cq.quotaReserved} · admitted ${cq.admitted}` }),
    ...cq.quota.map((row) => bar(cq.name, row)))));
  if (!queues.length) box.replaceChildren(el("p", { class: "muted", text: "no ClusterQueue in the log" }));
}

// A quota table: a ClusterQueue's columns, and for a cohort its own quota and what is used of it beside
// them (the API's figures as they are: docs/dashboard.md). Each row carries its amounts as data-* attributes.
const QUOTA_COLUMNS = [["nominal", "nominal"], ["used", "used"], ["borrowed", "borrowed"], ["lent", "lent"]];
const COHORT_COLUMNS = [["nominal", "nominal"], ["ownNominal", "own quota"], ["used", "used"],
  ["borrowed", "borrowed"], ["lent", "lent"], ["ownLent", "own quota used"]];

function quotaTable(rows, columns = QUOTA_COLUMNS) {
  return el("table", { class: "quota" },
    el("thead", {}, el("tr", {}, ...["flavor", "resource", ...columns.map(([, h]) => h)].map((h) => el("th", { text: h })))),
    el("tbody", {}, ...rows.map((r) => el("tr", Object.fromEntries([["data-testid", "quota-row"], ["data-flavor", r.flavor],
      ["data-resource", r.resource], ...columns.map(([k]) => [`data-${k.toLowerCase()}`, String(r[k])])]),
      ...[r.flavor, r.resource, ...columns.map(([k]) => r.display[k])].map((v) => el("td", { text: v }))))));
}

function cohortNode(node, queues) {
  return el("li", { "data-testid": "cohort", "data-name": node.name },
    el("strong", { text: `cohort ${node.name}` + (node.implicit ? " (implicit)" : "") }),
    quotaTable(node.quota, COHORT_COLUMNS),
    el("ul", { class: "tree" },
      ...node.clusterQueues.map((name) => el("li", { "data-testid": "cohort-member", "data-name": name },
        el("span", { text: `ClusterQueue ${name}` }), quotaTable(queues[name].quota))),
      ...node.cohorts.map((sub) => cohortNode(sub, queues))));
}

function renderCohorts(body) {
  const queues = Object.fromEntries(body.clusterQueues.map((q) => [q.name, q]));
  const tree = el("ul", { class: "tree" }, ...body.cohorts.map((c) => cohortNode(c, queues)),
    ...body.standaloneClusterQueues.map((name) => el("li", { "data-testid": "cohort-member", "data-name": name },
      el("span", { text: `ClusterQueue ${name} (no cohort)` }), quotaTable(queues[name].quota))));
  $("cohort-tree").replaceChildren(tree);
}

// The priority the admitter and the preemptor use, and the base one beside it when a priority boost
// (gate PriorityBoost) makes them differ: "105 (5, boost +100)".
function priorityText(w) {
  const effective = w.effectivePriority ?? w.priority;
  if (effective === w.priority) return String(w.priority);
  const boost = effective - w.priority;
  return `${effective} (${w.priority}, boost ${boost > 0 ? "+" : ""}${boost})`;
}

function workloadLink(namespace, name, text) {
  return el("a", { href: `/workloads/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}`, text: text || name });
}

function renderLocalQueues(queues) {
  $("local-queues").replaceChildren(...queues.map((lq) => el("div", { class: "card", "data-testid": "local-queue",
    "data-name": `${lq.namespace}/${lq.name}` },
    el("h3", { text: `${lq.namespace}/${lq.name}` }),
    el("div", { class: "muted", text: `ClusterQueue ${lq.clusterQueue} · admitted ${lq.admitted} · pending ${lq.pending.length}` }),
    lq.pending.length ? el("ol", { start: "0", "data-testid": "local-queue-pending" }, ...lq.pending.map((p) => el("li", {
      "data-testid": "pending-workload", "data-name": `${lq.namespace}/${p.name}` },
      workloadLink(lq.namespace, p.name),
      el("span", { class: "muted", text: ` position ${p.positionInLocalQueue} in LocalQueue, ${p.positionInClusterQueue}` +
        ` in ClusterQueue, priority ${priorityText(p)}` })))) : null)));
}

function renderWorkloads(rows) {
  const body = $("workloads").querySelector("tbody");
  body.replaceChildren(...rows.map((w) => el("tr", { "data-testid": "workload-row", "data-workload": w.key, "data-job": w.jobKey },
    el("td", { text: w.namespace }),
    el("td", {}, workloadLink(w.namespace, w.name)),
    el("td", { text: w.jobName ? `${w.jobType} ${w.jobName}` : "" }),
    el("td", { text: w.localQueue }),
    el("td", { text: w.clusterQueue }),
    el("td", { "data-testid": "workload-row-status", class: `status-${w.status}`, text: w.status }),
    el("td", { text: w.positionInLocalQueue === null ? "" : String(w.positionInLocalQueue) }),
    el("td", { text: w.priority === null ? "" : priorityText(w) }),
    el("td", { text: w.age }),
    el("td", { "data-testid": "workload-row-reason", text: w.message }))));
}

function renderOverview(body) {
  showAsOf(body.asOf);
  renderCohorts(body);
  renderClusterQueues(body.clusterQueues);
  renderLocalQueues(body.localQueues);
  renderWorkloads(body.workloads);
}

// --- a workload ---------------------------------------------------------------------------------------

async function loadWorkload() {
  const { namespace, name } = view.route;
  const { status, body } = await getJSON(`/api/workloads/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}${atQuery()}`);
  showAsOf(body.asOf);
  const error = $("workload-error");
  if (status === 404) {
    $("workload-title").textContent = `${namespace}/${name}`;
    error.hidden = false;
    error.textContent = body.error;
    return;
  }
  error.hidden = true;
  $("workload-title").textContent = `Workload ${body.workload}` + (body.owner ? ` (for ${body.owner})` : "");
  const st = $("workload-status");
  st.textContent = body.status;
  st.className = `status-${String(body.status).toUpperCase()}`;
  const p = body.position;
  $("workload-position").textContent = p ? `position ${p.positionInLocalQueue} in LocalQueue ${p.localQueue}, ` +
    `${p.positionInClusterQueue} of ${p.pendingInClusterQueue} pending in ClusterQueue ${p.clusterQueue}` +
    (p.parked ? " (inadmissible)" : "") : "";
  const needs = body.needs || {};
  const waiting = body.status === "pending";
  $("workload-why").hidden = !waiting && !(needs.blocked || []).length;
  $("workload-reason").textContent = waiting ? (needs.message || needs.reason || "waiting for the next cycle") : "";
  const lines = waiting ? (needs.summary || []) : (needs.blocked || []);
  $("workload-needs").replaceChildren(...lines.map((line) => el("li", { text: line.trim() })));
  $("workload-story").querySelector("tbody").replaceChildren(...body.story.map((line) => el("tr", { "data-testid": "story-line" },
    el("td", { text: `#${line.seq}` }), el("td", { text: (line.approximateTime ? "~" : "") + line.time }),
    el("td", { text: line.what }), el("td", { text: line.text }))));
}

// --- wiring -------------------------------------------------------------------------------------------

async function refresh() {
  try {
    if (view.route.page === "workload") await loadWorkload();
    else if (view.at === null && view.latest) renderOverview(view.latest);
    else renderOverview((await getJSON(`/api/overview${atQuery()}`)).body);
  } catch (err) {
    $("live-status").textContent = `error: ${err.message}`;
    $("live-status").className = "badge down";
  }
}

function follow() {
  const source = new EventSource("/api/events");
  source.addEventListener("overview", (event) => {
    view.latest = JSON.parse(event.data);
    if (view.at !== null) { $("history-slider").max = String(view.latest.asOf.lastSeq); return; }
    if (view.route.page === "overview") renderOverview(view.latest);
    else refresh();
  });
  source.onerror = () => { $("live-status").textContent = "reconnecting"; $("live-status").className = "badge down"; };
}

function init() {
  $("overview-page").hidden = view.route.page !== "overview";
  $("workload-page").hidden = view.route.page !== "workload";
  const slider = $("history-slider");
  slider.addEventListener("input", () => {
    view.at = slider.value === slider.max ? null : Number(slider.value);
    clearTimeout(view.pending);
    view.pending = setTimeout(refresh, 60);
  });
  $("history-live").addEventListener("click", () => { view.at = null; refresh(); });
  refresh();
  follow();
}

init();

// ksched ui: plain JS, no build step. Polls the JSON API every REFRESH_MS.
"use strict";
const REFRESH_MS = 2000;
const HEAT = [[0, [232, 243, 236]], [0.5, [246, 201, 69]], [1, [214, 69, 49]]]; // as .ramp
let resource = "cpu";
let lastNodes = null;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : String(c));
  return node;
}

function heatColor(f) {
  const x = Math.max(0, Math.min(1, f));
  for (let i = 1; i < HEAT.length; i++) {
    const [x0, c0] = HEAT[i - 1], [x1, c1] = HEAT[i];
    if (x <= x1) {
      const t = (x - x0) / (x1 - x0);
      return `rgb(${c0.map((v, j) => Math.round(v + (c1[j] - v) * t)).join(",")})`;
    }
  }
  return "rgb(214,69,49)";
}

function amount(kind, v) {
  if (kind === "cpu") return `${+(v / 1000).toFixed(2)}`;
  if (kind === "memory") return `${+(v / 2 ** 30).toFixed(1)}Gi`;
  return String(v);
}

function usage(cell, kind) {
  const r = cell[kind];
  return `${kind} ${amount(kind, r.requested)}/${amount(kind, r.allocatable)} ` +
    `(${Math.round(cell.heat[kind] * 100)}%)`;
}

async function getJSON(url, init) {
  const resp = await fetch(url, init);
  const body = await resp.json();
  if (!resp.ok) throw new Error(body.error || resp.statusText);
  return body;
}

function renderHeat(data) {
  lastNodes = data;
  for (const k of ["nodes", "pods", "bound"]) {
    document.getElementById(`count-${k}`).textContent = data.counts[k];
  }
  const map = document.getElementById("heatmap");
  map.replaceChildren(...data.nodes.map((cell) => {
    const detail = `${cell.name}: ${["cpu", "memory", "pods"].map((k) => usage(cell, k)).join(", ")}`;
    return el("div", {
      class: "tile", "data-node": cell.name, title: detail,
      style: `background:${heatColor(cell.heat[resource])}`,
      onmouseenter: () => { document.getElementById("heat-detail").textContent = detail; },
      onclick: () => { document.getElementById("whatif-node").value = cell.name; },
    }, el("span", { class: "pct" }, `${Math.round(cell.heat[resource] * 100)}%`), cell.name);
  }));
}

function renderPending(data) {
  document.getElementById("count-pending").textContent = data.total;
  const more = data.total - data.pending.length;
  document.getElementById("pending-note").textContent = more > 0 ? `(${more} more)` : "";
  document.getElementById("pending-empty").hidden = data.total > 0;
  const body = document.querySelector("#pending tbody");
  body.replaceChildren(...data.pending.map((p) => el("tr", {
    "data-pod": p.pod, onclick: () => explainPod(p.pod),
  }, el("td", {}, p.pod), el("td", { class: "reason" }, p.reason || "–"), el("td", {}, p.message))));
}

async function refresh() {
  const status = document.getElementById("status");
  try {
    const [nodes, pending] = await Promise.all([getJSON("/api/nodes"), getJSON("/api/pending")]);
    renderHeat(nodes);
    renderPending(pending);
    status.textContent = `updated ${new Date().toLocaleTimeString()}`;
  } catch (err) {
    status.textContent = `not updated: ${err.message}`;
  }
}

function decision(report) {
  if (report.gated) return `Held by PreEnqueue plugin ${report.gated.plugin}: ${report.gated.message}`;
  if (report.chosen === null) return `Fits nowhere: ${report.message || ""}`;
  return `Would go to ${report.chosen} (${report.feasible} of ${report.nodes} nodes feasible)`;
}

function groupsTable(report, onNode) {
  const rows = (report.groups || []).map((g) => {
    const verdicts = Object.entries(g.verdicts);
    const cell = verdicts.length
      ? verdicts.map(([p, v]) => el("div", { class: "verdict-fail" }, `${p}: ${v}`))
      : [el("span", { class: "verdict-ok" }, "passes every Filter plugin")];
    const names = g.nodes.map((n) => el("span", { class: "node-link", onclick: () => onNode(n) }, n));
    const listed = names.flatMap((n, i) => (i ? [", ", n] : [n]));
    if (g.count > g.nodes.length) listed.push(", …");
    return el("tr", {}, el("td", {}, g.count), el("td", {}, ...cell), el("td", {}, ...listed));
  });
  return el("table", { class: "groups" },
    el("thead", {}, el("tr", {}, el("th", {}, "Nodes"), el("th", {}, "Filter verdicts"),
      el("th", {}, "Which"))), el("tbody", {}, ...rows));
}

function scoresTable(scores) {
  if (!scores || !scores.length) return "";
  const plugins = Object.keys(scores[0].plugins);
  return el("div", {}, el("h3", {}, "Best scores (normalized × weight per Score plugin)"),
    el("table", { class: "scores" },
    el("thead", {}, el("tr", {}, el("th", {}, "Node"), el("th", {}, "Total"),
      ...plugins.map((p) => el("th", {}, p)))),
    el("tbody", {}, ...scores.map((s) => el("tr", {}, el("td", {}, s.node), el("td", {}, s.total),
      ...plugins.map((p) => el("td", {}, `${s.plugins[p].normalized}×${s.plugins[p].weight}`)))))));
}

function nodeDetail(node) {
  if (!node) return "";
  const rows = Object.entries(node.filter).map(([p, v]) => el("tr", {}, el("td", {}, p),
    el("td", { class: v === "passed" || v === "skipped" ? "verdict-ok" : "verdict-fail" }, v)));
  return el("div", { class: "node-detail" }, el("h3", {}, `Node ${node.name}: every Filter plugin`),
    el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "Plugin"), el("th", {}, "Verdict"))),
      el("tbody", {}, ...rows)));
}

function renderReport(box, report, onNode) {
  box.replaceChildren(el("p", { class: "decision" }, decision(report)));
  if (report.gated) return;
  box.append(groupsTable(report, onNode), scoresTable(report.scores), nodeDetail(report.node));
}

async function explainPod(key, node) {
  document.getElementById("pod-name").value = key;
  const box = document.getElementById("pod-result");
  const query = new URLSearchParams({ name: key, ...(node ? { node } : {}) });
  try {
    const report = await getJSON(`/api/pod?${query}`);
    if (report.nodeName) {
      box.replaceChildren(el("p", { class: "decision" }, `Bound to ${report.nodeName}.`));
      return;
    }
    renderReport(box, report, (n) => explainPod(key, n));
  } catch (err) {
    box.replaceChildren(el("p", { class: "error" }, err.message));
  }
}

async function askWhatIf(node) {
  const box = document.getElementById("whatif-result");
  box.replaceChildren(el("p", { class: "muted" }, "asking…"));
  const form = {
    manifest: document.getElementById("whatif-manifest").value,
    node: node || document.getElementById("whatif-node").value.trim(),
  };
  try {
    const report = await getJSON("/api/whatif", { method: "POST", body: JSON.stringify(form) });
    renderReport(box, report, (n) => askWhatIf(n));
  } catch (err) {
    box.replaceChildren(el("p", { class: "error" }, err.message));
  }
}

const SHADOW_ROWS = 10; // differing decisions listed (the rest counted): the page stays short

function shadowCause(d) {
  if (d.rejectedBy) return Object.entries(d.rejectedBy).map(([p, v]) => (p ? `${p}: ${v}` : v)).join("; ");
  if (d.scoreDeltas) {
    return Object.entries(d.scoreDeltas).map(([p, v]) => `${p} ${v > 0 ? "+" : ""}${v}`).join(", ");
  }
  return d.verdict === "schedulable" ? `fits ${d.feasible} node(s)` : "";
}

function pct(f) { return `${(f * 100).toFixed(1)}%`; }

function change(a, b) { return a.fraction === b.fraction ? pct(a.fraction) : `${pct(a.fraction)} → ${pct(b.fraction)}`; }

function table(headers, rows, cls) {
  return el("table", { class: cls || "" }, el("thead", {}, el("tr", {}, ...headers.map((h) => el("th", {}, h)))),
    el("tbody", {}, ...rows.map((r) => el("tr", {}, ...r.map((c) => el("td", {}, c))))));
}

function renderShadow(box, out) {
  const counts = Object.entries(out.counts).map(([k, v]) => `${v} ${k}`).join(", ") || "none";
  box.replaceChildren(el("p", { class: "decision" },
    `${out.decisions} decisions compared (${counts}): ${out.differences} differ`),
    el("p", { class: "muted" }, out.mode === "diverge"
      ? "diverge: each decision met the candidate's own earlier placements"
      : "per-decision: each decision met the real cluster of its moment; utilisation is an estimate"));
  const rows = out.differing.slice(0, SHADOW_ROWS).map((d) =>
    [d.seq, d.pod, d.verdict, d.real || "–", d.shadow || "–", shadowCause(d)]);
  if (rows.length) {
    box.append(el("h3", {}, "Decisions the candidate takes otherwise"),
      table(["Seq", "Pod", "Verdict", "Real", "Shadow", "Why"], rows, "shadow-differing"));
    if (out.differing.length > SHADOW_ROWS) box.append(el("p", { class: "muted" }, `(${out.differing.length - SHADOW_ROWS} more)`));
  }
  const real = out.utilisation.real, shadow = out.utilisation.shadow;
  const zones = Object.keys(real.zones).map((z) => [z, change(real.zones[z].cpu, shadow.zones[z].cpu),
    change(real.zones[z].memory, shadow.zones[z].memory)]);
  const balance = ["cpu", "memory"].map((r) => [r,
    `${pct(real.balance[r].mean)} → ${pct(shadow.balance[r].mean)}`,
    `${pct(real.balance[r].stddev)} → ${pct(shadow.balance[r].stddev)}`]);
  box.append(el("div", { class: "columns" },
    el("div", {}, el("h3", {}, "Requested / allocatable per zone (real → shadow)"), table(["Zone", "cpu", "memory"], zones)),
    el("div", {}, el("h3", {}, "Balance across nodes (real → shadow)"), table(["", "mean", "std dev"], balance))));
}

async function runShadow() {
  const box = document.getElementById("shadow-result");
  box.replaceChildren(el("p", { class: "muted" }, "replaying the log…"));
  const form = {
    config: document.getElementById("shadow-config").value,
    since: document.getElementById("shadow-since").value.trim(),
    diverge: document.getElementById("shadow-diverge").checked,
  };
  try {
    renderShadow(box, await getJSON("/api/shadow", { method: "POST", body: JSON.stringify(form) }));
  } catch (err) {
    box.replaceChildren(el("p", { class: "error" }, err.message));
  }
}

document.getElementById("shadow-form").addEventListener("submit", (e) => {
  e.preventDefault();
  runShadow();
});
document.getElementById("pod-form").addEventListener("submit", (e) => {
  e.preventDefault();
  explainPod(document.getElementById("pod-name").value.trim());
});
document.getElementById("whatif-form").addEventListener("submit", (e) => {
  e.preventDefault();
  askWhatIf();
});
for (const radio of document.querySelectorAll("input[name=resource]")) {
  radio.addEventListener("change", () => { resource = radio.value; if (lastNodes) renderHeat(lastNodes); });
}
refresh();
setInterval(refresh, REFRESH_MS);

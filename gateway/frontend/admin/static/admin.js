// The operator page's live parts, in plain JavaScript (no build step, nothing from elsewhere): upstream
// states, the catalog and the audit events as they change (server-sent events), and the explain form
// answered in place. Rows are made with textContent only: nothing a server or client named is markup.
"use strict";

function showUpstreams(upstreams) {
  for (const u of upstreams) {
    const row = document.querySelector(`tr[data-upstream="${CSS.escape(u.namespace)}"]`);
    if (!row) continue;
    row.className = `state-${u.state}`;
    row.querySelector(".state").textContent = u.state;
    row.querySelector(".prompts").textContent = u.prompts;
    row.querySelector(".latency").textContent = u.latency;
    row.querySelector(".restarts").textContent = u.restarts;
    row.querySelector(".error").textContent = u.last_error || "";
  }
}

function replaceRows(tableId, rows, cellsOf) {
  const body = document.querySelector(`#${tableId} tbody`);
  if (!body) return;
  body.replaceChildren(...rows.map((row) => {
    const tr = document.createElement("tr");
    for (const text of cellsOf(row)) {
      const td = document.createElement("td");
      td.textContent = text;
      tr.append(td);
    }
    return tr;
  }));
}

const catalogCells = (p) => [p.name, p.upstream, p.local, p.overridden, p.tags, p.seen_by];
const auditCells = (e) => [e.timestamp, e.who, e.method, e.prompt || "", e.code ? `${e.outcome} ${e.code}` : e.outcome];

function listen() {
  const events = new EventSource(document.body.dataset.events);
  events.addEventListener("upstreams", (event) => showUpstreams(JSON.parse(event.data)));
  events.addEventListener("catalog", (event) => replaceRows("catalog", JSON.parse(event.data), catalogCells));
  events.addEventListener("audit", (event) => replaceRows("audit", JSON.parse(event.data), auditCells));
}

function explainInPlace() {
  const form = document.getElementById("explain");
  const out = document.getElementById("explained");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const query = new URLSearchParams(new FormData(form));
    const answer = await fetch(`${document.body.dataset.explain}?${query}`, { headers: { Accept: "text/plain" } });
    out.textContent = await answer.text();
    out.dataset.status = String(answer.status);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  listen();
  explainInPlace();
});

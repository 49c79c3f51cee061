// The operator page's live parts, in plain JavaScript (no build step, nothing from elsewhere): upstream
// states, the catalog and the audit events as they change (server-sent events), and the explain form
// answered in place. Rows are made with textContent only: nothing a server or client named is markup.
"use strict";

function cell(text, className) {
  const td = document.createElement("td");
  td.textContent = text;
  if (className) td.className = className;
  return td;
}

function showUpstreams(upstreams) {
  // Rebuilt whole: a reload adds and removes upstreams, not only their states.
  const body = document.querySelector("#upstreams tbody");
  body.replaceChildren(...upstreams.map((u) => {
    const tr = document.createElement("tr");
    tr.dataset.upstream = u.namespace;
    tr.className = `state-${u.state}`;
    tr.append(
      cell(u.namespace), cell(u.transport), cell(u.state, "state"), cell(String(u.prompts), "prompts"),
      cell(u.latency, "latency"), cell(String(u.restarts), "restarts"), cell(u.last_error || "", "error"),
    );
    return tr;
  }));
}

function replaceRows(tableId, rows, cellsOf) {
  const body = document.querySelector(`#${tableId} tbody`);
  if (!body) return;
  body.replaceChildren(...rows.map((row) => {
    const tr = document.createElement("tr");
    tr.append(...cellsOf(row).map((text) => cell(text)));
    return tr;
  }));
}

const catalogCells = (p) => [p.name, p.upstream, p.local, p.overridden, p.tags, p.seen_by];
const outcomeOf = (e) => [e.outcome, e.code ?? e.status ?? ""].join(" ").trim();  // a code 0 is a code too
const auditCells = (e) => [e.timestamp, e.who, e.method || "", e.prompt || e.skill || "", outcomeOf(e), e.reason || ""];

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

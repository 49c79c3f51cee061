// The operator page's live parts, in plain JavaScript (no build step, nothing from elsewhere): upstream
// states as they change (server-sent events), and the explain form answered in place.
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

function listen() {
  const events = new EventSource(document.body.dataset.events);
  events.addEventListener("upstreams", (event) => showUpstreams(JSON.parse(event.data)));
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

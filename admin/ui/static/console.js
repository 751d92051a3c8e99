// hookproxy console: the two parts of the pages that change without a reload. Data from
// the server is only ever set with textContent, never parsed as markup.
"use strict";

function cell(tr, text, cls) {
  const td = document.createElement("td");
  if (cls) td.className = cls;
  td.textContent = text || "";
  tr.appendChild(td);
  return td;
}

function clock(iso) {
  const d = new Date(iso);
  return d.toISOString().substring(11, 23);
}

function decisionRow(d) {
  const tr = document.createElement("tr");
  tr.className = "outcome-" + d.enforcement + " fresh";
  tr.dataset.seq = d.seq;
  cell(tr, clock(d.time));
  cell(tr, d.route);
  const s = cell(tr, "");
  if (d.session) {
    const a = document.createElement("a");
    a.href = "/ui/sessions/" + encodeURIComponent(d.session);
    a.textContent = d.session;
    s.appendChild(a);
  }
  cell(tr, d.eventType);
  cell(tr, d.tool);
  cell(tr, d.enforcement, "outcome");
  const pols = [];
  for (const ic of d.interceptors || []) {
    if (ic.outcome !== "not_called" && !pols.includes(ic.backend)) pols.push(ic.backend);
  }
  cell(tr, pols.join(", "));
  const rule = cell(tr, "", "rule");
  if (d.denial) {
    const code = document.createElement("code");
    code.textContent = d.denial.code || "";
    rule.appendChild(code);
    rule.appendChild(document.createTextNode(" " + d.denial.reason));
  }
  return tr;
}

function live() {
  const body = document.querySelector("#decisions tbody");
  const status = document.getElementById("live-status");
  const es = new EventSource("/ui/events" + location.search);
  es.onopen = () => { status.textContent = "live"; status.className = "status on"; };
  es.onerror = () => { status.textContent = "reconnecting…"; status.className = "status off"; };
  es.addEventListener("decision", (e) => {
    const d = JSON.parse(e.data);
    if (body.querySelector('tr[data-seq="' + d.seq + '"]')) return;
    const empty = document.getElementById("empty");
    if (empty) empty.remove();
    body.insertBefore(decisionRow(d), body.firstChild);
    while (body.rows.length > 500) body.deleteRow(body.rows.length - 1);
  });
}

// refreshOn fetches the page again whenever source reports one of events, and swaps in the
// element with the given id. A form being filled in (a half-typed reason) is left alone.
function refreshOn(source, events, id) {
  const es = new EventSource(source);
  es.onopen = () => { document.body.dataset.live = "on"; };
  let pending = null;
  const refresh = () => {
    if (pending) return;
    pending = setTimeout(async () => {
      pending = null;
      const r = await fetch(location.pathname, { headers: { Accept: "text/html" }, credentials: "same-origin" });
      if (!r.ok) return;
      const doc = new DOMParser().parseFromString(await r.text(), "text/html");
      const fresh = doc.getElementById(id);
      const cur = document.getElementById(id);
      if (fresh && cur && !cur.contains(document.activeElement)) cur.replaceWith(fresh);
    }, 200);
  };
  es.onmessage = refresh;
  for (const t of events) es.addEventListener(t, refresh);
}

document.addEventListener("DOMContentLoaded", () => {
  const page = document.body.dataset.page;
  if (page === "live") live();
  // The approvals queue changes when a record does; the Shadow and Pins pages when a
  // shadow disagreement or a tool-definition change is recorded.
  if (page === "approvals") refreshOn("/ui/approvals/events", ["approval", "created", "decided", "expired", "pending", "approved", "denied"], "approvals-live");
  if (page === "shadow") refreshOn("/ui/events?rollout=1", ["decision"], "shadow-live");
  if (page === "pins") refreshOn("/ui/events?rollout=1", ["decision"], "pins-live");
});

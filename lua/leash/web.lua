-- leash.web: the status page the HTTP server serves at /.
--
-- One self-contained document: style and script inline, nothing loaded from
-- elsewhere (the server's Content-Security-Policy forbids it anyway), no
-- framework.  The page carries no data of its own: its script reads
-- /api/status and /api/history every few seconds and builds the DOM with
-- textContent only, so a job name, replica id or error text can never
-- become markup.  With [http] token_env set, the token comes in the page's
-- address after a # (http://host:port/#token=...), which a browser never
-- sends to the server; the script keeps it for the tab and sends it as a
-- bearer token.
local M = {}

M.REFRESH_MS = 3000

M.page = ([==[<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>leash</title>
<style>
:root { --ok: #2e9e4f; --failed: #d6333a; --timeout: #e8912d; --lost: #8e44ad;
        --missed: #9a9a9a; --other: #4a7bd0; --line: #e2e2e2; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0;
       color: #222; background: #f6f6f4; }
header { display: flex; flex-wrap: wrap; gap: .3em 1.2em; align-items: baseline;
         padding: .6em 1em; background: #1f2430; color: #e8e8e8; }
header h1 { font-size: 1.15em; margin: 0; letter-spacing: .05em; }
header .muted { color: #a8adb8; }
#health.bad, #error { color: #ff8a8a; font-weight: 600; }
main { padding: 0 1em 1.5em; max-width: 1400px; margin: 0 auto; }
h2 { font-size: 1em; margin: 1.2em 0 .4em; color: #444; }
.scroll { overflow-x: auto; background: #fff; border: 1px solid var(--line); }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: .3em .6em; border-bottom: 1px solid var(--line);
         white-space: nowrap; }
th { font-size: 12px; color: #666; font-weight: 600; background: #fafafa; }
td.mono, .lane .name { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 13px; }
td.holder { max-width: 16em; overflow: hidden; text-overflow: ellipsis; }
.state-ok { color: var(--ok); } .state-failing { color: var(--failed); font-weight: 600; }
.state-overdue { color: var(--timeout); font-weight: 600; } .state-unheld { color: var(--lost); }
.state-paused { color: var(--missed); }
.o-ok { color: var(--ok); } .o-failed { color: var(--failed); } .o-timeout { color: var(--timeout); }
.o-lost { color: var(--lost); } .o-missed { color: var(--missed); } .o-other { color: var(--other); }
.legend { font-size: 12px; color: #555; margin-bottom: .4em; }
.legend span { display: inline-block; margin-right: 1em; }
.legend i { display: inline-block; width: .9em; height: .9em; margin-right: .3em;
            vertical-align: -1px; border-radius: 2px; }
#timeline { background: #fff; border: 1px solid var(--line); padding: .4em .6em; }
.lane { display: grid; grid-template-columns: 14em 1fr; gap: .6em; align-items: center;
        margin: .25em 0; }
.lane .name { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.track { position: relative; height: 22px; background: #f3f4f6; border-radius: 3px; }
.bar { position: absolute; top: 2px; bottom: 2px; min-width: 3px; border-radius: 2px;
       cursor: pointer; opacity: .9; }
.bar:hover, .bar:focus { opacity: 1; outline: 2px solid #222; z-index: 2; }
.ok { background: var(--ok); } .failed { background: var(--failed); }
.timeout { background: var(--timeout); } .lost { background: var(--lost); }
.missed { background: var(--missed); } .other { background: var(--other); }
.axis { display: grid; grid-template-columns: 14em 1fr; gap: .6em; font-size: 12px; color: #777; }
.axis div:last-child { display: flex; justify-content: space-between; }
.empty { color: #777; padding: .5em 0; }
#tip { position: fixed; pointer-events: none; background: #1f2430; color: #f2f2f2;
       padding: .45em .65em; border-radius: 4px; font-size: 12px; display: none;
       max-width: min(28em, 90vw); white-space: pre-wrap; overflow-wrap: anywhere; z-index: 10;
       box-shadow: 0 2px 8px rgba(0,0,0,.3); }
@media (max-width: 720px) {
  body { font-size: 13px; }
  .lane, .axis { grid-template-columns: 6.5em 1fr; }
  .opt { display: none; }
  td.holder { max-width: 7em; }
  th, td { padding: .3em .4em; }
  main { padding: 0 .5em 1em; }
}
</style>
</head>
<body>
<header>
<h1>leash</h1>
<span id="provider" class="muted"></span>
<span id="health"></span>
<span id="updated" class="muted"></span>
<span id="error" role="alert"></span>
</header>
<main>
<h2>Jobs</h2>
<div id="more" class="empty"></div>
<div class="scroll">
<table id="jobs">
<thead><tr><th>JOB</th><th class="opt">SCHEDULE</th><th>STATE</th><th>HOLDER</th><th>LAST</th>
<th class="opt">DURATION</th><th class="opt">NEXT</th></tr></thead>
<tbody></tbody>
</table>
</div>
<h2>Last hour, per replica</h2>
<div class="legend"><span><i class="ok"></i>ok</span><span><i class="failed"></i>failed</span><span><i class="timeout"></i>timeout</span><span><i class="lost"></i>lost</span><span><i class="missed"></i>missed</span><span><i class="other"></i>other (running, killed, handed-off, stopped, skipped, manual)</span></div>
<div id="timeline"></div>
<div class="axis"><div></div><div><span>-60m</span><span>-45m</span><span>-30m</span><span>-15m</span><span>now</span></div></div>
</main>
<div id="tip"></div>
<script>
"use strict";
(function () {
  var HOUR = 3600000, REFRESH = @REFRESH@;
  // The last instant a row may hold (src/store/store.h, STORE_TIME_MAX): a
  // corrupt row's time past it is shown as a number, never as a Date.
  var TIME_MAX = 253402300799999;
  function sane(t) { return typeof t === "number" && t >= 0 && t <= TIME_MAX; }
  var OUTCOMES = ["ok", "failed", "timeout", "lost", "missed"];
  var token = null;
  var m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  try {
    if (m) { token = decodeURIComponent(m[1]); sessionStorage.setItem("leash-token", token); }
    else { token = sessionStorage.getItem("leash-token"); }
  } catch (e) { if (m) token = decodeURIComponent(m[1]); }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function kind(outcome) { return OUTCOMES.indexOf(outcome) >= 0 ? outcome : "other"; }
  function human(ms) {
    if (ms === null || ms === undefined) return "-";
    ms = Math.abs(ms);
    if (ms < 1000) return Math.round(ms) + "ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + "s";
    if (ms < 3600000) return Math.floor(ms / 60000) + "m" + Math.floor(ms % 60000 / 1000) + "s";
    return Math.floor(ms / 3600000) + "h" + Math.floor(ms % 3600000 / 60000) + "m";
  }
  function rel(t, now) {
    if (t === null || t === undefined) return "-";
    return t <= now ? human(now - t) + " ago" : "in " + human(t - now);
  }
  function iso(t) {
    if (t === null || t === undefined) return "-";
    return sane(t) ? new Date(t).toISOString() : t + " (out of bounds)";
  }
  function get(path) {
    var headers = {};
    if (token) headers.Authorization = "Bearer " + token;
    return fetch(path, { headers: headers, cache: "no-store" }).then(function (r) {
      return r.text().then(function (body) {
        var j = null;
        try { j = JSON.parse(body); } catch (e) { j = null; }
        if (!r.ok) throw new Error(path + ": " + r.status + " " + ((j && j.error) || body.trim()));
        if (!j) throw new Error(path + ": not JSON");
        return j;
      });
    });
  }

  function renderJobs(st) {
    var rows = [];
    (st.jobs || []).forEach(function (j) {
      var tr = el("tr");
      tr.dataset.job = j.name;
      tr.appendChild(el("td", "mono name", j.name));
      tr.appendChild(el("td", "opt", j.schedule || "-"));
      tr.appendChild(el("td", "state state-" + j.state, j.state));
      var h = el("td", "mono holder", j.holder ? j.holder + " (token " + j.token + ")" : "-");
      if (j.holder) h.title = j.holder;
      tr.appendChild(h);
      var last = j.last, td;
      if (last) {
        td = el("td", "last o-" + kind(last.outcome),
                last.outcome + " " + rel(last.ended_at || last.started_at || last.scheduled_at, st.now));
        td.dataset.outcome = last.outcome;
        if (last.owner) td.title = "on " + last.owner + (last.error ? "\n" + last.error : "");
      } else {
        td = el("td", "last", "-");
      }
      tr.appendChild(td);
      tr.appendChild(el("td", "opt", last ? human(last.duration_ms) : "-"));
      tr.appendChild(el("td", "opt", j.next ? rel(j.next, st.now) : "-"));
      rows.push(tr);
    });
    var tb = document.querySelector("#jobs tbody");
    tb.replaceChildren.apply(tb, rows);
    // /api/status answers a page (the first 500 jobs by name).
    var total = st.jobs_total || 0, shown = (st.jobs || []).length;
    document.getElementById("more").textContent = total > shown ?
      "the first " + shown + " of " + total + " jobs (leash status --json lists all, /api/status?offset=" +
      shown + " the next)" : "";
  }

  function tipText(r) {
    var lines = [r.job + ": " + r.outcome, "replica " + r.owner + ", token " + r.token,
                 "scheduled " + iso(r.scheduled_at)];
    if (r.started_at !== null) lines.push("started " + iso(r.started_at));
    if (r.ended_at !== null) lines.push("ended " + iso(r.ended_at) + " (" + human(r.duration_ms) + ")");
    if (r.exit_code !== null) lines.push("exit code " + r.exit_code);
    if (r.exit_signal !== null) lines.push("signal " + r.exit_signal);
    if (r.error) lines.push(r.error.length > 400 ? r.error.slice(0, 400) + " ..." : r.error);
    return lines.join("\n");
  }

  function renderTimeline(st, hist) {
    var now = hist.now || st.now, from = now - HOUR, lanes = {}, order = [];
    function lane(owner) {
      if (!lanes[owner]) { lanes[owner] = []; order.push(owner); }
      return lanes[owner];
    }
    (st.replicas || []).forEach(function (r) { lane(r.owner); });
    (hist.runs || []).forEach(function (r) {
      if (r.outcome === "control" || !r.owner || !sane(r.scheduled_at)) return;
      var start = r.started_at !== null ? r.started_at : r.scheduled_at;
      var end = r.ended_at !== null ? r.ended_at : (r.outcome === "running" ? now : start);
      if (end < from) return;
      lane(r.owner).push({ r: r, start: start, end: end });
    });
    order.sort();
    var out = [];
    order.forEach(function (owner) {
      var row = el("div", "lane"), name = el("div", "name", owner), track = el("div", "track");
      row.dataset.replica = owner;
      name.title = owner;
      row.appendChild(name);
      lanes[owner].forEach(function (b) {
        var s = Math.max(b.start, from), e = Math.min(Math.max(b.end, s), now);
        var bar = el("div", "bar " + kind(b.r.outcome));
        bar.style.left = ((s - from) / HOUR * 100).toFixed(3) + "%";
        bar.style.width = ((e - s) / HOUR * 100).toFixed(3) + "%";
        bar.dataset.outcome = b.r.outcome;
        bar.dataset.job = b.r.job;
        bar.tabIndex = 0;
        bar.setAttribute("aria-label", tipText(b.r));
        track.appendChild(bar);
      });
      row.appendChild(track);
      out.push(row);
    });
    var box = document.getElementById("timeline");
    if (!out.length) out.push(el("div", "empty", "no runs in the last hour"));
    box.replaceChildren.apply(box, out);
  }

  var tip = document.getElementById("tip");
  function showTip(ev) {
    var t = ev.target;
    if (!t.classList || !t.classList.contains("bar")) { tip.style.display = "none"; return; }
    tip.textContent = t.getAttribute("aria-label");
    tip.style.display = "block";
    var r = t.getBoundingClientRect();
    var x = ev.clientX !== undefined && ev.type !== "focusin" ? ev.clientX : r.left;
    var y = ev.clientY !== undefined && ev.type !== "focusin" ? ev.clientY : r.bottom;
    tip.style.left = Math.max(4, Math.min(x + 12, window.innerWidth - tip.offsetWidth - 4)) + "px";
    tip.style.top = Math.max(4, Math.min(y + 12, window.innerHeight - tip.offsetHeight - 4)) + "px";
  }
  document.addEventListener("mouseover", showTip);
  document.addEventListener("focusin", showTip);
  document.addEventListener("click", showTip);
  document.addEventListener("mouseout", function (ev) {
    if (ev.target.classList && ev.target.classList.contains("bar")) tip.style.display = "none";
  });

  function health() {
    var headers = {};
    if (token) headers.Authorization = "Bearer " + token;
    return fetch("/healthz", { headers: headers, cache: "no-store" }).then(function (r) {
      return r.text().then(function (t) {
        var h = document.getElementById("health");
        h.textContent = r.ok ? "healthy" : "unhealthy: " + t.trim();
        h.className = r.ok ? "" : "bad";
      });
    }).catch(function () {});
  }

  function refresh() {
    health();
    get("/api/status")
      .then(function (st) {
        if (st.singleton === false) return [st, { runs: [] }];
        return get("/api/history?since=1h&limit=5000").then(function (h) { return [st, h]; });
      })
      .then(function (got) {
        var st = got[0], hist = got[1];
        document.getElementById("provider").textContent = st.provider ? "store: " + st.provider : "singleton mode off";
        renderJobs(st);
        renderTimeline(st, hist);
        document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString();
        document.getElementById("error").textContent = "";
        document.body.dataset.loaded = String((Number(document.body.dataset.loaded) || 0) + 1);
      })
      .catch(function (e) {
        document.getElementById("error").textContent = String(e.message || e);
        document.body.dataset.failed = String(e.message || e);
      })
      .then(function () { setTimeout(refresh, REFRESH); });
  }
  refresh();
})();
</script>
</body>
</html>
]==]):gsub("@REFRESH@", tostring(M.REFRESH_MS))

return M

-- leash.web: the status page the HTTP server serves at /.
--
-- One self-contained document: style and script inline, nothing loaded from
-- elsewhere (the server's Content-Security-Policy forbids it anyway), no
-- framework.  The server renders the first paint (M.render: the header's
-- summary, the jobs table and the replicas table, from the same model as
-- /api/status), so the page reads before any script runs; the script then
-- refreshes it every few seconds from /api/status and /api/history,
-- building the DOM with textContent only, and draws the timeline.  Every
-- text from the store (job names, replica ids, errors) goes into the
-- server's HTML through M.esc, never raw.  With [http] token_env set, the
-- token comes in the page's address after a # (http://host:port/#token=...),
-- which a browser never sends to the server: a request without the token
-- gets the page without data (M.render with no input), and the script
-- keeps the token for the tab and sends it as a bearer token.
--
-- What the script draws and what M.render draws are the same elements
-- (tests/http_page_spec.lua reads both in Chromium); the rules they share
-- (human, rel, axis_label, job_kind, summary, differs) are written twice,
-- once here and once in the script, side by side in name.
local jobs_view = require "leash.jobs_view"
local status = require "leash.status"

local M = {}

M.REFRESH_MS = 3000
-- The timeline's runs: at most this many of the window, the latest.
M.HISTORY_LIMIT = 5000
-- The timeline's windows (?window=NAME, also /api/history's since).
M.WINDOWS = {
  { name = "5m", ms = 300000, label = "5 min", span = "5 minutes" },
  { name = "1h", ms = 3600000, label = "1 h", span = "hour" },
  { name = "24h", ms = 86400000, label = "24 h", span = "24 hours" },
}
M.DEFAULT_WINDOW = "1h"

function M.window(name)
  for _, w in ipairs(M.WINDOWS) do
    if w.name == name then return w end
  end
  return nil
end

-- ---- text ----

local ENT = { ["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;", ["'"] = "&#39;" }

-- s as HTML text or a quoted attribute's value: & < > " ' as entities,
-- bytes that are not UTF-8 and control characters (but tab and newline)
-- as U+FFFD.
function M.esc(s)
  s = tostring(s)
  if not utf8.len(s) then
    local out, i = {}, 1
    while i <= #s do
      local _, bad = utf8.len(s, i)
      if not bad then
        out[#out + 1] = s:sub(i)
        break
      end
      out[#out + 1] = s:sub(i, bad - 1) .. "\u{FFFD}"
      i = bad + 1
    end
    s = table.concat(out)
  end
  s = s:gsub("[%z\1-\8\11-\31\127]", "\u{FFFD}")
  return (s:gsub("[&<>\"']", ENT))
end

local function plural(n, what) return ("%d %s%s"):format(n, what, n == 1 and "" or "s") end

-- "850ms", "12.3s", "4m5s", "2h3m" (the script's human).
function M.human(ms)
  if ms == nil then return "-" end
  ms = math.abs(ms)
  if ms < 1000 then return ("%dms"):format(math.floor(ms + 0.5)) end
  if ms < 60000 then return ("%.1fs"):format(ms / 1000) end
  if ms < 3600000 then return ("%dm%ds"):format(ms // 60000, ms % 60000 // 1000) end
  return ("%dh%dm"):format(ms // 3600000, ms % 3600000 // 60000)
end

function M.rel(t, now)
  if t == nil then return "-" end
  return t <= now and M.human(now - t) .. " ago" or "in " .. M.human(t - now)
end

-- An axis label ms before now: "-24h", "-45m", "-3m45s".
function M.axis_label(ms)
  if ms >= 6 * 3600000 and ms % 3600000 == 0 then return ("-%dh"):format(ms // 3600000) end
  if ms % 60000 == 0 then return ("-%dm"):format(ms // 60000) end
  return ("-%dm%02ds"):format(ms // 60000, ms % 60000 // 1000)
end

-- ---- the header ----

-- What a job counts as in the header: "failing", "overdue", "unheld"
-- (past twice its lease: a hand-off is not a problem), "paused" or "ok".
-- j has the JSON's fields: state, in_jobs_dir, unheld_ms, lease_ms.  As
-- `leash status --check`, only jobs of jobs/ can be overdue or unheld.
function M.job_kind(j)
  if j.state == "paused" or j.state == "failing" then return j.state end
  if j.state == "overdue" and j.in_jobs_dir then return "overdue" end
  if j.state == "unheld" and j.in_jobs_dir and (j.unheld_ms == nil or j.unheld_ms > 2 * j.lease_ms) then
    return "unheld"
  end
  return "ok"
end

-- The header's line and whether it is bad: what is wrong ("2 jobs failing;
-- 1 job unheld; the lease store has not answered for 16.2s"), else "all 12
-- jobs ok".  jobs as job_kind takes them; total: the jobs in all pages;
-- o.error (the store could not be read), o.health (/healthz's reason),
-- o.warnings (the replicas' drift), o.broken (how many broken job files
-- the replicas report), o.singleton.
function M.summary(jobs, total, o)
  local n, parts = { failing = 0, overdue = 0, unheld = 0, paused = 0, ok = 0 }, {}
  if o.error then parts[#parts + 1] = o.error end
  for _, j in ipairs(jobs) do
    local k = M.job_kind(j)
    n[k] = n[k] + 1
  end
  for _, k in ipairs { "failing", "overdue", "unheld" } do
    if n[k] > 0 then parts[#parts + 1] = plural(n[k], "job") .. " " .. k end
  end
  if o.warnings and #o.warnings > 0 then parts[#parts + 1] = plural(#o.warnings, "replica warning") end
  if o.broken and o.broken > 0 then parts[#parts + 1] = plural(o.broken, "broken job file") end
  if o.health then parts[#parts + 1] = o.health end
  if #parts > 0 then return table.concat(parts, "; "), true end
  if o.singleton == false then return "singleton mode off: no store to read", false end
  local text
  if #jobs == 0 then text = "no jobs"
  elseif n.paused > 0 then text = ("%s ok, %d paused"):format(plural(n.ok, "job"), n.paused)
  else text = "all " .. plural(#jobs, "job") .. " ok" end
  if total > #jobs then text = text .. (" (the first %d of %d jobs)"):format(#jobs, total) end
  return text, false
end

-- ---- the replicas ----

-- The owners among live (rows with .owner and field) whose field differs
-- from the most of them (all that differ, when no value has the most).
function M.differs(live, field)
  local count, max, kinds, top, out = {}, 0, 0, 0, {}
  for _, r in ipairs(live) do
    local v = r[field]
    if not count[v] then kinds = kinds + 1 end
    count[v] = (count[v] or 0) + 1
    max = math.max(max, count[v])
  end
  for _, c in pairs(count) do
    if c == max then top = top + 1 end
  end
  for _, r in ipairs(live) do
    if kinds > 1 and (count[r[field]] < max or top > 1) then out[r.owner] = true end
  end
  return out
end

local function replica_rows(model)
  if not model.replicas or #model.replicas == 0 then
    return ('<tr><td class="empty" colspan="7">%s</td></tr>'):format(model.singleton == false and
      "singleton mode off" or "no replica has reported its presence")
  end
  local judged = status.judge(model.replicas, model.leases, model.now, model.lease_ms or 15000)
  local live = {}
  for _, j in ipairs(judged) do
    if j.state ~= "dead" then live[#live + 1] = j.r end
  end
  local jobs_diff, ver_diff = M.differs(live, "jobs_hash"), M.differs(live, "version")
  local out = {}
  for _, j in ipairs(judged) do
    local r, d = j.r, {}
    if jobs_diff[r.owner] then d[#d + 1] = "jobs/ differs" end
    if ver_diff[r.owner] then d[#d + 1] = "version differs" end
    out[#out + 1] = ('<tr data-replica="%s"><td class="mono name">%s</td>'
      .. '<td class="rstate rstate-%s">%s</td><td class="mono version">%s</td><td class="opt">%s</td>'
      .. '<td class="leases">%d</td><td class="share">%d%%</td><td class="%s">%s</td></tr>'):format(
      M.esc(r.owner), M.esc(r.owner), j.state, j.state, M.esc(r.version), M.esc(r.host), j.leases,
      math.floor(j.share * 100 + 0.5), #d > 0 and "drift differs" or "drift",
      #d > 0 and table.concat(d, ", ") or "-")
  end
  return table.concat(out, "\n")
end

-- The replicas' broken job files, a <li> each.
local function broken_items(model)
  local out = {}
  for _, b in ipairs(model.broken_files) do
    out[#out + 1] = ('<li data-file="%s">%s</li>'):format(M.esc(b.file .. ".lua"),
      M.esc(("%s: %s.lua (broken %s, %s): %s"):format(b.replica, b.file, M.rel(b.since, model.now),
        b.kept and "running the last good definition" or "not running", b.error)))
  end
  if model.broken_more > 0 then
    out[#out + 1] = ("<li>%d more not shown</li>"):format(model.broken_more)
  end
  return table.concat(out)
end

-- ---- the jobs ----

local OUTCOMES = { ok = true, failed = true, timeout = true, lost = true, missed = true }

local function job_rows(model)
  local out, now = {}, model.now
  for _, j in ipairs(model.jobs) do
    local cells = {
      ('<td class="mono name">%s</td>'):format(M.esc(j.name)),
      ('<td class="opt">%s</td>'):format(M.esc(j.schedule or "-")),
      ('<td class="state state-%s">%s</td>'):format(j.state, j.state),
      j.holder and ('<td class="mono holder" title="%s">%s</td>'):format(M.esc(j.holder),
        M.esc(("%s (token %d)"):format(j.holder, j.token))) or '<td class="mono holder">-</td>',
    }
    local last = j.last
    if last then
      local title = last.owner and last.owner ~= "" and (' title="%s"'):format(M.esc("on " .. last.owner
        .. (last.error and last.error ~= "" and "\n" .. last.error or ""))) or ""
      cells[#cells + 1] = ('<td class="last o-%s" data-outcome="%s"%s>%s</td>'):format(
        OUTCOMES[last.outcome] and last.outcome or "other", M.esc(last.outcome), title,
        M.esc(last.outcome .. " " .. M.rel(last.ended_at or last.started_at or last.scheduled_at, now)))
    else
      cells[#cells + 1] = '<td class="last">-</td>'
    end
    cells[#cells + 1] = ('<td class="opt">%s</td>'):format(last and M.human(last.duration_ms) or "-")
    cells[#cells + 1] = ('<td class="opt">%s</td>'):format(j.next and M.rel(j.next, now) or "-")
    out[#out + 1] = ('<tr data-job="%s">%s</tr>'):format(M.esc(j.name), table.concat(cells))
  end
  return table.concat(out, "\n")
end

-- The jobs as job_kind reads them (the JSON's names).
local function kinds_input(model)
  local out = {}
  for i, j in ipairs(model.jobs) do
    out[i] = { state = j.state, in_jobs_dir = j.in_jobs, lease_ms = j.lease_ms,
               unheld_ms = j.unheld and j.unheld_ms or nil }
  end
  return out
end

-- ---- the page ----

local STYLE = [==[
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
#health { font-weight: 600; }
#health.good { color: #8fe0a6; }
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
.state-paused { color: var(--missed); } .state-broken { color: var(--timeout); font-weight: 600; }
.rstate-live { color: var(--ok); } .rstate-draining { color: var(--timeout); font-weight: 600; }
.rstate-dead { color: var(--failed); font-weight: 600; } td.drift.differs { color: var(--failed); }
#warnings { margin: .4em 0 0; padding-left: 1.2em; color: var(--failed); }
#warnings:empty, #broken:empty { display: none; }
#broken { margin: .4em 0 0; padding-left: 1.2em; color: var(--timeout); }
.windows { display: flex; flex-wrap: wrap; gap: .4em; align-items: baseline; margin: 1.2em 0 .4em; }
.windows h2 { margin: 0 .6em 0 0; }
.windows a { font-size: 12px; color: #335; text-decoration: none; padding: .1em .5em; white-space: nowrap;
             border: 1px solid #c8cbd2; border-radius: 3px; background: #fff; }
.windows a.on { background: #1f2430; color: #fff; border-color: #1f2430; }
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
]==]

local SCRIPT = ([==[
<script>
"use strict";
(function () {
  var REFRESH = @REFRESH@, LIMIT = @LIMIT@, WINDOWS = @WINDOWS@, DEFAULT_WINDOW = "@DEFAULT@";
  // The last instant a row may hold (src/store/store.h, STORE_TIME_MAX): a
  // corrupt row's time past it is shown as a number, never as a Date.
  var TIME_MAX = 253402300799999;
  function sane(t) { return typeof t === "number" && t >= 0 && t <= TIME_MAX; }
  var OUTCOMES = ["ok", "failed", "timeout", "lost", "missed"];
  var token = null, timer = null;
  var m = /(?:^#|&)token=([^&]*)/.exec(location.hash);
  try {
    if (m) { token = decodeURIComponent(m[1]); sessionStorage.setItem("leash-token", token); }
    else { token = sessionStorage.getItem("leash-token"); }
  } catch (e) { if (m) token = decodeURIComponent(m[1]); }

  function windowOf(name) {
    for (var i = 0; i < WINDOWS.length; i++) if (WINDOWS[i].name === name) return WINDOWS[i];
    return null;
  }
  var win = windowOf(new URLSearchParams(location.search).get("window")) || windowOf(DEFAULT_WINDOW);

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function plural(n, what) { return n + " " + what + (n === 1 ? "" : "s"); }
  function kind(outcome) { return OUTCOMES.indexOf(outcome) >= 0 ? outcome : "other"; }
  // leash.web's human, rel and axis_label: the server's first paint reads the same.
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
  function axisLabel(ms) {
    if (ms >= 6 * 3600000 && ms % 3600000 === 0) return "-" + ms / 3600000 + "h";
    if (ms % 60000 === 0) return "-" + ms / 60000 + "m";
    var s = Math.floor(ms % 60000 / 1000);
    return "-" + Math.floor(ms / 60000) + "m" + (s < 10 ? "0" : "") + s + "s";
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
  function replace(box, nodes) { box.replaceChildren.apply(box, nodes); }

  // What a job counts as in the header (leash.web's job_kind).
  function jobKind(j) {
    if (j.state === "paused") return "paused";
    if (j.state === "failing") return "failing";
    if (j.state === "overdue" && j.in_jobs_dir) return "overdue";
    if (j.state === "unheld" && j.in_jobs_dir &&
        (j.unheld_ms === null || j.unheld_ms === undefined || j.unheld_ms > 2 * j.lease_ms)) return "unheld";
    return "ok";
  }
  // The header's line (leash.web's summary): what is wrong, or that all is fine.
  function summary(st, healthWhy, storeErr) {
    var jobs = (st && st.jobs) || [], n = { failing: 0, overdue: 0, unheld: 0, paused: 0, ok: 0 };
    var parts = [];
    if (storeErr) parts.push(storeErr);
    jobs.forEach(function (j) { n[jobKind(j)]++; });
    ["failing", "overdue", "unheld"].forEach(function (k) {
      if (n[k] > 0) parts.push(plural(n[k], "job") + " " + k);
    });
    var warns = (st && st.warnings) || [];
    if (warns.length) parts.push(plural(warns.length, "replica warning"));
    var broken = ((st && st.broken_files) || []).length + ((st && st.broken_files_left_out) || 0);
    if (broken) parts.push(plural(broken, "broken job file"));
    if (healthWhy) parts.push(healthWhy);
    if (parts.length) return { text: parts.join("; "), bad: true };
    if (st && st.singleton === false) return { text: "singleton mode off: no store to read", bad: false };
    var text = !jobs.length ? "no jobs" : n.paused ? plural(n.ok, "job") + " ok, " + n.paused + " paused"
               : "all " + plural(jobs.length, "job") + " ok";
    var total = st.jobs_total || 0;
    if (total > jobs.length) text += " (the first " + jobs.length + " of " + total + " jobs)";
    return { text: text, bad: false };
  }
  function renderSummary(s) {
    var h = document.getElementById("health");
    h.textContent = s.text;
    h.className = s.bad ? "bad" : "good";
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
    replace(document.querySelector("#jobs tbody"), rows);
    // /api/status answers a page (the first 500 jobs by name).
    var total = st.jobs_total || 0, shown = (st.jobs || []).length;
    document.getElementById("more").textContent = total > shown ?
      "the first " + shown + " of " + total + " jobs (leash status --json lists all, /api/status?offset=" +
      shown + " the next)" : "";
  }

  // Which live replicas differ from the most of them (leash.web's drift).
  function differs(live, field) {
    var count = {}, max = 0, kinds = 0, out = {};
    live.forEach(function (r) {
      if (!count[r[field]]) kinds++;
      count[r[field]] = (count[r[field]] || 0) + 1;
      max = Math.max(max, count[r[field]]);
    });
    var top = 0;
    Object.keys(count).forEach(function (k) { if (count[k] === max) top++; });
    live.forEach(function (r) { if (kinds > 1 && (count[r[field]] < max || top > 1)) out[r.owner] = true; });
    return out;
  }
  function renderReplicas(st) {
    var reps = st.replicas || [], held = 0, rows = [];
    (st.leases || []).forEach(function (l) { if (l.state === "held") held++; });
    var live = reps.filter(function (r) { return r.state !== "dead"; });
    var jobsDiff = differs(live, "jobs_hash"), verDiff = differs(live, "version");
    reps.forEach(function (r) {
      var tr = el("tr"), d = [];
      tr.dataset.replica = r.owner;
      tr.appendChild(el("td", "mono name", r.owner));
      tr.appendChild(el("td", "rstate rstate-" + r.state, r.state));
      tr.appendChild(el("td", "mono version", r.version));
      tr.appendChild(el("td", "opt", r.host));
      tr.appendChild(el("td", "leases", r.leases));
      tr.appendChild(el("td", "share", (held ? Math.round(r.leases / held * 100) : 0) + "%"));
      if (jobsDiff[r.owner]) d.push("jobs/ differs");
      if (verDiff[r.owner]) d.push("version differs");
      tr.appendChild(el("td", d.length ? "drift differs" : "drift", d.length ? d.join(", ") : "-"));
      rows.push(tr);
    });
    if (!rows.length) {
      var tr = el("tr"), td = el("td", "empty", st.singleton === false ? "singleton mode off" :
                                  "no replica has reported its presence");
      td.colSpan = 7;
      tr.appendChild(td);
      rows.push(tr);
    }
    replace(document.querySelector("#replicas tbody"), rows);
    replace(document.getElementById("warnings"), (st.warnings || []).map(function (w) { return el("li", "", w); }));
    // The replicas' broken job files (leash.web's broken_items).
    var items = (st.broken_files || []).map(function (b) {
      var li = el("li", "", b.replica + ": " + b.file + " (broken " + rel(b.since, st.now) + ", " +
                  (b.running_last_good ? "running the last good definition" : "not running") + "): " +
                  b.error);
      li.dataset.file = b.file;
      return li;
    });
    if (st.broken_files_left_out) items.push(el("li", "", st.broken_files_left_out + " more not shown"));
    replace(document.getElementById("broken"), items);
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

  function renderWindow() {
    document.querySelectorAll(".windows a").forEach(function (a) {
      a.className = a.dataset.window === win.name ? "on" : "";
      if (a.dataset.window === win.name) a.setAttribute("aria-current", "true");
      else a.removeAttribute("aria-current");
    });
    document.getElementById("span").textContent = win.span;
    var labels = [];
    for (var i = 4; i >= 1; i--) labels.push(el("span", "", axisLabel(win.ms * i / 4)));
    labels.push(el("span", "", "now"));
    replace(document.getElementById("axis"), labels);
  }

  function renderTimeline(st, hist) {
    var span = win.ms, now = hist.now || st.now, from = now - span, lanes = {}, order = [];
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
        bar.style.left = ((s - from) / span * 100).toFixed(3) + "%";
        bar.style.width = ((e - s) / span * 100).toFixed(3) + "%";
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
    if (!out.length) out.push(el("div", "empty", "no runs in the last " + win.span));
    box.dataset.window = win.name;
    replace(box, out);
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
  // The window's links work without the script too (the server draws the
  // axis); with it they switch in place, the address (and #token=) kept.
  document.querySelectorAll(".windows a").forEach(function (a) {
    a.addEventListener("click", function (ev) {
      var w = windowOf(a.dataset.window);
      if (!w || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.button !== 0) return;
      ev.preventDefault();
      win = w;
      try { history.replaceState(null, "", "?window=" + w.name + location.hash); } catch (e) {}
      renderWindow();
      refresh();
    });
  });

  // /healthz's reason when it is not 200, else null; never fails.
  function health() {
    var headers = {};
    if (token) headers.Authorization = "Bearer " + token;
    return fetch("/healthz", { headers: headers, cache: "no-store" }).then(function (r) {
      return r.text().then(function (t) { return r.ok ? null : t.trim() || ("/healthz: " + r.status); });
    }).catch(function () { return null; });
  }

  function refresh() {
    if (timer !== null) clearTimeout(timer);
    timer = null;
    var asked = win;
    Promise.all([health(), get("/api/status").then(function (st) {
      if (st.singleton === false) return [st, { runs: [] }];
      return get("/api/history?since=" + asked.name + "&limit=" + LIMIT).then(function (h) { return [st, h]; });
    })])
      .then(function (got) {
        var why = got[0], st = got[1][0], hist = got[1][1];
        if (asked !== win) return;      // switched meanwhile: the new one draws
        document.getElementById("provider").textContent = st.provider ? "store: " + st.provider : "singleton mode off";
        renderSummary(summary(st, why, null));
        renderJobs(st);
        renderReplicas(st);
        renderTimeline(st, hist);
        document.getElementById("updated").textContent = "updated " + new Date().toISOString().slice(11, 19) + " UTC";
        document.getElementById("error").textContent = "";
        document.body.dataset.loaded = String((Number(document.body.dataset.loaded) || 0) + 1);
      })
      .catch(function (e) {
        var msg = String(e.message || e);
        renderSummary(summary(null, null, msg));
        document.getElementById("error").textContent = msg;
        document.body.dataset.failed = msg;
      })
      .then(function () { if (asked === win && timer === null) timer = setTimeout(refresh, REFRESH); });
  }
  renderWindow();
  refresh();
})();
</script>]==]):gsub("@(%u+)@", {
  REFRESH = tostring(M.REFRESH_MS),
  LIMIT = tostring(M.HISTORY_LIMIT),
  DEFAULT = M.DEFAULT_WINDOW,
  WINDOWS = (function()
    local t = {}
    for i, w in ipairs(M.WINDOWS) do
      t[i] = ('{"name":"%s","ms":%d,"span":"%s"}'):format(w.name, w.ms, w.span)
    end
    return "[" .. table.concat(t, ",") .. "]"
  end)(),
})
M.SCRIPT = SCRIPT

-- ---- the script's hash, for the Content-Security-Policy ----

-- SHA-256 of s (FIPS 180-4), as 32 bytes.
function M.sha256(s)
  local K = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
  }
  local H = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
              0x5be0cd19 }
  local M32 = 0xffffffff
  local function ror(x, n) return ((x >> n) | (x << (32 - n))) & M32 end
  local msg = s .. "\128" .. ("\0"):rep((55 - #s) % 64) .. (">I8"):pack(#s * 8)
  local w = {}
  for at = 1, #msg, 64 do
    for i = 1, 16 do w[i] = (">I4"):unpack(msg, at + (i - 1) * 4) end
    for i = 17, 64 do
      local a, b = w[i - 15], w[i - 2]
      local s0 = ror(a, 7) ~ ror(a, 18) ~ (a >> 3)
      local s1 = ror(b, 17) ~ ror(b, 19) ~ (b >> 10)
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) & M32
    end
    local a, b, c, d, e, f, g, h = table.unpack(H)
    for i = 1, 64 do
      local t1 = (h + (ror(e, 6) ~ ror(e, 11) ~ ror(e, 25)) + ((e & f) ~ (~e & g)) + K[i] + w[i]) & M32
      local t2 = ((ror(a, 2) ~ ror(a, 13) ~ ror(a, 22)) + ((a & b) ~ (a & c) ~ (b & c))) & M32
      h, g, f, e, d, c, b, a = g, f, e, (d + t1) & M32, c, b, a, (t1 + t2) & M32
    end
    for i, v in ipairs { a, b, c, d, e, f, g, h } do H[i] = (H[i] + v) & M32 end
  end
  return (">I4I4I4I4I4I4I4I4"):pack(table.unpack(H))
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

function M.base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = (a << 16) | ((b or 0) << 8) | (c or 0)
    local q = {}
    for k = 1, 4 do
      local v = (n >> (6 * (4 - k))) & 63
      q[k] = B64:sub(v + 1, v + 1)
    end
    if not b then q[3] = "=" end
    if not c then q[4] = "=" end
    out[#out + 1] = table.concat(q)
  end
  return table.concat(out)
end

-- The Content-Security-Policy's source for the page's one script: only
-- that exact text runs, so no markup in a page (however a job is named)
-- can start a script of its own.
M.SCRIPT_SOURCE = "'sha256-" .. M.base64(M.sha256(SCRIPT:match("^<script>(.*)</script>$"))) .. "'"

local function fill(template, values)
  return (template:gsub("@(%l+)@", function(k) return assert(values[k], k) end))
end

local BODY = [==[
<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>leash</title>
@style@
</head>
<body>
<header>
<h1>leash</h1>
<span id="provider" class="muted">@provider@</span>
<span id="health"@healthclass@>@health@</span>
<span id="updated" class="muted">@updated@</span>
<span id="error" role="alert"></span>
</header>
<main>
<h2>Jobs</h2>
<div id="more" class="empty">@more@</div>
<div class="scroll">
<table id="jobs">
<thead><tr><th>JOB</th><th class="opt">SCHEDULE</th><th>STATE</th><th>HOLDER</th><th>LAST</th>
<th class="opt">DURATION</th><th class="opt">NEXT</th></tr></thead>
<tbody>
@jobs@
</tbody>
</table>
</div>
<h2>Replicas</h2>
<div class="scroll">
<table id="replicas">
<thead><tr><th>REPLICA</th><th>STATE</th><th>VERSION</th><th class="opt">HOST</th><th>LEASES</th>
<th>SHARE</th><th>DRIFT</th></tr></thead>
<tbody>
@replicas@
</tbody>
</table>
</div>
<ul id="warnings">@warnings@</ul>
<ul id="broken">@broken@</ul>
<div class="windows"><h2>Runs per replica, the last <span id="span">@span@</span></h2>
@windows@</div>
<div class="legend"><span><i class="ok"></i>ok</span><span><i class="failed"></i>failed</span><span><i class="timeout"></i>timeout</span><span><i class="lost"></i>lost</span><span><i class="missed"></i>missed</span><span><i class="other"></i>other (running, killed, handed-off, stopped, skipped, manual)</span></div>
<div id="timeline" data-window="@window@"><div class="empty">@timeline@</div></div>
<div class="axis"><div></div><div id="axis">@axis@</div></div>
</main>
<div id="tip"></div>
@script@
</body>
</html>
]==]

-- The page.  input: what leash.jobs_view.build takes (the C side gathers it
-- as for /api/status, its first page), or nil for a page without data (no
-- token, or the store was busy: the script fills it).  o.window: a name of
-- M.WINDOWS (default M.DEFAULT_WINDOW); o.error: why the store could not
-- be read; o.health: /healthz's reason when it is not ok; o.singleton:
-- false with singleton mode off.  Returns the HTML, or nil and the reason
-- for an unknown window.
function M.render(input, o)
  o = o or {}
  local w = M.window(o.window or M.DEFAULT_WINDOW)
  if not w then
    local names = {}
    for i, x in ipairs(M.WINDOWS) do names[i] = x.name end
    return nil, ("window: expected %s"):format(table.concat(names, ", "))
  end
  local v = { style = STYLE, script = SCRIPT, window = w.name, span = w.span, more = "",
              jobs = "", replicas = "", warnings = "", broken = "", updated = "", provider = "", health = "",
              healthclass = "", timeline = "loading the runs ..." }
  local links, axis = {}, {}
  for i, x in ipairs(M.WINDOWS) do
    links[i] = ('<a href="?window=%s" data-window="%s"%s>%s</a>'):format(x.name, x.name,
      x == w and ' class="on" aria-current="true"' or "", x.label)
  end
  for i = 4, 1, -1 do axis[#axis + 1] = "<span>" .. M.axis_label(w.ms * i // 4) .. "</span>" end
  axis[#axis + 1] = "<span>now</span>"
  v.windows, v.axis = table.concat(links, "\n"), table.concat(axis)
  local text, bad
  if o.singleton == false then
    v.provider = "singleton mode off"
    v.replicas = replica_rows { singleton = false }
    text, bad = M.summary({}, 0, { health = o.health, singleton = false })
  elseif input then
    local model = jobs_view.build(input)
    local warns = model.replicas and status.drift(model.replicas, model.now, model.lease_ms or 15000) or {}
    v.provider = "store: " .. M.esc(model.provider or "")
    v.jobs, v.replicas = job_rows(model), replica_rows(model)
    for i, msg in ipairs(warns) do warns[i] = "<li>" .. M.esc(msg) .. "</li>" end
    v.warnings = table.concat(warns)
    v.broken = broken_items(model)
    if model.total > #model.jobs then
      v.more = ("the first %d of %d jobs (leash status --json lists all, /api/status?offset=%d the next)")
        :format(#model.jobs, model.total, #model.jobs)
    end
    v.updated = "updated " .. os.date("!%H:%M:%S", model.now // 1000) .. " UTC"
    text, bad = M.summary(kinds_input(model), model.total, { health = o.health, warnings = warns,
      broken = #model.broken_files + model.broken_more })
  elseif o.error then
    text, bad = M.summary({}, 0, { error = o.error, health = o.health })
  else
    text = "loading ..."
  end
  v.health = M.esc(text)
  if bad ~= nil then v.healthclass = bad and ' class="bad"' or ' class="good"' end
  return fill(BODY, v)
end

-- The pages without data, one per window, in M.WINDOWS' order: { {
-- window =, html =, default = (true for M.DEFAULT_WINDOW) }, ... }.  The
-- server answers these to a request without the token, or while the store
-- is busy.
function M.shells()
  local out = {}
  for i, w in ipairs(M.WINDOWS) do
    out[i] = { window = w.name, html = M.render(nil, { window = w.name }),
               default = w.name == M.DEFAULT_WINDOW }
  end
  return out
end

return M

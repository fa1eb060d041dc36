-- leash status: the jobs view.  One list() and one last_runs() answer, and
-- the local jobs/ (name, schedule, lease, next fire and first unhandled
-- fire, computed by the C core with the code `leash check --next` uses), in;
-- a model of every job out, rendered as a table, as JSON or as a monitor's
-- check (Nagios plugin style).  Pure: the clock is the database's `now`.
local status = require "leash.status"
local core = require "leash.core"
local text = require "leash.text"

local M = {}

-- Outcomes that make a job failing (the store's STORE_FAIL_OUTCOMES).
M.FAILS = { failed = true, timeout = true, lost = true, killed = true }

-- The exit codes of a monitoring plugin.
M.OK, M.WARNING, M.CRITICAL, M.UNKNOWN = 0, 1, 2, 3
local LEVEL = { [0] = "OK", "WARNING", "CRITICAL", "UNKNOWN" }

-- How long after a fire was due a run of it may still be missing:
-- max(1m, lease x 2).
function M.grace(lease_ms)
  return math.max(60000, 2 * lease_ms)
end

-- "2026-12-01T03:00:00Z" (with .mmm when the time is not a whole second).
function M.iso(ms)
  local s = os.date("!%Y-%m-%dT%H:%M:%S", ms // 1000)
  if ms % 1000 ~= 0 then s = s .. (".%03d"):format(ms % 1000) end
  return s .. "Z"
end

-- Text from the store, made safe for a terminal (leash.status's safe).
M.safe = status.safe

-- A replica's broken job files, from its presence row's broken text
-- (src/plan/sched.h: a line per file, "NAME\tSINCE\tKEPT\tERROR", then
-- "+\t0\t0\tN" when N more were left out): a list of { replica=, file=,
-- since=, kept=, error= }, and N (0 when none was left out).  A line that
-- does not parse is skipped: a row is the other replica's to get right.
function M.parse_broken(text, replica)
  local out, more = {}, 0
  for line in (text or ""):gmatch("[^\n]+") do
    local file, since, kept, err = line:match("^([^\t]+)\t(%d+)\t([01])\t(.*)$")
    if file == "+" then
      more = more + (tonumber(err) or 0)
    elseif file then
      out[#out + 1] = { replica = replica, file = file, since = math.tointeger(tonumber(since)),
                        kept = kept == "1", error = err }
    end
  end
  return out, more
end

-- The model: input = { provider=, now=, lease_ms= (the config's),
-- leases = list() rows, runs = last_runs() map, locals = { { name=,
-- schedule=, kind=, singleton=, lease_ms=, next=, due= }, ... },
-- local_broken = { { name=, error= }, ... } (the files of the local jobs/
-- that do not load), replicas = presence rows (their broken text) }.
-- broken_files: every replica's broken files (parse_broken), by replica
-- then file; broken_more: how many their rows left out.
-- Each job: name, in_jobs (false: only the store knows it), schedule, kind,
-- holder (nil when unheld), token, lease (its row), unheld_ms (how long
-- since it expired, nil when held or never held), last/ok/failed (ledger
-- rows), fails, next, due (the first fire after the last one a holder took
-- care of), overdue_ms (past its grace: how long ago it was due), state.
function M.build(input)
  local now, byname, names = input.now, {}, {}
  local function job(name)
    local j = byname[name]
    if not j then
      j = { name = name, in_jobs = false, fails = 0 }
      byname[name] = j
      names[#names + 1] = name
    end
    return j
  end
  for _, l in ipairs(input.locals or {}) do
    local j = job(l.name)
    j.in_jobs, j.schedule, j.kind, j.next, j.due = true, l.schedule, l.kind, l.next, l.due
    j.singleton = l.singleton ~= false
    j.lease_ms = l.lease_ms
  end
  for _, b in ipairs(input.local_broken or {}) do job(b.name).local_broken = b.error end
  local broken_files, broken_more = {}, 0
  local paged = input.page and input.page.paged
  for _, r in ipairs(input.replicas or {}) do
    local list, more = M.parse_broken(r.broken, r.name or r.owner)
    broken_more = broken_more + more
    for _, b in ipairs(list) do
      broken_files[#broken_files + 1] = b
      -- A page (input.page.paged) shows only its own jobs: a file no job
      -- of it stands for is in broken_files alone.
      local j = byname[b.file] or (not paged and job(b.file))
      if j then
        j.broken_on = j.broken_on or {}
        j.broken_on[#j.broken_on + 1] = b
        if b.kept then j.kept_on = true end
      end
    end
  end
  for _, r in ipairs(input.leases or {}) do
    local j = job(r.name)
    j.lease, j.token = r, r.token
    -- Out of store.h's bounds (the C side judges): the job runs nowhere.
    if r.corrupt then j.corrupt = "lease " .. r.corrupt end
    if r.expires_at > now then j.holder = r.owner else j.unheld_ms = now - r.expires_at end
  end
  for name, r in pairs(input.runs or {}) do
    -- "@REPLICA": leash drain's ledger rows, not a job (no job name starts so).
    if name:sub(1, 1) ~= "@" then
      local j = job(name)
      j.last, j.ok, j.failed, j.fails, j.handled_at = r.last, r.ok, r.failed, r.fails or 0,
        r.handled_at
      j.corrupt = j.corrupt or r.corrupt
    end
  end
  table.sort(names)
  local jobs = {}
  for _, name in ipairs(names) do
    local j = byname[name]
    j.lease_ms = j.lease_ms or input.lease_ms or 15000
    -- An elected job has a lease row, or is a local singleton job; a job
    -- only the store knows without one ran unelected.
    local elected = j.lease ~= nil or (j.in_jobs and j.singleton)
    if j.due and j.due < now - M.grace(j.lease_ms) then j.overdue_ms = now - j.due end
    if elected and not j.holder then j.unheld = true end
    if j.lease and j.lease.paused_until and j.lease.paused_until > now then
      j.paused_until = j.lease.paused_until
    end
    -- Broken where it would load, and no replica runs a good definition.
    if (j.local_broken or j.broken_on) and not j.kept_on and not j.holder and not j.in_jobs then
      j.broken = true
    end
    if j.corrupt then j.state = "corrupt"
    elseif j.broken then j.state = "broken"
    elseif j.paused_until then j.state = "paused"
    elseif j.unheld then j.state = "unheld"
    elseif j.overdue_ms then j.state = "overdue"
    elseif j.fails > 0 then j.state = "failing"
    else j.state = "ok" end
    jobs[#jobs + 1] = j
  end
  -- input.page = { offset=, total=, paged= }: these jobs are a page of
  -- total, from offset (the C side chose them, paged when it chose fewer
  -- than all); none: all of them.
  local page = input.page or {}
  return { provider = input.provider, now = now, jobs = jobs, leases = input.leases or {},
           offset = page.offset or 0, total = page.total or #jobs,
           replicas = input.replicas, lease_ms = input.lease_ms,
           broken_files = broken_files, broken_more = broken_more }
end

local function ago(ms) return status.human(math.max(0, ms)) .. " ago" end

-- When a run happened: its start, else its fire.
local function run_at(r) return r.started_at or r.scheduled_at end

-- The last run in a few words: "5m ago ok 1.2s"; wide puts its replica
-- after the age.
local function last_text(r, now, wide)
  if not r then return "-" end
  local dur
  if r.duration_ms then dur = status.human(r.duration_ms)
  elseif r.outcome == "running" and r.started_at then dur = "for " .. status.human(now - r.started_at)
  else dur = "-" end
  local who = wide and (" " .. M.safe(r.owner)) or ""
  return ("%s%s %s %s"):format(ago(now - run_at(r)), who, r.outcome, dur)
end

-- The width the commands' tables fit in unless --wide.
M.FIT = 120

-- Columns padded to their widest cell, two spaces apart, the last unpadded
-- (opts: leash.text.columns's, to fit a width).
M.columns = text.columns

-- A job file's error as the views show it: its first line, at most 80
-- characters, safe.
local function err_text(e)
  return M.safe(core.utf8_cut((e or ""):match("^[^\n]*"), 80))
end

-- What the JOB column says after the name: where its file is broken and
-- which definition runs, or that the local jobs/ lacks it.
function M.job_note(j)
  local notes = {}
  if j.local_broken then
    if j.kept_on or j.holder then
      notes[#notes + 1] = "running the last good definition: " .. err_text(j.local_broken)
    end
  elseif not j.in_jobs and not j.broken_on then
    notes[#notes + 1] = "not in jobs/"
  end
  for _, b in ipairs(j.broken_on or {}) do
    if b.error ~= j.local_broken then
      notes[#notes + 1] = ("broken on %s: %s"):format(M.safe(b.replica), err_text(b.error))
    end
  end
  if #notes == 0 then return "" end
  return " (" .. table.concat(notes, "; ") .. ")"
end

-- The BROKEN FILE table: each replica's broken job files ("" for none).
function M.broken_table(model)
  local files = model.broken_files or {}
  if #files == 0 and (model.broken_more or 0) == 0 then return "" end
  local lines = { { "REPLICA", "BROKEN FILE", "SINCE", "RUNS", "ERROR" } }
  for _, b in ipairs(files) do
    lines[#lines + 1] = { M.safe(b.replica), M.safe(b.file) .. ".lua",
      b.since and ago(model.now - b.since) or "-",
      b.kept and "last good definition" or "nothing", err_text(b.error) }
  end
  local out = "\n" .. M.columns(lines)
  if (model.broken_more or 0) > 0 then
    out = out .. ("(%d more broken files not shown: see the replicas' logs)\n"):format(model.broken_more)
  end
  return out
end

-- The jobs as a table, the state first.  Unless wide, it leaves out the
-- token and the last run's replica, and fits M.FIT columns by cutting the
-- schedule, the holder, the job's name and the last run, in that order ("~"
-- marks a cut); wide shows it all.
function M.table(model, wide)
  if #model.jobs == 0 then return "no jobs (none in jobs/, none in the store)\n" end
  local lines = { wide and { "STATE", "JOB", "SCHEDULE", "HOLDER", "TOKEN", "LAST", "NEXT" }
                  or { "STATE", "JOB", "SCHEDULE", "HOLDER", "LAST", "NEXT" } }
  for _, j in ipairs(model.jobs) do
    local l = {
      j.state,
      M.safe(j.name) .. M.job_note(j),
      j.schedule or "-",
      j.holder and M.safe(j.holder) or "-",
      last_text(j.last, model.now, wide),
      j.next and M.iso(j.next) or "-",
    }
    if wide then table.insert(l, 5, j.token and tostring(j.token) or "-") end
    lines[#lines + 1] = l
  end
  if wide then return M.columns(lines) end
  return M.columns(lines, { max = M.FIT,
    cut = { { 3, 12 }, { 4, 16 }, { 2, 16 }, { 5, 20 }, { 2, 10 }, { 4, 10 } } })
end

-- ---- JSON ----

local function jv(v)
  if v == nil then return "null" end
  if type(v) == "boolean" then return tostring(v) end
  if math.type(v) == "integer" then return ("%d"):format(v) end
  if type(v) == "number" then return ("%d"):format(math.floor(v)) end
  return status.json_string(v)
end

-- An object with its keys in the order given ({ key, value } pairs).
local function obj(pairs_)
  local out = {}
  for _, kv in ipairs(pairs_) do out[#out + 1] = status.json_string(kv[1]) .. ":" .. kv[2] end
  return "{" .. table.concat(out, ",") .. "}"
end

M.RUN_FIELDS = { "job", "scheduled_at", "owner", "token", "outcome", "claimed_at", "started_at",
                 "ended_at", "duration_ms", "exit_code", "exit_signal", "error", "actor",
                 "recorded_at", "run_id", "how" }

function M.run_json(r)
  if not r then return "null" end
  local kv = {}
  for _, k in ipairs(M.RUN_FIELDS) do kv[#kv + 1] = { k, jv(r[k]) } end
  return obj(kv)
end

function M.json(model)
  local jobs = {}
  for _, j in ipairs(model.jobs) do
    jobs[#jobs + 1] = obj {
      { "name", jv(j.name) }, { "in_jobs_dir", jv(j.in_jobs) }, { "schedule", jv(j.schedule) },
      { "kind", jv(j.kind) }, { "state", jv(j.state) }, { "holder", jv(j.holder) },
      { "token", jv(j.token) },
      { "lease_expires_at", jv(j.lease and j.lease.expires_at) },
      { "unheld_ms", jv(j.unheld and (j.unheld_ms or nil)) },
      { "lease_ms", jv(j.lease_ms) }, { "next", jv(j.next) }, { "due", jv(j.due) },
      { "overdue_ms", jv(j.overdue_ms) }, { "fails_in_a_row", jv(j.fails) },
      { "last", M.run_json(j.last) }, { "last_ok", M.run_json(j.ok) },
      { "last_failure", M.run_json(j.failed) }, { "corrupt", jv(j.corrupt) },
      { "broken_here", jv(j.local_broken) },
    }
  end
  local broken = {}
  for _, b in ipairs(model.broken_files or {}) do
    broken[#broken + 1] = obj {
      { "replica", jv(b.replica) }, { "file", jv(b.file .. ".lua") }, { "since", jv(b.since) },
      { "running_last_good", jv(b.kept) }, { "error", jv(b.error) },
    }
  end
  -- The lease array (and the replicas, when the store keeps presence rows)
  -- exactly as `status --leases --json` prints them.
  local rest = status.json(model.provider, model.leases, model.now, model.replicas, model.lease_ms)
  rest = rest:match('^{"provider":[^,]*,"now":%-?%d+,(.*)}$')
  -- Where this page is in the name-ordered list: next_offset is null on
  -- the last (always, for the commands, which show all).
  local after = model.offset + #model.jobs
  return ('{"provider":%s,"now":%s,"jobs_total":%s,"offset":%s,"next_offset":%s,"jobs":[%s],'
    .. '"broken_files":[%s],"broken_files_left_out":%s,%s}'):format(
    jv(model.provider), jv(model.now), jv(model.total), jv(model.offset),
    jv(after < model.total and after or nil), table.concat(jobs, ","), table.concat(broken, ","),
    jv(model.broken_more or 0), rest)
end

-- ---- the monitor's check ----

-- Problems of the model: { level=, kind=, job=, text=, short= }, in job
-- order.  opts.fail: failures in a row that make a warning (default 1).
-- Only jobs of the local jobs/ are checked for being overdue or unheld (a
-- job only the store knows may be one that was removed).
function M.problems(model, opts)
  local fail = opts and opts.fail or 1
  local out = {}
  for _, j in ipairs(model.jobs) do
    local name = M.safe(j.name)
    if j.corrupt then
      local what = M.safe(j.corrupt)
      out[#out + 1] = { level = M.CRITICAL, kind = "corrupt", job = name,
        short = ("%s (%s)"):format(name, what),
        text = ("%s: corrupt: %s is out of bounds; `leash repair %s` resets it"):format(name,
          what, name) }
    end
    if j.local_broken or j.broken_on then
      local where, err = {}, j.local_broken
      if j.local_broken then where[1] = "here" end
      for _, b in ipairs(j.broken_on or {}) do
        where[#where + 1] = M.safe(b.replica)
        err = err or b.error
      end
      local runs = (j.kept_on or j.holder) and "running the last good definition"
        or "not running"
      out[#out + 1] = { level = M.WARNING, kind = "broken", job = name,
        short = ("%s (on %s)"):format(name, table.concat(where, ", ")),
        text = ("%s: broken: jobs/%s.lua does not load on %s (%s): %s"):format(name, name,
          table.concat(where, ", "), runs, err_text(err)) }
    end
    if j.in_jobs and j.overdue_ms then
      out[#out + 1] = { level = M.CRITICAL, kind = "overdue", job = name,
        short = ("%s (due %s, %s)"):format(name, M.iso(j.due), ago(j.overdue_ms)),
        text = ("%s: overdue: the fire due %s (%s) has no run; grace %s"):format(name,
          M.iso(j.due), ago(j.overdue_ms), status.human(M.grace(j.lease_ms))) }
    end
    if j.in_jobs and j.unheld and (not j.unheld_ms or j.unheld_ms > 2 * j.lease_ms) then
      local since = j.unheld_ms and ("for " .. status.human(j.unheld_ms)) or "never held"
      out[#out + 1] = { level = M.CRITICAL, kind = "unheld", job = name,
        short = ("%s (%s)"):format(name, since),
        text = ("%s: unheld: no replica holds its lease (%s; lease %s)"):format(name, since,
          status.human(j.lease_ms)) }
    end
    if j.fails >= fail and j.failed then
      local f = j.failed
      local err = f.error and (": " .. M.safe(core.utf8_cut(f.error:match("^[^\n]*"), 80))) or ""
      out[#out + 1] = { level = M.WARNING, kind = "failing", job = name,
        short = ("%s (%d in a row)"):format(name, j.fails),
        text = ("%s: failing: %d in a row, last %s %s on %s%s"):format(name, j.fails, f.outcome,
          ago(model.now - run_at(f)), M.safe(f.owner), err) }
    end
  end
  return out
end

local KIND_ORDER = { "corrupt", "overdue", "unheld", "broken", "failing" }

-- Exit code and text: the status line, then one line per problem.
function M.check(model, opts)
  local problems, level = M.problems(model, opts), M.OK
  local groups = {}
  for _, p in ipairs(problems) do
    level = math.max(level, p.level)
    groups[p.kind] = groups[p.kind] or {}
    table.insert(groups[p.kind], p.short)
  end
  local head
  if #problems == 0 then
    head = ("LEASH OK - %d job%s ok"):format(#model.jobs, #model.jobs == 1 and "" or "s")
  else
    local parts = {}
    for _, k in ipairs(KIND_ORDER) do
      local g = groups[k]
      if g then
        parts[#parts + 1] = ("%d job%s %s: %s"):format(#g, #g == 1 and "" or "s", k,
          table.concat(g, ", "))
      end
    end
    head = ("LEASH %s - %s"):format(LEVEL[level], table.concat(parts, "; "))
  end
  local lines = { head }
  for _, p in ipairs(problems) do lines[#lines + 1] = p.text end
  return level, table.concat(lines, "\n") .. "\n"
end

-- The check's line when the store cannot be read.
function M.unknown(why)
  return "LEASH UNKNOWN - " .. M.safe(why) .. "\n"
end

-- What the command calls: input as for build, view "table" | "wide" |
-- "json" | "check", fail as for problems.  Returns the exit code and the
-- text.
function M.render(input, view, fail)
  local model = M.build(input)
  if view == "check" then return M.check(model, { fail = fail }) end
  if view == "json" then return 0, M.json(model) end
  local tbl = M.table(model, view == "wide")
  if model.replicas and #model.replicas > 0 then
    return 0, tbl .. status.replicas_table(model.replicas, model.leases, model.now,
      model.lease_ms or 15000) .. M.broken_table(model)
  end
  return 0, tbl
end

return M

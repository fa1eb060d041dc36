-- leash history: ledger rows (read_runs, newest first) as a table or JSON,
-- and the command's arguments checked.  Pure: rows and now (ms, the
-- database's clock) in, text out.
local status = require "leash.status"
local view = require "leash.jobs_view"
local duration = require "leash.duration"
local text = require "leash.text"
local core = require "leash.core"

local M = {}

M.LIMIT_DEFAULT, M.LIMIT_MAX = 50, 10000

-- The first line of an error, at most 60 characters, made safe.
function M.error_head(s)
  if not s or s == "" then return "-" end
  local line = s:match("^[^\n]*")
  if #line ~= #s then line = line .. " ..." end
  if #line > 60 then line = core.utf8_cut(line, 57) .. "..." end
  return view.safe(line)
end

-- A time as the FIRE (UTC) column shows it: "2026-12-01 03:00:00.250".
local function fire_text(ms)
  if not ms then return "-" end
  return (view.iso(ms):gsub("T", " "):gsub("Z$", ""))
end

-- The fire as the narrow table shows it: "12-01 03:00:00", the year and
-- the milliseconds left to --wide.
local function fire_short(ms)
  return fire_text(ms // 1000 * 1000):sub(6)
end

-- A start or an end (r[field]) as its column shows it: the time of day
-- when it is on the fire's day, else the whole time; whole seconds unless
-- ms.
local function later_text(r, field, ms)
  if not r[field] then return "-" end
  local fire, at = fire_text(r.scheduled_at), fire_text(ms and r[field] or r[field] // 1000 * 1000)
  if fire:sub(1, 10) == at:sub(1, 10) then return at:sub(12) end
  return at
end

-- "2", "sig 9" or "-".
local function exit_text(r)
  if r.exit_signal then return "sig " .. r.exit_signal end
  return r.exit_code and tostring(r.exit_code) or "-"
end

local function duration_text(r, now)
  if r.duration_ms then return status.human(r.duration_ms) end
  if r.outcome == "running" and r.started_at and now then
    return "for " .. status.human(math.max(0, now - r.started_at))
  end
  return "-"
end

-- What the row says beyond its state: how the run came (catch-up, manual)
-- unless the state says it, then the error (or the cause of a missed fire,
-- or the action of a control) and who asked.  whole: the error's first
-- line whole, else cut at 60 characters.
function M.note(r, whole)
  local what = ""
  if r.error and r.error ~= "" then
    what = whole and view.safe(r.error:match("^[^\n]*")) or M.error_head(r.error)
  end
  if r.actor and r.actor ~= "" then
    what = (what ~= "" and what .. " by " or "by ") .. view.safe(r.actor)
  end
  if r.how and r.how ~= r.outcome then
    what = view.safe(r.how) .. (what ~= "" and "; " .. what or "")
  end
  return what ~= "" and what or "-"
end

-- The rows as a table, the state first; the run number is the log's
-- `[job run N]` ("-" for a row written before leash kept it).  Unless
-- wide, it leaves out the end, the token, the fire's year and the
-- milliseconds, and fits view.FIT columns by cutting the job's name, the
-- replica and the note, in that order ("~" marks a cut).
function M.table(rows, now, wide)
  if #rows == 0 then return "no runs in the ledger\n" end
  local head = { "STATE", "JOB", "RUN", "EXIT", "FIRE (UTC)", "START", "DURATION", "REPLICA",
                 "NOTE" }
  if wide then
    head = { "STATE", "JOB", "RUN", "EXIT", "FIRE (UTC)", "START", "END", "DURATION", "REPLICA",
             "TOKEN", "NOTE" }
  end
  local lines = { head }
  for _, r in ipairs(rows) do
    local l = { r.outcome, view.safe(r.job), r.run_id and tostring(r.run_id) or "-", exit_text(r),
      wide and fire_text(r.scheduled_at) or fire_short(r.scheduled_at),
      later_text(r, "started_at", wide), duration_text(r, now), view.safe(r.owner),
      M.note(r, wide) }
    if wide then
      table.insert(l, 7, later_text(r, "ended_at", true))
      table.insert(l, 10, tostring(r.token))
    end
    lines[#lines + 1] = l
  end
  if wide then return view.columns(lines) end
  return view.columns(lines, { max = view.FIT,
    cut = { { 2, 16 }, { 8, 20 }, { 9, 24 }, { 8, 12 }, { 2, 10 }, { 9, 12 } } })
end

function M.json(provider, rows, now)
  local out = {}
  for _, r in ipairs(rows) do out[#out + 1] = view.run_json(r) end
  return ('{"provider":%s,"now":%d,"runs":[%s]}'):format(status.json_string(provider), now,
    table.concat(out, ","))
end

-- Days since 1970-01-01 of a civil date (proleptic Gregorian).
local function days(y, m, d)
  y = m <= 2 and y - 1 or y
  local era = y // 400
  local yoe = y - era * 400
  local doy = (153 * (m + (m > 2 and -3 or 9)) + 2) // 5 + d - 1
  return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
end

-- ms of "2026-12-01T03:00:00Z" (or with .mmm), or nil.
function M.parse_iso(s)
  local y, mo, d, h, mi, se, frac = s:match("^(%d%d%d%d)-(%d%d)-(%d%d)T(%d%d):(%d%d):(%d%d)(%.?%d*)Z$")
  if not y then return nil end
  y, mo, d, h, mi, se = tonumber(y), tonumber(mo), tonumber(d), tonumber(h), tonumber(mi), tonumber(se)
  if mo < 1 or mo > 12 or d < 1 or d > 31 or h > 23 or mi > 59 or se > 59 then return nil end
  if frac ~= "" and not frac:match("^%.%d%d?%d?$") then return nil end
  local ms = frac ~= "" and math.floor(tonumber("0" .. frac) * 1000 + 0.5) or 0
  return ((days(y, mo, d) * 24 + h) * 60 + mi) * 60000 + se * 1000 + ms
end

-- Checks the arguments: job (or nil), since text (a duration back from now,
-- or a UTC time as 2026-12-01T03:00:00Z; or nil), limit text (or nil), and
-- now (ms, the local clock).  Returns { job=, since_at= (ms, or nil),
-- limit= }, or nil and the message naming the argument.
function M.args(job, since, limit, now)
  local a = { job = job, limit = M.LIMIT_DEFAULT }
  if job and (job == "" or #job > 200) then
    return nil, ("JOB %s: expected a job name of 1 to 200 bytes"):format(text.quote(job))
  end
  if since then
    local at = M.parse_iso(since)
    if at then
      if at > now then
        return nil, ("--since %s: that is in the future"):format(text.quote(since))
      elseif at < 0 then
        -- The ledger's times are ms since 1970 and no row is older.
        return nil, ("--since %s: that is before 1970-01-01T00:00:00Z"):format(text.quote(since))
      end
      a.since_at = at
    else
      local ms = duration.parse(since)
      if not ms or ms <= 0 then
        return nil, ("--since %s: not a duration (30s, 5m, 1h, 2d) or a UTC time "
          .. "(2026-12-01T03:00:00Z)"):format(text.quote(since))
      end
      a.since_at = math.max(0, now - ms)
    end
  end
  if limit then
    local n = limit:match("^%d+$") and tonumber(limit)
    if not n or n < 1 or n > M.LIMIT_MAX then
      return nil, ("--limit %s: expected a whole number from 1 to %d"):format(text.quote(limit),
        M.LIMIT_MAX)
    end
    a.limit = n
  end
  return a
end

return M

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

local function t(ms) return ms and view.iso(ms) or "-" end

function M.table(rows, _now)
  if #rows == 0 then return "no runs in the ledger\n" end
  local lines = { { "SCHEDULED", "STARTED", "ENDED", "JOB", "REPLICA", "TOKEN", "OUTCOME",
                    "DURATION", "ERROR" } }
  for _, r in ipairs(rows) do
    lines[#lines + 1] = { t(r.scheduled_at), t(r.started_at), t(r.ended_at), view.safe(r.job),
      view.safe(r.owner), tostring(r.token), r.outcome,
      r.duration_ms and status.human(r.duration_ms) or "-", M.error_head(r.error) }
  end
  return view.columns(lines)
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

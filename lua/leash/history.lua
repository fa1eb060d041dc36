-- leash history: ledger rows (read_runs, newest first) as a table or JSON,
-- and the command's arguments checked.  Pure: rows and now (ms, the
-- database's clock) in, text out.
local status = require "leash.status"
local view = require "leash.jobs_view"
local duration = require "leash.duration"

local M = {}

M.LIMIT_DEFAULT, M.LIMIT_MAX = 50, 10000

-- The first line of an error, at most 60 characters, made safe.
function M.error_head(s)
  if not s or s == "" then return "-" end
  local line = s:match("^[^\n]*")
  if #line ~= #s then line = line .. " ..." end
  if #line > 60 then line = line:sub(1, 57) .. "..." end
  return view.safe(line)
end

local function t(ms) return ms and view.iso(ms) or "-" end

function M.table(rows)
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

-- Checks the arguments: job (or nil), since text (a duration, or nil),
-- limit text (or nil).  Returns { job=, since_ms= (a duration back from
-- now, or nil), limit= }, or nil and the message naming the argument.
function M.args(job, since, limit)
  local a = { job = job, limit = M.LIMIT_DEFAULT }
  if job and (job == "" or #job > 200) then
    return nil, ("JOB %s: expected a job name of 1 to 200 bytes"):format(view.safe(job))
  end
  if since then
    local ms = duration.parse(since)
    if not ms then
      return nil, ("--since %s: not a duration (use 30s, 5m, 1h, 2d)"):format(view.safe(since))
    end
    if ms <= 0 then return nil, ("--since %s: must be longer than 0"):format(view.safe(since)) end
    a.since_ms = ms
  end
  if limit then
    local n = limit:match("^%d+$") and tonumber(limit)
    if not n or n < 1 or n > M.LIMIT_MAX then
      return nil, ("--limit %s: expected a whole number from 1 to %d"):format(view.safe(limit),
        M.LIMIT_MAX)
    end
    a.limit = n
  end
  return a
end

return M

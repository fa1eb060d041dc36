-- bench/common.lua: what every benchmark measures with: percentiles, a
-- process's RSS, and PostgreSQL's own view (psql, its transaction count).
local L = require "e2e"

local M = {}

-- The p-th quantile (0 < p <= 1) of a list of numbers, NaN when empty; the
-- list is left as it was.
function M.pct(t, p)
  if #t == 0 then return 0 / 0 end
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  return s[math.max(1, math.ceil(#s * p))]
end

function M.median(t) return M.pct(t, 0.5) end

function M.rss_kb(pid)
  return tonumber(L.read("/proc/" .. pid .. "/status"):match("VmRSS:%s*(%d+)")) or 0
end

-- What the RSS is made of (kB): anonymous memory, the files' pages (the
-- libraries' above all, shared with every process that maps them) and
-- shared memory (the metrics' memfd).
function M.rss_parts_kb(pid)
  local st = L.read("/proc/" .. pid .. "/status")
  local function kb(k) return tonumber(st:match(k .. ":%s*(%d+)")) or 0 end
  return kb("RssAnon"), kb("RssFile"), kb("RssShmem")
end

-- One query through psql on conninfo pg; its output, trimmed of nothing.
function M.psql(pg, sql)
  local code, out = L.sh(("psql %s -Atc %s"):format(L.quote(pg), L.quote(sql)))
  assert(code == 0, "psql failed: " .. sql)
  return out
end

-- PostgreSQL's committed and rolled back transactions so far (each store
-- call is one autocommit statement).
function M.xacts(pg)
  return tonumber(M.psql(pg, "SELECT xact_commit + xact_rollback FROM pg_stat_database "
    .. "WHERE datname = current_database()"))
end

-- Source of an every = "1s" job that appends its fire's second and its start
-- lateness (seconds, measured inside the child: now - ctx.scheduled_at) to
-- path, a line a run.
function M.lateness_job(path)
  return ([[
local core = require "leash.core"
return { every = "1s", run = function(ctx)
  local f = io.open(%q, "a")
  f:write(("%%d %%.6f\n"):format(ctx.scheduled_at, core.now() - ctx.scheduled_at))
  f:close()
end }]]):format(path)
end

-- The lateness lines of path: the latenesses in ms, and beside them (same
-- index) the fires' seconds.
function M.lateness_ms(path)
  local late, at = {}, {}
  for _, l in ipairs(L.lines(path)) do
    local s, v = l:match("^(%d+) (%S+)$")
    if s and tonumber(v) then
      late[#late + 1] = tonumber(v) * 1000
      at[#at + 1] = tonumber(s)
    end
  end
  return late, at
end

return M

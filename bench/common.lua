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

return M

-- Helpers for the end-to-end election specs: a job that records replica,
-- token, scheduled time and a heartbeat every 50 ms while it runs (so an
-- overlap between replicas shows whatever killed or froze whom), configs for
-- each provider, the lease rows as the store has them, and replicas started
-- and stopped as real `leash run` processes.
local L = require "e2e"
local core = require "leash.core"
local providers = require "providers"

local M = {}

M.LEASE, M.RETRY = 2000, 500         -- ms; renew = lease/3, margin = lease/5
local LEASE, RETRY = M.LEASE, M.RETRY

-- A job every `every` that records to out (what, replica, token, scheduled
-- time, ns): "start", then body (Lua text, default 10 x "beat" 50 ms apart),
-- then "end".  M.runs reads the records.
function M.job_src(out, every, body)
  return ([[
local core = require "leash.core"
local OUT = %q
local function rec(ctx, what)
  local f = assert(io.open(OUT, "a"))
  f:write(("%%s %%s %%d %%d %%.0f\n"):format(what, ctx.replica, ctx.token,
    ctx.scheduled_at or 0, core.now() * 1e9))
  f:close()
end
return {
  every = %q,
  run = function(ctx)
    rec(ctx, "start")
    %s
    rec(ctx, "end")
  end,
}
]]):format(out, every or "1s", body or 'for _ = 1, 10 do ctx.sleep(0.05); rec(ctx, "beat") end')
end

-- n config files in d (r1.ini ... rn.ini) for replicas named r1 ... rn on
-- table tbl, sharing d's jobs; singleton: their [singleton] section.
function M.replica_configs(p, tbl, d, n, singleton)
  local cfgs = {}
  for i = 1, n do
    local c = M.config(p, tbl)
    c.leash = { grace = "500ms", log_level = "debug", replica = "r" .. i, jobs = d.jobs }
    c.singleton = singleton
    cfgs[i] = d.dir .. "/r" .. i .. ".ini"
    L.write(cfgs[i], L.ini(c))
  end
  return cfgs
end

-- A `leash run` of config file cfgpath, its owner id read from its log.
function M.start(cfgpath, password)
  local proc = L.spawn(cfgpath, { env = { LEASH_TEST_MSSQL_PASSWORD = password or "" } })
  proc.owner = assert(L.wait_for(function()
    return proc:log_text():match("replica (%S+),")
  end, 5), "replica did not start")
  return proc
end

-- Runs per (replica, token, scheduled_at): first and last record times (s).
function M.runs(out)
  local by, list = {}, {}
  for _, l in ipairs(L.lines(out)) do
    local what, rep, token, sched, ns = l:match("^(%a+) (%S+) (%d+) (%d+) (%d+)$")
    if what then
      local key = rep .. " " .. token .. " " .. sched
      local r = by[key]
      if not r then
        r = { replica = rep, token = tonumber(token), scheduled_at = tonumber(sched), from = math.huge, to = 0, ended = false }
        by[key] = r
        list[#list + 1] = r
      end
      local t = tonumber(ns) / 1e9
      r.from, r.to = math.min(r.from, t), math.max(r.to, t)
      if what == "end" then r.ended = true end
    end
  end
  table.sort(list, function(a, b) return a.from < b.from end)
  return list
end

function M.assert_no_overlap(list)
  for i = 2, #list do
    local a, b = list[i - 1], list[i]
    assert(b.from >= a.to,
      ("runs overlap: %s token %d [%.3f, %.3f] and %s token %d [%.3f, %.3f]"):format(
        a.replica, a.token, a.from, a.to, b.replica, b.token, b.from, b.to))
  end
end

function M.config(p, d_table, extra)
  local c = {
    leash = { grace = "500ms", log_level = "debug" },
    -- First come, first held: these specs follow one holder through kills,
    -- freezes and outages, and the replicas of one host share a name, so
    -- spread would move the job to the smallest owner id whenever it is
    -- live.  tests/spread_spec.lua covers spread.
    singleton = { enabled = "true", lease = LEASE .. "ms", retry = RETRY .. "ms", spread = "false" },
    store = { provider = p.provider, table = d_table, statement_timeout = "1s", connect_timeout = "1s" },
  }
  if p.provider == "sqlite" then c.sqlite = { path = p.path }
  elseif p.provider == "mssql" then
    c.mssql = { host = p.host, port = tostring(p.port), user = p.user, database = p.database,
                password_env = "LEASH_TEST_MSSQL_PASSWORD" }
  else c.postgres = { conninfo = p.conninfo } end
  for k, v in pairs(extra or {}) do c[k] = v end
  return c
end

-- The store as the specs see it (a handle of their own), to read who holds
-- what and what the ledger says. Its timeouts are 10 s or more: an
-- observer's, not leash's (a loaded machine once took over 1 s to prepare
-- PostgreSQL's statements, and the spec failed without a fault in leash).
function M.open(p, tbl, timeout_ms)
  local ms = math.max(timeout_ms or 0, 10000)
  return assert(core.open_store { provider = p.provider, path = p.path, conninfo = p.conninfo,
    host = p.host, port = p.port, user = p.user, password = p.password, database = p.database,
    table = tbl, connect_timeout_ms = ms, statement_timeout_ms = ms })
end

-- The ledger rows of job (default "rec"), oldest first.
function M.ledger(p, tbl, job)
  local s = M.open(p, tbl, 2000)
  local rows = assert(s:read_runs { job = job or "rec", limit = 10000 })
  s:close()
  table.sort(rows, function(a, b) return a.scheduled_at < b.scheduled_at end)
  return rows
end

function M.rows(p, tbl)
  local s = M.open(p, tbl)
  local list, now = assert(s:list())
  s:close()
  return list, now
end

function M.lease_row(p, tbl, name)
  for _, r in ipairs((M.rows(p, tbl))) do
    if r.name == name then return r end
  end
end

-- The replica holding "rec" (and the row), or nil when none does.
function M.holder(procs, p, tbl)
  local r = M.lease_row(p, tbl, "rec")
  if not r then return nil end
  for _, proc in ipairs(procs) do
    if proc.owner == r.owner then return proc, r end
  end
end

function M.wait_holder(procs, p, tbl)
  local got = assert(L.wait_for(function()
    local proc, r = M.holder(procs, p, tbl)
    return proc and { proc, r }
  end, 5), "nobody holds the lease")
  return got[1], got[2]
end

function M.start_replicas(d, n)
  local procs = {}
  for i = 1, n do
    local proc = L.spawn(d, { env = { LEASH_TEST_MSSQL_PASSWORD = d.password or "" } })
    proc.owner = assert(L.wait_for(function()
      return proc:log_text():match("replica (%S+),")
    end, 5), "replica " .. i .. " did not start")
    procs[#procs + 1] = proc
  end
  return procs
end

-- Runs `leash CMD -c <d's config> ARGS...` (d as L.dir made it, p the
-- provider) with the store's password, and $USER set to someone else: a
-- control's actor comes from the system, never from $USER.  Returns the exit
-- code, stdout and stderr.
function M.leash_in(d, p, cmd, ...)
  return L.leash({ cmd, "-c", d.config, ... }, { env = {
    LEASH_TEST_MSSQL_PASSWORD = p.password or "", USER = "ops" } })
end

function M.stop_all(procs)
  for _, proc in ipairs(procs) do
    if proc:alive() then proc:signal("CONT"); proc:stop(10) end
  end
end

-- The pids of a process and all its descendants.
function M.tree(pid)
  local out = { pid }
  for _, c in ipairs(L.children(pid)) do
    for _, x in ipairs(M.tree(c)) do out[#out + 1] = x end
  end
  return out
end

-- Whether a writer could take the SQLite file's write lock within 50 ms
-- (a BEGIN IMMEDIATE through the sqlite3 shell, rolled back at once).
function M.sqlite_writable(path)
  local code = L.exec({ "sqlite3", path, ".timeout 50", "BEGIN IMMEDIATE;", "ROLLBACK;" })
  return code == 0
end

local function stopped(pid)
  local f = io.open(("/proc/%d/stat"):format(pid))
  if not f then return true end                 -- gone: nothing left to stop
  local state = (f:read("a") or ""):match("^%d+ %b() (%a)")
  f:close()
  return state ~= "R" and state ~= "S" and state ~= "D"
end

-- SIGSTOPs pid and all its descendants (on provider p) and returns their
-- pids, once they are all stopped.  On SQLite a replica stopped inside a
-- write transaction keeps the file's write lock until it wakes, and until
-- then no other replica writes to the file, so none can take its leases
-- over: a limit of SQLite (docs/stores.md, "SQLite"), not what a freeze spec is
-- after.  So a freeze that leaves the file unwritable is undone (SIGCONT)
-- and tried again a moment later, up to 10 times.  PostgreSQL and SQL
-- Server end each operation's transaction on the server, so a frozen
-- client holds none of their locks: any freeze will do.
function M.freeze(pid, p)
  for _ = 1, 10 do
    local tree
    -- Twice: a child forked before pid stopped is in the second listing.
    for _ = 1, 2 do
      tree = M.tree(pid)
      for _, x in ipairs(tree) do L.kill(x, "STOP") end
      assert(L.wait_for(function()
        for _, x in ipairs(tree) do
          if not stopped(x) then return false end
        end
        return true
      end, 5, 0.01), "the frozen processes did not stop")
    end
    if p.provider ~= "sqlite" or M.sqlite_writable(p.path) then return tree end
    for _, x in ipairs(tree) do L.kill(x, "CONT") end
    L.sleep(0.05 + math.random() * 0.1)
  end
  error("every freeze caught the replica inside a SQLite write transaction")
end

function M.list_of(p)
  local out = {}
  for _, x in ipairs(providers.list) do
    if x.provider == "sqlite" then
      out[#out + 1] = { provider = "sqlite", path = (os.getenv("LEASH_TEST_TMP") or "/tmp") .. "/election.db" }
    elseif x.provider == "postgres" or x.provider == "mssql" then
      out[#out + 1] = x
    end
  end
  return out
end

return M

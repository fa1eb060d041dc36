-- The CLI never damages a running service (issue 38): reading commands open
-- the store read-only and make no file nor table, the controls make none
-- either, an operator in the database's group reads it, and a replica that
-- meets a database it cannot write says how to fix it and carries on by
-- itself once it is fixed.  The users are switched with setpriv (root
-- only): nobody (group nogroup) is the service, daemon an operator.
local L = require "e2e"
local R = require "replicas"
local core = require "leash.core"
local providers = require "providers"

local root = select(2, L.sh("id -u")):match("^0\n") ~= nil
local function as(user, groups)
  return ("setpriv --reuid=%s --regid=%s %s"):format(user, user == "nobody" and "nogroup" or user,
    groups and ("--groups=" .. groups) or "--clear-groups")
end

-- `leash ARGS` as user (nil: this process's), with the mssql password.
local function leash(p, args, user, groups)
  local env = { env = { LEASH_TEST_MSSQL_PASSWORD = p.password or "" } }
  if not user then return L.leash(args, env) end
  local words = {}
  for _, a in ipairs(args) do words[#words + 1] = L.quote(a) end
  return L.sh(("export LEASH_TEST_MSSQL_PASSWORD=%s; exec %s %s %s"):format(
    L.quote(p.password or ""), as(user, groups), L.quote(L.bin), table.concat(words, " ")))
end

local function listing(dir)
  local _, out = L.sh("ls -la --time-style=+ " .. dir .. " | tail -n +2")
  return out
end

-- Every directory from dir up to / searchable by others, so the users
-- switched to reach the config and the jobs (root only: setpriv is).
local function open_path(dir)
  local p = dir
  while root and p ~= "" and p ~= "/" do
    assert(os.execute("chmod o+x " .. L.quote(p)))
    p = p:match("^(.*)/[^/]*$")
  end
end

local function read_open(p, tbl)
  return core.open_store { provider = p.provider, path = p.path, conninfo = p.conninfo,
    host = p.host, port = p.port, user = p.user, password = p.password, database = p.database,
    table = tbl, mode = "read", connect_timeout_ms = 10000, statement_timeout_ms = 10000 }
end

describe("reading commands and controls on a store leash run has not made", function()
  for _, x in ipairs(providers.list) do
    it("say there is no lease table yet and make nothing [" .. x.provider .. "]", function()
      local tbl = "ro_" .. math.random(1, 1e6)
      local d = L.dir { config = {}, jobs = { a = 'return { every = "1h", run = function() end }' } }
      local p = x
      if x.provider == "sqlite" then
        p = { provider = "sqlite", path = d.dir .. "/db/leash.db" }
        assert(os.execute("mkdir '" .. d.dir .. "/db'"))
      end
      local c = R.config(p, tbl, { leash = { jobs = d.jobs } })
      -- An observer's timeouts: a first read on a real SQL Server took over 1 s.
      c.store.statement_timeout, c.store.connect_timeout = "10s", "10s"
      L.write(d.config, L.ini(c))
      for _, args in ipairs { { "status" }, { "status", "--leases" }, { "status", "--json" },
          { "history" }, { "pause", "a" }, { "trigger", "a" }, { "drain", "r1" } } do
        table.insert(args, 2, "-c")
        table.insert(args, 3, d.config)
        local code, out, err = leash(p, args)
        assert.equal(1, code, table.concat(args, " ") .. ": " .. out .. err)
        assert.matches("no lease table yet: has `leash run` started%? %(" .. p.provider, err,
          nil, false)
        assert.matches("has no table " .. tbl, err, nil, true)
      end
      local code, out = leash(p, { "status", "-c", d.config, "--check" })
      assert.equal(3, code)
      assert.matches("LEASH UNKNOWN - .*no lease table yet", out)
      if p.provider == "sqlite" then
        assert.equal("", listing(d.dir .. "/db"):gsub("[^\n]* %.%.?\n", ""))
      end
      -- Nothing was made: a read open still finds no table, and after
      -- leash run's kind of open (which makes them) it finds them.
      local s, err = read_open(p, tbl)
      assert.is_nil(s)
      assert.matches("no lease table yet", err)
      R.open(p, tbl):close()
      s = assert(read_open(p, tbl))
      s:close()
      code, out, err = leash(p, { "status", "-c", d.config })
      assert.equal(0, code, err)
      assert.matches("a%s+every 1h", out)
    end)
  end
end)

describe("SQLite files and their users", function()
  local function setup(prefix)
    local d = L.dir { prefix = prefix, config = {},
      jobs = { a = 'return { every = "1s", run = function() end }' } }
    open_path(d.dir)
    assert(os.execute("chmod -R a+rX '" .. d.dir .. "'"))
    local db = d.dir .. "/db"
    assert(os.execute("mkdir '" .. db .. "'"))
    local p = { provider = "sqlite", path = db .. "/leash.db" }
    L.write(d.config, L.ini(R.config(p, "leash_leases", { leash = {
      jobs = d.jobs, grace = "500ms", log_level = "info" } })))
    assert(os.execute("chmod a+r '" .. d.config .. "'"))
    return d, p, db
  end

  it("status as root on a missing database makes no file", function()
    local d, p, db = setup("ro-root")
    local code, _, err = leash(p, { "status", "-c", d.config })
    assert.equal(1, code)
    assert.matches("no lease table yet", err)
    assert.is_false(L.exists(p.path))
    -- A database leash run made and closed: root's status reads it without
    -- leaving -wal or -shm files behind (root's would lock the service out).
    R.open(p, "leash_leases"):close()
    local before = listing(db)
    code, _, err = leash(p, { "status", "-c", d.config })
    assert.equal(0, code, err)
    code, _, err = leash(p, { "history", "-c", d.config })
    assert.equal(0, code, err)
    assert.equal(before, listing(db))
    assert.is_false(L.exists(p.path .. "-wal"))
    -- A reader opened while nothing writes reads the file as it is on disk;
    -- once a writer comes (and makes the -wal file) it reads through it.
    local rd = assert(read_open(p, "leash_leases"))
    assert.same({}, (assert(rd:list())))
    local w = R.open(p, "leash_leases")
    assert.is_true(w:try_acquire("j", "o:1:00000001", 60000))
    local rows = assert(rd:list())
    assert.equal("j", rows[1] and rows[1].name)
    w:close()
    rd:close()
  end)

  it("an operator in the service's group reads it; one outside is told why", function()
    if not root then pending("needs root for setpriv") return end
    local d, p, db = setup("ro-group")
    R.open(p, "leash_leases"):close()
    assert(os.execute(("chown -R nobody:nogroup '%s' && chmod 0750 '%s' && chmod 0640 '%s'")
      :format(db, db, p.path)))
    -- The service off: no -wal file, and a directory the operator cannot write.
    local code, out, err = leash(p, { "status", "-c", d.config }, "daemon", "nogroup")
    assert.equal(0, code, err)
    assert.matches("a%s+every 1s", out)
    assert.is_false(L.exists(p.path .. "-wal"))
    assert.is_false(L.exists(p.path .. "-shm"))
    -- The service on, as nobody: its -wal and -shm files are read, never written.
    local svc = L.spawn_cmd(("exec %s %s run -c %s"):format(as("nobody"), L.bin, d.config))
    finally(function() if svc:alive() then svc:stop(10) end end)
    assert.truthy(svc:wait_log("%[a run 1%] finished", 30), svc:log_text())
    code, out, err = leash(p, { "history", "-c", d.config, "a" }, "daemon", "nogroup")
    assert.equal(0, code, err)
    assert.matches("\nok%s+a%s+1%s", out)
    code, out, err = leash(p, { "status", "-c", d.config }, "daemon", "nogroup")
    assert.equal(0, code, err)
    -- A control needs the service's user, and says so.
    code, out, err = leash(p, { "pause", "-c", d.config, "a" }, "daemon", "nogroup")
    assert.equal(1, code)
    assert.matches("user daemon cannot write it %(owner nobody, group nogroup, mode 0640%); " ..
      "run the command as the service's user %(sudo %-u nobody leash", err)
    -- Outside the group: the directory in the way, named.
    code, out, err = leash(p, { "status", "-c", d.config }, "daemon")
    assert.equal(1, code)
    assert.matches("user daemon cannot reach it: Permission denied %(directory " .. db:gsub("%p", "%%%0")
      .. ": owner nobody, group nogroup, mode 0750%)", err)
    assert.equal(0, svc:stop(15))
    -- Root's controls with the service off: SQLite gives what it makes to the file's owner.
    -- (no replica is live: --force, and --no-wait for one to take it)
    code, _, err = leash(p, { "pause", "-c", d.config, "a", "--force", "--no-wait" })
    assert.equal(0, code, err)
    code, _, err = leash(p, { "resume", "-c", d.config, "a", "--force", "--no-wait" })
    assert.equal(0, code, err)
    -- Neither the operator nor root left a file of their own.
    local _, owners = L.sh("stat -c %U " .. db .. "/*")
    assert.equal("", owners:gsub("nobody\n", ""))
  end)

  it("a replica that cannot write the database says how to fix it, then recovers", function()
    if not root then pending("needs root for setpriv") return end
    local d, p, db = setup("ro-replica")
    -- As in the issue: root made the file before the service started.
    R.open(p, "leash_leases"):close()
    assert(os.execute(("chgrp -R nogroup '%s' && chmod 0750 '%s' && chmod 0644 '%s'")
      :format(db, db, p.path)))
    local svc = L.spawn_cmd(("exec %s %s run -c %s"):format(as("nobody"), L.bin, d.config))
    finally(function() if svc:alive() then svc:stop(10) end end)
    local line = svc:wait_log("lease store: cannot open sqlite", 30)
    assert.truthy(line, svc:log_text())
    assert.matches("user nobody cannot write it %(owner root, group nogroup, mode 0644%); " ..
      "fix: chown nobody: " .. p.path:gsub("%p", "%%%0") .. "%*", line)
    -- It keeps retrying (every 500 ms) without saying it again, and runs nothing.
    assert.truthy(L.wait_for(function()
      return #svc:grep("lease store") >= 1 and svc:log_text():find("retrying every 500ms")
    end, 10))
    L.sleep(2)
    assert.equal(1, #svc:grep("cannot write it"), svc:log_text())
    assert.equal(0, #svc:grep("%[a run"), svc:log_text())
    assert(os.execute(("chown -R nobody: '%s'"):format(db)))
    assert.truthy(svc:wait_log("lease store: answering again", 30), svc:log_text())
    assert.truthy(svc:wait_log("%[a run 1%] finished", 30), svc:log_text())
    assert.equal(1, #svc:grep("cannot write it"), svc:log_text())
    assert.equal(0, svc:stop(15))
  end)

  it("a replica whose database directory is missing names it and the fix, then runs once it is made", function()
    local d, p, db = setup("ro-nodir")
    assert(os.execute("rmdir '" .. db .. "'"))
    local svc = L.spawn_cmd(("exec %s run -c %s"):format(L.bin, d.config))
    finally(function() if svc:alive() then svc:stop(10) end end)
    local line = svc:wait_log("lease store: cannot open sqlite", 30)
    assert.truthy(line, svc:log_text())
    local q = db:gsub("%p", "%%%0")
    assert.matches("the directory " .. q .. " does not exist; fix: mkdir %-p " .. q, line)
    assert(os.execute("mkdir '" .. db .. "'"))
    assert.truthy(svc:wait_log("%[a run 1%] finished", 30), svc:log_text())
    assert.equal(0, svc:stop(15))
  end)
end)

-- A PostgreSQL server that stops taking writes under a running replica (a
-- standby after a failover, or default_transaction_read_only): the replica
-- names the fix once, connects again on each retry, and carries on when the
-- server takes writes again.  The lane's own server is made read-only for a
-- moment (ALTER SYSTEM and a reload reach every open session).
local pg = os.getenv("LEASH_TEST_PG_CONNINFO")
describe("a replica on a PostgreSQL server that takes no writes", function()
  local function psql(sql)
    return L.sh(("psql -X -q -v ON_ERROR_STOP=1 %s -c 'SET default_transaction_read_only = off'"
      .. " -c %s -c 'SELECT pg_reload_conf()'"):format(L.quote(pg), L.quote(sql)))
  end

  it("says so with the fix, and recovers by itself", function()
    if not pg or pg == "" then pending("no PostgreSQL") return end
    local p = { provider = "postgres", conninfo = pg }
    local tbl = "ro_pg_" .. math.random(1, 1e6)
    local d = L.dir { config = {}, jobs = { a = 'return { every = "1s", run = function() end }' } }
    local c = R.config(p, tbl, { leash = { jobs = d.jobs, grace = "500ms", log_level = "info" } })
    L.write(d.config, L.ini(c))
    local svc = L.spawn(d)
    local ok, why = pcall(function()
      assert.truthy(svc:wait_log("%[a run 1%] finished", 30), svc:log_text())
      assert.equal(0, (psql("ALTER SYSTEM SET default_transaction_read_only = on")))
      local line = svc:wait_log("the server takes no writes", 30)
      assert.truthy(line, svc:log_text())
      assert.matches("read%-only transaction .*target_session_attrs=read%-write", line)
      L.sleep(2)                  -- retries (every 500 ms) do not say it again
      assert.equal(1, #svc:grep("the server takes no writes"), svc:log_text())
      assert.equal(0, (psql("ALTER SYSTEM RESET default_transaction_read_only")))
      assert.truthy(svc:wait_log("lease store: answering again", 30), svc:log_text())
      local runs = #svc:grep("%[a run %d+%] finished")
      assert.truthy(L.wait_for(function()
        return #svc:grep("%[a run %d+%] finished") > runs
      end, 30), svc:log_text())
    end)
    psql("ALTER SYSTEM RESET default_transaction_read_only")
    svc:stop(15)
    assert(ok, why)
  end)
end)

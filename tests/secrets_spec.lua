-- Secrets stay with leash, and job bodies cannot write its store (issue 37,
-- items 4 and 5): a job sees none of leash's own secrets (the variables
-- [http] token_env and [mssql] password_env name, and with a PostgreSQL
-- store every PG* one) while its file loads, in run(ctx), in a program
-- ctx.exec starts or in /proc/self/environ; with [leash] run_as its
-- processes are that user's, hold no capability and cannot open the
-- SQLite file; a root leash without run_as says so at start; and `leash
-- check` and `leash run` refuse a run_as user that does not exist.
local L = require "e2e"
local P = require "providers"

local SECRETS = { LEASH_T_TOKEN = "tok-s3cret-1", LEASH_T_PW = "pw-s3cret-2",
                  PGPASSWORD = "pg-s3cret-3", PGAPPNAME = "pg-s3cret-4" }
local NAMES = { "LEASH_T_TOKEN", "LEASH_T_PW", "PGPASSWORD", "PGAPPNAME", "LEASH_T_PLAIN" }

local function env_with(extra)
  local env = { LEASH_T_PLAIN = "plain-visible" }
  for k, v in pairs(SECRETS) do env[k] = v end
  for k, v in pairs(extra or {}) do env[k] = v end
  return env
end

-- A job that writes, once, what it saw of NAMES while loading and in run,
-- what `env` (through ctx.exec) and /proc/self/environ hold, its uid (the
-- body's own, from /proc/self/status, and `id -u`'s), its effective
-- capabilities, HOME and its working directory, and whether the files in
-- `try` open for writing.
local function probe_job(out, try)
  return ([[
local NAMES = %s
local TRY = %s
local at_load = {}
for _, n in ipairs(NAMES) do at_load[n] = os.getenv(n) or "-" end
local done = false
return { every = "1s", run = function(ctx)
  if done then return end
  done = true
  local lines = {}
  for _, n in ipairs(NAMES) do lines[#lines + 1] = "load." .. n .. "=" .. at_load[n] end
  for _, n in ipairs(NAMES) do lines[#lines + 1] = "run." .. n .. "=" .. (os.getenv(n) or "-") end
  local _, _, env = ctx.exec({ "env" })
  lines[#lines + 1] = "exec:" .. env:gsub("\n", "|")
  -- (A process that changed its user is not dumpable: its /proc files
  -- are root's, and only programs it execs may read their own.)
  local f = io.open("/proc/self/environ")
  lines[#lines + 1] = "environ:" .. (f and f:read("a"):gsub("%%z", "|") or "unreadable")
  if f then f:close() end
  f = assert(io.open("/proc/self/status"))
  local status = f:read("a")
  f:close()
  lines[#lines + 1] = "uid=" .. status:match("\nUid:%%s*(%%d+)")
  lines[#lines + 1] = "capeff=" .. status:match("\nCapEff:%%s*(%%x+)")
  local _, _, id = ctx.exec({ "id", "-u" })
  lines[#lines + 1] = "id=" .. id:gsub("%%s", "")
  local _, _, pwd = ctx.exec({ "pwd" })
  lines[#lines + 1] = "pwd=" .. pwd:gsub("%%s", "")
  lines[#lines + 1] = "home=" .. (os.getenv("HOME") or "-")
  for i, path in ipairs(TRY) do
    local w = io.open(path, "r+")
    lines[#lines + 1] = "write" .. i .. "=" .. (w and "yes" or "no")
    if w then w:close() end
  end
  f = assert(io.open(%q, "w"))
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
  assert(os.rename(%q, %q))
end }
]]):format(("{ %q, %q, %q, %q, %q }"):format(table.unpack(NAMES)),
    "{ " .. table.concat((function()
      local t = {}
      for i, p in ipairs(try or {}) do t[i] = ("%q"):format(p) end
      return t
    end)(), ", ") .. " }",
    out .. ".tmp", out .. ".tmp", out)
end

-- out's "key=value" lines as a table (the exec and environ lines too).
local function seen(out)
  local t = {}
  for _, line in ipairs(L.lines(out)) do
    local k, v = line:match("^([%w._]+)[=:](.*)$")
    if k then t[k] = v end
  end
  return t
end

local function assert_no_secret(text, which)
  for name in pairs(which) do
    assert.is_nil(text:find(SECRETS[name], 1, true), name .. "'s value leaked:\n" .. text)
  end
end

-- Runs leash on d (or the command line cmd) with env until the probe wrote
-- out; returns its text and the log.
local function run_probe(d, out, env, cmd)
  local p = cmd and L.spawn_cmd(cmd, { env = env }) or L.spawn(d, { env = env })
  local ok = L.wait_for(function() return L.exists(out) end, 20)
  local rc = p:stop(10)
  assert(ok, "the probe never wrote " .. out .. ":\n" .. p:log_text())
  assert.equal(0, rc, p:log_text())
  return L.read(out), p:log_text()
end

local AS_ROOT = select(2, L.sh("id -u")):match("%d+") == "0"

describe("leash's own secrets", function()
  local stores = { { provider = "sqlite" } }
  for _, p in ipairs(P.list) do
    if p.provider == "postgres" then stores[#stores + 1] = p end
  end

  for _, p in ipairs(stores) do
    local pg = p.provider == "postgres"
    it(("are not seen by a job at load, in run, in ctx.exec or its environ (%s store)"):format(p.provider), function()
      local config = {
        http = { token_env = "LEASH_T_TOKEN" },
        mssql = { password_env = "LEASH_T_PW" },
        store = { provider = p.provider, table = "secrets_leases" },
      }
      if pg then config.postgres = { conninfo = p.conninfo } end
      local d = L.dir { config = config }
      if not pg then config.sqlite = { path = d.dir .. "/leash.db" } end
      L.write(d.config, L.ini(config))
      local out = d.out "probe"
      d.write_job("probe", probe_job(out))
      local text = run_probe(d, out, env_with())
      local s = seen(out)
      local hidden = { LEASH_T_TOKEN = true, LEASH_T_PW = true }
      if pg then hidden.PGPASSWORD, hidden.PGAPPNAME = true, true end
      assert_no_secret(text, hidden)
      for name in pairs(hidden) do
        assert.equal("-", s["load." .. name], name)
        assert.equal("-", s["run." .. name], name)
      end
      -- What is not leash's stays the job's (and shows the probe sees it).
      assert.equal("plain-visible", s["load.LEASH_T_PLAIN"])
      assert.equal("plain-visible", s["run.LEASH_T_PLAIN"])
      assert.matches("LEASH_T_PLAIN=plain-visible", s.exec, 1, true)
      assert.matches("LEASH_T_PLAIN=plain-visible", s.environ, 1, true)
      if not pg then
        -- PG* variables are leash's only when it uses PostgreSQL.
        assert.equal(SECRETS.PGPASSWORD, s["run.PGPASSWORD"])
      end
    end)
  end

  it("are not seen by a job file's top level under `leash check`", function()
    local d = L.dir { config = {
      http = { token_env = "LEASH_T_TOKEN" },
      mssql = { password_env = "LEASH_T_PW" },
      store = { provider = "postgres" },
      postgres = { conninfo = "host=/nonexistent" },
    } }
    d.write_job("peek", [[
local seen = {}
for _, n in ipairs { "LEASH_T_TOKEN", "LEASH_T_PW", "PGPASSWORD", "LEASH_T_PLAIN" } do
  seen[#seen + 1] = n .. "=" .. tostring(os.getenv(n))
end
error("seen: " .. table.concat(seen, " "))
]])
    local code, out, err = L.leash({ "check", "-c", d.config }, { env = env_with() })
    assert.equal(1, code, out .. err)
    assert.matches("seen: LEASH_T_TOKEN=nil LEASH_T_PW=nil PGPASSWORD=nil LEASH_T_PLAIN=plain-visible",
      out, 1, true)
    assert_no_secret(out .. err, SECRETS)
  end)
end)

describe("[leash] run_as", function()
  it("is refused by `leash check` and `leash run` when the user does not exist", function()
    local d = L.dir { config = { leash = { run_as = "no-such-user-leash" } } }
    d.write_job("a", 'return { every = "1s", run = function() end }\n')
    local want = d.config:gsub("%p", "%%%0") .. ':%d+: %[leash%] run_as: "no%-such%-user%-leash" is not a user of this host'
    local code, out, err = L.leash({ "check", "-c", d.config })
    assert.equal(2, code, out .. err)
    assert.matches(want, err)
    code, out, err = L.leash({ "run", "-c", d.config })
    assert.equal(2, code, out .. err)
    assert.matches(want, err)
  end)

  if not AS_ROOT then
    pending("the rest switch users: run as root")
    return
  end

  -- A directory any user may write into, for the probe's output.
  local function open_dir()
    local dir = L.tmpdir("open")
    assert(os.execute("chmod 0777 " .. L.quote(dir)))
    return dir
  end

  -- The probe ran as nobody, with no capability, and could not write db.
  local function assert_nobody(out, db)
    local s = seen(out)
    assert.equal("65534", s.uid)
    assert.equal("65534", s.id)
    assert.equal("0000000000000000", s.capeff)
    assert.is_true(L.exists(db))
    assert.equal("no", s.write1, "the job could write the SQLite file")
    return s
  end

  it("runs a root leash's jobs as that user, with no capability, away from the SQLite file", function()
    local d = L.dir { config = { leash = { run_as = "nobody" } } }
    local db = d.dir .. "/leash.db"
    L.write(d.config, L.ini { leash = { jobs = "jobs", run_as = "nobody" }, sqlite = { path = db },
      singleton = { enabled = "true" } })
    local out = open_dir() .. "/probe.out"
    d.write_job("probe", probe_job(out, { db, d.config }))
    local _, log = run_probe(d, out, env_with())
    local s = assert_nobody(out, db)
    assert.equal("no", s.write2, "the job could write the config")
    assert.equal("/", s.pwd)                     -- nobody's home does not exist
    assert.is_nil(log:find("job processes run as root", 1, true), log)
    -- leash's and its group's (an operator's leash status reads it), never
    -- the job user's, who is in neither.
    local _, mode, err = L.sh("stat -c %a " .. L.quote(db))
    assert.equal("640", mode:match("%d+"), err)
  end)

  it("drops the capabilities a leash that is not root switches with (the unit's way)", function()
    -- leash as daemon with CAP_SETUID, CAP_SETGID and CAP_KILL, as the
    -- packaged unit runs it as leash; its jobs as nobody.
    local d = L.dir { config = { leash = { run_as = "nobody" } } }
    local state = open_dir()
    assert(os.execute("chown daemon " .. L.quote(state) .. " && chmod 0700 " .. L.quote(state)))
    local db = state .. "/leash.db"
    L.write(d.config, L.ini { leash = { jobs = "jobs", run_as = "nobody", grace = "1s" }, sqlite = { path = db },
      http = { token_env = "LEASH_T_TOKEN" }, singleton = { enabled = "true" } })
    local out = open_dir() .. "/probe.out"
    d.write_job("probe", probe_job(out, { db }))
    local caps = "+setuid,+setgid,+kill"
    run_probe(d, out, env_with(), ("exec setpriv --reuid=daemon --regid=daemon --init-groups "
      .. "--inh-caps=%s --ambient-caps=%s %s run -c %s"):format(caps, caps, L.quote(L.bin), L.quote(d.config)))
    assert_nobody(out, db)
    assert_no_secret(L.read(out), { LEASH_T_TOKEN = true })
  end)

  it("is needed by a leash without CAP_SETUID: `leash run` says so and stops", function()
    local d = L.dir { config = { leash = { run_as = "nobody" } } }
    d.write_job("a", 'return { every = "1s", run = function() end }\n')
    local code, out, err = L.exec({ "setpriv", "--reuid=daemon", "--regid=daemon", "--clear-groups",
      L.bin, "run", "-c", d.config })
    assert.equal(2, code, out .. err)
    assert.matches("run_as = nobody: leash runs as uid 1 without CAP_SETUID, CAP_SETGID and CAP_KILL",
      err, 1, true)
  end)

  it("left out, a root leash warns at start that its jobs run as root", function()
    local d = L.dir { config = { sqlite = { path = "leash.db" } } }
    d.write_job("a", 'return { every = "1s", run = function() end }\n')
    local p = L.spawn(d)
    local line = p:wait_log("job processes run as root: set %[leash%] run_as", 10)
    p:stop(10)
    assert(line, p:log_text())
    assert.equal(1, #p:grep("job processes run as root"))
  end)
end)

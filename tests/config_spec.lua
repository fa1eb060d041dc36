-- The config file: every kind of error names file, line and key and makes
-- `leash check` exit 2; long values arrive whole; the lookup order of -c.
local L = require "e2e"
local core = require "leash.core"

-- Writes INI text into a fresh directory (with an empty jobs/ beside it);
-- returns the file's path.
local function ini(text)
  local d = L.tmpdir("cfg")
  os.execute("mkdir -p " .. L.quote(d .. "/jobs"))
  L.write(d .. "/jobs/ok.lua", 'return { every = "1s", run = function() end }\n')
  L.write(d .. "/leash.ini", text)
  return d .. "/leash.ini", d
end

-- `leash check -c file` must exit 2 and print a line holding every piece.
local function refused(text, ...)
  local file = ini(text)
  local code, out, err = L.leash { "check", "-c", file }
  assert.equal(2, code, "exit code; stdout: " .. out .. " stderr: " .. err)
  local pieces = { file, ... }
  for _, p in ipairs(pieces) do
    assert.is_truthy(err:find(p, 1, true), ("%q lacks %q"):format(err, p))
  end
  -- And the library path says the same.
  local c, msg = core.config_load(file)
  assert.is_nil(c)
  for _, p in ipairs(pieces) do
    assert.is_truthy(msg:find(p, 1, true), ("%q lacks %q"):format(msg, p))
  end
  return err
end

describe("config errors", function()
  it("an unknown section", function()
    refused("[leash]\njobs = jobs\n\n[sheduler]\nx = 1\n", ":4:", "[sheduler]", "unknown section")
  end)

  it("an unknown section even when it is empty", function()
    refused("[leash]\njobs = jobs\n[nope]\n", ":3:", "[nope]")
  end)

  it("an unknown key", function()
    refused("[leash]\njobs = jobs\ncolour = red\n", ":3:", "[leash] colour", "unknown key")
  end)

  it("a key given twice", function()
    refused("[singleton]\nlease = 15s\nretry = 1s\nlease = 20s\n[leash]\njobs = jobs\n",
      ":4:", "[singleton] lease", "given twice", "line 2")
  end)

  it("lease = 3x", function()
    refused("[leash]\njobs = jobs\n[singleton]\nlease = 3x\n", ":4:", "[singleton] lease", '"3x"')
  end)

  it("enabled = maybe", function()
    refused("[leash]\njobs = jobs\n[singleton]\nenabled = maybe\n", ":4:",
      "[singleton] enabled", '"maybe"', "boolean")
  end)

  it("a port out of range and a port that is not a number", function()
    refused("[leash]\njobs = jobs\n[mssql]\nport = 70000\n", ":4:", "[mssql] port", "70000")
    refused("[leash]\njobs = jobs\n[mssql]\nport = 14x3\n", ":4:", "[mssql] port", "14x3")
    refused("[leash]\njobs = jobs\n[mssql]\nport = 0\n", ":4:", "[mssql] port")
  end)

  it("[http] listen not HOST:PORT, or with a host that is no address", function()
    for _, v in ipairs { "9187", "127.0.0.1", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536",
                         ":9187", "example.com:80", "1.2.3.256:80", "[zz]:80", "::1:80",
                         "127.0.0.1:80x" } do
      refused("[leash]\njobs = jobs\n[http]\nlisten = " .. v .. "\n", ":4:", "[http] listen",
        '"' .. v .. '"')
    end
  end)

  it("[http] token_env that cannot name a variable", function()
    for _, v in ipairs { "1TOKEN", "MY-TOKEN", "A B", "$TOKEN" } do
      refused("[leash]\njobs = jobs\n[http]\ntoken_env = " .. v .. "\n", ":4:",
        "[http] token_env", "environment variable")
    end
  end)

  it("[ledger] keep shorter than a day, keep_per_job not a whole number in range", function()
    refused("[leash]\njobs = jobs\n[ledger]\nkeep = 2h\n", ":4:", "[ledger] keep", "at least 1d")
    refused("[leash]\njobs = jobs\n[ledger]\nkeep = 3651d\n", ":4:", "[ledger] keep")
    for _, v in ipairs { "0", "-1", "1.5", "10x", "1000001", "99999999999999999999" } do
      refused("[leash]\njobs = jobs\n[ledger]\nkeep_per_job = " .. v .. "\n", ":4:",
        "[ledger] keep_per_job", v, "whole number")
    end
  end)

  it("a table name that is not an identifier", function()
    refused("[leash]\njobs = jobs\n[store]\ntable = leases; drop\n", ":4:", "[store] table")
    refused("[leash]\njobs = jobs\n[store]\ntable = 1st\n", ":4:", "[store] table", '"1st"')
  end)

  it("a table name longer than 54 bytes (the store adds _runs and _replicas; identifiers stop at 63)", function()
    assert.equal(54, core.limits.ident_max)
    refused("[leash]\njobs = jobs\n[store]\ntable = " .. ("t"):rep(55) .. "\n", ":4:", "[store] table",
      "at most 54 bytes")
    local c, err = core.config_load((ini("[leash]\njobs = jobs\n[store]\ntable = " .. ("t"):rep(54) .. "\n")))
    assert.is_table(c, err)
    assert.equal(("t"):rep(54), c.table)
  end)

  it("a log_level or log_format leash does not know", function()
    refused("[leash]\njobs = jobs\nlog_level = loud\n", ":3:", "[leash] log_level", '"loud"')
    refused("[leash]\njobs = jobs\nlog_format = xml\n", ":3:", "[leash] log_format", '"xml"')
  end)

  it("an unknown provider", function()
    refused("[leash]\njobs = jobs\n[store]\nprovider = oracle\n", ":4:", "[store] provider")
  end)

  it("a missing file", function()
    local d = L.tmpdir("cfg")
    local code, _, err = L.leash { "check", "-c", d .. "/absent.ini" }
    assert.equal(2, code)
    assert.matches("absent.ini: cannot read the config file", err, 1, true)
    assert.is_nil((core.config_load(d .. "/absent.ini")))
  end)

  it("a line that is neither a section nor key = value", function()
    refused("[leash]\njobs = jobs\nthis is not ini\n", ":3:", "not a [section] or key = value")
  end)

  it("a key before any section", function()
    refused("jobs = jobs\n[leash]\n", ":1:", "jobs", "outside any section")
  end)

  it("renew >= lease - margin, when singleton mode is on", function()
    refused("[leash]\njobs = jobs\n[singleton]\nenabled = true\nlease = 10s\nrenew = 8s\n",
      ":6:", "[singleton] renew", "lease - margin")
    refused("[leash]\njobs = jobs\n[singleton]\nenabled = true\nlease = 10s\nmargin = 10s\n",
      ":6:", "[singleton] margin")
  end)

  it("postgres without a conninfo", function()
    refused("[leash]\njobs = jobs\n[singleton]\nenabled = true\n[store]\nprovider = postgres\n",
      "[postgres] conninfo", "required")
  end)

  it("a value with a NUL byte in it (lease = 15s\\0junk was read as 15s)", function()
    refused("[leash]\njobs = jobs\n[singleton]\nlease = 15s\0junk\n", ":4:", "NUL byte")
  end)

  it("a 10 MB line is too long, whatever it holds", function()
    refused("[leash]\njobs = jobs\n" .. string.rep("x", 10 * 1024 * 1024) .. "\n", ":3:",
      "line too long (10485760 bytes, at most 65536)")
    refused("[postgres]\nconninfo = " .. string.rep("x", 70000) .. "\n", ":2:", "line too long")
  end)

  it("reports every problem of a file at once", function()
    local err = refused("[leash]\njobs = jobs\ncolour = red\n[singleton]\nlease = 3x\n[bogus]\n",
      ":3:", ":5:", ":6:")
    local n = select(2, err:gsub("\n", "\n"))
    assert.is_true(n >= 3, err)
  end)
end)

-- Values that passed check and then failed or spun in leash run (issue 9):
-- each is refused on its own line, naming its key and the bound it misses.
describe("config limits", function()
  local HEAD = "[leash]\njobs = jobs\n[singleton]\nenabled = true\n"

  it("statement_timeout = 0s (every renew failed, and nothing was logged)", function()
    refused("[leash]\njobs = jobs\n[store]\nstatement_timeout = 0s\n", ":4:",
      "[store] statement_timeout", "too short")
    refused("[leash]\njobs = jobs\n[store]\nconnect_timeout = 0s\n", ":4:",
      "[store] connect_timeout", "too short")
  end)

  it("lease = 48h (every try failed with \"at most 24h\")", function()
    refused(HEAD .. "lease = 48h\n", ":5:", "[singleton] lease", "too long (at most 1d)")
  end)

  it("retry = 0s or 1ms (a follower sent 11,000 statements a second)", function()
    refused(HEAD .. "retry = 0s\n", ":5:", "[singleton] retry", "too short (at least 50ms)")
    refused(HEAD .. "retry = 1ms\n", ":5:", "[singleton] retry", "too short")
  end)

  it("renew = 0s (a busy loop that also killed runs)", function()
    refused(HEAD .. "renew = 0s\n", ":5:", "[singleton] renew", "too short (at least 10ms)")
  end)

  it("lease = 0s is a lease problem on the lease's line, not a margin problem", function()
    local err = refused(HEAD .. "retry = 1s\nlease = 0s\n", ":6:", "[singleton] lease",
      "too short (at least 100ms)")
    assert.is_nil(err:find("margin", 1, true), err)
  end)

  it("a bound is checked whether singleton mode is on or off", function()
    refused("[leash]\njobs = jobs\n[singleton]\nlease = 48h\n", ":4:", "[singleton] lease")
  end)

  it("keeps the shortest timings the specs use, and the bounds themselves", function()
    for _, t in ipairs {
      "lease = 400ms\nrenew = 50ms\nretry = 100ms\n",
      "lease = 2000ms\nretry = 500ms\n",
      "lease = 100ms\nrenew = 10ms\nretry = 50ms\nmargin = 0s\n",
      "lease = 24h\nretry = 24h\n",
    } do
      local c, err = core.config_load(ini(HEAD .. t .. "[store]\nstatement_timeout = 1ms\n"))
      assert.is_table(c, err)
    end
    refused(HEAD .. "lease = 99ms\n", ":5:", "[singleton] lease", "too short")
  end)

  it("leash run refuses the same at start: exit 2 with file, line and key", function()
    local file, dir = ini(HEAD .. "retry = 0s\n[sqlite]\npath = leash.db\n")
    local p = L.spawn(file)
    local rc = p:wait(5)
    p:stop()
    assert.equal(2, rc, p:log_text())
    assert.matches(file .. ":5: [singleton] retry: 0s is too short", p:log_text(), 1, true)
    assert.is_false(L.exists(dir .. "/leash.db"))
  end)
end)

describe("config [http]", function()
  local HEAD = "[leash]\njobs = jobs\n[singleton]\nenabled = true\n"

  it("takes an empty listen (off), IPv4, [IPv6] and localhost", function()
    for _, v in ipairs { "", "127.0.0.1:9187", "0.0.0.0:1", "[::1]:9187", "localhost:65535" } do
      local file = ini("[leash]\njobs = jobs\n[http]\nlisten = " .. v .. "\ntoken_env = LEASH_T\n")
      local c = assert(core.config_load(file))
      assert.equal(v, c.http_listen)
      assert.equal("LEASH_T", c.http_token_env)
      assert.equal(0, (L.leash { "check", "-c", file }))
    end
    local c = assert(core.config_load((ini("[leash]\n"))))
    assert.equal("", c.http_listen)
    assert.equal("", c.http_token_env)
  end)

  it("leash run refuses what leash check refuses: exit 2, the key named, nothing started", function()
    local file, dir = ini(HEAD .. "[sqlite]\npath = leash.db\n[http]\nlisten = 127.0.0.1:99999\n")
    local code, _, err = L.leash { "check", "-c", file }
    assert.equal(2, code)
    local p = L.spawn(file)
    local rc = p:wait(5)
    p:stop()
    assert.equal(2, rc, p:log_text())
    local want = file .. ":8: [http] listen: \"127.0.0.1:99999\" is not HOST:PORT"
    assert.matches(want, err, 1, true)
    assert.matches(want, p:log_text(), 1, true)
    assert.is_false(L.exists(dir .. "/leash.db"))
  end)

  it("leash run with token_env naming a variable that is not set: exit 2, the key named", function()
    local file, dir = ini(HEAD .. "[sqlite]\npath = leash.db\n[http]\nlisten = 127.0.0.1:1\n"
      .. "token_env = LEASH_TEST_NO_SUCH_TOKEN\n")
    local p = L.spawn(file, { env = { LEASH_TEST_NO_SUCH_TOKEN = false } })
    local rc = p:wait(5)
    p:stop()
    assert.equal(2, rc, p:log_text())
    assert.matches("[http] token_env: the environment variable LEASH_TEST_NO_SUCH_TOKEN is not set",
      p:log_text(), 1, true)
    assert.is_false(L.exists(dir .. "/leash.db"))
  end)
end)

describe("config values", function()
  it("fills in every default", function()
    local file, dir = ini("[leash]\n")
    local c = assert(core.config_load(file))
    assert.equal(dir .. "/jobs", c.jobs)
    assert.equal("auto", c.replica)
    assert.equal(0, c.log_json)
    assert.equal(5000, c.grace_ms)
    assert.equal(0, c.singleton)
    assert.equal(15000, c.lease_ms)
    assert.equal(5000, c.renew_ms)    -- lease/3
    assert.equal(3000, c.margin_ms)   -- lease/5
    assert.equal(2000, c.retry_ms)
    assert.equal("sqlite", c.provider)
    assert.equal("leash_leases", c.table)
    assert.equal(1433, c.mssql_port)
    assert.equal("LEASH_MSSQL_PASSWORD", c.mssql_password_env)
    assert.equal(14 * 86400000, c.ledger_keep_ms)
    assert.equal(1000, c.ledger_keep_per_job)
  end)

  it("reads each kind of value, paths relative to the file", function()
    local file, dir = ini(table.concat({
      "[leash]", "jobs = ../elsewhere/jobs", "log_format = json", "grace = 1m30s",
      "[singleton]", "enabled = yes", "lease = 30s",
      "[store]", "table = My_Leases", "[sqlite]", "path = var/x.db",
      "[mssql]", "port = 2000",
    }, "\n") .. "\n")
    local c = assert(core.config_load(file))
    assert.equal(dir:gsub("/[^/]+$", "") .. "/elsewhere/jobs", c.jobs)
    assert.equal(1, c.log_json)
    assert.equal(90000, c.grace_ms)
    assert.equal(1, c.singleton)
    assert.equal(30000, c.lease_ms)
    assert.equal(10000, c.renew_ms)
    assert.equal(6000, c.margin_ms)
    assert.equal("My_Leases", c.table)
    assert.equal(dir .. "/var/x.db", c.sqlite_path)
    assert.equal(2000, c.mssql_port)
  end)

  -- inih's own line buffer is 200 bytes on Debian: a longer value must
  -- arrive whole (or be refused), never cut.
  for _, n in ipairs { 150, 198, 199, 200, 201, 600, 5000 } do
    it(("reads a %d-character [postgres] conninfo whole"):format(n), function()
      local head = "host=db.example.org port=5432 dbname=leash application_name="
      local conninfo = head .. ("x"):rep(n - #head)
      assert.equal(n, #conninfo)
      local file = ini("[leash]\njobs = jobs\n[postgres]\nconninfo = " .. conninfo
        .. "\n[store]\ntable = after_long\n")
      local c = assert(core.config_load(file))
      assert.equal(n, #c.pg_conninfo)
      assert.equal(conninfo, c.pg_conninfo)
      -- The lines after it are still read with the right numbers.
      assert.equal("after_long", c.table)
      local code = L.leash { "check", "-c", file }
      assert.equal(0, code)
    end)
  end

  it("a long line keeps its line number in messages", function()
    local file = ini("[leash]\njobs = jobs\n[postgres]\nconninfo = " .. ("y"):rep(600)
      .. "\n[store]\ntable = 9bad\n")
    local _, msg = core.config_load(file)
    assert.matches(":6: [store] table", msg, 1, true)
  end)

  it("a long value of an unknown key is an error, not a crash", function()
    refused("[leash]\njobs = jobs\nlong_thing = " .. ("z"):rep(700) .. "\n", ":3:",
      "[leash] long_thing", "unknown key")
  end)
end)

describe("config lookup", function()
  -- A working directory holding config/leash.ini, and another config file.
  local cwd, other
  before_each(function()
    cwd = L.tmpdir("lookup")
    os.execute("mkdir -p " .. L.quote(cwd .. "/config/jobs") .. " " .. L.quote(cwd .. "/other/jobs"))
    L.write(cwd .. "/config/leash.ini", "[leash]\njobs = jobs\n")
    L.write(cwd .. "/config/jobs/from-cwd.lua", 'return { every = "1s", run = function() end }\n')
    other = cwd .. "/other/leash.ini"
    L.write(other, "[leash]\njobs = jobs\n")
    L.write(cwd .. "/other/jobs/from-env.lua", 'return { every = "1s", run = function() end }\n')
    L.write(cwd .. "/third.ini", "[leash]\njobs = other/jobs\n")
  end)

  local function which(args, env)
    local code, out, err = L.leash(args, { cwd = cwd, env = env })
    return code, out .. err
  end

  it("-c comes first", function()
    local code, out = which({ "check", "-c", "third.ini", "--next", "1" },
      { LEASH_CONFIG = other })
    assert.equal(0, code, out)
    assert.matches("third.ini: 1 job ok", out, 1, true)
    assert.matches("from-env ", out, 1, true)
  end)

  it("then $LEASH_CONFIG", function()
    local code, out = which({ "check", "--next", "1" }, { LEASH_CONFIG = other })
    assert.equal(0, code, out)
    assert.matches(other .. ": 1 job ok", out, 1, true)
    assert.matches("from-env ", out, 1, true)
    assert.is_nil(out:find("from-cwd", 1, true))
  end)

  it("then config/leash.ini in the working directory", function()
    local code, out = which({ "check", "--next", "1" }, { LEASH_CONFIG = false })
    assert.equal(0, code, out)
    assert.matches("config/leash.ini: 1 job ok", out, 1, true)
    assert.matches("from-cwd ", out, 1, true)
  end)

  it("an empty $LEASH_CONFIG counts as unset", function()
    local code, out = which({ "check" }, { LEASH_CONFIG = "" })
    assert.equal(0, code, out)
    assert.matches("config/leash.ini", out, 1, true)
  end)

  it("then /etc/leash/leash.ini", function()
    os.remove(cwd .. "/config/leash.ini")
    local code, out = which({ "check" }, { LEASH_CONFIG = false })
    assert.matches("/etc/leash/leash.ini", out, 1, true)
    if not L.exists("/etc/leash/leash.ini") then
      assert.equal(2, code)
      assert.matches("/etc/leash/leash.ini: cannot read the config file", out, 1, true)
    end
  end)

  it("run and status use the same lookup", function()
    os.remove(cwd .. "/config/leash.ini")
    local code, out = which({ "status" }, { LEASH_CONFIG = other })
    assert.equal(0, code, out)
    assert.matches(other, out, 1, true)
    code, out = which({ "run" }, { LEASH_CONFIG = cwd .. "/missing.ini" })
    assert.equal(2, code)
    assert.matches("missing.ini: cannot read the config file", out, 1, true)
  end)
end)

-- -o SECTION.KEY=VALUE: several replicas from one config (issue 38 item 4).
describe("config -o", function()
  local HEAD = "[leash]\njobs = jobs\nreplica = r1\n[singleton]\nenabled = true\n[sqlite]\npath = leash.db\n"

  it("refuses what the file would refuse, naming the option; and what is no option", function()
    local file = ini(HEAD)
    local cases = {
      { { "-o", "leash.replca=r2" }, "-o leash.replca=r2: [leash] replca: unknown key" },
      { { "-o", "nope.x=1" }, "-o nope.x=1: unknown section [nope]" },
      { { "-osingleton.lease=3x" }, '-o singleton.lease=3x: [singleton] lease: "3x" is not a duration' },
      { { "-o", "singleton.lease=9s", "-o", "singleton.lease=8s" },
        "-o singleton.lease=8s: [singleton] lease: given twice (first as -o singleton.lease=9s)" },
      { { "-o", "leash-replica" }, "-o leash-replica: not SECTION.KEY=VALUE" },
      { { "-o" }, "-o needs SECTION.KEY=VALUE" },
    }
    for _, cmd in ipairs { "check", "status", "run" } do
      for _, case in ipairs(cases) do
        local args = { cmd, "-c", file }
        for _, a in ipairs(case[1]) do args[#args + 1] = a end
        local code, out, err = L.leash(args)
        assert.equal(2, code, table.concat(args, " ") .. ": " .. out .. err)
        assert.matches(case[2], err, 1, true)
      end
    end
  end)

  it("sets a key for one command, in place of the file's: two replicas from one config", function()
    local file, dir = ini(HEAD .. "[http]\nlisten =\n")
    -- a relative path in an option is from the current directory
    os.execute("mkdir -p " .. L.quote(dir .. "/here"))
    local procs = {}
    for _, r in ipairs { "r2", "r3" } do
      procs[#procs + 1] = L.spawn_cmd(("exec %s run -c %s -o leash.replica=%s -o sqlite.path=shared.db")
        :format(L.quote(L.bin), L.quote(file), r), { cwd = dir .. "/here" })
    end
    local ok, why = pcall(function()
      local seen = L.wait_for(function()
        local code, out = L.leash({ "status", "-c", file, "-o", "sqlite.path=here/shared.db" }, { cwd = dir })
        return code == 0 and out:find("\nr2:%d+") and out:find("\nr3:%d+") and out
      end, 60, 0.5)
      assert.is_truthy(seen, "no replicas r2 and r3 in status")
      assert.matches("%sr[23]:%d+:%x+%s", seen)     -- ok holds its lease
      assert.is_false(L.exists(dir .. "/leash.db"), "the file's path was used")
    end)
    for _, p in ipairs(procs) do assert.equal(0, p:stop(20)) end
    assert(ok, why)
  end)
end)

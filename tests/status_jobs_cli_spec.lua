-- `leash status` (the jobs view, --json, --watch, --check) and `leash
-- history`, the real binary against a prepared database on SQLite,
-- PostgreSQL and SQL Server (the TDS test server): leases taken and ledger
-- rows written through the store handle, local jobs in jobs/.  Ages and
-- times are normalised before the golden files are compared.
local L = require "e2e"
local core = require "leash.core"
local json = require "dkjson"
local providers = require "providers"

local ROOT = os.getenv("LEASH_ROOT") or "."
local HOUR = 3600000
local A, B = "replica-a:1:00000001", "replica-b:2:00000002"

local function cfg(p, tbl, extra)
  local c = { singleton = { enabled = "true" }, store = { provider = p.provider, table = tbl } }
  if p.provider == "sqlite" then c.sqlite = { path = p.path }
  elseif p.provider == "mssql" then
    c.mssql = { host = p.host, port = tostring(p.port), user = p.user, database = p.database,
                password_env = "LEASH_TEST_MSSQL_PASSWORD" }
  else c.postgres = { conninfo = p.conninfo } end
  for k, v in pairs(extra or {}) do c[k] = v end
  return c
end

local function open(p, tbl)
  return assert(core.open_store { provider = p.provider, path = p.path, conninfo = p.conninfo,
    host = p.host, port = p.port, user = p.user, password = p.password, database = p.database,
    table = tbl })
end

local function db_now(s)
  local _, now = assert(s:list())
  return now
end

local function row(job, at, owner, outcome, extra)
  local r = { job = job, scheduled_at = at, owner = owner, token = 1, outcome = outcome,
              started_at = at + 5, ended_at = at + 1205, duration_ms = 1200 }
  for k, v in pairs(extra or {}) do r[k] = v end
  return r
end

local EVERY_HOUR = 'return { every = "1h", run = function(ctx) end }\n'

-- Ages, times and padding vary from run to run; the rest must not.
local function normal(text)
  text = text:gsub("%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d[%.%d]*Z", "<time>")
  text = text:gsub("%d%d%d%d%-%d%d%-%d%d %d%d:%d%d:%d%d[%.%d]*", "<time>")
  text = text:gsub("%d%d:%d%d:%d%d[%.%d]*", "<time>")
  text = text:gsub("%d+[hm]%d%d[ms]? ago", "<age> ago"):gsub("[%d.]+m?s ago", "<age> ago")
  text = text:gsub("for [%d.]+s", "for <t>")
  return (text:gsub("[ ]+", " "))
end

local function golden(name, got)
  local path = ROOT .. "/tests/golden/" .. name
  if os.getenv("LEASH_GOLDEN_UPDATE") then L.write(path, got) end
  assert.equal(L.read(path), got)
end

for _, x in ipairs(providers.list) do
  local p = x.provider == "sqlite"
    and { provider = "sqlite", path = os.getenv("LEASH_TEST_TMP") .. "/status_jobs.db" } or x
  local env = { env = { LEASH_TEST_MSSQL_PASSWORD = p.password or "" } }

  describe("leash status jobs view [" .. p.provider .. "]", function()
    local tbl, d, now

    setup(function()
      tbl = "sjobs_" .. math.random(1, 1e6)
      local s = open(p, tbl)
      now = db_now(s)
      local h = now // HOUR * HOUR            -- the latest hourly fire
      assert.is_true(s:try_acquire("hourly", A, 60000))
      assert.is_true(s:try_acquire("flaky", B, 60000))
      assert.is_true(s:try_acquire("orphan", B, 100))
      assert.is_true(s:record_runs({
        row("hourly", h - 2 * HOUR, A, "ok"),                          -- then nothing: overdue
        row("flaky", h - 2 * HOUR, B, "ok"),
        row("flaky", h - HOUR, B, "failed", { exit_code = 1, error = "flaky.lua:3: no luck\nstack" }),
        row("flaky", h, B, "timeout", { token = 2 }),
        row("orphan", h, B, "ok"),
      }))
      s:close()
      d = L.dir { config = cfg(p, tbl), jobs = { hourly = EVERY_HOUR, flaky = EVERY_HOUR,
        idle = 'return { every = "5m", run = function(ctx) end }\n' } }
      L.sleep(0.2)                                -- orphan's lease expires
    end)

    it("prints every job, local or only in the store, with its state (golden file, --wide)", function()
      local code, out, err = L.leash({ "status", "-c", d.config, "--wide" }, env)
      assert.equal(0, code, err)
      golden("status_jobs_cli.txt", normal(out))
    end)

    it("fits 120 columns by default, the state first; --wide adds the token", function()
      local code, out, err = L.leash({ "status", "-c", d.config }, env)
      assert.equal(0, code, err)
      assert.matches("^STATE%s+JOB%s+SCHEDULE%s+HOLDER%s+LAST%s+NEXT\n", out)
      assert.matches("\nfailing%s+flaky%s", out)
      for line in out:gmatch("[^\n]+") do assert.is_true(utf8.len(line) <= 120, line) end
      code, out = L.leash({ "status", "-c", d.config, "--wide" }, env)
      assert.equal(0, code)
      assert.matches("^STATE%s+JOB%s+SCHEDULE%s+HOLDER%s+TOKEN%s+LAST%s+NEXT\n", out)
      code, out = L.leash({ "history", "-c", d.config }, env)
      assert.equal(0, code)
      assert.matches("^STATE%s+JOB%s+RUN%s+EXIT%s+FIRE %(UTC%)%s+START%s+DURATION%s+REPLICA%s+NOTE\n", out)
      for line in out:gmatch("[^\n]+") do assert.is_true(utf8.len(line) <= 120, line) end
    end)

    it("--json carries jobs and leases", function()
      local code, out, err = L.leash({ "status", "-c", d.config, "--json" }, env)
      assert.equal(0, code, err)
      local obj = assert(json.decode(out))
      assert.equal(p.provider, obj.provider)
      local by = {}
      for _, j in ipairs(obj.jobs) do by[j.name] = j end
      assert.equal("overdue", by.hourly.state)
      assert.equal("failing", by.flaky.state)
      assert.equal(2, by.flaky.fails_in_a_row)
      assert.equal("timeout", by.flaky.last_failure.outcome)
      assert.equal("ok", by.flaky.last_ok.outcome)
      assert.equal("unheld", by.idle.state)
      assert.is_false(by.orphan.in_jobs_dir)
      assert.equal(3, #obj.leases)
    end)

    it("--leases prints the lease table as before", function()
      local code, out, err = L.leash({ "status", "-c", d.config, "--leases" }, env)
      assert.equal(0, code, err)
      assert.matches("^LEASE%s+OWNER%s+STATE%s+EXPIRES IN%s+TOKEN\n", out)
      assert.matches("hourly%s+replica%-a:1:00000001%s+held", out)
    end)

    it("--check: critical for the overdue and the never-held job, the failing one listed too", function()
      local code, out, err = L.leash({ "status", "-c", d.config, "--check" }, env)
      assert.equal(2, code, err)
      golden("status_check_cli.txt", normal(out))
    end)

    it("history: newest first, by job, --limit, --json (golden file)", function()
      local code, out, err = L.leash({ "history", "-c", d.config, "--wide" }, env)
      assert.equal(0, code, err)
      golden("history_cli.txt", normal(out))
      code, out = L.leash({ "history", "-c", d.config, "flaky", "--limit", "2", "--json" }, env)
      assert.equal(0, code)
      local obj = assert(json.decode(out))
      assert.equal(2, #obj.runs)
      assert.same({ "timeout", "failed" }, { obj.runs[1].outcome, obj.runs[2].outcome })
      assert.equal("flaky.lua:3: no luck\nstack", obj.runs[2].error)
      code, out = L.leash({ "history", "-c", d.config, "--since", "90m" }, env)
      assert.equal(0, code)
      assert.not_matches("hourly", out)
    end)
  end)
end

describe("leash status --check, one problem at a time [sqlite]", function()
  local p = { provider = "sqlite", path = os.getenv("LEASH_TEST_TMP") .. "/status_check.db" }

  local function prepared(jobs, prep, extra)
    local tbl = "chk_" .. math.random(1, 1e6)
    local s = open(p, tbl)
    prep(s, db_now(s))
    s:close()
    return L.dir { config = cfg(p, tbl, extra), jobs = jobs }
  end

  it("OK: every job held and run", function()
    local d = prepared({ j = EVERY_HOUR }, function(s, now)
      assert.is_true(s:try_acquire("j", A, 60000))
      assert.is_true(s:record_runs({ row("j", now // HOUR * HOUR, A, "ok") }))
    end)
    local code, out = L.leash { "status", "-c", d.config, "--check" }
    assert.equal(0, code)
    assert.equal("LEASH OK - 1 job ok\n", out)
  end)

  it("CRITICAL: a fire due more than the grace ago has no run", function()
    local d = prepared({ j = EVERY_HOUR }, function(s, now)
      assert.is_true(s:try_acquire("j", A, 60000))
      -- the missed fire an hour before the latest: more than the grace (1m)
      -- ago at any time of the hour (the latest one is not, in its first minute)
      local h = now // HOUR * HOUR
      assert.is_true(s:record_runs({ row("j", h - 2 * HOUR, A, "ok"),
                                     row("j", h - HOUR, A, "missed") }))
    end)
    local code, out = L.leash { "status", "-c", d.config, "--check" }
    assert.equal(2, code)
    assert.matches("^LEASH CRITICAL %- 1 job overdue: j %(due %d+%-%d+%-%d+T%d+:00:00Z, [^)]+ ago%)\n", out)
    assert.matches("\nj: overdue: ", out)
  end)

  it("WARNING: failing N times in a row, from --fail N on", function()
    local d = prepared({ j = EVERY_HOUR }, function(s, now)
      local h = now // HOUR * HOUR
      assert.is_true(s:try_acquire("j", A, 60000))
      assert.is_true(s:record_runs({ row("j", h - 3 * HOUR, A, "ok"), row("j", h - 2 * HOUR, A, "killed"),
        row("j", h - HOUR, A, "lost"), row("j", h, A, "failed", { error = "boom" }) }))
    end)
    local code, out = L.leash { "status", "-c", d.config, "--check", "--fail", "3" }
    assert.equal(1, code)
    assert.matches("^LEASH WARNING %- 1 job failing: j %(3 in a row%)\nj: failing: 3 in a row, last failed .* ago on replica%-a:1:00000001: boom\n$", out)
    code, out = L.leash { "status", "-c", d.config, "--check", "--fail", "4" }
    assert.equal(0, code)
    assert.matches("^LEASH OK", out)
  end)

  it("CRITICAL: unheld longer than twice its lease", function()
    local d = prepared({ j = 'return { every = "1h", lease = "100ms", run = function(ctx) end }\n' },
      function(s, now)
        assert.is_true(s:try_acquire("j", A, 100))
        assert.is_true(s:record_runs({ row("j", now // HOUR * HOUR, A, "ok") }))
      end)
    local code, out = L.leash { "status", "-c", d.config, "--check" }
    assert.equal(0, code, out)                   -- not yet twice the lease
    L.sleep(0.35)
    code, out = L.leash { "status", "-c", d.config, "--check" }
    assert.equal(2, code)
    assert.matches("^LEASH CRITICAL %- 1 job unheld: j %(for [%d.]+m?s%)\n", out)
  end)

  it("WARNING from a real replica whose job fails, then OK once it recovers", function()
    local tbl = "chk_" .. math.random(1, 1e6)
    local d = L.dir { config = cfg(p, tbl, { singleton = { enabled = "true", lease = "1s", retry = "200ms" } }) }
    local flag = d.dir .. "/fail"
    L.write(flag, "")
    d.write_job("j", ([[return { every = "1s", run = function(ctx)
      local f = io.open(%q) if f then f:close() error("still failing") end end }
]]):format(flag))
    local proc = L.spawn(d)
    local code, out
    assert.truthy(L.wait_for(function()
      code, out = L.leash { "status", "-c", d.config, "--check" }
      return code == 1
    end, 15), out)
    assert.matches("^LEASH WARNING %- 1 job failing: j", out)
    assert.matches("still failing", out)
    os.remove(flag)
    assert.truthy(L.wait_for(function()
      code, out = L.leash { "status", "-c", d.config, "--check" }
      return code == 0
    end, 15), out)
    assert.equal(0, proc:stop())
  end)

  it("UNKNOWN (3) when the store cannot be reached, the reason on the line", function()
    local d = L.dir { config = {
      singleton = { enabled = "true" },
      store = { provider = "postgres", connect_timeout = "1s" },
      postgres = { conninfo = "host=127.0.0.1 port=1 dbname=nowhere" },
    } }
    local code, out = L.leash { "status", "-c", d.config, "--check" }
    assert.equal(3, code)
    assert.matches("^LEASH UNKNOWN %- cannot open the postgres store: .*127%.0%.0%.1", out)
    local err
    code, out, err = L.leash { "status", "-c", d.config }
    assert.equal(1, code)
    assert.equal("", out)
    assert.matches("leash status: cannot open the postgres store", err)
  end)

  it("refuses bad arguments with exit 2, naming them", function()
    local d = L.dir { config = cfg(p, "chk_args") }
    local cases = {
      { { "status", "--check", "--fail", "0" }, "%-%-fail 0: expected a count" },
      { { "status", "--check", "--fail", "x" }, "%-%-fail x" },
      { { "status", "--fail", "2" }, "only with %-%-check" },
      { { "status", "--check", "--json" }, "%-%-check prints a monitor's lines" },
      { { "status", "extra" }, 'unexpected argument "extra"' },
      { { "status", "--wide", "--json" }, "%-%-wide shows the jobs table whole" },
      { { "history", "--wide", "--json" }, "%-%-wide shows the table whole" },
      { { "history", "--limit", "0" }, '%-%-limit "0": expected a whole number from 1 to 10000' },
      { { "history", "--since", "soon" }, '%-%-since "soon": not a duration' },
      { { "history", "--since", "2999-01-01T00:00:00Z" }, "in the future" },
      { { "history", "a", "b" }, 'unexpected argument "b"' },
    }
    for _, c in ipairs(cases) do
      local args = c[1]
      table.insert(args, 2, "-c")
      table.insert(args, 3, d.config)
      local code, _, err = L.leash(args)
      assert.equal(2, code, table.concat(args, " "))
      assert.matches(c[2], err)
    end
  end)

  it("--watch appends a snapshot a second when stdout is not a terminal", function()
    local d = prepared({ j = EVERY_HOUR }, function(s) assert.is_true(s:try_acquire("j", A, 60000)) end)
    local code, out = L.sh(("timeout 2.5 %s status -c %s --watch"):format(L.bin, d.config))
    assert.equal(124, code)
    local _, n = out:gsub("JOB%s+SCHEDULE", "")
    assert.is_true(n >= 2, out)
    assert.not_matches("\27%[", out)
  end)
end)

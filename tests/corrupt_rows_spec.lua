-- End to end, real `leash run` processes on every provider: a row written
-- out of bounds by hand (store.h's bounds) under a running replica is
-- reported once, its job runs nowhere (no take-and-lose loop, no token
-- overflow) while the other jobs go on, `leash status` and `--check` name
-- it, and `leash repair` resets it so that the job runs again under a
-- token above every one it had.
local L = require "e2e"
local R = require "replicas"
local providers = require "providers"

local MAX64 = "9223372036854775807"

local JOB = [[
local OUT = %q
return {
  every = "1s",
  run = function(ctx)
    local f = assert(io.open(OUT, "a"))
    f:write(("%%d %%d\n"):format(ctx.token, math.floor(ctx.scheduled_at * 1000 + 0.5)))
    f:close()
  end,
}
]]

-- The tokens the job's runs recorded, in order.
local function tokens(out)
  local t = {}
  for _, l in ipairs(L.lines(out)) do
    local tok = l:match("^(%-?%d+) ")
    if tok then t[#t + 1] = math.tointeger(tonumber(tok)) end
  end
  return t
end

local function max_of(list)
  local m = 0
  for _, v in ipairs(list) do if v > m then m = v end end
  return m
end

-- Runs SQL by hand on provider p's database, beside leash: sqlite3 on
-- SQLite's file and on the TDS test server's, psql on PostgreSQL, FreeTDS's
-- tsql on a real SQL Server.
local function by_hand(p, sql)
  local file = L.tmpdir("hand") .. "/x.sql"
  local cmd
  if p.provider == "sqlite" then
    cmd = ("sqlite3 -bail -cmd '.timeout 5000' %s < %s"):format(L.quote(p.path), L.quote(file))
  elseif p.provider == "postgres" then
    cmd = ("psql -X -q -v ON_ERROR_STOP=1 %s -f %s"):format(L.quote(p.conninfo), L.quote(file))
  elseif not p.real then                -- the TDS test server's SQLite file
    local db = os.getenv("LEASH_TEST_TDS_CTL"):gsub("/[^/]*$", "") .. "/leases.db"
    cmd = ("sqlite3 -bail -cmd '.timeout 5000' %s < %s"):format(L.quote(db), L.quote(file))
  else
    sql = sql .. "\ngo\n"
    cmd = ("tsql -H %s -p %d -U %s -P %s -D %s -o fhq < %s"):format(L.quote(p.host), p.port,
      L.quote(p.user), L.quote(p.password), L.quote(p.database), L.quote(file))
  end
  L.write(file, sql)
  local code, out, err = L.sh(cmd)
  assert.equal(0, code, cmd .. "\n" .. (out or "") .. (err or ""))
  assert.is_nil(((out or "") .. (err or "")):find("Msg %d+"), (out or "") .. (err or ""))
end

for _, p in ipairs(R.list_of()) do
  describe("corrupt rows on " .. p.provider, function()
    local procs, tbl, d, out, other

    before_each(function()
      procs = {}
      tbl = ("bad_%d"):format(math.random(1, 1e8))
      local c = R.config(p, tbl)
      c.singleton = { enabled = "true", lease = "1s", retry = "200ms", spread = "false" }
      d = L.dir { config = c }
      d.password = p.password
      out, other = d.out("rec"), d.out("other")
      d.write_job("rec", JOB:format(out))
      d.write_job("other", JOB:format(other))
    end)
    after_each(function() R.stop_all(procs) end)

    local function leash(...) return R.leash_in(d, p, ...) end

    local host = select(2, L.sh("hostname")):match("^%s*(.-)%s*$")
    local me = select(2, L.sh("id -un")):match("^%s*(.-)%s*$")

    -- The replica runs rec and other; returns it once rec ran twice.
    local function start()
      procs = R.start_replicas(d, 1)
      assert(L.wait_for(function() return #tokens(out) >= 2 and #tokens(other) >= 1 end, 15),
        "the jobs never ran")
      return procs[1]
    end

    -- Waits for the job to run again under a token above every earlier one
    -- and above the new lease row's (repair's) token.
    local function runs_again(before)
      local top = max_of(before)
      assert(L.wait_for(function()
        for _, t in ipairs(tokens(out)) do if t > top then return true end end
      end, 15), "rec did not run again with a token above " .. top)
    end

    -- status shows rec corrupt, and --check is CRITICAL naming what (a
    -- pattern).
    local function shown_corrupt(what)
      local code, st = leash("status")
      assert.equal(0, code)
      assert.matches("\ncorrupt%s+rec%s", st)
      code, st = leash("status", "--check")
      assert.equal(2, code, st)
      assert.matches("^LEASH CRITICAL %- 1 job corrupt: rec %(" .. what .. "%)", st)
    end

    -- leash repair rec repairs, saying what (the start of it, plain).
    local function repaired(what)
      local code, stdout, stderr = leash("repair", "rec")
      assert.equal(0, code, stderr)
      assert.equal("repaired rec: " .. what, stdout:sub(1, #what + 14))
    end

    local function repair_row()
      local rows = R.ledger(p, tbl, "rec")
      for _, r in ipairs(rows) do
        if r.outcome == "control" then return r end
      end
    end

    local CASES = {
      { what = "a negative token", set = "token = -4", col = "token", value = "-4" },
      { what = "token = max int64", set = "token = " .. MAX64, col = "token", value = MAX64 },
      { what = "last_fire = max int64", set = "last_fire = " .. MAX64, col = "last_fire",
        value = MAX64 },
    }
    for _, case in ipairs(CASES) do
      it("a lease row with " .. case.what .. " is reported once, not run, then repaired", function()
        local h = start()
        local before = tokens(out)
        by_hand(p, ("UPDATE %s SET %s WHERE name = 'rec';"):format(tbl, case.set))
        local what = ("%s = %s"):format(case.col, case.value:gsub("%-", "%%-"))
        local pat = "corrupt lease row: " .. what .. " is out of bounds"
        assert(h:wait_log(pat, 15), "the corrupt row was not reported:\n" .. h:log_text())
        -- A generous while: still one line, no take-and-lose loop, rec not
        -- run, other still running.
        L.sleep(1)
        local n, m = #tokens(out), #tokens(other)
        L.sleep(3)
        assert.equal(1, #h:grep("corrupt lease row"), "reported more than once")
        assert.is_true(#h:grep("%[rec%] holding the lease") <= 2, "rec was taken again and again")
        assert.is_true(#h:grep("%[rec%] lease lost") <= 1, "rec was lost again and again")
        assert.equal(n, #tokens(out), "rec ran on its corrupt row")
        assert.is_true(#tokens(other) > m, "the other job stopped")

        shown_corrupt("lease " .. what)
        repaired("token ")
        assert(h:wait_log("%[rec%] the lease row is within bounds again", 15),
          "the replica did not take the repaired row")
        runs_again(before)
        local ctl = repair_row()
        assert.is_truthy(ctl, "no control row for the repair")
        assert.matches("^repair: token ", ctl.error)
        assert.equal(me .. "@" .. host, ctl.actor)
        local lease = R.lease_row(p, tbl, "rec")
        assert.is_true(lease.token > max_of(before))
        -- Nothing left to repair: exit 1, said so.
        local rcode, _, rerr = leash("repair", "rec")
        assert.equal(1, rcode)
        assert.matches("nothing to repair", rerr)
        assert.equal(1, #h:grep("corrupt lease row"))
      end)
    end

    it("a ledger row with scheduled_at = max int64 shows in status and --check; repair drops it", function()
      local h = start()
      by_hand(p, ("INSERT INTO %s_runs (job, scheduled_at, owner, token, outcome, recorded_at)"
        .. " VALUES ('rec', %s, 'x', 1, 'ok', 0);"):format(tbl, MAX64))
      -- The replica's upkeep (5-15 s after its start, then each minute)
      -- finds it.
      assert(h:wait_log("%[rec%] corrupt ledger row: scheduled_at = " .. MAX64
        .. " is out of bounds", 40), "the corrupt ledger row was not reported")
      shown_corrupt("ledger scheduled_at = " .. MAX64)
      repaired("1 corrupt ledger row dropped")
      local ccode, check = leash("status", "--check")
      assert.equal(0, ccode, check)
      for _, r in ipairs(R.ledger(p, tbl, "rec")) do
        assert.is_true(r.scheduled_at <= 253402300799999, "a corrupt row is left")
      end
      local n = #tokens(out)
      assert(L.wait_for(function() return #tokens(out) > n end, 10), "rec stopped")
      assert.equal(0, #h:grep("corrupt lease row"))
      assert.equal(1, #h:grep("corrupt ledger row"))
    end)

    it("repair says what is wrong with its arguments", function()
      R.open(p, tbl):close()        -- the tables, as leash run makes them: repair makes none
      local code, _, err = leash("repair", "nope")
      assert.equal(1, code)
      assert.matches("no job nope in the store or in ", err)
      code, _, err = leash("repair")
      assert.equal(2, code)
      assert.matches("which JOB%?", err)
      code, _, err = leash("repair", "rec")
      assert.equal(1, code)
      assert.matches("rec has no lease row and no corrupt ledger rows: nothing to repair", err)
    end)
  end)
end

-- The store's side, on every provider including a real T-SQL engine
-- (Babelfish, when the shared folder has it): a corrupt row is not taken nor
-- renewed and its token never grows past the bounds; repair resets it.
local core = require "leash.core"
local LIMIT = 1 << 62

for _, key_p in ipairs(providers.proof_list) do
  local key = key_p.key or key_p.provider
  describe("corrupt rows in the " .. key .. " store", function()
    local s, tbl, p
    before_each(function()
      tbl = ("badst_%d"):format(math.random(1, 1e8))
      p = providers.get(key, tbl)
      p.real = key_p.real
      s = assert(core.open_store(p))
    end)
    after_each(function() if s then s:close() end end)

    local function row(name)
      for _, r in ipairs((assert(s:list()))) do if r.name == name then return r end end
    end

    it("refuses to take or renew a corrupt lease row, and never grows its token past the bounds", function()
      assert.is_true((s:try_acquire("j", "o1", 60000)))
      for _, set in ipairs { "token = -4", "token = " .. MAX64, "last_fire = " .. MAX64 } do
        by_hand(p, ("UPDATE %s SET %s WHERE name = 'j';"):format(tbl, set))
        assert.is_false((s:renew("j", "o1", 60000)), set .. ": renewed")
        local got, info = s:try_acquire("j", "o1", 60000)
        assert.is_false(got, set .. ": taken by its owner")
        assert.is_nil(assert(s:renew_all("o1", { "j" }, 60000)).j, set .. ": renew_all")
        by_hand(p, ("UPDATE %s SET expires_at = 0 WHERE name = 'j';"):format(tbl))
        got, info = s:try_acquire("j", "o2", 60000)
        assert.is_false(got, set .. ": taken when expired")
        local all = assert(s:acquire_all("o2", { "j" }, 60000))
        assert.is_false(all.j.ok, set .. ": taken by acquire_all")
        local r = row("j")
        assert.equal("o1", r.owner)
        assert.is_truthy(r.corrupt, set)
        assert.equal(math.tointeger(info.token), r.token)
        local fixed = assert(s:repair("j"))
        assert.is_true(fixed.found and fixed.lease_bad, set)
        assert.is_true(fixed.new_token >= 1 and fixed.new_token < LIMIT, set)
        r = row("j")
        assert.equal("", r.owner)
        assert.equal(fixed.new_token, r.token)
        assert.is_nil(r.corrupt)
        got, info = s:try_acquire("j", "o1", 60000)
        assert.is_true(got, set .. ": not taken once repaired")
        assert.equal(fixed.new_token + 1, info.token)
      end
    end)

    it("leash's own writes stay within the bounds", function()
      local good = { job = "w", scheduled_at = 1, owner = "A", token = 0, outcome = "ok" }
      for k, v in pairs { scheduled_at = math.maxinteger, token = LIMIT,
                          started_at = 253402300800000 } do
        local bad = {}
        for key, val in pairs(good) do bad[key] = val end
        bad[k] = v
        local ok, err = s:record_runs({ bad })
        assert.is_nil(ok, k)
        assert.matches(k .. " must be 0 to ", err)
      end
      assert.is_true((s:try_acquire("w", "A", 60000)))
      local ok, err = s:claim_all("A", { { name = "w", token = 1, fire = 253402300800000 } })
      assert.is_nil(ok)
      assert.matches("fire must be 0 to 253402300799999 ms", err)
    end)

    it("repair: a token above every sane one of the table and the job's ledger, its corrupt ledger rows dropped", function()
      assert.is_true((s:try_acquire("j", "o1", 60000)))
      assert.is_true((s:try_acquire("k", "o1", 60000)))
      by_hand(p, ("UPDATE %s SET token = 40 WHERE name = 'k';\n"
        .. "INSERT INTO %s_runs (job, scheduled_at, owner, token, outcome, recorded_at) VALUES"
        .. " ('j', 1000, 'x', 70, 'ok', 0);\n"
        .. "INSERT INTO %s_runs (job, scheduled_at, owner, token, outcome, recorded_at) VALUES"
        .. " ('j', %s, 'x', 1, 'ok', 0);\n"
        .. "INSERT INTO %s_runs (job, scheduled_at, owner, token, outcome, recorded_at) VALUES"
        .. " ('k', %s, 'x', 1, 'ok', 0);\n"
        .. "UPDATE %s SET token = -4, last_fire = -9 WHERE name = 'j';"):format(tbl, tbl, tbl, MAX64,
        tbl, MAX64, tbl))
      local fixed = assert(s:repair("j"))
      assert.same({ found = true, lease_bad = true, token = -4, last_fire = -9, new_token = 71,
                    dropped = 1 }, { found = fixed.found, lease_bad = fixed.lease_bad,
                    token = fixed.token, last_fire = fixed.last_fire,
                    new_token = fixed.new_token, dropped = fixed.dropped })
      local r = row("j")
      assert.equal(71, r.token)
      assert.is_nil(r.last_fire)
      local runs = assert(s:read_runs { job = "j", limit = 10 })
      assert.equal(1, #runs)
      assert.equal(1000, runs[1].scheduled_at)
      -- k's corrupt row is k's to repair; nothing else to do for j.
      assert.equal(1, #assert(s:read_runs { job = "k", limit = 10 }))
      local bad = assert(s:corrupt_runs())
      assert.equal(1, #bad)
      assert.equal("k", bad[1].job)
      assert.equal(math.tointeger(tonumber(MAX64)), bad[1].scheduled_at)
      fixed = assert(s:repair("j"))
      assert.is_true(fixed.found)
      assert.is_false(fixed.lease_bad)
      assert.equal(0, fixed.dropped)
      assert.equal(71, fixed.new_token)
      fixed = assert(s:repair("nope"))
      assert.is_false(fixed.found)
      assert.equal(0, fixed.dropped)
      fixed = assert(s:repair("k"))
      assert.is_false(fixed.lease_bad)
      assert.equal(1, fixed.dropped)
      assert.same({}, assert(s:corrupt_runs()))
    end)
  end)
end

describe("corrupt rows: providers", function()
  it("every expected provider is configured", function()
    assert.same({}, providers.missing)
  end)
end)

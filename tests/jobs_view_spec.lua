-- leash status's jobs view and leash history, rendered from fixed answers
-- (no store, no clock): the table, the JSON and the monitor's check against
-- golden files, and the rules for each state and problem.
local view = require "leash.jobs_view"
local history = require "leash.history"
local json = require "dkjson"

local root = os.getenv("LEASH_ROOT") or "."
local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end
local function golden(name, got)
  local path = root .. "/tests/golden/" .. name
  if os.getenv("LEASH_GOLDEN_UPDATE") then
    local f = assert(io.open(path, "wb"))
    f:write(got)
    f:close()
  end
  assert.equal(read(path), got)
end

local T = history.parse_iso
local NOW = T("2026-12-01T03:04:00Z")
local A, B = "web-1:4242:a1b2c3d4", "web-2:99:0f0e0d0c"

local function run(job, at, owner, outcome, extra)
  local r = { job = job, scheduled_at = at, owner = owner, token = 3, outcome = outcome,
              claimed_at = at - 2, started_at = at + 1 }
  if outcome ~= "running" then r.ended_at = at + 1201; r.duration_ms = 1200 end
  for k, v in pairs(extra or {}) do r[k] = v end
  return r
end

-- Every state: ok, failing, overdue, unheld, a service, an unelected job,
-- a job only the store knows, a name with a control character.
local function input()
  local bill_ok = run("billing", T("2026-11-30T03:00:00Z"), A, "ok")
  local rep_fail = run("report", T("2026-12-01T03:03:00Z"), B, "failed",
    { exit_code = 2, error = "report.lua:9: no such table: sales\nstack traceback:\n..." })
  local rep_ok = run("report", T("2026-12-01T03:00:00Z"), A, "ok")
  local sync_run = run("sync", T("2026-12-01T03:03:30Z"), A, "running")
  return {
    provider = "sqlite", now = NOW, lease_ms = 15000,
    leases = {
      { name = "billing", owner = A, token = 7, acquired_at = NOW - 86400000, renewed_at = NOW - 1000,
        expires_at = NOW + 14000 },
      { name = "old-job", owner = B, token = 2, acquired_at = NOW - 7200000, renewed_at = NOW - 3600000,
        expires_at = NOW - 3585000 },
      { name = "report", owner = B, token = 12, acquired_at = NOW - 600000, renewed_at = NOW - 2000,
        expires_at = NOW + 13000 },
      { name = "sync", owner = A, token = 4, acquired_at = NOW - 60000, renewed_at = NOW - 3000,
        expires_at = NOW + 12000 },
      { name = "web", owner = A, token = 1, acquired_at = NOW - 60000, renewed_at = NOW - 3000,
        expires_at = NOW - 50000 },
    },
    runs = {
      billing = { job = "billing", last = bill_ok, ok = bill_ok, fails = 0, handled_at = bill_ok.scheduled_at },
      report = { job = "report", last = rep_fail, ok = rep_ok, failed = rep_fail, fails = 2,
                 handled_at = rep_fail.scheduled_at },
      sync = { job = "sync", last = sync_run, fails = 0, handled_at = sync_run.scheduled_at },
      ["old-job"] = { job = "old-job", last = run("old-job", NOW - 3600000, B, "ok"),
                      fails = 0, handled_at = NOW - 3600000 },
      ["ev\27il"] = { job = "ev\27il", last = run("ev\27il", NOW - 5000, "h\nost:1:2", "ok", { token = 0 }),
                      fails = 0, handled_at = NOW - 5000 },
    },
    locals = {
      { name = "billing", schedule = "cron 0 3 * * *", kind = "cron", singleton = true,
        lease_ms = 15000, next = T("2026-12-02T03:00:00Z"), due = T("2026-12-01T03:00:00Z") },
      { name = "report", schedule = "every 1m", kind = "every", singleton = true,
        lease_ms = 15000, next = T("2026-12-01T03:05:00Z"), due = T("2026-12-01T03:04:00Z") },
      { name = "sync", schedule = "every 30s", kind = "every", singleton = true,
        lease_ms = 15000, next = T("2026-12-01T03:04:30Z"), due = T("2026-12-01T03:04:00Z") },
      { name = "web", schedule = "service", kind = "service", singleton = true, lease_ms = 15000 },
      { name = "new", schedule = "every 5m", kind = "every", singleton = true, lease_ms = 15000,
        next = T("2026-12-01T03:05:00Z") },
      { name = "local-only", schedule = "every 10s", kind = "every", singleton = false,
        lease_ms = 15000, next = T("2026-12-01T03:04:10Z") },
    },
  }
end

describe("leash status jobs view", function()
  it("renders the table of the golden file", function()
    golden("status_jobs.txt", view.table(view.build(input())))
  end)

  it("renders the JSON of the golden file, which parses and carries every job and lease", function()
    local got = view.json(view.build(input()))
    golden("status_jobs.json", got .. "\n")
    local obj = assert(json.decode(got))
    assert.equal("sqlite", obj.provider)
    assert.equal(NOW, obj.now)
    assert.equal(8, #obj.jobs)
    assert.equal(5, #obj.leases)
    local by = {}
    for _, j in ipairs(obj.jobs) do by[j.name] = j end
    assert.equal("overdue", by.billing.state)
    assert.equal(4 * 60000, by.billing.overdue_ms)
    assert.equal("failing", by.report.state)
    assert.equal(2, by.report.fails_in_a_row)
    assert.equal("failed", by.report.last_failure.outcome)
    assert.equal("ok", by.report.last_ok.outcome)
    assert.equal("ok", by.sync.state)
    assert.equal("running", by.sync.last.outcome)
    assert.equal("unheld", by.web.state)
    assert.equal(50000, by.web.unheld_ms)
    assert.equal("unheld", by.new.state)
    assert.is_false(by["old-job"].in_jobs_dir)
    assert.equal("ok", by["local-only"].state)
    assert.equal("ok", by["ev\27il"].state)
    assert.is_nil(by["ev\27il"].holder)
  end)

  it("renders the check of the golden file: critical over warning, one line per problem", function()
    local code, text = view.check(view.build(input()), { fail = 1 })
    assert.equal(view.CRITICAL, code)
    golden("status_check.txt", text)
  end)

  it("states: overdue only past the grace of max(1m, lease x 2)", function()
    assert.equal(60000, view.grace(15000))
    assert.equal(120000, view.grace(60000))
    local i = input()
    i.locals[1].due = NOW - 60000            -- exactly the grace: not yet
    local m = view.build(i)
    assert.equal("ok", m.jobs[1].state)
    i.locals[1].due = NOW - 60001
    assert.equal("overdue", view.build(i).jobs[1].state)
    i.locals[1].lease_ms = 60000              -- a longer lease, a longer grace
    assert.equal("ok", view.build(i).jobs[1].state)
  end)

  it("states: paused (leash pause) while the lease row's paused_until is ahead, over every other state", function()
    local i = input()
    local base
    for _, j in ipairs(view.build(i).jobs) do if j.name == "billing" then base = j.state end end
    i.leases[1].paused_until = NOW + 1                -- billing
    i.leases[5].paused_until = NOW + 600000           -- web: unheld, paused all the same
    local by = {}
    for _, j in ipairs(view.build(i).jobs) do by[j.name] = j end
    assert.equal("paused", by.billing.state)
    assert.equal(NOW + 1, by.billing.paused_until)
    assert.equal("paused", by.web.state)
    i.leases[1].paused_until = NOW                    -- ended: back to what it is
    for _, j in ipairs(view.build(i).jobs) do by[j.name] = j end
    assert.equal(base, by.billing.state)
    assert.is_nil(by.billing.paused_until)
  end)

  it("check: failing N times in a row is a warning from --fail N on", function()
    local i = input()
    i.locals[1].due = nil                      -- billing not overdue
    i.leases[5].expires_at = NOW + 1000        -- web held
    table.remove(i.locals, 5)                  -- no "new"
    local code, text = view.check(view.build(i), { fail = 2 })
    assert.equal(view.WARNING, code)
    assert.equal("LEASH WARNING - 1 job failing: report (2 in a row)\n"
      .. "report: failing: 2 in a row, last failed 59.9s ago on web-2:99:0f0e0d0c: "
      .. "report.lua:9: no such table: sales\n", text)
    code, text = view.check(view.build(i), { fail = 3 })
    assert.equal(view.OK, code)
    assert.equal("LEASH OK - 7 jobs ok\n", text)
  end)

  it("check: unheld is critical only past twice the lease; a job only the store knows is not checked", function()
    local i = input()
    i.locals[1].due = nil
    table.remove(i.locals, 5)
    i.runs.report.fails = 0
    i.leases[5].expires_at = NOW - 30000       -- exactly 2 x lease
    assert.equal(view.OK, (view.check(view.build(i))))
    i.leases[5].expires_at = NOW - 30001
    local code, text = view.check(view.build(i))
    assert.equal(view.CRITICAL, code)
    assert.matches("^LEASH CRITICAL %- 1 job unheld: web %(for 30%.0s%)\n", text)
  end)

  it("check: the store unreachable is UNKNOWN, the reason on one line", function()
    assert.equal("LEASH UNKNOWN - cannot open the postgres store: refused\\x0anow\n",
      view.unknown("cannot open the postgres store: refused\nnow"))
  end)

  -- Broken job files: the status host's own (local_broken) and the ones
  -- each replica publishes with its presence row (src/plan/sched.h's text).
  local function broken_input()
    local i = input()
    i.replicas = {
      { owner = A, name = "web-1", host = "h1", pid = 4242, version = "1.0", jobs_hash = "aaaa",
        heartbeat = NOW - 100, started_at = NOW - 60000, draining = false,
        broken = "report\t" .. (NOW - 90000) .. "\t1\tjobs/report.lua:3: unexpected symbol\n"
          .. "typo\t" .. (NOW - 5000) .. "\t0\tjobs/typo.lua:1: every: \"3x\" is not a duration\n"
          .. "garbled line\n+\t0\t0\t7\n" },
      { owner = B, name = "web-2", host = "h2", pid = 99, version = "1.0", jobs_hash = "aaaa",
        heartbeat = NOW - 100, started_at = NOW - 60000, draining = false },
    }
    i.local_broken = { { name = "sync", error = "jobs/sync.lua:2: '}' expected" },
                       { name = "never", error = "jobs/never.lua:1: unexpected symbol" } }
    return i
  end

  it("broken files: parses a replica's text, a garbled line skipped and the left-out count kept", function()
    local list, more = view.parse_broken(broken_input().replicas[1].broken, "web-1")
    assert.equal(7, more)
    assert.same({ replica = "web-1", file = "report", since = NOW - 90000, kept = true,
                  error = "jobs/report.lua:3: unexpected symbol" }, list[1])
    assert.equal("typo", list[2].file)
    assert.is_false(list[2].kept)
    assert.equal(2, #list)
    assert.same({}, (view.parse_broken(nil, "x")))
  end)

  it("broken files: states, notes, the BROKEN FILE table, the check and the JSON", function()
    local m = view.build(broken_input())
    local by = {}
    for _, j in ipairs(m.jobs) do by[j.name] = j end
    -- running its last good definition (held): its state is its own
    assert.equal("failing", by.report.state)
    assert.equal(" (broken on web-1: jobs/report.lua:3: unexpected symbol)", view.job_note(by.report))
    assert.equal("ok", by.sync.state)
    assert.equal(" (running the last good definition: jobs/sync.lua:2: '}' expected)",
      view.job_note(by.sync))
    -- no good definition anywhere: broken, not "not in jobs/"
    assert.equal("broken", by.typo.state)
    assert.equal("broken", by.never.state)
    assert.equal("", view.job_note(by.never))
    local text = select(2, view.render(broken_input(), "table"))
    assert.matches("\nbroken%s+typo %(broken on web%-1: [^\n]*%s+%-%s+%-%s+%-%s+%-\n", text)
    -- --wide gives the note whole
    assert.matches("\nbroken%s+typo %(broken on web%-1: jobs/typo%.lua:1: every[^\n]*%)%s+%-%s+%-%s+%-%s+%-%s+%-\n",
      select(2, view.render(broken_input(), "wide")))
    assert.matches("\nREPLICA%s+BROKEN FILE%s+SINCE%s+RUNS%s+ERROR\n", text)
    assert.matches("\nweb%-1%s+report%.lua%s+1m30s ago%s+last good definition%s+jobs/report%.lua:3", text)
    assert.matches("\nweb%-1%s+typo%.lua%s+5%.0s ago%s+nothing%s+jobs/typo%.lua:1: every", text)
    assert.matches("%(7 more broken files not shown: see the replicas' logs%)\n$", text)
    local code, check = view.render(broken_input(), "check")
    assert.equal(view.CRITICAL, code)          -- the input's own problems stay
    assert.matches("4 jobs broken: never %(on here%), report %(on web%-1%), sync %(on here%), typo %(on web%-1%)", check)
    assert.matches("\ntypo: broken: jobs/typo%.lua does not load on web%-1 %(not running%): jobs/typo%.lua:1", check)
    assert.matches("\nreport: broken: [^\n]*%(running the last good definition%)", check)
    local v = json.decode(select(2, view.render(broken_input(), "json")))
    assert.equal(7, v.broken_files_left_out)
    assert.same({ replica = "web-1", file = "report.lua", since = NOW - 90000, running_last_good = true,
                  error = "jobs/report.lua:3: unexpected symbol" }, v.broken_files[1])
    for _, j in ipairs(v.jobs) do
      if j.name == "sync" then assert.equal("jobs/sync.lua:2: '}' expected", j.broken_here) end
    end
  end)

  it("broken files on a page (/api/status): no job of another page comes in, the list keeps them", function()
    local i = broken_input()
    i.page = { offset = 0, total = 20, paged = true }
    local m = view.build(i)
    local by = {}
    for _, j in ipairs(m.jobs) do by[j.name] = j end
    assert.is_nil(by.typo)
    assert.equal(1, #by.report.broken_on)
    assert.equal(2, #m.broken_files)
  end)

  it("check: a broken file alone is a WARNING", function()
    local code, check = view.render({ provider = "sqlite", now = NOW, replicas = { { owner = A,
      name = "web-1", broken = "x\t1\t0\tjobs/x.lua:1: oops\n" } } }, "check")
    assert.equal(view.WARNING, code)
    assert.equal("LEASH WARNING - 1 job broken: x (on web-1)\n"
      .. "x: broken: jobs/x.lua does not load on web-1 (not running): jobs/x.lua:1: oops\n", check)
  end)

  it("says so when there are no jobs", function()
    assert.equal("no jobs (none in jobs/, none in the store)\n",
      view.table(view.build { provider = "sqlite", now = NOW }))
  end)

  it("leaves out leash drain's ledger rows (job \"@REPLICA\"): they are no job", function()
    local m = view.build { provider = "sqlite", now = NOW,
      runs = { ["@web-1"] = { fails = 0 }, sync = { last = run("sync", NOW - 60000, A, "ok"), fails = 0 } } }
    assert.equal(1, #m.jobs)
    assert.equal("sync", m.jobs[1].name)
  end)
end)

describe("leash history rendering", function()
  local function rows()
    return {
      run("report", T("2026-12-01T03:03:00Z"), B, "failed",
        { exit_code = 2, error = "report.lua:9: no such table: sales\nstack traceback:\n..." }),
      run("sync", T("2026-12-01T03:03:00Z"), A, "running"),
      run("billing", T("2026-12-01T03:00:00Z"), A, "missed",
        { started_at = false, claimed_at = false, ended_at = false, duration_ms = false,
          error = "the holder web-2:99:0f0e0d0c stopped renewing at 2026-12-01T02:59:58Z" }),
      run("report", T("2026-12-01T03:00:00Z"), A, "ok"),
    }
  end
  local function clean(list)
    for _, r in ipairs(list) do
      for k, v in pairs(r) do if v == false then r[k] = nil end end
    end
    return list
  end

  it("renders the table and the JSON of the golden files", function()
    golden("history.txt", history.table(clean(rows())))
    local got = history.json("postgres", clean(rows()), NOW)
    golden("history.json", got .. "\n")
    local obj = assert(json.decode(got))
    assert.equal(4, #obj.runs)
    assert.equal("missed", obj.runs[3].outcome)
  end)

  it("fits 120 columns unless wide, cutting the name, the replica and the note with ~", function()
    local long = run(("nightly-warehouse-"):rep(4), T("2026-12-01T03:00:00Z"), ("replica-"):rep(6) .. "1:2:3",
      "failed", { exit_code = 3, run_id = 41, how = "catch-up",
                  error = ("the warehouse said no "):rep(5) .. "\nstack" })
    local text = history.table({ long }, NOW)
    for line in text:gmatch("[^\n]+") do assert.is_true(utf8.len(line) <= 120, line) end
    assert.matches("\nfailed%s+nightly%-[%w-]*~%s+41%s+3%s+12%-01 03:00:00%s+03:00:00%s+1%.2s%s+"
      .. "replica%-[%w-]*~%s+catch%-up; the warehouse[%w ]*~\n$", text)
    local wide = history.table({ long }, NOW, true)
    assert.matches(("nightly%-warehouse%-"):rep(4) .. "  ", wide)
    assert.matches("03:00:00%.001  03:00:01%.201  1%.2s", wide)
    assert.matches("catch%-up; " .. ("the warehouse said no "):rep(5) .. "\n$", wide)
    -- A row from before the run id was kept shows "-"; a manual run its actor.
    text = history.table({ run("sync", NOW, A, "ok", { how = "manual", actor = "ops@desk" }) }, NOW)
    assert.matches("\nok%s+sync%s+%-%s+%-%s+.*manual; by ops@desk\n$", text)
    local st = view.table(view.build { provider = "sqlite", now = NOW, locals = {
      { name = ("long-job-name-"):rep(8), schedule = "cron " .. ("1,"):rep(30) .. "2 * * * *",
        kind = "cron", singleton = true, lease_ms = 15000, next = NOW } } })
    for line in st:gmatch("[^\n]+") do assert.is_true(utf8.len(line) <= 120, line) end
    assert.matches("~", st)
  end)

  it("checks its arguments, naming the bad one", function()
    local a = assert(history.args(nil, "1h", "20", NOW))
    assert.same({ limit = 20, since_at = NOW - 3600000 }, a)
    a = assert(history.args("billing", "2026-12-01T00:00:00Z", nil, NOW))
    assert.same({ job = "billing", limit = 50, since_at = T("2026-12-01T00:00:00Z") }, a)
    local function bad(pat, ...)
      local ok, err = history.args(...)
      assert.is_nil(ok)
      assert.matches(pat, err)
    end
    bad('^%-%-since "3x": not a duration', nil, "3x", nil, NOW)
    bad('^%-%-since "0s"', nil, "0s", nil, NOW)
    bad('^%-%-since "2026%-12%-02T00:00:00Z": that is in the future', nil, "2026-12-02T00:00:00Z", nil, NOW)
    bad('^%-%-limit "0": expected a whole number from 1 to 10000', nil, nil, "0", NOW)
    bad('^%-%-limit "10001"', nil, nil, "10001", NOW)
    bad('^%-%-limit "%-5"', nil, nil, "-5", NOW)
    bad('^%-%-limit "2x"', nil, nil, "2x", NOW)
    bad("^JOB", ("j"):rep(201), nil, nil, NOW)
  end)

  it("parses UTC times as leash check --next prints them", function()
    assert.equal(0, T("1970-01-01T00:00:00Z"))
    assert.equal(951782400000, T("2000-02-29T00:00:00Z"))
    assert.equal(1796094000500, T("2026-12-01T03:00:00.5Z") )
    assert.is_nil(T("2026-13-01T00:00:00Z"))
    assert.is_nil(T("2026-12-01 00:00:00"))
  end)
end)

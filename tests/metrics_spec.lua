-- /metrics (src/core/metrics.c): the text checked by promtool and by a strict
-- reader of our own, and its values.  First the job table on a fake clock
-- (leash.core.sched) with core.metrics() in-process; then real `leash run`
-- processes whose probe job renders the metrics in its run's child: the
-- child sees the parent's live records through the shared mapping, as a
-- forked HTTP server does.  Store latency families on every provider.
local L = require "e2e"
local R = require "replicas"
local core = require "leash.core"
local providers = require "providers"

-- Label values back from the text format's escapes.
local function unescape(v)
  return (v:gsub("\\(.)", { ["\\"] = "\\", ['"'] = '"', n = "\n" }))
end

-- Reads the exposition strictly: HELP and TYPE once per family before its
-- samples, a family's samples together, no series twice, every value a
-- number.  Returns { [name] = { { labels = {...}, value = n }, ... } } and
-- the families' types; raises on the first problem.
local function parse(text)
  local samples, types, seen, done = {}, {}, {}, {}
  local current
  local function family_of(name)
    if types[name] then return name end
    local base = name:match("^(.*)_bucket$") or name:match("^(.*)_sum$") or name:match("^(.*)_count$")
    if base and types[base] == "histogram" then return base end
    return name
  end
  local n = 0
  for line in text:gmatch("([^\n]*)\n") do
    n = n + 1
    local kind, fam, rest = line:match("^# (%u+) ([%w_:]+) (.*)$")
    if kind == "HELP" then
      assert(not done[fam] and fam ~= current, ("line %d: second HELP for %s"):format(n, fam))
      if current then done[current] = true end
      current = fam
    elseif kind == "TYPE" then
      assert(fam == current and not types[fam], ("line %d: TYPE for %s out of place"):format(n, fam))
      types[fam] = rest
    else
      local name, labels, value = line:match("^([%w_:]+){(.*)} (%S+)$")
      if not name then name, value = line:match("^([%w_:]+) (%S+)$"); labels = "" end
      assert(name, ("line %d: not a sample: %q"):format(n, line))
      assert(family_of(name) == current, ("line %d: %s outside its family"):format(n, name))
      assert(tonumber(value) or value == "+Inf", ("line %d: value %q"):format(n, value))
      -- A value ends at the first quote that no backslash escapes.
      local l, rest_ = {}, labels
      while rest_ ~= "" do
        local k = rest_:match('^([%w_]+)="')
        assert(k, ("line %d: bad labels %q"):format(n, labels))
        local i, buf = #k + 3, {}
        while true do
          local c = rest_:sub(i, i)
          assert(c ~= "", ("line %d: unterminated label value"):format(n))
          if c == "\\" then buf[#buf + 1] = rest_:sub(i, i + 1); i = i + 2
          elseif c == '"' then break
          else buf[#buf + 1] = c; i = i + 1 end
        end
        assert(not l[k], ("line %d: label %s twice"):format(n, k))
        l[k] = unescape(table.concat(buf))
        rest_ = rest_:sub(i + 1):gsub("^,", "")
      end
      local keys = {}
      for k, v in pairs(l) do keys[#keys + 1] = k .. "=" .. v end
      table.sort(keys)
      local id = name .. "{" .. table.concat(keys, ",") .. "}"
      assert(not seen[id], ("line %d: series twice: %s"):format(n, id))
      seen[id] = true
      samples[name] = samples[name] or {}
      table.insert(samples[name], { labels = l, value = tonumber(value) })
    end
  end
  assert(text:sub(-1) == "\n", "the text does not end with a newline")
  return samples, types
end

-- The value of the sample name{want...} (nil when there is none).
local function value(samples, name, want)
  for _, s in ipairs(samples[name] or {}) do
    local ok = true
    for k, v in pairs(want or {}) do
      if s.labels[k] ~= v then ok = false end
    end
    if ok then return s.value end
  end
end

local function has_job(samples, job)
  for _, list in pairs(samples) do
    for _, s in ipairs(list) do
      if s.labels.job == job then return true end
    end
  end
  return false
end

-- promtool check metrics on text; fails with the reason when promtool is
-- missing (Debian's prometheus package, tools/deps.sh) or finds a problem.
local function promtool(text)
  local path = L.tmpdir("promtool") .. "/metrics.txt"
  L.write(path, text)
  local code, out = L.sh("command -v promtool")
  assert(code == 0 and out ~= "",
    "promtool is missing: install Debian's prometheus package (tools/deps.sh)")
  local rc, got = L.sh(("promtool check metrics < %s 2>&1"):format(L.quote(path)))
  assert(rc == 0 and got == "", "promtool check metrics: " .. got)
end

local T0 = 1800000000000

describe("metrics of the job table (in-process, fake clock)", function()
  local o, text, m, long

  setup(function()
    collectgarbage("collect")       -- other specs' job tables leave their records
    local d = L.dir { jobs = {
      ["mx-late"] = 'return { every = "1s", run = function() end }',
      ["mx-skip"] = 'return { every = "1s", run = function() end }',
      ["mx-paused"] = 'return { every = "1s", run = function() end }',
      ["mx-gone"] = 'return { every = "1s", run = function() end }',
    } }
    local t = { wall = T0 + 500, mono = 1000000 }
    local s = core.sched {
      jobs = d.jobs,
      wall = function() return t.wall end,
      mono = function() return t.mono end,
      holds = function() return true end,
      claim = function(list)
        local ok = {}
        for i = 1, #list do ok[i] = true end
        return ok
      end,
      paused = function(name) return name == "mx-paused" end,
    }
    o = { s = s, t = t, d = d }
    s:load(false)
    s:due()
    local function advance(ms)
      t.wall, t.mono = t.wall + ms, t.mono + ms
      s:due()
      s:events()
    end
    advance(507)                    -- every fire of T0+1000 starts 7 ms late
    s:ended("mx-late", false, 3)
    s:ended("mx-gone", false, 3)
    advance(1000)                   -- and of T0+2000; mx-skip still runs: skipped
    s:ended("mx-late", false, 3)
    m = core.metrics_job('a"b\\c\n')
    long = { core.metrics_job(("n"):rep(200)), core.metrics_job(("m"):rep(43)),
             core.metrics_job(("l"):rep(44)) }
    text = core.metrics()
  end)

  teardown(function()
    if m then m:remove() end
    for _, j in ipairs(long or {}) do j:remove() end
  end)

  it("passes promtool check metrics and a strict reader", function()
    promtool(text)
    parse(text)
  end)

  it("observes each fire's lateness, in the bucket its 7 ms fall in", function()
    local s = parse(text)
    local b = { job = "mx-late" }
    assert.equal(2, value(s, "leash_fire_lateness_seconds_count", b))
    assert.equal(0.014, value(s, "leash_fire_lateness_seconds_sum", b))
    assert.equal(0, value(s, "leash_fire_lateness_seconds_bucket", { job = "mx-late", le = "0.005" }))
    assert.equal(2, value(s, "leash_fire_lateness_seconds_bucket", { job = "mx-late", le = "0.01" }))
    assert.equal(2, value(s, "leash_fire_lateness_seconds_bucket", { job = "mx-late", le = "+Inf" }))
    -- a paused job's fires never started
    assert.equal(0, value(s, "leash_fire_lateness_seconds_count", { job = "mx-paused" }))
  end)

  it("counts skipped fires by reason", function()
    local s = parse(text)
    assert.equal(1, value(s, "leash_fires_skipped_total", { job = "mx-skip", reason = "overlap" }))
    assert.equal(0, value(s, "leash_fires_skipped_total", { job = "mx-skip", reason = "paused" }))
    assert.equal(2, value(s, "leash_fires_skipped_total", { job = "mx-paused", reason = "paused" }))
    assert.equal(0, value(s, "leash_fires_skipped_total", { job = "mx-late", reason = "overlap" }))
  end)

  it("escapes a hostile job name in the job label (backslash, quote, newline)", function()
    assert.truthy(text:find('leash_runs_total{job="a\\"b\\\\c\\n",outcome="ok"} 0\n', 1, true))
    assert.is_true(has_job(parse(text), 'a"b\\c\n'))
  end)

  it("keeps a name of any length whole, in its slot or beside it (43, 44 and 200 bytes)", function()
    local s = parse(text)
    for _, n in ipairs { ("n"):rep(200), ("m"):rep(43), ("l"):rep(44) } do
      assert.is_true(has_job(s, n), #n .. " bytes")
    end
    assert.is_false(has_job(s, ("n"):rep(199)))
  end)

  it("counts a store call that failed under its operation", function()
    local function errors()
      return value(parse(core.metrics()), "leash_store_errors_total", { op = "open" }) or 0
    end
    local before = errors()
    local s, err = core.open_store { provider = "sqlite", path = "/nonexistent/dir/x.db", table = "t" }
    assert.is_nil(s, "opened " .. tostring(s))
    assert.truthy(err)
    assert.equal(before + 1, errors())
  end)

  it("drops a removed job's series once its run ended", function()
    o.d.remove_job("mx-gone")
    o.s:load(true)
    o.s:ended("mx-gone", true, 1)
    assert.is_true(has_job(parse(core.metrics()), "mx-gone"))     -- until dropped
    o.s:drop_removed()
    local s = parse(core.metrics())
    assert.is_false(has_job(s, "mx-gone"))
    assert.is_true(has_job(s, "mx-late"))
  end)
end)

local probe_src = L.metrics_probe_job

-- Starts one replica on provider p with jobs (plus the probe); returns the
-- process, the directory and a function giving the parsed metrics once
-- pred(samples) holds (or failing after timeout seconds).
local function start(p, jobs)
  local tbl = "metrics_" .. math.random(1, 1e6)
  local d = L.dir { config = R.config(p, tbl), jobs = jobs }
  local out = d.dir .. "/metrics.txt"
  d.write_job("probe", probe_src(out))
  d.password = p.password
  local proc = R.start_replicas(d, 1)[1]
  local last
  local function wait(pred, timeout)
    local got = L.wait_for(function()
      local text = L.read(out)
      if text == "" then return nil end
      local ok, s = pcall(parse, text)
      assert(ok, s)
      last = text
      return pred(s) and { s, text }
    end, timeout or 10, 0.2)
    assert(got, "the metrics never showed it; the last text:\n" .. tostring(last)
      .. "\nthe log:\n" .. proc:log_text())
    return got[1], got[2]
  end
  return proc, d, wait
end

describe("metrics of a real leash run [sqlite]", function()
  local proc, d, wait, started

  setup(function()
    started = L.now()
    local p = { provider = "sqlite", path = L.tmpdir("metrics") .. "/leash.db" }
    proc, d, wait = start(p, {
      ["mx-ok"] = 'return { every = "1s", run = function() end }',
      ["mx-fail"] = 'return { every = "1s", run = function() error("boom") end }',
      ["mx-slow"] = 'return { every = "1s", run = function(ctx) ctx.sleep(1.5) end }',
      ["mx-local"] = 'return { every = "1s", singleton = false, run = function() end }',
    })
  end)

  teardown(function()
    if proc then proc:stop(10) end
  end)

  it("counts runs by outcome, lateness, skips, leases, store calls and renewals", function()
    local s, text = wait(function(x)
      return (value(x, "leash_runs_total", { job = "mx-fail", outcome = "failed" }) or 0) >= 1
        and (value(x, "leash_fires_skipped_total", { job = "mx-slow", reason = "overlap" }) or 0) >= 1
        and (value(x, "leash_lease_renew_margin_seconds_count") or 0) >= 1
        and (value(x, "leash_store_call_duration_seconds_count", { op = "record_runs" }) or 0) >= 1
    end)
    promtool(text)
    assert.equal(0, value(s, "leash_runs_total", { job = "mx-fail", outcome = "ok" }))
    assert.is_true(value(s, "leash_runs_total", { job = "mx-ok", outcome = "ok" }) >= 1)
    assert.is_true(value(s, "leash_run_duration_seconds_count", { job = "mx-ok" }) >= 1)
    assert.is_nil(value(s, "leash_last_success_timestamp_seconds", { job = "mx-fail" }))
    local last = value(s, "leash_last_success_timestamp_seconds", { job = "mx-ok" })
    assert.is_true(last > started and last <= L.now(), tostring(last))
    -- the fires of a healthy loop start within 50 ms
    local late = value(s, "leash_fire_lateness_seconds_count", { job = "mx-ok" })
    assert.is_true(late >= 1)
    assert.is_true(value(s, "leash_fire_lateness_seconds_bucket", { job = "mx-ok", le = "0.05" }) >= 1)
    for _, job in ipairs { "mx-ok", "mx-fail", "mx-slow", "probe" } do
      assert.equal(1, value(s, "leash_lease_held", { job = job }), job)
      assert.equal(1, value(s, "leash_lease_gained_total", { job = job }), job)
      assert.equal(0, value(s, "leash_lease_lost_total", { job = job }), job)
    end
    for _, op in ipairs { "open", "acquire_all", "renew_ctl", "claim_runs", "record_runs" } do
      assert.is_true(value(s, "leash_store_call_duration_seconds_count", { op = op }) >= 1, op)
      assert.equal(0, value(s, "leash_store_errors_total", { op = op }), op)
    end
    -- a job that runs unelected has runs but no lease series
    assert.is_true(value(s, "leash_runs_total", { job = "mx-local", outcome = "ok" }) >= 1)
    assert.is_nil(value(s, "leash_lease_held", { job = "mx-local" }))
    assert.is_nil(value(s, "leash_lease_gained_total", { job = "mx-local" }))
    local rss = value(s, "process_resident_memory_bytes")
    assert.is_true(rss > 1e6, tostring(rss))
    local t0 = value(s, "process_start_time_seconds")
    assert.is_true(t0 >= started - 1 and t0 <= L.now(), tostring(t0))
  end)

  it("counts a handover: leash handoff lets the lease go (held 0, lost 1) till it is taken again", function()
    local code, out, err = L.leash({ "handoff", "-c", d.config, "mx-ok" })
    assert.equal(0, code, out .. err)
    local s = wait(function(x)
      return value(x, "leash_lease_lost_total", { job = "mx-ok" }) == 1
    end)
    local held = value(s, "leash_lease_held", { job = "mx-ok" })
    local gained = value(s, "leash_lease_gained_total", { job = "mx-ok" })
    -- the lone replica takes it back after its hold: held again with one more gain
    assert.is_true((held == 0 and gained == 1) or (held == 1 and gained == 2),
      ("held %s gained %s"):format(held, gained))
    s = wait(function(x) return value(x, "leash_lease_gained_total", { job = "mx-ok" }) == 2 end, 15)
    assert.equal(1, value(s, "leash_lease_held", { job = "mx-ok" }))
  end)

  it("drops the series of a job removed from jobs/", function()
    wait(function(x) return has_job(x, "mx-slow") end)
    d.remove_job("mx-slow")
    proc:signal("HUP")
    local s = wait(function(x) return not has_job(x, "mx-slow") end)
    assert.is_true(has_job(s, "mx-ok"))
    -- its lease was released on the way out
    assert.is_nil(value(s, "leash_lease_held", { job = "mx-slow" }))
  end)
end)

describe("metrics read by a forked process while the parent's jobs come and go", function()
  it("never shows a torn or stale name: slots change hands under a seqlock", function()
    local names = {}
    for i = 1, 40 do names[#names + 1] = ("churn-%d-%s"):format(i, ("x"):rep(i)) end
    local valid = {}
    for _, n in ipairs(names) do valid[n] = true end
    valid.reader = true
    local d = L.dir {}
    local out = d.dir .. "/reader.txt"
    -- Renders for 3 s in its run's child and checks every job label it sees.
    d.write_job("reader", ([[
local core = require "leash.core"
local valid = { %s }
return { every = "1s", singleton = false, run = function()
  local renders, bad, seen, t0 = 0, {}, {}, core.monotonic()
  while core.monotonic() - t0 < 3 do
    for name in core.metrics():gmatch('leash_runs_total{job="([^"]*)",outcome="ok"}') do
      if not valid[name] then bad[#bad + 1] = name end
      seen[name] = true
    end
    renders = renders + 1
  end
  local n = 0
  for _ in pairs(seen) do n = n + 1 end
  local f = assert(io.open(%q, "w"))
  f:write(("renders=%%d names=%%d bad=%%d %%s\n"):format(renders, n, #bad, bad[1] or ""))
  f:close()
end }
]]):format((function()
      local t = {}
      for n in pairs(valid) do t[#t + 1] = ("[%q] = true"):format(n) end
      return table.concat(t, ", ")
    end)(), out))
    local proc = L.spawn(d)
    assert(proc:wait_log("loaded: every 1s", 5), proc:log_text())
    -- Jobs added and removed ten times a second while the reader runs.
    local t0, k = L.now(), 0
    while L.now() - t0 < 4.5 and not L.exists(out) do
      k = k + 1
      for i, n in ipairs(names) do
        if (i + k) % 2 == 0 then
          d.write_job(n, 'return { every = "1h", singleton = false, run = function() end }')
        elseif L.exists(d.job_path(n)) then
          d.remove_job(n)
        end
      end
      proc:signal("HUP")
      L.sleep(0.1)
    end
    local line = L.wait_for(function() return L.read(out):match("[^\n]+") end, 5)
    proc:stop(10)
    assert(line, "the reader wrote nothing: " .. proc:log_text())
    local renders, seen, bad = line:match("^renders=(%d+) names=(%d+) bad=(%d+)")
    assert.equal("0", bad, line)
    assert.is_true(tonumber(renders) >= 20, line)
    assert.is_true(tonumber(seen) >= 20, line)   -- it did see the churn
  end)
end)

describe("store call metrics on every provider", function()
  it("has every expected provider configured", function()
    assert.same({}, providers.missing)
  end)

  for _, p in ipairs(R.list_of()) do
    if p.provider ~= "sqlite" then
      it("shows the latency and errors of each store operation [" .. p.provider .. "]", function()
        local proc, _, wait = start(p, { ["mx-ok"] = 'return { every = "1s", run = function() end }' })
        local ok, err = pcall(function()
          local s, text = wait(function(x)
            return (value(x, "leash_store_call_duration_seconds_count", { op = "record_runs" }) or 0) >= 1
              and (value(x, "leash_lease_renew_margin_seconds_count") or 0) >= 1
          end, 15)
          promtool(text)
          for _, op in ipairs { "open", "acquire_all", "claim_runs", "record_runs" } do
            assert.is_true(value(s, "leash_store_call_duration_seconds_count", { op = op }) >= 1, op)
            assert.is_true(value(s, "leash_store_call_duration_seconds_bucket",
              { op = op, le = "+Inf" }) >= 1, op)
            -- errors counted apart from the calls (a busy machine may fail an
            -- open or a claim once: the replica retries, so most calls succeed)
            local errs = value(s, "leash_store_errors_total", { op = op })
            assert.is_true(errs >= 0 and errs < value(s, "leash_store_call_duration_seconds_count", { op = op }), op)
          end
          assert.equal(1, value(s, "leash_lease_held", { job = "mx-ok" }))
        end)
        proc:stop(10)
        assert(ok, err)
      end)
    end
  end
end)

-- Broken job files are visible everywhere (issue 38, item 1): a real `leash
-- run` replica on each provider publishes the files its jobs/ fails to load
-- with its presence row; `leash status` (table, --check, --json) from the
-- replica's directory and from another host's (a directory of its own),
-- /metrics and the page show them, and they go away once fixed.  A file
-- broken from the start and one that broke while its job ran.
local L = require "e2e"
local R = require "replicas"
local H = require "http"
local json = require "dkjson"
local providers = require "providers"

local GOOD = 'return { every = "1s", run = function(ctx) end }\n'
local BROKEN_FROM_START = 'return { every = "3x", run = function(ctx) end }\n'
local BROKEN_LATER = 'return { every = "1s", run = function(ctx) end\n'   -- no closing brace

for _, x in ipairs(providers.list) do
  local p = x.provider == "sqlite"
    and { provider = "sqlite", path = os.getenv("LEASH_TEST_TMP") .. "/broken_files.db" } or x

  describe("broken job files [" .. p.provider .. "]", function()
    local tbl = "broken_" .. math.random(1, 1e6)
    local d, proc, other, name

    local function status(dir, ...)
      return R.leash_in(dir, p, "status", ...)
    end

    -- Waits until `leash status` in dir prints what ok(out) accepts.
    local function wait_status(dir, ok, args)
      local code, out, err
      assert.truthy(L.wait_for(function()
        code, out, err = status(dir, table.unpack(args or {}))
        return ok(out, code)
      end, 30, 0.3), ("status never showed it: exit %s\n%s%s"):format(code, out, err))
      return out, code
    end

    local function metric(text)
      return tonumber(text:match("\nleash_job_files_broken (%d+)\n"))
    end

    -- /metrics and the page answer from snapshots a moment old: waits until
    -- path's body matches pat (plain with plain); the body.
    local function wait_body(path, pat, plain)
      local body
      assert.truthy(L.wait_for(function()
        local _, _, b = H.request(d.url .. path)
        body = b
        return b:find(pat, 1, plain)
      end, 30, 0.3), path .. " never matched " .. pat .. ":\n" .. tostring(body))
      return body
    end

    -- A real T-SQL engine takes seconds over its schema batch on a loaded
    -- machine: the replica's and the commands' statements get room.
    local real_ms = providers.MSSQL_REAL_TIMEOUT_MS .. "ms"
    local store = p.real and { statement_timeout = real_ms, connect_timeout = real_ms } or {}

    setup(function()
      d, proc = H.replica(p, tbl, H.free_port(), { store = store,
        jobs = { tick = GOOD, bad = BROKEN_FROM_START } })
      -- The replica's name, as a Lua pattern matches it literally.
      name = proc.owner:match("^(.*):[^:]*:[^:]*$"):gsub("%p", "%%%0")
      -- Another host: the same store, a jobs/ of its own that loads well.
      local c = R.config(p, tbl)
      for k, v in pairs(store) do c.store[k] = v end
      other = L.dir { config = c, jobs = { tick = GOOD } }
      H.wait_up(d.url .. "/healthz", 15)
    end)

    teardown(function() if proc then proc:stop(10) end end)

    it("a file broken from the start: state broken, the BROKEN FILE table, --check, --json, /metrics, the page", function()
      local out = wait_status(d, function(o) return o:find("BROKEN FILE", 1, true) end)
      assert.matches("\nbroken%s+bad%s+%-%s+%-%s+%-%s+%-\n", out)
      assert.is_nil(out:find("not in jobs/", 1, true))
      assert.matches(name .. "%s+bad%.lua%s+[^\n]- ago%s+nothing%s+[^\n]*bad%.lua:1: every", out)
      -- Seen from another host, whose own jobs/ has no such file.
      -- (--wide: the note whole, not cut to fit 120 columns)
      out = wait_status(other, function(o) return o:find("BROKEN FILE", 1, true) end, { "--wide" })
      assert.matches("\nbroken%s+bad %(broken on " .. name .. ": [^\n]*every[^\n]*%)%s+%-%s+%-%s+%-%s+%-%s+%-\n", out)
      local code
      out, code = wait_status(other, function(_, c) return c == 1 end, { "--check" })
      assert.equal(1, code)
      assert.matches("^LEASH WARNING %- 1 job broken: bad %(on " .. name .. "%)\n", out)
      assert.matches("\nbad: broken: jobs/bad%.lua does not load on " .. name .. " %(not running%): ", out)
      local _, js = status(other, "--json")
      local v = assert(json.decode(js))
      assert.equal(1, #v.broken_files)
      local b = v.broken_files[1]
      assert.same({ proc.owner:match("^(.*):[^:]*:[^:]*$"), "bad.lua", false },
        { b.replica, b.file, b.running_last_good })
      assert.matches("bad%.lua:1: every", b.error)
      assert.is_true(math.abs(b.since - v.now) < 600000)
      assert.equal(1, metric(wait_body("/metrics", "\nleash_job_files_broken 1\n", true)))
      wait_body("/", '<ul id="broken"><li data%-file="bad%.lua">' .. name .. ': bad%.lua %(broken ')
    end)

    it("a file that breaks while its job runs: the last good definition goes on, and everyone says so", function()
      d.write_job("tick", BROKEN_LATER)
      proc:signal("HUP")
      local out = wait_status(d, function(o) return o:find(name .. "%s+tick%.lua") end, { "--wide" })
      assert.matches("\n%a+%s+tick %(running the last good definition: [^\n]*tick%.lua[^\n]*%)%s", out)
      assert.matches(name .. "%s+tick%.lua%s+[^\n]+last good definition%s+[^\n]*tick%.lua", out)
      out = wait_status(other, function(o) return o:find("tick%.lua") end, { "--wide" })
      assert.matches("\n%a+%s+tick %(broken on " .. name .. ": [^\n]*tick%.lua[^\n]*%)%s", out)
      local code
      code, out = status(other, "--check")
      assert.equal(1, code, out)
      assert.matches("^LEASH WARNING %- 2 jobs broken: bad %(on " .. name .. "%), tick %(on " .. name .. "%)\n", out)
      assert.matches("\ntick: broken: [^\n]*%(running the last good definition%)", out)
      -- The job still runs: its ledger grows.
      local n = #R.ledger(p, tbl, "tick")
      assert.truthy(L.wait_for(function() return #R.ledger(p, tbl, "tick") > n end, 20))
      local _, js = status(d, "--json")
      local v = assert(json.decode(js))
      assert.equal(2, #v.broken_files)
      assert.same({ "tick.lua", true }, { v.broken_files[2].file, v.broken_files[2].running_last_good })
      local text = wait_body("/metrics", "\nleash_job_files_broken 2\n", true)
      local f = L.tmpdir("metrics") .. "/metrics.txt"
      L.write(f, text)
      local pc, po, pe = L.sh("promtool check metrics < " .. L.quote(f))
      assert.equal(0, pc, po .. pe)
      wait_body("/", '<li data%-file="tick%.lua">' .. name .. ': tick%.lua %(broken [^)]*, running the last good definition%)')
    end)

    it("fixed files go away everywhere", function()
      d.write_job("tick", GOOD)
      d.remove_job("bad")
      proc:signal("HUP")
      local out, code = wait_status(other, function(_, c) return c == 0 end, { "--check" })
      assert.equal(0, code)
      assert.matches("^LEASH OK", out)
      local _, o2 = status(d)
      assert.is_nil(o2:find("BROKEN FILE", 1, true), o2)
      local _, js = status(other, "--json")
      assert.same({}, assert(json.decode(js)).broken_files)
      assert.truthy(L.wait_for(function()
        local _, _, text = H.request(d.url .. "/metrics")
        return metric(text) == 0
      end, 15))
      wait_body("/", '<ul id="broken"></ul>', true)
    end)
  end)
end

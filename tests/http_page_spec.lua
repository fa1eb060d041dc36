-- The status page in a real browser: headless Chromium (Debian's chromium)
-- opens / of a replica of two, runs its script against the live API, and
-- the DOM it leaves must list the jobs, hold a bar per run with the failed
-- run shown as failed, and carry the hostile job name, replica id and error
-- text as text, never as markup.  Screenshots at 1280x800 and phone size go
-- under the test's temporary directory.  A Chromium that cannot start fails
-- the spec with its reason.
local L = require "e2e"
local R = require "replicas"
local H = require "http"

-- An injected element would run this and mark the body.
local PWN = [[<img src=x onerror="document.body.dataset.pwned='1'">]]
local HOSTILE_REPLICA = [[<b>r&amp;"'</b>]]
local HOSTILE_JOB = [[<svg onload="document.body.dataset.pwned='2'">]]

local JOBS = {
  tick = 'return { every = "1s", run = function(ctx) end }\n',
  boom = ('return { every = "1s", run = function(ctx) error(%q, 0) end }\n'):format(PWN),
}

local function chromium(args, dir)
  local argv = { "chromium", "--headless", "--no-sandbox", "--disable-gpu",
                 "--user-data-dir=" .. dir .. "/profile", "--no-first-run",
                 "--virtual-time-budget=6000" }
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local code, out, err = L.exec({ "timeout", "90", table.unpack(argv) }, { env = { HOME = dir } })
  assert(code == 0, ("chromium could not run (exit %d): %s"):format(code, err:sub(-2000)))
  return out, err
end

-- The DOM without its attributes' values: what is left of a tag there is
-- an element, not text.
local function tags_only(dom)
  return (dom:gsub('="[^"]*"', '=""'))
end

describe("the status page in headless Chromium", function()
  local p = { provider = "sqlite", path = os.getenv("LEASH_TEST_TMP") .. "/http_page.db" }
  local tbl = "page_" .. math.random(1, 1e6)
  local ds, procs, dir = {}, {}, nil

  setup(function()
    dir = L.tmpdir("chromium")
    local s = R.open(p, tbl, 5000)
    local _, now = assert(s:list())
    assert.is_true(s:try_acquire(HOSTILE_JOB, HOSTILE_REPLICA .. ":1:00000001", 600000))
    assert.is_true(s:record_runs({
      { job = HOSTILE_JOB, scheduled_at = now - 600000, owner = HOSTILE_REPLICA .. ":1:00000001", token = 1,
        outcome = "timeout", started_at = now - 600000, ended_at = now - 540000,
        duration_ms = 60000, error = PWN },
    }))
    s:close()
    -- A corrupt ledger row (by hand: leash writes none), in the hour the
    -- timeline shows: the page must not break on it ("Invalid time value").
    assert(L.exec({ "sqlite3", "-cmd", ".timeout 5000", p.path, ("INSERT INTO %s_runs (job,"
      .. " scheduled_at, owner, token, outcome, recorded_at) VALUES ('stale',"
      .. " 9223372036854775807, 'x:1:00000002', 1, 'ok', 0);"):format(tbl) }) == 0)
    for i = 1, 2 do
      ds[i], procs[i] = H.replica(p, tbl, H.free_port(), {
        jobs = JOBS, singleton = { spread = "true" } })
    end
    for i = 1, 2 do H.wait_up(ds[i].url .. "/healthz", 15) end
    H.wait_outcome(ds[1].url, "boom", "failed")
    L.sleep(1.5)
  end)

  teardown(function() R.stop_all(procs) end)

  it("lists the jobs, draws the runs per replica, shows the failed run as failed", function()
    -- Spread may be moving tick from one replica to the other as the page
    -- loads (on SQLite the taker finds the lease free on its next try):
    -- then its row says "unheld", truly; the page is loaded again, at most
    -- twice, for a moment when it is held.
    local dom
    for _ = 1, 3 do
      dom = chromium({ "--dump-dom", ds[2].url .. "/" }, dir)
      local row = dom:match('<tr data%-job="tick">(.-)</tr>') or ""
      if not row:find('class="state state-unheld"', 1, true) then break end
      L.sleep(1)
    end
    L.write(dir .. "/page.html", dom)
    assert.matches('<body[^>]* data%-loaded="%d+"', dom, nil, false, "the script did not render: " .. dom:sub(1, 400))
    assert.is_nil(dom:find("data-failed", 1, true), dom:match('data%-failed="[^"]*"'))
    -- The jobs table.
    for _, name in ipairs { "tick", "boom" } do
      assert.matches('<tr data%-job="' .. name .. '">', dom, nil, false, name)
    end
    local boom_row = dom:match('<tr data%-job="boom">(.-)</tr>')
    assert.matches('class="state state%-failing">failing<', boom_row)
    -- Its last run: failed, or the next one, whose end the ledger records
    -- within a second (ends are written in batches).
    local last = boom_row:match('class="last o%-%a+" data%-outcome="(%a+)"')
    assert.is_truthy(last == "failed" or last == "running", boom_row)
    local tick_row = dom:match('<tr data%-job="tick">(.-)</tr>')
    assert.matches('class="state state%-ok">ok<', tick_row)
    local stale_row = dom:match('<tr data%-job="stale">(.-)</tr>') or ""
    assert.matches('class="state state%-corrupt">corrupt<', stale_row)
    -- The timeline: a lane per replica, bars by outcome.
    local lanes = 0
    for _ in dom:gmatch('<div class="lane" data%-replica=') do lanes = lanes + 1 end
    assert.is_true(lanes >= 2, "lanes: " .. lanes)
    assert.matches('<div class="bar ok" data%-outcome="ok" data%-job="tick"', dom)
    assert.matches('<div class="bar failed" data%-outcome="failed" data%-job="boom"', dom)
    assert.matches('<div class="bar timeout" data%-outcome="timeout"', dom)
    -- Hover details are there for every bar.
    assert.matches('data%-job="boom" tabindex="0" aria%-label="boom: failed\n', dom)
  end)

  it("keeps hostile job names, replica ids and errors as text", function()
    local dom = L.read(dir .. "/page.html")
    assert.is_true(#dom > 0, "the first test saved no DOM")
    assert.is_nil(dom:match("<body[^>]*data%-pwned[^>]*>"), "an injected element ran")
    local bare = tags_only(dom)
    assert.is_nil(bare:find("<img", 1, true), "an <img> element was made from text")
    assert.is_nil(bare:find("<svg", 1, true), "an <svg> element was made from text")
    assert.is_nil(bare:find("<b>", 1, true), "a <b> element was made from a replica id")
    -- ... and they are shown, escaped, as text.
    assert.matches("&lt;svg onload=", dom, 1, true)
    assert.matches("&lt;b&gt;r&amp;amp;\"'&lt;/b&gt;", dom, 1, true)
  end)

  it("saves screenshots at 1280x800 and at phone size", function()
    for _, size in ipairs { "1280,800", "390,844" } do
      local shot = ("%s/page-%s.png"):format(dir, size:gsub(",", "x"))
      chromium({ "--hide-scrollbars", "--window-size=" .. size, "--screenshot=" .. shot,
                 ds[1].url .. "/" }, dir)
      local png = L.read(shot)
      assert.is_true(#png > 5000, shot .. " is " .. #png .. " bytes")
      assert.equal("\137PNG", png:sub(1, 4))
      print("screenshot: " .. shot)
    end
  end)

  it("sends the token from #token= when [http] token_env is set", function()
    local d, proc = H.replica({ provider = "sqlite", path = dir .. "/tok.db" }, "t", H.free_port(), {
      jobs = { tick = JOBS.tick }, http = { token_env = "LEASH_TEST_PAGE_TOKEN" },
      env = { LEASH_TEST_PAGE_TOKEN = "tok-123" } })
    H.wait_up(d.url .. "/healthz", 15, { headers = { Authorization = "Bearer tok-123" } })
    local ok, dom = pcall(chromium, { "--dump-dom", d.url .. "/#token=tok-123" }, dir)
    local ok2, bad = pcall(chromium, { "--dump-dom", d.url .. "/#token=wrong" }, dir)
    R.stop_all { proc }
    assert(ok, dom)
    assert(ok2, bad)
    assert.matches('<tr data%-job="tick">', dom)
    assert.matches('data%-failed="[^"]*401', bad)
  end)
end)

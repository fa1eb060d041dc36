-- The status page in a real browser: headless Chromium (Debian's chromium)
-- opens / of a replica of two, runs its script against the live API, and
-- the DOM it leaves must list the jobs, hold a bar per run with the failed
-- run shown as failed, and carry the hostile job name, replica id and error
-- text as text, never as markup.  The header says what is wrong (2 jobs
-- failing), the replicas table shows each replica's state and version, the
-- timeline's window goes to 24 h, and with JavaScript off the server's first
-- paint already holds the tables.  Screenshots at 1280x800 and phone size
-- (and one with JavaScript off) go under the test's temporary directory.  A
-- Chromium that cannot start fails the spec with its reason.
local L = require "e2e"
local R = require "replicas"
local H = require "http"

local ROOT = os.getenv("LEASH_ROOT") or "."

-- An injected element would run this and mark the body.
local PWN = [[<img src=x onerror="document.body.dataset.pwned='1'">]]
local HOSTILE_REPLICA = [[<b>r&amp;"'</b>]]
local HOSTILE_JOB = [[<svg onload="document.body.dataset.pwned='2'">]]
-- A replica that beat once and went: dead, of an old version.
local GONE = [[<i>gone</i>:9:0000dead]]
local GONE_VERSION = [[<i>0.0.1</i>]]
-- A run three hours old: in the 24 h window, not in the hour's.
local OLD_JOB = "three-hours-ago"

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

-- The DOM as Chromium holds it, through the DevTools protocol
-- (tests/support/cdp.py): o.noscript (scripts off from the first byte:
-- what the server drew), o.loaded (wait until the script drew that many
-- times), o.click (then click that element and wait for one more),
-- o.screenshot (a PNG of the screen then).
-- --dump-dom cannot show a page with scripts off (it reads the DOM with
-- a script).
local function cdp(url, dir, o)
  o = o or {}
  local argv = { "timeout", "90", "python3", ROOT .. "/tests/support/cdp.py", dir .. "/cdp-profile", url }
  if o.noscript then argv[#argv + 1] = "--noscript" end
  if o.loaded then argv[#argv + 1] = "--loaded"; argv[#argv + 1] = tostring(o.loaded) end
  if o.click then argv[#argv + 1] = "--click"; argv[#argv + 1] = o.click end
  if o.screenshot then argv[#argv + 1] = "--screenshot"; argv[#argv + 1] = o.screenshot end
  local code, out, err = L.exec(argv, { env = { HOME = dir } })
  assert(code == 0, ("cdp.py %s (exit %d): %s"):format(url, code, err:sub(-2000)))
  return out, err
end

-- The DOM without its attributes' values: what is left of a tag there is
-- an element, not text.
local function tags_only(dom)
  return (dom:gsub('="[^"]*"', '=""'))
end

-- No element of dom was made from the hostile texts, and none ran.
local function text_only(dom)
  assert.is_nil(dom:match("<body[^>]*data%-pwned[^>]*>"), "an injected element ran")
  local bare = tags_only(dom)
  assert.is_nil(bare:find("<img", 1, true), "an <img> element was made from text")
  assert.is_nil(bare:find("<svg", 1, true), "an <svg> element was made from text")
  assert.is_nil(bare:find("<b>", 1, true), "a <b> element was made from a replica id")
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
      { job = OLD_JOB, scheduled_at = now - 3 * 3600000, owner = HOSTILE_REPLICA .. ":1:00000001", token = 1,
        outcome = "ok", started_at = now - 3 * 3600000, ended_at = now - 3 * 3600000 + 60000,
        duration_ms = 60000 },
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
    text_only(dom)
    -- ... and they are shown, escaped, as text.
    assert.matches("&lt;svg onload=", dom, 1, true)
    assert.matches("&lt;b&gt;r&amp;amp;\"'&lt;/b&gt;", dom, 1, true)
  end)

  it("says in the header that 2 jobs are failing, not that all is healthy", function()
    -- boom fails each second; the hostile job's last run timed out.
    local dom = L.read(dir .. "/page.html")
    local health = dom:match('<span id="health"[^>]*>([^<]*)</span>')
    assert.is_string(health, "no header summary")
    assert.matches("^2 jobs failing", health)
    assert.matches('<span id="health" class="bad">', dom, 1, true)
  end)

  it("draws the first paint on the server: with JavaScript off the page holds the tables", function()
    local shot = dir .. "/page-noscript-1280x800.png"
    local dom = cdp(ds[1].url .. "/", dir, { noscript = true, screenshot = shot })
    L.write(dir .. "/page-noscript.html", dom)
    -- The script did not run ...
    assert.is_nil(dom:find("data-loaded", 1, true))
    -- ... and the jobs table, the header's summary and the replicas are there.
    assert.matches('<tr data%-job="tick">', dom)
    local boom_row = assert(dom:match('<tr data%-job="boom">(.-)</tr>'), "no row for boom")
    assert.matches('class="state state%-failing">failing<', boom_row)
    assert.matches('<span id="health" class="bad">2 jobs failing', dom)
    for i = 1, 2 do
      assert.matches('<tr data-replica="' .. procs[i].owner .. '">', dom, 1, true)
    end
    -- Hostile text stays text in the server's HTML too.
    text_only(dom)
    assert.matches("&lt;svg onload=", dom, 1, true)
    -- What the screen shows with no script run: the tables.
    assert.equal("\137PNG", L.read(shot):sub(1, 4))
    print("screenshot: " .. shot)
  end)

  it("shows each replica's state and version, a dead one's too", function()
    -- A replica that beat once, under a hostile id, defining no job (so
    -- spread gives it none); dead once a lease has passed without a beat.
    local s = R.open(p, tbl, 5000)
    assert(s:beat({ owner = GONE, host = HOSTILE_REPLICA, pid = 9, version = GONE_VERSION,
                    jobs_hash = "gone", jobs = "" }, 600000))
    s:close()
    L.sleep(2.5)
    local _, st = H.get_json(ds[1].url .. "/api/status")
    local version = {}
    for _, r in ipairs(st.replicas or {}) do version[r.owner] = r.version end
    for _, js in ipairs { true, false } do
      local dom = cdp(ds[2].url .. "/", dir, { noscript = not js, loaded = js and 1 or nil })
      local what = js and "with the script" or "without it"
      for i = 1, 2 do
        local row = dom:match('<tr data%-replica="' .. procs[i].owner:gsub("%p", "%%%0") .. '">(.-)</tr>')
        assert.is_string(row, procs[i].owner .. " has no row " .. what)
        assert.matches('<td class="rstate rstate%-live">live</td>', row, nil, false, what)
        assert.matches('<td class="mono version">' .. assert(version[procs[i].owner]) .. '</td>', row, 1, true)
      end
      local gone = dom:match('<td class="mono name">&lt;i&gt;gone&lt;/i&gt;:9:0000dead</td>(.-)</tr>')
      assert.is_string(gone, "the dead replica has no row " .. what)
      assert.matches('<td class="rstate rstate%-dead">dead</td>', gone, nil, false, what)
      assert.matches('<td class="mono version">&lt;i&gt;0.0.1&lt;/i&gt;</td>', gone, 1, true)
      assert.is_nil(tags_only(dom):find("<i>", 1, true), "an <i> element was made from text " .. what)
    end
  end)

  it("switches the timeline to 24 h: its axis, and a run 3 h old", function()
    local hour = L.read(dir .. "/page.html")
    assert.matches('<div id="timeline" data-window="1h">', hour, 1, true)
    assert.is_nil(hour:find('data-outcome="ok" data-job="' .. OLD_JOB .. '"', 1, true), "a run 3 h old in the hour")
    -- The "24 h" link clicked on the page (kept in the address) ...
    local dom, log = cdp(ds[1].url .. "/#token=none", dir, { loaded = 1, click = '.windows a[data-window="24h"]' })
    assert.matches("location: /?window=24h#token=none", log, 1, true)
    assert.is_nil(dom:find("data-failed", 1, true), dom:match('data%-failed="[^"]*"'))
    assert.matches('<div id="timeline" data-window="24h">', dom, 1, true)
    assert.matches('<div id="axis"><span>-24h</span><span>-18h</span><span>-12h</span><span>-6h</span>'
      .. '<span>now</span></div>', dom, 1, true)
    assert.matches('<a href="?window=24h" data-window="24h" class="on" aria-current="true">', dom, 1, true)
    assert.matches('<div class="bar ok" data-outcome="ok" data-job="' .. OLD_JOB .. '"', dom, 1, true)
    -- ... and the page opened at ?window=24h.
    dom = chromium({ "--dump-dom", ds[1].url .. "/?window=24h" }, dir)
    assert.matches('<body[^>]* data%-loaded="%d+"', dom, nil, false, "the script did not render")
    assert.matches('<div id="timeline" data-window="24h">', dom, 1, true)
    assert.matches('<div id="axis"><span>-24h</span><span>-18h</span><span>-12h</span><span>-6h</span>'
      .. '<span>now</span></div>', dom, 1, true)
    assert.matches('<a href="?window=24h" data-window="24h" class="on" aria-current="true">', dom, 1, true)
    assert.matches('<div class="bar ok" data-outcome="ok" data-job="' .. OLD_JOB .. '"', dom, 1, true)
    -- A window the page does not know is refused with the ones it does.
    local code, _, body = H.request(ds[1].url .. "/?window=2h")
    assert.equal(400, code)
    assert.equal("window: expected 5m, 1h or 24h\n", body)
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
    -- The server draws no data for a request without the token (a
    -- browser's navigation never has it), and does for one with it.
    local _, _, page = H.request(d.url .. "/")
    local _, _, with = H.request(d.url .. "/", { headers = { Authorization = "Bearer tok-123" } })
    R.stop_all { proc }
    assert(ok, dom)
    assert(ok2, bad)
    assert.matches('<tr data%-job="tick">', dom)
    assert.matches('data%-failed="[^"]*401', bad)
    assert.is_nil(page:find('data-job="tick"', 1, true))
    assert.matches('<span id="health">loading ...</span>', page, 1, true)
    assert.matches('<tr data-job="tick">', with, 1, true)
  end)
end)

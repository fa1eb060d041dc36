-- The status page's first paint (leash.web.render) from fixed answers, no
-- store and no browser: the header's summary, the jobs and replicas tables,
-- the timeline's window, and hostile text escaped.  tests/http_page_spec.lua
-- reads the same page in Chromium from a live server.
local web = require "leash.web"
local history = require "leash.history"

local T = history.parse_iso
local NOW = T("2026-12-01T03:04:00Z")
local A, B, C = "web-1:4242:a1b2c3d4", "web-2:99:0f0e0d0c", "web-3:7:00000001"
local HOSTILE = [[<img src=x onerror="alert(1)">&'"]]

local function run(job, at, owner, outcome)
  return { job = job, scheduled_at = at, owner = owner, token = 3, outcome = outcome,
           claimed_at = at - 2, started_at = at + 1, ended_at = at + 1201, duration_ms = 1200,
           error = outcome == "ok" and nil or HOSTILE }
end

local function lease(name, owner, expires)
  return { name = name, owner = owner, token = 7, acquired_at = NOW - 60000, renewed_at = NOW - 1000,
           expires_at = expires or NOW + 14000 }
end

local function replica(owner, t)
  t = t or {}
  return { owner = owner, host = t.host or "h1", pid = 1, version = t.version or "0.1.0",
           started_at = NOW - 60000, heartbeat = t.beat or NOW - 100, draining = t.draining or false,
           jobs_hash = t.hash or "aa", jobs = "a\nb\n" }
end

local function local_job(name)
  return { name = name, schedule = "every 1m", kind = "every", singleton = true, lease_ms = 15000,
           next = NOW + 30000 }
end

-- Two failing jobs (one with a hostile name), one ok; three replicas.
local function input(t)
  t = t or {}
  local fail1, fail2, ok = run("boom", NOW - 60000, A, "failed"), run(HOSTILE, NOW - 60000, B, "timeout"),
    run("tick", NOW - 5000, A, "ok")
  return {
    provider = "sqlite", now = NOW, lease_ms = 15000,
    leases = t.leases or { lease("boom", A), lease(HOSTILE, B), lease("tick", A) },
    runs = t.runs or {
      boom = { job = "boom", last = fail1, failed = fail1, fails = 3 },
      [HOSTILE] = { job = HOSTILE, last = fail2, failed = fail2, fails = 1 },
      tick = { job = "tick", last = ok, ok = ok, fails = 0, handled_at = ok.scheduled_at },
    },
    locals = t.locals or { local_job("boom"), local_job(HOSTILE), local_job("tick") },
    replicas = t.replicas or { replica(A), replica(B, { draining = true }),
                               replica(C, { beat = NOW - 60000, version = "0.0.9" }) },
    page = t.page,
  }
end

local function health(html)
  local class, text = html:match('<span id="health"([^>]*)>(.-)</span>')
  return text, class
end

-- What is left of the page once attribute values are blanked: a tag there
-- is an element, not text.
local function tags_only(html)
  return (html:gsub('="[^"]*"', '=""'))
end

describe("leash.web.render", function()
  it("says how many jobs are failing in the header, not that all is fine", function()
    local text, class = health(web.render(input(), {}))
    assert.equal("2 jobs failing", text)
    assert.equal(' class="bad"', class)
  end)

  it("says all jobs are ok when they are, and what else is wrong when something is", function()
    local ok = run("tick", NOW - 5000, A, "ok")
    local quiet = input { leases = { lease("tick", A) }, runs = { tick = { job = "tick", last = ok, ok = ok,
      fails = 0, handled_at = ok.scheduled_at } }, locals = { local_job("tick") },
      replicas = { replica(A) } }
    local text, class = health(web.render(quiet, {}))
    assert.equal("all 1 job ok", text)
    assert.equal(' class="good"', class)
    -- An unheld job (long past a hand-off), the loop's health, a drift.
    quiet.leases[1].expires_at = NOW - 60000
    quiet.replicas = { replica(A), replica(B, { hash = "bb" }) }
    text = health(web.render(quiet, { health = "the scheduler's loop has not turned for 6.0s" }))
    assert.equal("1 job unheld; 1 replica warning; the scheduler&#39;s loop has not turned for 6.0s", text)
    -- Unheld for less than two leases is a hand-off: not a problem.
    quiet.leases[1].expires_at = NOW - 1000
    quiet.replicas = { replica(A) }
    assert.equal("all 1 job ok", (health(web.render(quiet, {}))))
    -- A store that cannot be read.
    text, class = health(web.render(nil, { error = "cannot list the leases in the sqlite store: <locked>" }))
    assert.equal("cannot list the leases in the sqlite store: &lt;locked&gt;", text)
    assert.equal(' class="bad"', class)
    -- A page of a longer list says so.
    local paged = input { page = { offset = 0, total = 1200 } }
    paged.runs = {}
    assert.equal("all 3 jobs ok (the first 3 of 1200 jobs)", (health(web.render(paged, {}))))
  end)

  it("counts jobs as the script does", function()
    assert.equal("failing", web.job_kind { state = "failing", in_jobs_dir = false })
    assert.equal("ok", web.job_kind { state = "overdue", in_jobs_dir = false })
    assert.equal("overdue", web.job_kind { state = "overdue", in_jobs_dir = true })
    assert.equal("unheld", web.job_kind { state = "unheld", in_jobs_dir = true, lease_ms = 1000 })
    assert.equal("ok", web.job_kind { state = "unheld", in_jobs_dir = true, unheld_ms = 2000, lease_ms = 1000 })
    assert.equal("unheld", web.job_kind { state = "unheld", in_jobs_dir = true, unheld_ms = 2001, lease_ms = 1000 })
    assert.equal("paused", web.job_kind { state = "paused", in_jobs_dir = true })
  end)

  it("renders the jobs table as the script builds it", function()
    local html = web.render(input(), {})
    local row = html:match('<tr data%-job="boom">(.-)</tr>')
    assert.is_string(row)
    assert.matches('<td class="state state%-failing">failing</td>', row)
    assert.matches('<td class="last o%-failed" data%-outcome="failed" title="on ' .. A:gsub("%p", "%%%0")
      .. '\n&lt;img', row)
    assert.matches('failed 58.8s ago</td>', row, 1, true)
    assert.matches('<td class="mono holder" title="' .. A .. '">' .. A .. ' (token 7)</td>', row, 1, true)
    assert.matches('<td class="opt">in 30.0s</td>', row, 1, true)
  end)

  it("renders the replicas: state, version, share and drift", function()
    local reps = { replica(A), replica(B, { draining = true, version = "0.2.0" }),
                   replica(C, { beat = NOW - 60000, version = "0.0.9" }) }
    local html = web.render(input { replicas = reps }, {})
    local function row(owner)
      return assert(html:match('<tr data%-replica="' .. owner:gsub("%p", "%%%0") .. '">(.-)</tr>'), owner)
    end
    assert.matches('<td class="rstate rstate%-live">live</td><td class="mono version">0%.1%.0</td>', row(A))
    assert.matches('<td class="leases">2</td><td class="share">67%</td>', row(A), 1, true)
    assert.matches('<td class="rstate rstate%-draining">draining</td><td class="mono version">0%.2%.0</td>', row(B))
    assert.matches('<td class="drift differs">version differs</td>', row(B), 1, true)
    assert.matches('<td class="drift differs">version differs</td>', row(A), 1, true)
    assert.matches('<td class="rstate rstate%-dead">dead</td><td class="mono version">0%.0%.9</td>', row(C))
    assert.matches('<td class="drift">%-</td>', row(C))
    -- Without presence rows, a row says so.
    local none = input()
    none.replicas = nil
    assert.matches("no replica has reported its presence", web.render(none, {}), 1, true)
  end)

  it("marks the replica whose jobs/ differs from the most", function()
    local reps = { replica(A), replica(B), replica(C, { hash = "zz" }) }
    local html = web.render(input { replicas = reps }, {})
    assert.matches('<tr data%-replica="web%-3:7:00000001">.-<td class="drift differs">jobs/ differs</td>', html)
    assert.matches('<tr data%-replica="web%-1:4242:a1b2c3d4">.-<td class="drift">%-</td>', html)
    assert.matches('<ul id="warnings"><li>the live replicas define the same jobs differently', html, 1, true)
  end)

  it("draws the timeline's window: its links, its axis, 1h unless asked", function()
    local html = web.render(input(), {})
    assert.matches('<div id="timeline" data-window="1h">', html, 1, true)
    assert.matches('<div id="axis"><span>-60m</span><span>-45m</span><span>-30m</span><span>-15m</span><span>now</span></div>', html, 1, true)
    html = web.render(input(), { window = "24h" })
    assert.matches('<a href="?window=24h" data-window="24h" class="on" aria-current="true">24 h</a>', html, 1, true)
    assert.matches('<div id="axis"><span>-24h</span><span>-18h</span><span>-12h</span><span>-6h</span><span>now</span></div>', html, 1, true)
    assert.matches('the last <span id="span">24 hours</span>', html, 1, true)
    html = web.render(nil, { window = "5m" })
    assert.matches('<span>-5m</span><span>-3m45s</span><span>-2m30s</span><span>-1m15s</span><span>now</span>', html, 1, true)
    local none, err = web.render(input(), { window = "2h" })
    assert.is_nil(none)
    assert.equal("window: expected 5m, 1h, 24h", err)
  end)

  it("escapes every text from the store, and the script is the same on every page", function()
    local reps = { replica(HOSTILE .. ":1:00", { host = HOSTILE, version = "<i>9</i>", hash = "<b>" }) }
    local html = web.render(input { replicas = reps }, {})
    local body = tags_only(html:match("<body>(.*)<script>"))
    assert.is_nil(body:find("<img", 1, true))
    assert.is_nil(body:find("<i>", 1, true))
    assert.matches('&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;&#39;&quot;', html, 1, true)
    assert.matches('<td class="mono version">&lt;i&gt;9&lt;/i&gt;</td>', html, 1, true)
    assert.equal("a&lt;&gt;&amp;&quot;&#39;b\u{FFFD}c\u{FFFD}", web.esc("a<>&\"'b\255c\1"))
    -- The same script whatever the data (a Content-Security-Policy may
    -- name its hash).
    local script = "<script>" .. html:match("<script>(.-)</script>") .. "</script>"
    assert.equal(web.SCRIPT, script)
    -- ... whose hash the policy names (SHA-256 checked against FIPS 180-4's vectors).
    local function hex(d) return (d:gsub(".", function(c) return ("%02x"):format(c:byte()) end)) end
    assert.equal("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", hex(web.sha256("abc")))
    assert.equal("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1",
      hex(web.sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")))
    assert.equal("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", hex(web.sha256("")))
    assert.equal("YWJj YWI= YQ==", web.base64("abc") .. " " .. web.base64("ab") .. " " .. web.base64("a"))
    assert.equal("'sha256-" .. web.base64(web.sha256(script:sub(9, -10))) .. "'", web.SCRIPT_SOURCE)
    for _, s in ipairs(web.shells()) do
      assert.matches(web.SCRIPT, s.html, 1, true)
      assert.equal("loading ...", (health(s.html)))
    end
  end)
end)

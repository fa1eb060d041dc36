-- [http] listen: real `leash run` replicas serving /metrics, /healthz,
-- /api/status, /api/history and the page, asked through curl.  On SQLite two
-- replicas with a job that fails (and a hostile replica id and error):
-- status codes, 405, 404, HEAD, headers, the token, /healthz going 503 while
-- the loop is stopped, the server restarted when it dies and gone with its
-- parent.  On every provider: the API's JSON equals the commands', a hostile
-- job name included.  And a port in use or an address not on this host:
-- exit 2 before the scheduler starts.
local L = require "e2e"
local R = require "replicas"
local H = require "http"
local json = require "dkjson"
local providers = require "providers"

local HOSTILE_REPLICA = [[<b>r&amp;"'</b>]]
local HOSTILE_ERROR = [[<script>alert('x')</script> & "boom"]]
local HOSTILE_JOB = [[<img src=x onerror=alert(1)>"&'</td>]]

local JOBS = {
  tick = 'return { every = "1s", run = function(ctx) end }\n',
  boom = ('return { every = "1s", run = function(ctx) error(%q, 0) end }\n'):format(HOSTILE_ERROR),
}

describe("http server [sqlite, two replicas]", function()
  local p = { provider = "sqlite", path = os.getenv("LEASH_TEST_TMP") .. "/http.db" }
  local tbl = "http_" .. math.random(1, 1e6)
  local ports, ds, procs = {}, {}, {}

  setup(function()
    for i = 1, 2 do
      ports[i] = H.free_port()
      ds[i], procs[i] = H.replica(p, tbl, ports[i], { jobs = JOBS })
    end
    for i = 1, 2 do H.wait_up(ds[i].url .. "/healthz", 15) end
    H.wait_outcome(ds[1].url, "boom", "failed")
  end)

  teardown(function() R.stop_all(procs) end)

  it("answers GET on each endpoint, with its content type", function()
    local want = {
      ["/"] = "text/html; charset=utf-8",
      ["/metrics"] = "text/plain; version=0.0.4; charset=utf-8",
      ["/healthz"] = "text/plain; charset=utf-8",
      ["/api/status"] = "application/json",
      ["/api/history"] = "application/json",
    }
    for _, d in ipairs(ds) do
      for path, ctype in pairs(want) do
        local status, h = H.request(d.url .. path)
        assert.equal(200, status, path)
        assert.equal(ctype, h["content-type"], path)
        assert.equal("nosniff", h["x-content-type-options"], path)
        assert.equal("no-store", h["cache-control"], path)
      end
    end
    local _, h = H.request(ds[1].url .. "/")
    assert.matches("default-src 'none'", h["content-security-policy"], 1, true)
    assert.matches("connect-src 'self'", h["content-security-policy"], 1, true)
    -- Only the page's own script runs: named by its hash, not any inline one.
    local script_src = h["content-security-policy"]:match("script%-src ([^;]*)")
    assert.matches("^'sha256%-[%w+/]+=*'$", script_src)
  end)

  it("/healthz says ok, /metrics is valid Prometheus text (promtool)", function()
    local status, _, body = H.request(ds[2].url .. "/healthz")
    assert.equal(200, status)
    assert.equal("ok\n", body)
    local _, _, text = H.request(ds[1].url .. "/metrics")
    assert.matches("leash_build_info{", text, 1, true)
    local f = L.tmpdir("metrics") .. "/metrics.txt"
    L.write(f, text)
    local code, out, err = L.sh("promtool check metrics < " .. L.quote(f))
    assert.equal(0, code, out .. err)
  end)

  it("HEAD is answered without a body; every other method is 405", function()
    local status, h, body = H.request(ds[1].url .. "/api/status", { method = "HEAD" })
    assert.equal(200, status)
    assert.equal("application/json", h["content-type"])
    assert.equal("", body)
    for _, m in ipairs { "POST", "PUT", "DELETE", "PATCH", "OPTIONS" } do
      for _, path in ipairs { "/", "/metrics", "/api/status", "/nothing" } do
        local st, hh = H.request(ds[1].url .. path, { method = m, data = m ~= "OPTIONS" and "x=1" or nil })
        assert.equal(405, st, m .. " " .. path)
        assert.equal("GET, HEAD", hh["allow"], m .. " " .. path)
      end
    end
  end)

  it("serves no files: unknown paths and traversal are 404", function()
    for _, path in ipairs { "/index.html", "/../../etc/passwd", "/%2e%2e/etc/passwd", "/api",
                            "/api/status/x", "/metrics/", "//etc/passwd", "/leash.ini" } do
      local status, _, body = H.request(ds[1].url .. path)
      assert.equal(404, status, path)
      assert.is_nil(body:find("root:", 1, true), path)
    end
  end)

  it("/api/status and /api/history give the commands' JSON, both replicas alike", function()
    for _, d in ipairs(ds) do
      H.same_json({ "status", "-c", d.config, "--json" }, d.url .. "/api/status", d.env)
      H.same_json({ "history", "-c", d.config, "--json", "boom", "--limit", "3" },
        d.url .. "/api/history?job=boom&limit=3", d.env)
      H.same_json({ "history", "-c", d.config, "--json", "--since", "1h" },
        d.url .. "/api/history?since=1h", d.env)
    end
  end)

  it("/api/history refuses bad arguments with 400 and the command's reason", function()
    for _, q in ipairs { "limit=0", "limit=x", "since=yesterday", "limit=100000" } do
      local status, v = H.get_json(ds[1].url .. "/api/history?" .. q)
      assert.equal(400, status, q)
      local code, _, err = L.leash({ "history", "-c", ds[1].config,
        "--" .. q:match("^(%a+)="), q:match("=(.*)$") }, ds[1].env)
      assert.equal(2, code)
      assert.matches(v.error, err, 1, true)
    end
  end)

  it("shows the failed run, the hostile replica id and error text escaped as JSON", function()
    -- leash.config refuses such a replica name; another version's row may hold one.
    local s = R.open(p, tbl, 5000)
    assert.is_true(s:try_acquire("ghost", HOSTILE_REPLICA .. ":1:00000001", 600000))
    s:close()
    local _, v, body = H.get_json(ds[1].url .. "/api/status")
    local boom
    for _, j in ipairs(v.jobs) do if j.name == "boom" then boom = j end end
    assert.equal("failing", boom.state)
    assert.equal("failed", boom.last_failure.outcome)
    assert.equal(HOSTILE_ERROR, boom.last_failure.error)
    local owners = {}
    for _, r in ipairs(v.leases or {}) do owners[#owners + 1] = r.owner end
    assert.matches(HOSTILE_REPLICA, table.concat(owners, " "), 1, true)
    -- JSON escaping: no raw control character, quotes escaped.
    assert.equal("\n", body:sub(-1))         -- the line ends as the command's
    local at = body:sub(1, -2):find("[%z\1-\31]")
    assert.is_nil(at, at and body:sub(at - 40, at + 40))
    assert.matches([[\"boom\"]], body, 1, true)
  end)

  it("the page is one self-contained document, its first paint drawn by the server", function()
    local _, _, page = H.request(ds[1].url .. "/")
    assert.matches("^<!doctype html>", page)
    assert.is_nil(page:find("<script src", 1, true))
    assert.is_nil(page:find("<link", 1, true))
    assert.is_nil(page:find("https?://"))
    assert.is_nil(page:find("innerHTML", 1, true))
    -- The jobs table is in the HTML, hostile text as entities.
    assert.matches('<tr data-job="boom">', page, 1, true)
    assert.matches('<span id="health" class="bad">1 job failing', page, 1, true)
    assert.is_nil(page:find(HOSTILE_ERROR, 1, true))
    assert.is_nil(page:find(HOSTILE_REPLICA, 1, true))
    -- One script, the same on every page (the Content-Security-Policy
    -- allows inline scripts only).
    local _, _, again = H.request(ds[2].url .. "/?window=5m")
    assert.equal(page:match("<script>.-</script>"), again:match("<script>.-</script>"))
    local n = 0
    for _ in page:gmatch("<script") do n = n + 1 end
    assert.equal(1, n)
  end)

  it("/healthz is 503 with the reason while the loop does not turn", function()
    local d, proc = ds[2], procs[2]
    proc:signal("STOP")
    -- The store's silence shows first (the lease is 2s), the loop's at 5s.
    local seen = {}
    local got = L.wait_for(function()
      local status, _, body = H.request(d.url .. "/healthz")
      if status == 503 then seen[#seen + 1] = body end
      return status == 503 and body:find("loop has not turned for", 1, true) and body
    end, 10)
    proc:signal("CONT")
    assert.is_string(got, "healthz did not say the loop stopped: " .. table.concat(seen, " | "))
    assert.matches("the lease store has not answered for", seen[1], 1, true)
    H.wait_up(d.url .. "/healthz", 10)
  end)

  it("is named `leash: http` in ps (its command line and its comm)", function()
    local pid = H.server_pid(procs[1])
    assert(L.wait_for(function()
      return L.read(("/proc/%d/comm"):format(pid)) == "leash: http\n"
    end, 10), "comm: " .. tostring(L.read(("/proc/%d/comm"):format(pid))))
    assert.equal("leash: http", (L.read(("/proc/%d/cmdline"):format(pid)):gsub("%z+$", "")))
  end)

  it("a server that dies is started again, the same port serving", function()
    local proc = procs[1]
    local pid = H.server_pid(proc)
    assert.is_true(L.kill(pid, "KILL"))
    assert.is_truthy(proc:wait_log("starting the server again", 5))
    local again = assert(L.wait_for(function()
      local p2 = H.server_pid(proc)
      return p2 ~= pid and p2
    end, 10))
    assert.is_true(L.alive(again))
    H.wait_up(ds[1].url .. "/healthz", 10)
    -- The scheduler went on meanwhile.
    assert.is_true(proc:alive())
  end)

  it("the server dies with its parent", function()
    local pid = H.server_pid(procs[2])
    procs[2]:signal("KILL")
    procs[2]:wait(5)
    assert.is_truthy(L.wait_for(function() return not L.alive(pid) end, 5),
      "the server outlived its parent")
  end)
end)

describe("http server with [http] token_env", function()
  local p = { provider = "sqlite", path = os.getenv("LEASH_TEST_TMP") .. "/http_token.db" }
  local d, proc

  setup(function()
    d, proc = H.replica(p, "tok_" .. math.random(1, 1e6), H.free_port(), {
      jobs = { tick = JOBS.tick }, http = { token_env = "LEASH_TEST_HTTP_TOKEN" },
      env = { LEASH_TEST_HTTP_TOKEN = "s3cret-t0ken" } })
    H.wait_up(d.url .. "/healthz", 15, { headers = { Authorization = "Bearer s3cret-t0ken" } })
  end)

  teardown(function() R.stop_all { proc } end)

  it("is 401 without the bearer token or with a wrong one, 200 with it", function()
    for _, path in ipairs { "/metrics", "/healthz", "/api/status", "/api/history" } do
      local st, h = H.request(d.url .. path)
      assert.equal(401, st, path)
      assert.matches("^Bearer", h["www-authenticate"], nil, false, path)
      for _, bad in ipairs { "Bearer wrong", "Bearer s3cret-t0ke", "Bearer s3cret-t0ken2",
                             "Basic czNjcmV0LXQwa2Vu", "s3cret-t0ken", "Bearer " } do
        assert.equal(401, (H.request(d.url .. path, { headers = { Authorization = bad } })), path .. " " .. bad)
      end
      assert.equal(200, (H.request(d.url .. path, { headers = { Authorization = "Bearer s3cret-t0ken" } })), path)
    end
    -- Without the token the page holds no data; its script sends the
    -- token from #token=.
    local st, _, page = H.request(d.url .. "/")
    assert.equal(200, st)
    assert.is_nil(page:find('data-job="tick"', 1, true))
    local _, _, with = H.request(d.url .. "/", { headers = { Authorization = "Bearer s3cret-t0ken" } })
    assert.matches('<tr data-job="tick">', with, 1, true)
    -- 405 whatever the token.
    assert.equal(405, (H.request(d.url .. "/api/status", { method = "POST" })))
  end)
end)

describe("http server while the store does not answer", function()
  -- PostgreSQL on a port nobody listens on: every connect is refused.
  local p = { provider = "postgres", conninfo = "host=127.0.0.1 port=1 dbname=none" }
  local d, proc

  setup(function()
    d, proc = H.replica(p, "down", H.free_port(), { jobs = { tick = JOBS.tick } })
    H.wait_up(d.url .. "/metrics", 15)
  end)

  teardown(function() R.stop_all { proc } end)

  it("/healthz is 503 naming the store, /api is 503 with the reason as JSON, /metrics still 200", function()
    local status, _, body = H.request(d.url .. "/healthz")
    assert.equal(503, status)
    assert.matches("the lease store has not answered", body, 1, true)
    for _, path in ipairs { "/api/status", "/api/history" } do
      local st, h, b = H.request(d.url .. path)
      assert.equal(503, st, path)
      assert.equal("application/json", h["content-type"])
      local v = assert(json.decode(b), b)
      assert.matches("cannot open the postgres store", v.error, 1, true)
    end
    assert.equal(200, (H.request(d.url .. "/metrics")))
  end)

  it("the page says in its header that the store cannot be read", function()
    local st, _, page = H.request(d.url .. "/")
    assert.equal(200, st)
    assert.matches('<span id="health" class="bad">cannot open the postgres store', page, 1, true)
  end)
end)

describe("http server at start", function()
  local p = { provider = "sqlite" }

  local function refused(listen, want)
    local dir = L.tmpdir("http-start")
    p.path = dir .. "/leash.db"
    -- public: the address need not be loopback (192.0.2.1 is not).
    local d = L.dir { config = R.config(p, "st", { http = { listen = listen, public = "true" } }),
                      jobs = { tick = JOBS.tick } }
    local proc = L.spawn(d)
    local rc = proc:wait(10)
    if not rc then proc:stop() end
    assert.equal(2, rc, proc:log_text())
    assert.matches("[http] listen: " .. listen .. ": " .. want, proc:log_text(), 1, true)
    assert.is_nil(proc:log_text():find("holding the lease", 1, true))
    assert.is_false(L.exists(p.path), "the scheduler opened the store")
    -- leash check has nothing against the value itself.
    assert.equal(0, (L.leash { "check", "-c", d.config }))
  end

  it("a port in use: exit 2 naming the key, the scheduler not started", function()
    local port = H.free_port()
    local holder = L.spawn_cmd(("exec python3 -c %s"):format(L.quote(
      "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', " .. port .. ")); "
      .. "s.listen(); print('listening', flush=True); time.sleep(30)")))
    assert(holder:wait_log("listening", 5))
    refused("127.0.0.1:" .. port, "the port is in use")
    holder:stop()
  end)

  it("an address not on this host: exit 2 naming the key", function()
    -- 192.0.2.0/24 is TEST-NET-1: no host has it; nothing is sent, bind only.
    refused("192.0.2.1:" .. H.free_port(), "the address is not one of this host's")
  end)
end)

-- The store-reading endpoints on every provider: the commands' JSON, with a
-- hostile job name (a lease row and ledger rows written through the store
-- handle, as another replica or version could) and a hostile error.
for _, x in ipairs(R.list_of()) do
  local p = x.provider == "sqlite"
    and { provider = "sqlite", path = os.getenv("LEASH_TEST_TMP") .. "/http_api.db" } or x

  describe("http /api [" .. p.provider .. "]", function()
    local tbl = "hapi_" .. math.random(1, 1e6)
    local d, proc

    setup(function()
      local s = R.open(p, tbl, 5000)
      local _, now = assert(s:list())
      assert.is_true(s:try_acquire(HOSTILE_JOB, "<i>other</i>:1:00000001", 600000))
      assert.is_true(s:record_runs({
        { job = HOSTILE_JOB, scheduled_at = now - 60000, owner = "<i>other</i>:1:00000001",
          token = 1, outcome = "failed", started_at = now - 59990, ended_at = now - 59000,
          duration_ms = 990, exit_code = 1, error = HOSTILE_ERROR .. "\n\tline two" },
        { job = HOSTILE_JOB, scheduled_at = now - 30000, owner = "<i>other</i>:1:00000001",
          token = 1, outcome = "ok", started_at = now - 29990, ended_at = now - 29000,
          duration_ms = 990, exit_code = 0 },
      }))
      s:close()
      d, proc = H.replica(p, tbl, H.free_port(), {
        jobs = { hourly = 'return { every = "1h", run = function(ctx) end }\n' } })
      H.wait_up(d.url .. "/healthz", 20)
    end)

    teardown(function() R.stop_all { proc } end)

    it("/api/status and /api/history equal leash status --json and leash history --json", function()
      local _, body = H.same_json({ "status", "-c", d.config, "--json" }, d.url .. "/api/status", d.env)
      local v = json.decode(body)
      local names = {}
      for _, j in ipairs(v.jobs) do names[j.name] = j end
      assert.is_table(names[HOSTILE_JOB])
      assert.is_table(names.hourly)
      assert.equal(HOSTILE_ERROR .. "\n\tline two", names[HOSTILE_JOB].last_failure.error)
      local _, hbody = H.same_json({ "history", "-c", d.config, "--json", HOSTILE_JOB },
        d.url .. "/api/history?job=" .. HOSTILE_JOB:gsub("[^%w]", function(c)
          return ("%%%02X"):format(c:byte()) end), d.env)
      local hv = json.decode(hbody)
      assert.equal(2, #hv.runs)
      assert.equal(HOSTILE_JOB, hv.runs[1].job)
      assert.is_nil(hbody:sub(1, -2):find("[%z\1-\31]"))
    end)

    it("/ draws the same jobs and the replica, the hostile name as entities", function()
      local st, _, page = H.request(d.url .. "/")
      assert.equal(200, st)
      assert.matches('<tr data-job="hourly">', page, 1, true)
      assert.matches('<tr data-job="&lt;img src=x onerror=alert(1)&gt;&quot;&amp;&#39;&lt;/td&gt;">', page, 1, true)
      assert.matches('<tr data-replica="' .. proc.owner .. '"><td class="mono name">' .. proc.owner
        .. '</td><td class="rstate rstate-live">live</td>', page, 1, true)
      assert.matches('<span id="health" class="good">all 2 jobs ok</span>', page, 1, true)
    end)
  end)
end

-- [http] safe to expose: a listen address other hosts reach needs a token
-- (or public = true), the Host header must name this server (DNS
-- rebinding), "Bearer" in any case, since before 1970 is 400, one access
-- log line per request, the server below the scheduler's priority, a
-- request that trickles is closed once it took 10 s, 100 trickling clients
-- leave room for /healthz, and HTTPS with [http] cert and key.
local L = require "e2e"
local R = require "replicas"
local H = require "http"

local ROOT = os.getenv("LEASH_ROOT") or "."
local TOKEN = "s3cret-t0ken"
local AUTH = { Authorization = "Bearer " .. TOKEN }
local JOBS = { tick = 'return { every = "1s", run = function(ctx) end }\n' }

-- The trickler (tests/support/http_trickle.py) against port: n connections
-- sending a request of 60 bytes a byte every 0.5 s (30 s for the whole).
local function trickle(port, n)
  return L.spawn_cmd(("exec timeout 60 python3 %s %d %d 0.5 60"):format(
    L.quote(ROOT .. "/tests/support/http_trickle.py"), port, n))
end

local function trickled(proc)
  assert.is_truthy(proc:wait(60), "the trickler did not end")
  local line = proc:log_text():match("opened=[^\n]*")
  assert.is_string(line, proc:log_text())
  print("trickle: " .. line)
  local t = {}
  for k, v in line:gmatch("([%w_]+)=([%d.]+)") do t[k] = tonumber(v) end
  return t
end

local function nice(pid)
  local stat = L.read("/proc/" .. pid .. "/stat")
  -- Field 19, after the command in parentheses (which may hold spaces).
  local rest = assert(stat:match("%) (.*)$"))
  local f = {}
  for w in rest:gmatch("%S+") do f[#f + 1] = w end
  return tonumber(f[17])
end

describe("http [check and run] who may be served", function()
  local function config(http)
    local dir = L.tmpdir("http-safe")
    return L.dir { config = R.config({ provider = "sqlite", path = dir .. "/leash.db" }, "hs",
      { http = http }), jobs = JOBS }
  end

  it("refuse a listen address that is not loopback without a token, unless public = true", function()
    for _, listen in ipairs { "0.0.0.0:" .. H.free_port(), "[::]:" .. H.free_port() } do
      local d = config { listen = listen }
      local code, _, err = L.leash { "check", "-c", d.config }
      assert.equal(2, code, err)
      assert.matches("[http] listen: " .. listen .. " is not a loopback address and [http] token_env is empty",
        err, 1, true)
      local proc = L.spawn(d)
      local rc = proc:wait(10)
      if not rc then proc:stop() end
      assert.equal(2, rc, proc:log_text())
      assert.matches("[http] listen: " .. listen .. " is not a loopback address", proc:log_text(), 1, true)
      assert.equal(0, (L.leash { "check", "-c", config { listen = listen, public = "true" }.config }))
      assert.equal(0, (L.leash { "check", "-c", config { listen = listen, token_env = "T" }.config }))
    end
    for _, listen in ipairs { "127.0.0.1:9", "127.1.2.3:9", "[::1]:9", "localhost:9" } do
      assert.equal(0, (L.leash { "check", "-c", config { listen = listen }.config }), listen)
    end
  end)

  it("refuse a cert without its key, an unreadable one and host names that are none", function()
    local d = config { listen = "127.0.0.1:9", cert = "nope.pem" }
    local code, _, err = L.leash { "check", "-c", d.config }
    assert.equal(2, code)
    assert.matches("[http] cert: HTTPS needs both cert and key: [http] key is not set", err, 1, true)
    assert.matches("[http] cert: cannot read " .. d.dir .. "/nope.pem", err, 1, true)
    L.write(d.dir .. "/k.pem", "not a key\n")
    code, _, err = L.leash { "check", "-c", config { listen = "127.0.0.1:9", cert = d.dir .. "/k.pem",
      key = d.dir .. "/k.pem" }.config }
    assert.equal(2, code)
    assert.matches("[http] key: " .. d.dir .. "/k.pem is not a PEM file", err, 1, true)
    code, _, err = L.leash { "check", "-c", config { listen = "127.0.0.1:9", hosts = "a.example, b:80" }.config }
    assert.equal(2, code)
    assert.matches('[http] hosts: "b:80" is not a host name', err, 1, true)
  end)
end)

describe("http server [token, hosts, access_log]", function()
  local p = { provider = "sqlite", path = os.getenv("LEASH_TEST_TMP") .. "/http_safe.db" }
  local d, proc, port

  setup(function()
    port = H.free_port()
    local jobs = { tick = JOBS.tick }
    for _, n in ipairs { "a1", "a2", "a3", "a4" } do jobs[n] = 'return { every = "1h", run = function(ctx) end }\n' end
    d, proc = H.replica(p, "hsafe_" .. math.random(1, 1e6), port, {
      jobs = jobs, env = { LEASH_TEST_HTTP_TOKEN = TOKEN },
      http = { token_env = "LEASH_TEST_HTTP_TOKEN", hosts = "leash.example.org 192.0.2.7",
               access_log = "true" } })
    H.wait_up(d.url .. "/healthz", 15, { headers = AUTH })
  end)

  teardown(function() R.stop_all { proc } end)

  it("refuses a Host that is not this server's (DNS rebinding) with 421", function()
    for _, host in ipairs { "evil.example", "evil.example:" .. port, "leash.example.org.evil.example",
                            "192.0.2.8", "[2001:db8::1]:" .. port } do
      for _, path in ipairs { "/api/status", "/", "/healthz" } do
        local st, _, body = H.request(d.url .. path, { headers = { Host = host, Authorization = AUTH.Authorization } })
        assert.equal(421, st, host .. " " .. path)
        assert.is_nil(body:find("tick", 1, true))
      end
    end
    for _, host in ipairs { "leash.example.org", "LEASH.Example.ORG:" .. port, "127.0.0.1:" .. port,
                            "localhost", "[::1]:" .. port, "127.0.0.2", "192.0.2.7:" .. port } do
      assert.equal(200, (H.request(d.url .. "/api/status", { headers = { Host = host, Authorization = AUTH.Authorization } })), host)
    end
  end)

  it("takes the Bearer scheme in any case, the token exactly", function()
    for _, a in ipairs { "bearer " .. TOKEN, "BEARER " .. TOKEN, "Bearer  " .. TOKEN } do
      assert.equal(200, (H.request(d.url .. "/healthz", { headers = { Authorization = a } })), a)
    end
    for _, a in ipairs { "bearer " .. TOKEN:upper(), "Bearer" .. TOKEN, "Bearerx " .. TOKEN, "bearer" } do
      assert.equal(401, (H.request(d.url .. "/healthz", { headers = { Authorization = a } })), a)
    end
  end)

  it("answers 400 to a since before 1970, as the command refuses it", function()
    for _, since in ipairs { "1969-12-31T23:59:59Z", "1900-01-01T00:00:00Z" } do
      local st, v = H.get_json(d.url .. "/api/history?since=" .. since, { headers = AUTH })
      assert.equal(400, st, since)
      assert.matches("before 1970", v.error, 1, true)
      local code, _, err = L.leash({ "history", "-c", d.config, "--since", since }, d.env)
      assert.equal(2, code)
      assert.matches(v.error, err, 1, true)
    end
  end)

  it("pages /api/status: offset and limit, jobs_total and next_offset, bad ones 400", function()
    local function page(q)
      local st, v, body = H.get_json(d.url .. "/api/status" .. q, { headers = AUTH })
      assert.equal(200, st, body)
      local names = {}
      for _, j in ipairs(v.jobs) do names[#names + 1] = j.name end
      local leases = {}
      for _, l in ipairs(v.leases) do leases[#leases + 1] = l.name end
      table.sort(leases)
      return v, table.concat(names, " "), table.concat(leases, " ")
    end
    local all = page("")
    assert.equal(5, all.jobs_total)
    assert.equal(0, all.offset)
    assert.is_nil(all.next_offset)
    local v, names, leases = page("?limit=2")
    assert.equal("a1 a2", names)
    assert.equal(5, v.jobs_total)
    assert.equal(2, v.next_offset)
    -- The leases of the page's jobs only.
    assert.is_nil(leases:find("tick", 1, true))
    v, names = page("?offset=2&limit=2")
    assert.equal("a3 a4", names)
    assert.equal(4, v.next_offset)
    v, names = page("?offset=4&limit=2")
    assert.equal("tick", names)
    assert.is_nil(v.next_offset)
    for _, q in ipairs { "limit=0", "limit=1001", "limit=x", "offset=-1", "offset=1e3" } do
      local st, e = H.get_json(d.url .. "/api/status?" .. q, { headers = AUTH })
      assert.equal(400, st, q)
      assert.matches("^%a+: expected a whole number", e.error)
    end
  end)

  it("logs one line per request with [http] access_log", function()
    H.request(d.url .. "/healthz?probe=1", { headers = AUTH })
    H.request(d.url .. "/nothing")
    local ok = proc:wait_log("http: request client=127%.0%.0%.1 method=GET path=\"?/healthz%?probe=1\"? status=200", 5)
    assert.is_string(ok, proc:log_text())
    assert.is_string(proc:wait_log("path=/nothing status=401", 5))
  end)

  it("runs the server below the scheduler's priority", function()
    local server = H.server_pid(proc)
    assert.is_true(nice(server) > nice(proc.pid), ("server nice %d, scheduler %d"):format(
      nice(server), nice(proc.pid)))
  end)

  it("closes a connection whose request has not arrived whole within 10 s", function()
    local t = trickled(trickle(port, 1))
    assert.equal(1, t.closed_early, "the trickled request was served")
    assert.equal(0, t.answered)
  end)

  it("answers /healthz while 100 clients trickle their requests", function()
    local tr = trickle(port, 100)
    assert.is_truthy(tr:wait_log("connected 100", 20), tr:log_text())
    -- (A connection that meets the moment a trickler is closed to make
    -- room may be reset: asked again, while they all still trickle.)
    local st, body
    for _ = 1, 10 do
      local ok, a, _, c = pcall(H.request, d.url .. "/healthz", { headers = AUTH, timeout = 15 })
      if ok then st, body = a, c end
      if st == 200 then break end
      L.sleep(0.3)
    end
    assert.equal(200, st)
    assert.equal("ok\n", body)
    assert.is_true(tr:alive(), "the tricklers were done before /healthz was asked")
    local t = trickled(tr)
    assert.equal(100, t.closed_early, "a trickled request was served")
    H.wait_up(d.url .. "/healthz", 15, { headers = AUTH })
  end)
end)

describe("http server with [http] cert and key", function()
  local p = { provider = "sqlite", path = os.getenv("LEASH_TEST_TMP") .. "/http_tls.db" }
  local d, proc, dir, port

  setup(function()
    dir = L.tmpdir("tls")
    L.write(dir .. "/tmpl", 'cn = "leash test"\nip_address = "127.0.0.1"\ndns_name = "localhost"\n'
      .. "expiration_days = 2\nca\ncert_signing_key\nsigning_key\nencryption_key\ntls_www_server\n")
    local code, out, err = L.exec { "certtool", "--generate-privkey", "--key-type", "ecdsa",
      "--outfile", dir .. "/key.pem" }
    assert.equal(0, code, out .. err)
    code, out, err = L.exec { "certtool", "--generate-self-signed", "--load-privkey",
      dir .. "/key.pem", "--template", dir .. "/tmpl", "--outfile", dir .. "/cert.pem" }
    assert.equal(0, code, out .. err)
    port = H.free_port()
    d, proc = H.replica(p, "htls_" .. math.random(1, 1e6), port, { jobs = JOBS,
      http = { cert = dir .. "/cert.pem", key = dir .. "/key.pem" } })
    d.url = "https://127.0.0.1:" .. port
    H.wait_up(d.url .. "/healthz", 15, { cacert = dir .. "/cert.pem" })
  end)

  teardown(function() R.stop_all { proc } end)

  it("serves HTTPS, verified against its certificate, and nothing in plain HTTP", function()
    assert.is_string(proc:wait_log("http: serving https://127.0.0.1:" .. port, 5))
    local st, h = H.request(d.url .. "/api/status", { cacert = dir .. "/cert.pem" })
    assert.equal(200, st)
    assert.equal("application/json", h["content-type"])
    local code = L.exec { "curl", "-sS", "--max-time", "5", "http://127.0.0.1:" .. port .. "/healthz" }
    assert.is_not.equal(0, code)
    assert.is_true(proc:alive())
  end)
end)

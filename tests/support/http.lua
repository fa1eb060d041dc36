-- Helpers for the HTTP specs: requests through curl (a real client, not
-- ours), a free loopback port, leash run replicas with [http] listen, and
-- the JSON of the API compared with the commands' without the fields that
-- move between two reads.
local L = require "e2e"
local R = require "replicas"
local json = require "dkjson"
local assert = require "luassert"

local M = {}

-- A port nobody listens on now (the kernel's pick, let go at once).
function M.free_port()
  local code, out = L.exec { "python3", "-c",
    "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])" }
  assert(code == 0, "python3 could not find a free port")
  return tonumber(out:match("%d+"))
end

-- One request: status, headers (lower-case names), body.  o.method, o.headers
-- ({ name = value }), o.data, o.timeout (s), o.cacert (a CA file for https).
function M.request(url, o)
  o = o or {}
  local argv
  if o.method == "HEAD" then
    argv = { "curl", "-sS", "-I", "--max-time", tostring(o.timeout or 10) }
  else
    argv = { "curl", "-sS", "-i", "--max-time", tostring(o.timeout or 10), "-X", o.method or "GET" }
  end
  for k, v in pairs(o.headers or {}) do argv[#argv + 1] = "-H"; argv[#argv + 1] = k .. ": " .. v end
  if o.data then argv[#argv + 1] = "--data-binary"; argv[#argv + 1] = o.data end
  if o.cacert then argv[#argv + 1] = "--cacert"; argv[#argv + 1] = o.cacert end
  argv[#argv + 1] = "--path-as-is"
  argv[#argv + 1] = url
  local code, out, err = L.exec(argv)
  assert(code == 0, ("curl %s %s: exit %d: %s"):format(o.method or "GET", url, code, err))
  local head, body = out:match("^(.-)\r\n\r\n(.*)$")
  head = head or out
  local status = tonumber(head:match("^HTTP/%S+ (%d+)"))
  local h = {}
  for k, v in head:gmatch("\r\n([^:\r\n]+):[ \t]*([^\r\n]*)") do h[k:lower()] = v end
  return status, h, body or ""
end

-- GET url and decode its JSON body; status, value, body.
function M.get_json(url, o)
  local status, _, body = M.request(url, o)
  local v = json.decode(body)
  return status, v, body
end

-- Waits until url answers 200; its body.
function M.wait_up(url, timeout, o)
  return assert(L.wait_for(function()
    local ok, status, _, body = pcall(M.request, url, o)
    return ok and status == 200 and body
  end, timeout or 10), url .. " did not answer 200")
end

-- Fields that change between two reads a moment apart (clocks, renewals).
M.VOLATILE = { now = true, renewed_at = true, expires_at = true, expires_in_ms = true,
               lease_expires_at = true, heartbeat = true, unheld_ms = true, overdue_ms = true }

function M.strip(v)
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do
    if not M.VOLATILE[k] then out[k] = M.strip(x) end
  end
  return out
end

-- The value of a command's --json output and of the endpoint, stripped,
-- a few tries apart (a renewal or a fire between the two reads changes
-- them; on a loaded machine a command takes a good part of a second, so
-- a 1 s job's fire falls between the two reads of many tries).
function M.same_json(cmd_args, url, env, tries)
  local last
  for _ = 1, tries or 20 do
    local code, out, err = L.leash(cmd_args, env)
    assert(code == 0, table.concat(cmd_args, " ") .. ": " .. err)
    local status, _, body = M.request(url)
    assert(status == 200, url .. ": " .. status .. " " .. body)
    local a, b = M.strip(json.decode(out)), M.strip(json.decode(body))
    last = { a, b, out, body }
    local ok = pcall(assert.are.same, a, b)
    if ok then return out, body end
    L.sleep(0.05 + math.random() * 0.3)
  end
  assert.are.same(last[1], last[2])
end

-- A `leash run` replica of provider p on table tbl serving port: d (its
-- directory, from L.dir) and its process; opts.jobs, opts.http (more [http]
-- keys), opts.leash (more [leash] keys), opts.singleton, opts.store (more
-- [store] keys), opts.env.
function M.replica(p, tbl, port, opts)
  opts = opts or {}
  local http = { listen = "127.0.0.1:" .. port }
  for k, v in pairs(opts.http or {}) do http[k] = v end
  local cfg = R.config(p, tbl, { http = http })
  for k, v in pairs(opts.leash or {}) do cfg.leash[k] = v end
  for k, v in pairs(opts.singleton or {}) do cfg.singleton[k] = v end
  for k, v in pairs(opts.store or {}) do cfg.store[k] = v end
  local d = L.dir { config = cfg, jobs = opts.jobs }
  local env = { LEASH_TEST_MSSQL_PASSWORD = p.password or "" }
  for k, v in pairs(opts.env or {}) do env[k] = v end
  d.env = { env = env }
  local proc = L.spawn(d, { env = env })
  proc.owner = assert(L.wait_for(function()
    return proc:log_text():match("replica (%S+),")
  end, 5), "the replica did not start: " .. proc:log_text())
  d.url = "http://127.0.0.1:" .. port
  return d, proc
end

-- Waits until /api/history of the server at url shows a run of job with
-- outcome.
function M.wait_outcome(url, job, outcome, timeout)
  assert(L.wait_for(function()
    local _, v = M.get_json(url .. "/api/history?job=" .. job .. "&limit=5")
    for _, r in ipairs(v and v.runs or {}) do
      if r.outcome == outcome then return true end
    end
  end, timeout or 10), ("no %s run of %s"):format(outcome, job))
end

-- The server process of a leash run (its pid), once it serves.
function M.server_pid(proc)
  return assert(L.wait_for(function()
    local line = proc:grep("http: serving")
    return line[#line] and tonumber(line[#line]:match("server pid (%d+)"))
  end, 10), "no server started: " .. proc:log_text())
end

return M

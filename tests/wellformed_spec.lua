-- Everything leash prints is well-formed (issue 37, item 3), whatever the
-- names, rows and job output hold: JSON (the JSON log, --json, /api) is
-- strict JSON in valid UTF-8 (invalid bytes as U+FFFD), the text log and the
-- tables hold no raw control character and no forged line, a NUL does not
-- cut an error, a huge error is one log line cut on a character boundary,
-- and replica names are refused unless they are letters, digits, . - _.
-- Real processes on SQLite; outputs read back with Python's strict UTF-8
-- decoder and json.loads.
local L = require "e2e"
local H = require "http"
local core = require "leash.core"
local json = require "dkjson"

-- Strict checks: text decodes as UTF-8 (Python, errors="strict") and, with
-- mode "doc" or "lines", parses as JSON (a document, or one a line).
local PY = [[
import json, sys
data = open(sys.argv[1], 'rb').read()
text = data.decode('utf-8')
mode = sys.argv[2]
if mode != 'utf8':
    docs = [l for l in text.split('\n') if l] if mode == 'lines' else [text]
    for i, d in enumerate(docs):
        try:
            json.loads(d)
        except ValueError as e:
            sys.exit('line %d: %s: %r' % (i + 1, e, d[:200]))
]]

local function strict(text, mode)
  local f = L.tmpdir("wf") .. "/in"
  L.write(f, text)
  local code, _, err = L.exec { "python3", "-c", PY, f, mode }
  assert(code == 0, ("not strict %s: %s"):format(mode, err))
end

-- No raw C0 control character (tab included), DEL or C1 control on a line.
local function no_controls(text)
  for line in text:gmatch("[^\n]*") do
    local at = line:find("[%z\1-\31\127]") or line:find("\194[\128-\159]")
    assert(not at, ("a raw control character in %q"):format(line:sub(1, 200)))
  end
end

local BAD = "bad\255\254\27]0;pwned\7\27[2J"

-- ---- the one escaping routine, on random bytes ----

describe("esc (core.json_string, core.safe, core.cut)", function()
  -- Random strings rich in what breaks: controls, C1, stray and cut UTF-8.
  local pieces = { "\0", "\n", "\t", "\27", "\127", "\194\155", "\255", "\254", "\192\128",
    "\237\160\128", "\244\144\128\128", "\226\130", "é", "€", "😀", '"', "\\", "a", " ", "=" }
  local function random_text()
    local t = {}
    for i = 1, math.random(0, 40) do t[i] = pieces[math.random(#pieces)] end
    return table.concat(t)
  end

  it("any bytes come out as valid UTF-8 without a raw control, JSON that round-trips", function()
    math.randomseed(37)
    local batch = {}
    for i = 1, 3000 do
      local s = random_text()
      local js, safe = core.json_string(s), core.safe(s)
      assert.is_truthy(utf8.len(js), js)
      assert.is_truthy(utf8.len(safe), safe)
      no_controls(js)
      no_controls(safe)
      if utf8.len(s) then        -- valid UTF-8 comes back as it was
        assert.equal(s, json.decode('{"v":' .. js .. "}").v)
      end
      local cut = core.cut(s, 10)
      assert.is_true(#s <= 10 and cut == s or cut:find("... [cut: " .. #s .. " bytes in all]", 1, true) ~= nil)
      if utf8.len(s) then assert.is_truthy(utf8.len(cut), cut) end
      batch[#batch + 1] = js
    end
    strict("[" .. table.concat(batch, ",") .. "]", "doc")
  end)
end)

-- ---- replica names ----

describe("replica names", function()
  local function cfg(replica)
    return L.dir { config = ("[leash]\njobs = jobs\nreplica = %s\n"):format(replica),
                   jobs = { ok = 'return { every = "1h", run = function() end }\n' } }
  end

  for _, name in ipairs { BAD, "a b", "x:1", "<b>r</b>", "tab\there", "é" } do
    it(("are refused by check and by run alike: %q"):format(name), function()
      local d = cfg(name)
      local code, out, err = L.leash { "check", "-c", d.config }
      assert.equal(2, code, out .. err)
      local msg = err:match("[^\n]*%[leash%] replica:[^\n]*")
      assert.is_truthy(msg, err)
      assert.matches(":3: [leash] replica: ", msg, 1, true)
      assert.matches("letters, digits, '.', '-' and '_'", msg, 1, true)
      strict(err, "utf8")
      no_controls(err)
      local rcode, rout, rerr = L.exec { "timeout", "10", L.bin, "run", "-c", d.config }
      assert.equal(2, rcode, rout .. rerr)
      assert.matches(msg, rerr, 1, true)
    end)
  end

  it("letters, digits and . - _ pass", function()
    local code, out, err = L.leash { "check", "-c", cfg("db-1.example_A9").config }
    assert.equal(0, code, out .. err)
  end)

  it("auto: a hostname outside that set is refused by check and run, naming it", function()
    local d = L.dir { config = "[leash]\njobs = jobs\n",
                      jobs = { ok = 'return { every = "1h", run = function() end }\n' } }
    -- A UTS namespace of its own, where the hostname can be anything.
    local script = ("printf 'bad host\\033]0;x\\007' > /proc/sys/kernel/hostname || exit 99; "
      .. "%s check -c %s; echo check=$?; timeout 10 %s run -c %s; echo run=$?")
      :format(L.quote(L.bin), L.quote(d.config), L.quote(L.bin), L.quote(d.config))
    local code, out, err = L.exec { "unshare", "--uts", "sh", "-c", script }
    if code == 1 and err:find("unshare", 1, true) then
      pending("no UTS namespace here: " .. err)
      return
    end
    assert.matches("check=2", out, 1, true)
    assert.matches("run=2", out, 1, true)
    local _, n = err:gsub('%[leash%] replica: auto: the hostname "bad host\\x1b%]0;x\\x07": '
      .. "a replica name may hold only letters, digits, '%.', '%-' and '_' %(set replica = NAME%)", "")
    assert.equal(2, n, err)
    no_controls(err)
  end)
end)

describe("leash check", function()
  it("prints a job file's error with its control characters escaped", function()
    local d = L.dir { config = "[leash]\njobs = jobs\nreplica = a\n",
                      jobs = { bad = 'error("boom\\27]0;pwned\\7 \\255 end", 0)\n' } }
    local code, out, err = L.leash { "check", "-c", d.config }
    assert.equal(1, code, out .. err)
    strict(out, "utf8")
    no_controls(out)
    assert.matches("boom\\x1b]0;pwned\\x07 \239\191\189 end", out, 1, true)
  end)
end)

-- ---- a replica's log, JSON and store text ----

-- Jobs whose names are fine and whose output, records and errors are not.
local JOBS = {
  forge = [[
return { every = "1s", run = function(ctx)
  ctx.log("info", "msg\n2026-01-01T00:00:00.000Z error [tick run 1] FORGED",
    { ["k\ney"] = "v\27]0;title\7", bad = "\255\254x", ["a b=c"] = "1", level = "error" })
  ctx.log("warn", "esc \27[31mred\27[0m \255\254 c1:\194\155 nul:\0after-nul")
  print("out \27]0;t\7 \255 nul:\0after-nul")
  io.stdout:flush()
  io.stderr:write(("é"):rep(3000), "\n")
end }
]],
  nulerr = 'return { every = "1s", run = function(ctx) error("\\0after-nul \\255", 0) end }\n',
  bigerr = 'return { every = "1s", run = function(ctx) error(("é"):rep(600000), 0) end }\n',
}

-- A singleton replica on SQLite with [http] listen, log_format fmt, until
-- every job has ended a run; its log and d.
local function run_replica(fmt)
  local port = H.free_port()
  local db = L.tmpdir("wfdb") .. "/leash.db"
  local d = L.dir { config = {
    leash = { replica = "wf1", grace = "1s", log_format = fmt },
    singleton = { enabled = "true" }, sqlite = { path = db },
    http = { listen = "127.0.0.1:" .. port } }, jobs = JOBS }
  -- Rows another version or a hand could have written.
  local s = assert(core.open_store { provider = "sqlite", path = db, table = "leash_leases" })
  local _, now = assert(s:list())
  local owner = "own\255er\27[31m:1:00000001"
  assert.is_true(s:try_acquire(BAD .. "\nFORGED", owner, 600000))
  assert.is_true(s:record_runs {
    { job = BAD .. "\nFORGED", scheduled_at = now - 60000, owner = owner, token = 1,
      outcome = "failed", started_at = now - 59990, ended_at = now - 59000, duration_ms = 990,
      exit_code = 1, error = "e\255rr\27[2J\nline two" } })
  s:close()
  local p = L.spawn(d)
  d.url = "http://127.0.0.1:" .. port
  local done = function()
    local t = p:log_text()
    for name in pairs(JOBS) do
      if not (t:find("%[" .. name .. " run %d+%] f[a-z]+ after") or t:find("%[" .. name .. " run %d+%] finished")
          or t:find('"job":"' .. name .. '","run":%d+,"msg":"f[a-z]+ ')) then
        return false
      end
    end
    return true
  end
  local ok, why = pcall(function()
    assert(L.wait_for(done, 20), "not every job ended a run: " .. p:log_text():sub(1, 3000))
    H.wait_up(d.url .. "/healthz", 10)
  end)
  if not ok then
    p:stop(10)
    error(why, 0)
  end
  d.proc = p
  return d, p
end

describe("the text log", function()
  local d, p, text

  setup(function()
    d, p = run_replica("text")
    assert.equal(0, p:stop(10))
    text = p:log_text()
  end)

  it("is valid UTF-8 with no raw control character", function()
    strict(text, "utf8")
    no_controls(text)
  end)

  it("escapes newlines and escapes in messages and keys: no forged line", function()
    for line in text:gmatch("[^\n]+") do
      assert.matches("^%d%d%d%d%-%d%d%-%d%dT[%d:.]+Z (%a+)", line)
      assert.is_nil(line:find("^2026%-01%-01T00:00:00"), line)
    end
    assert.matches("%[forge run %d+%] msg\\x0a2026%-01%-01T00:00:00%.000Z error %[tick run 1%] FORGED", text)
    assert.matches("k\\x0aey=\"v\\u001b]0;title\\u0007\"", text, 1, true)
    assert.matches("a\\x20b\\x3dc=1", text, 1, true)
    assert.matches("esc \\x1b[31mred\\x1b[0m \239\191\189\239\191\189 c1:\\u009b", text, 1, true)
  end)

  it("keeps what follows a NUL: in output, in a record, in an error and its ledger row", function()
    assert.matches("out \\x1b]0;t\\x07 \239\191\189 nul:\239\191\189after-nul stream=stdout", text, 1, true)
    assert.matches("nul:\239\191\189after-nul", text, 1, true)
    assert.matches("%[nulerr run %d+%] run failed: \239\191\189after%-nul \239\191\189 traceback=", text)
    local code, out, err = L.leash { "history", "-c", d.config, "--json", "nulerr" }
    assert.equal(0, code, err)
    strict(out, "doc")
    local v = json.decode(out)
    assert.is_true(#v.runs >= 1)
    local last
    for _, r in ipairs(v.runs) do if r.outcome == "failed" then last = r end end
    assert.is_table(last, out)
    assert.matches("after-nul", last.error, 1, true)
  end)

  it("makes a 1.2 MB error one line, cut on a character boundary, saying so", function()
    local runs = {}
    for id in text:gmatch("%[bigerr run (%d+)%] run failed") do runs[#runs + 1] = id end
    assert.is_true(#runs >= 1)
    local lines = 0
    for line in text:gmatch("[^\n]+") do
      if line:find("[bigerr run " .. runs[1] .. "]", 1, true) then lines = lines + 1 end
    end
    assert.is_true(lines <= 3, lines .. " lines for one run")    -- started, run failed, failed after
    assert.matches("%[bigerr run " .. runs[1] .. "%] run failed: [é]+%.%.%. %[cut: 1200012 bytes in all%]", text)
  end)

  it("logs a long output line in pieces cut on character boundaries", function()
    local pieces = 0
    for line in text:gmatch("[^\n]+") do
      local body = line:match("%[forge run %d+%] ([é]+) stream=stderr$")
      if body then
        pieces = pieces + 1
        assert.is_truthy(utf8.len(body), "a piece split inside a character")
      end
    end
    assert.is_true(pieces >= 2, pieces .. " pieces")
  end)
end)

describe("the JSON log, --json and /api", function()
  local d, p, text

  setup(function()
    d, p = run_replica("json")
  end)

  teardown(function() if p then p:stop(10) end end)

  it("/api/status and /api/history are strict JSON in valid UTF-8", function()
    for _, path in ipairs { "/api/status", "/api/history", "/api/history?job=nulerr" } do
      local status, _, body = H.request(d.url .. path)
      assert.equal(200, status, path)
      strict(body, "doc")
      no_controls(body)
    end
    local _, v = H.get_json(d.url .. "/api/status")
    local names = {}
    for _, j in ipairs(v.jobs) do names[j.name] = j end
    assert.is_table(names["bad\239\191\189\239\191\189\27]0;pwned\7\27[2J\nFORGED"])
  end)

  it("status --json, status --leases --json and history --json are strict JSON", function()
    for _, args in ipairs { { "status", "--json" }, { "status", "--leases", "--json" },
                            { "history", "--json" } } do
      local code, out, err = L.leash { args[1], "-c", d.config, table.unpack(args, 2) }
      assert.equal(0, code, err)
      strict(out, "doc")
      no_controls(out)
    end
  end)

  it("status --leases, status and history escape store text as a table", function()
    -- (status cuts long cells to fit 120 columns, escaped first and on a
    -- character boundary; --wide shows them whole)
    for _, args in ipairs { { "status", "--leases" }, { "status" }, { "status", "--wide" },
                            { "history", "--limit", "10000", "--wide" } } do
      local code, out, err = L.leash { args[1], "-c", d.config, table.unpack(args, 2) }
      assert.equal(0, code, err)
      strict(out, "utf8")
      no_controls(out)
      assert.is_nil(out:find("\nFORGED", 1, true), out)
      if #args > 1 then
        assert.matches("bad\239\191\189\239\191\189\\x1b]0;pwned\\x07\\x1b[2J\\x0aFORGED", out, 1, true)
      end
    end
  end)

  it("the JSON log is one strict JSON object a line, in valid UTF-8", function()
    assert.equal(0, p:stop(10))
    text = p:log_text()
    strict(text, "lines")
    local forged, level
    for line in text:gmatch("[^\n]+") do
      local r = json.decode(line)
      if r.msg and r.msg:find("FORGED", 1, true) then forged, level = r, r["field.level"] end
    end
    assert.is_table(forged)
    assert.equal("info", forged.level)      -- a field named level does not shadow it
    assert.equal("error", level)
    assert.equal("\239\191\189\239\191\189x", forged.bad)
    assert.equal("v\27]0;title\7", forged["k\ney"])
  end)
end)

-- docs_spec: the docs say what the code does.
--
-- * README.md's commands run as written, in its order, in a copy of the
--   tree's layout (build/leash, config/, jobs/, var/): the first job is
--   checked, three replicas elect through SQLite, a trigger reaches the
--   ledger, and stopping the holder hands the job over.  Each ```sh block
--   is run or skipped by one entry of COMMANDS and each ```text block (an
--   output) is compared by one entry of OUTPUTS, so a new command in the
--   README fails here until it is run.  The copy's config/leash.ini serves
--   its page on a free port, not 9187, which others may hold.
-- * The man pages against the sources of truth: leash(1)'s commands and
--   options against `leash help`; leash.ini(5) is what tools/man.lua makes
--   of src/core/cfg_keys.h; leash-job(5)'s keys and ctx fields against
--   leash.job and leash.run, its defaults and bounds against what
--   leash.job accepts and refuses; a bound two pages share agrees; each
--   page renders without a groff warning.
-- * docs/: links and anchors resolve, every `[section] key` named exists,
--   the JSON fields and table columns listed are the ones the code makes.
--
-- Waits are generous (a busy 2-core machine): nothing here times anything.
local L = require "e2e"
local json = require "dkjson"
local config = require "leash.config"
local duration = require "leash.duration"
local jobmod = require "leash.job"

local ROOT = os.getenv("LEASH_ROOT") or "."
local TMP = assert(os.getenv("LEASH_TEST_TMP"), "run this spec through tests/run.sh")
local WAIT = 90                          -- seconds: the bound of every wait below

local function read(path)
  local f = assert(io.open(path, "rb"), path)
  local s = f:read("a")
  f:close()
  return s
end

local function has(cmd)
  return os.execute("command -v " .. cmd .. " >/dev/null 2>&1") == true
end

local function set_of(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

-- The fenced blocks of a markdown text: { lang =, body =, line = }, the
-- fence's indentation taken off the body's lines.
local function blocks(md)
  local out, cur, n = {}, nil, 0
  for line in (md .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local indent, fence, lang = line:match("^(%s*)(```)(%S*)%s*$")
    if cur then
      if fence and #indent == cur.indent and lang == "" then
        cur.body = table.concat(cur.lines, "\n")
        out[#out + 1] = cur
        cur = nil
      else
        cur.lines[#cur.lines + 1] = line:sub(cur.indent + 1)
      end
    elseif fence then
      cur = { lang = lang, indent = #indent, lines = {}, line = n }
    end
  end
  return out
end

local function lines_of(s)
  local t = {}
  for l in (s .. "\n"):gmatch("([^\n]*)\n") do
    if l ~= "" then t[#t + 1] = l end
  end
  return t
end

-- A shown line as a pattern: numbers may differ, runs of blanks may differ.
local function shape(line)
  local p = line:gsub("%s+$", ""):gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")
  p = p:gsub("%d+", "%%d+"):gsub("%s+", "%%s+")
  return "^" .. p .. "%s*$"
end

-- ---- README.md ----

describe("README.md", function()
  local md = read(ROOT .. "/README.md")
  local all = blocks(md)
  local dir = TMP .. "/readme"
  local procs, last_out, log_of = {}, nil, {}
  local port

  local function sh(cmd)
    return L.sh(("cd %s && %s"):format(L.quote(dir), cmd))
  end

  -- Runs cmd (a README line) until ok(code, out, err) says yes; returns
  -- the last code, out, err.
  local function until_ok(cmd, ok)
    local code, out, err
    L.wait_for(function()
      code, out, err = sh(cmd)
      return ok(code, out, err)
    end, WAIT, 0.5)
    return code, out, err
  end

  local function status_json()
    local code, out = sh("build/leash status -c config/leash.ini --json")
    if code ~= 0 then return nil end
    return json.decode(out, 1, json.null)     -- nulls kept: their keys count
  end

  local function holder_of(job)
    local s = status_json()
    for _, j in ipairs(s and s.jobs or {}) do
      if j.name == job and j.holder ~= json.null then return j.holder, j.token end
    end
  end

  -- What to do with each ```sh block, by its first line: run(body) runs it
  -- and leaves what it printed in last_out; a skip says why it is not run.
  local COMMANDS = {
    { "^sh tools/deps%.sh && make run$", skip = "runs until Ctrl-C, builds build/ and serves "
      .. "127.0.0.1:9187; the replicas below run that binary with a copy of that config" },
    { "^sh tools/deps%.sh && make test$", skip = "that is how this spec itself runs" },
    { "^build/leash check %-c config/leash%.ini", run = function(body)
      local code, out, err = sh(body)
      assert.are.equal(0, code, out .. err)
      last_out = out
    end },
    { "^build/leash run %-c config/leash%.ini %-o leash%.replica=r1$", run = function(body)
      -- One terminal per line: each in the background, its log kept.
      for _, line in ipairs(lines_of(body)) do
        local r = assert(line:match("leash%.replica=(r%d)"), line)
        log_of[r] = dir .. "/" .. r .. ".log"
        procs[r] = L.spawn_cmd("exec " .. line, { cwd = dir, log = log_of[r] })
      end
    end },
    { "^build/leash status %-c config/leash%.ini$", run = function(body)
      -- Until every job has a holder and the three replicas are live.
      local code, out, err = until_ok(body, function(c)
        local s = c == 0 and status_json()
        if not s or #s.replicas ~= 3 then return false end
        for _, j in ipairs(s.jobs) do
          if j.holder == json.null then return false end
        end
        return #s.jobs > 0
      end)
      assert.are.equal(0, code, err)
      last_out = out
    end },
    { "^build/leash trigger %-c config/leash%.ini disk%-report$", run = function(body)
      local trigger, history = table.unpack(lines_of(body))
      assert.matches("^build/leash history ", history)
      local code, out, err = sh(trigger)
      assert.are.equal(0, code, out .. err)
      assert.matches("^triggered disk%-report: r%d:", out)
      code, out, err = until_ok(history, function(c, o)
        return c == 0 and o:find("%s+manual%s+") ~= nil
      end)
      assert.are.equal(0, code, err)
      assert.matches("%s+manual%s+", out, nil, false, "no manual run in the ledger:\n" .. out)
      last_out = out
    end },
  }

  -- How each ```text block compares with what its command printed.
  local OUTPUTS = {
    { "^disk%-report %d", check = function(body)
      -- leash check --next 3: the lines shown are among those printed.
      for _, line in ipairs(lines_of(body)) do
        local found = false
        for _, got in ipairs(lines_of(last_out)) do
          if got:match(shape(line)) then found = true end
        end
        assert.is_true(found, ("%q is not the shape of any line of:\n%s"):format(line, last_out))
      end
    end },
    { "%[disk%-report run %d+%] started pid=", check = function(body)
      -- The log of a run: the shape of the lines of whichever replica ran it
      -- (waited for: on a busy machine the run may not have ended yet).
      for _, line in ipairs(lines_of(body)) do
        local found = L.wait_for(function()
          for _, r in ipairs { "r1", "r2", "r3" } do
            for _, got in ipairs(lines_of(L.read(log_of[r] or ""))) do
              if got:match(shape(line)) then return true end
            end
          end
        end, 30)
        assert.is_true(found == true, ("no log line has the shape of %q"):format(line))
      end
    end, after = true },
    { "^STATE%s+JOB%s+SCHEDULE%s+HOLDER", check = function(body)
      local want, got = lines_of(body), lines_of(last_out)
      assert.are.equal((want[1]:gsub("%s+", " ")), (got[1]:gsub("%s+", " ")))
      for _, line in ipairs(want) do
        local name = line:match("^[%w-]+%s+([%w.-]+)%s")
        if line:match("^REPLICA") then
          assert.matches("\nREPLICA%s+HOST%s+VERSION%s+STATE%s+LEASES%s+SHARE%s+JOBS HASH\n", last_out)
        elseif name and not line:match("^STATE") and not line:match("^r%d:") then
          assert.matches("\n[%w-]+%s+" .. name:gsub("%p", "%%%0") .. "%s", "\n" .. last_out)
        end
      end
    end },
    { "^STATE%s+JOB%s+RUN%s+EXIT", check = function(body)
      local want, got = lines_of(body), lines_of(last_out)
      assert.are.equal((want[1]:gsub("%s+", " ")), (got[1]:gsub("%s+", " ")))
      for _, outcome in ipairs { "manual", "control" } do     -- a state, or a running run's note
        assert.matches("%s" .. outcome .. "%s", last_out)
      end
    end },
  }

  local function entry(list, b)
    local first = b.body:match("^[^\n]*")
    local found
    for _, e in ipairs(list) do
      if first:find(e[1]) then
        assert.is_nil(found, ("README.md:%d: two entries match %q"):format(b.line, first))
        found = e
      end
    end
    assert.is_table(found, ("README.md:%d: %q is not run or compared by tests/docs_spec.lua")
      :format(b.line, first))
    found.used = true
    return found
  end

  setup(function()
    port = tonumber(select(2, L.exec { "python3", "-c",
      "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])" })
      :match("%d+"))
    -- The tree after `make run`: build/leash, config/, the example jobs, var/.
    assert(os.execute(("rm -rf %s && mkdir -p %s/build %s/config %s/jobs %s/var"):format(
      L.quote(dir), L.quote(dir), L.quote(dir), L.quote(dir), L.quote(dir))))
    assert(os.execute(("ln -s %s %s/build/leash"):format(L.quote(L.bin), L.quote(dir))))
    assert(os.execute(("cp %s/jobs/*.lua %s/jobs/"):format(L.quote(ROOT), L.quote(dir))))
    local ini = read(ROOT .. "/config/leash.ini")
    local n
    ini, n = ini:gsub("\nlisten = 127%.0%.0%.1:9187\n", ("\nlisten = 127.0.0.1:%d\n"):format(port))
    assert(n == 1, "config/leash.ini no longer listens on 127.0.0.1:9187: update this spec")
    L.write(dir .. "/config/leash.ini", ini)
  end)

  teardown(function()
    for _, p in pairs(procs) do p:stop(20) end
  end)

  it("writes its job files and runs its commands as written, in order", function()
    local pending_outputs = {}
    for _, b in ipairs(all) do
      if b.lang == "lua" then
        local path = b.body:match("^%-%- (jobs/[%w._-]+%.lua)")
        if path then L.write(dir .. "/" .. path, b.body .. "\n") end
      elseif b.lang == "sh" then
        local e = entry(COMMANDS, b)
        if e.run then e.run(b.body) end
      elseif b.lang == "text" then
        local e = entry(OUTPUTS, b)
        if e.after then pending_outputs[#pending_outputs + 1] = { e, b } else e.check(b.body) end
      end
    end
    -- The log a run wrote: the job has surely run by now (the trigger).
    for _, p in ipairs(pending_outputs) do p[1].check(p[2].body) end
    for _, list in ipairs { COMMANDS, OUTPUTS } do
      for _, e in ipairs(list) do
        assert.is_true(e.used == true, ("%s matches no block of README.md"):format(e[1]))
      end
    end
  end)

  it("hands a job over when its holder is stopped with Ctrl-C", function()
    -- A spread hand-off may leave it unheld for a moment.
    local h = L.wait_for(function()
      local o, t = holder_of("disk-report")
      return o and { o, t }
    end, WAIT, 0.5)
    assert.is_table(h, "nobody holds disk-report")
    local owner, token = h[1], h[2]
    local r = owner:match("^(r%d):")
    assert.is_true(procs[r]:signal("INT"))
    assert.are.equal(0, procs[r]:wait(WAIT))
    local new = L.wait_for(function()
      local o, t = holder_of("disk-report")
      return o and o ~= owner and { o, t }
    end, WAIT, 0.5)
    assert.is_table(new, "no replica took disk-report over")
    assert.is_true(new[2] > token, ("token %d after %d"):format(new[2], token))
  end)

  it("lists in docs/operating.md every field `leash status --json` prints", function()
    local s = assert(status_json(), "status --json failed")
    local ops = read(ROOT .. "/docs/operating.md")
    local sec = assert(ops:match("\n## leash status %-%-json\n(.-)\n## "), "no JSON section")
    local documented = {}
    for row in sec:gmatch("\n| (`[^|]+) |") do
      for name in row:gmatch("`([%w_]+)") do documented[name] = true end
    end
    local actual = {}
    for k in pairs(s) do actual[k] = true end
    for k in pairs(s.jobs[1]) do actual[k] = true end
    assert.are.same(actual, documented)
    for _, list in ipairs { "leases", "replicas" } do
      local row = assert(sec:match("\n| `" .. list .. "%[%]` |([^\n]*)"), list)
      for k in pairs(s[list][1]) do
        assert.matches("`" .. k .. "`", row, 1, true, list .. "[]." .. k)
      end
    end
  end)

  it("lists in docs/stores.md the columns of the three tables", function()
    if not has("sqlite3") then
      pending("sqlite3 is not installed")
      return
    end
    local stores = read(ROOT .. "/docs/stores.md")
    local sec = assert(stores:match("\n## Tables\n(.-)\n## "), "no Tables section")
    local tables, cur = {}, nil
    for line in (sec .. "\n"):gmatch("([^\n]*)\n") do
      local first = line:match("^| (`[^|]+) |")
      if first then
        if not cur then cur = {} tables[#tables + 1] = cur end
        for name in first:gmatch("`([%w_]+)`") do cur[#cur + 1] = name end
      elseif not line:match("^|") then
        cur = nil
      end
    end
    assert.are.equal(3, #tables)
    for i, t in ipairs { "leash_leases", "leash_leases_runs", "leash_leases_replicas" } do
      local code, out = sh(("sqlite3 var/leash.db \"SELECT name FROM pragma_table_info('%s')\""):format(t))
      assert.are.equal(0, code)
      local got = lines_of(out)
      table.sort(got)
      table.sort(tables[i])
      assert.are.same(got, tables[i], t)
    end
  end)

  it("stops every replica cleanly", function()
    for r, p in pairs(procs) do
      if p:alive() then
        p:signal("TERM")
        assert.are.equal(0, p:wait(WAIT), r)
      end
    end
  end)
end)

-- ---- the man pages ----

-- A page's source, and its sections (.SH) as text.
local function page(name)
  local src = read(ROOT .. "/man/" .. name)
  local sections, cur = {}, nil
  for line in (src .. "\n"):gmatch("([^\n]*)\n") do
    local t = line:match('^%.SH "?(.-)"?$')
    if t then cur = t sections[t] = {} elseif cur then table.insert(sections[cur], line) end
  end
  for k, v in pairs(sections) do sections[k] = table.concat(v, "\n") .. "\n" end
  return src, sections
end

-- Roff as plain text: fonts, \-, \(dq, \e and \& gone.
local function plain(s)
  return (s:gsub("\\f[BIRP]", ""):gsub("\\%-", "-"):gsub("\\%(dq", '"'):gsub("\\e", "\\")
    :gsub("\\&", ""):gsub("\\%(mu", "x"))
end

-- The paragraphs of a section text that start with .TP, each as plain
-- text (a leading font macro, its quotes and roff escapes gone); the first
-- line is the entry's header.
local function tp_blocks(text)
  local out, cur = {}, nil
  local function close()
    if cur then
      cur[1] = cur[1]:gsub("^%.%a+%s+", ""):gsub('"', "")
      out[#out + 1] = plain(table.concat(cur, "\n"))
    end
    cur = nil
  end
  for line in text:gmatch("[^\n]+") do
    if line == ".TP" then
      close()
      cur = {}
    elseif line:match("^%.[SP][HSP]") then
      close()
    elseif cur then
      cur[#cur + 1] = line
    end
  end
  close()
  return out
end

-- The header line of each .TP entry of a section text.
local function entries(text)
  local out = {}
  for _, b in ipairs(tp_blocks(text)) do out[#out + 1] = b:match("^[^\n]*") end
  return out
end

-- "name = kind..., A to B; default D" -> { key, kind, min, max, default, values }
local function header(h)
  local key, rest = h:match("^([%w_]+) = (.*)$")
  if not key then return nil end
  local spec, default = rest:match("^(.-); default (.*)$")
  spec = spec or rest:gsub("; required$", "")
  local e = { key = key, default = default, spec = spec }
  local a, b = spec:match(", (%S+) to (%S+)$")
  if a then e.min, e.max = a, b end
  e.min = e.min or spec:match(", at least (%S+)$") or spec:match(", positive,") and "1ms"
  e.max = e.max or spec:match(", at most (.+)$")
  if spec:find('^"') then
    e.values = {}
    for v in spec:gmatch('"([^"]+)"') do e.values[#e.values + 1] = v end
  end
  return e
end

describe("leash(1)", function()
  local src, sec = page("leash.1")
  local code, usage = L.leash { "help" }

  it("has a SYNOPSIS that is `leash help`", function()
    assert.are.equal(0, code)
    local want = {}
    for line in usage:gmatch("[^\n]+") do
      want[#want + 1] = line:gsub("^usage:", ""):gsub("^%s+", ""):lower()
    end
    local c, out = L.sh("MANWIDTH=200 man -l " .. L.quote(ROOT .. "/man/leash.1"))
    if c ~= 0 then
      pending("man cannot render pages here")
      return
    end
    local syn = assert(out:match("SYNOPSIS\n(.-)\n%S"))
    local got = {}
    for line in syn:gmatch("[^\n]+") do
      got[#got + 1] = line:gsub("^%s+", ""):gsub("\226\136\146", "-"):gsub("\226\128\144", "-"):lower()
    end
    assert.are.same(want, got)
  end)

  it("describes each command of `leash help` under COMMANDS and EXIT STATUS, and no other", function()
    local cmds = {}
    for c in usage:gmatch("leash (%l+)") do cmds[c] = true end
    local described = {}
    for _, h in ipairs(entries(sec.COMMANDS)) do described[h] = true end
    assert.are.same(cmds, described)
    local exits = {}
    for _, h in ipairs(entries(sec["EXIT STATUS"])) do
      for c in h:gmatch("%l+") do exits[c] = true end
    end
    assert.are.same(cmds, exits)
  end)

  it("describes each option of `leash help` under OPTIONS, and no other", function()
    local opts = {}
    for o in usage:gmatch("%-%-?[%a][%w-]*") do opts[o] = true end
    local described = {}
    for _, h in ipairs(entries(sec.OPTIONS)) do
      for o in h:gmatch("%-%-?[%a][%w-]*") do described[o] = true end
    end
    assert.are.same(opts, described)
  end)

  it("gives the bounds the commands enforce", function()
    local d = L.dir { config = { singleton = { enabled = "true" }, store = { provider = "sqlite" },
                                 sqlite = { path = "leash.db" } },
                      jobs = { j = 'return { every = "1m", run = function() end }' } }
    local probes = { { "--limit", { "history" } }, { "--next", { "check" } },
                     { "--fail", { "status", "--check" } } }
    for _, p in ipairs(probes) do
      local opt = p[1]
      local text
      for _, block in ipairs(tp_blocks(sec.OPTIONS)) do
        if block:find(opt .. " ", 1, true) == 1 then text = block:gsub("\n", " ") end
      end
      assert.is_string(text, opt)
      local lo, hi = text:match("(%d+) to (%d+)")
      assert.is_string(lo, opt .. ": no bounds")
      local function refused(v)
        local argv = { p[2][1], "-c", d.config }
        for i = 2, #p[2] do argv[#argv + 1] = p[2][i] end
        argv[#argv + 1] = opt
        argv[#argv + 1] = tostring(v)
        local _, _, err = L.leash(argv)
        return err:find("expected a", 1, true) ~= nil
      end
      assert.is_false(refused(lo), opt .. " " .. lo)
      assert.is_false(refused(hi), opt .. " " .. hi)
      assert.is_true(refused(tonumber(lo) - 1), opt .. " below " .. lo)
      assert.is_true(refused(tonumber(hi) + 1), opt .. " above " .. hi)
    end
  end)
end)

describe("leash.ini(5)", function()
  local man = dofile(ROOT .. "/tools/man.lua")

  it("is what tools/man.lua makes of its template and src/core/cfg_keys.h (make man)", function()
    local want, errors = man.render(read(ROOT .. "/man/leash.ini.5.in"), "man/leash.ini.5.in")
    assert.is_nil(errors and table.concat(errors, "\n"))
    assert.are.equal(want, read(ROOT .. "/man/leash.ini.5"), "man/leash.ini.5 is stale: run make man")
  end)

  it("gives each key's default and bounds as the code has them", function()
    local _, sec = page("leash.ini.5")
    local seen = {}
    for _, h in ipairs(entries(sec.KEYS)) do
      local e = assert(header(h), h)
      seen[#seen + 1] = e
    end
    assert.are.equal(#config.KEYS, #seen)
    for i, k in ipairs(config.KEYS) do
      local e = seen[i]
      assert.are.equal(k.key, e.key)
      if k.default and k.default ~= "" then assert.are.equal(k.default, e.default, k.key) end
      if k.kind == "duration" then
        if k.min > 0 then assert.are.equal(k.min, duration.parse(e.min), k.key) end
        assert.are.equal(k.max, duration.parse(e.max), k.key)
      elseif k.min and k.max and k.max > 0 then
        assert.are.equal(k.min, tonumber(e.min), k.key)
        assert.are.equal(k.max, tonumber(e.max), k.key)
      end
    end
  end)
end)

describe("leash-job(5)", function()
  local _, sec = page("leash-job.5")
  local keys = {}
  for _, h in ipairs(entries(sec.KEYS)) do
    local e = assert(header(h) or h:match("^([%w_]+) =") and { key = h:match("^([%w_]+)") }, h)
    keys[e.key] = e
  end

  local n = 0
  local function load(fields)
    n = n + 1
    local dir = TMP .. "/job-probes"
    os.execute("mkdir -p " .. L.quote(dir))
    local path = ("%s/probe%d.lua"):format(dir, n)
    L.write(path, "return { run = function() end, " .. fields .. " }\n")
    return jobmod.load(path, "probe" .. n)
  end

  it("has an entry for every key of leash.job.KEYS, and no other", function()
    local names = {}
    for k in pairs(keys) do names[k] = true end
    assert.are.same(set_of(jobmod.KEYS), names)
  end)

  it("has an entry for every field of ctx, and no other", function()
    local run = require "leash.run"
    local fields = {}
    local info = { replica = "r", token = 0, run_id = 1, scheduled_at = 0 }
    for k in pairs(run.ctx({ name = "x" }, info)) do
      fields[k] = true
    end
    -- A hook's ctx has one more: what leash.run.main adds to it.
    local seen, exit = nil, os.exit
    run.main({ name = "x", run = function() end, on_failure = function(ctx) seen = ctx end },
      { replica = "r", token = 0, run_id = 1, scheduled_at = 0, hook = "on_failure", run = {} })
    os.exit = exit
    for k in pairs(assert(seen, "the hook did not run")) do fields[k] = true end
    local described = {}
    for _, h in ipairs(entries(sec.CTX)) do
      described[assert(h:match("^ctx%.([%w_]+)"), h)] = true
    end
    assert.are.same(fields, described)
  end)

  it("gives the defaults leash.job fills in", function()
    local job = assert(load('every = "1m"'))
    local field = { missed_within = "missed_within_ms", timeout = "timeout_ms" }
    for key, e in pairs(keys) do
      if e.default and e.default ~= "[singleton] lease" then
        local got = job[field[key] or key]
        local want = e.default:match('^"(.*)"$') or e.default
        if want == "none" then
          assert.is_nil(got, key)
        elseif want == "true" or want == "false" then
          assert.are.equal(want == "true", got, key)
        elseif field[key] then
          assert.are.equal(duration.parse(want), got, key)
        else
          assert.are.equal(tonumber(want) or want, got, key)
        end
      end
    end
    assert.are.equal("[singleton] lease", keys.lease.default)
    assert.is_nil(job.lease_ms)
  end)

  it("gives the values and bounds leash.job accepts and refuses", function()
    assert.are.same(jobmod.OVERLAP, keys.overlap.values)
    assert.are.same(jobmod.MISSED, keys.missed.values)
    local base = { every = "", missed_max = 'every = "1m", missed = "all", ',
                   jitter = 'every = "1m", ', tz = 'cron = "0 * * * *", ' }
    local function ok(key, v)
      local val = type(v) == "string" and ("%q"):format(v) or tostring(v)
      return load((base[key] or 'every = "1m", ') .. key .. " = " .. val) ~= nil
    end
    local probed = 0
    for key, e in pairs(keys) do
      for _, v in ipairs(e.values or {}) do assert.is_true(ok(key, v), key .. " " .. v) end
      local int = e.spec:match("^integer")
      local function num(s) return int and tonumber(s) or assert(duration.parse(s), s) end
      local function val(x) return int and x or ("%dms"):format(x) end
      if e.min then
        local lo = num(e.min)
        assert.is_true(ok(key, val(lo)), key .. " at " .. e.min)
        assert.is_false(ok(key, val(lo - 1)), key .. " below " .. e.min)
        probed = probed + 1
      end
      if e.max then
        local hi = e.max == "the job's shortest period" and 60000 or num(e.max)
        assert.is_true(ok(key, val(hi)), key .. " at " .. e.max)
        assert.is_false(ok(key, val(hi + 1)), key .. " above " .. e.max)
        probed = probed + 1
      end
    end
    assert.is_true(probed >= 8, "fewer bounds than expected were read: " .. probed)
  end)

  it("agrees with leash.ini(5) on the bounds of lease", function()
    local _, ini = page("leash.ini.5")
    local lease
    for _, h in ipairs(entries(ini.KEYS)) do
      local e = header(h)
      if e and e.key == "lease" then lease = e end
    end
    assert.are.equal(duration.parse(lease.min), duration.parse(keys.lease.min))
    assert.are.equal(duration.parse(lease.max), duration.parse(keys.lease.max))
  end)
end)

describe("the man pages", function()
  for _, name in ipairs { "leash.1", "leash.ini.5", "leash-job.5" } do
    it(name .. " renders without a warning", function()
      local code, out, err = L.sh("groff -ww -man -z " .. L.quote(ROOT .. "/man/" .. name))
      assert.are.equal(0, code, out .. err)
      assert.are.equal("", err)
      if has("man") then
        code, out, err = L.sh("MANWIDTH=80 man -l --warnings " .. L.quote(ROOT .. "/man/" .. name)
          .. " >/dev/null")
        assert.are.equal(0, code, err)
        assert.are.equal("", err)
      end
    end)
  end
end)

-- ---- docs/ ----

describe("docs/", function()
  local files = { "README.md" }
  local _, ls = L.sh("cd " .. L.quote(ROOT) .. " && ls docs/*.md")
  for f in ls:gmatch("[^\n]+") do files[#files + 1] = f end

  -- GitHub's anchor of a heading.
  local function slug(h)
    return (h:lower():gsub("[^%w _-]", ""):gsub(" ", "-"))
  end

  it("starts each file with what it answers", function()
    for i = 2, #files do
      local text = read(ROOT .. "/" .. files[i])
      assert.matches("^# [^\n]+\n\nWhat this answers: ", text, nil, false, files[i])
    end
  end)

  it("links only to files and headings that exist", function()
    for _, f in ipairs(files) do
      local text = read(ROOT .. "/" .. f)
      local base = f:match("^(.*/)") or ""
      for target in text:gmatch("%]%(([^)%s]+)%)") do
        if not target:match("^https?:") then
          local file, anchor = target:match("^([^#]*)#?(.*)$")
          local path = file == "" and f or base .. file
          local norm = path:gsub("[^/]+/%.%./", "")
          local ok, body = pcall(read, ROOT .. "/" .. norm)
          assert.is_true(ok, ("%s: a link to %s, which does not exist"):format(f, target))
          if anchor ~= "" then
            local found = false
            for h in body:gmatch("\n#+ ([^\n]+)") do
              if slug(h) == anchor then found = true end
            end
            assert.is_true(found, ("%s: a link to %s, a heading %s does not have"):format(f, target, norm))
          end
        end
      end
    end
  end)

  it("names only config keys that exist", function()
    local sections = {}
    for _, k in ipairs(config.KEYS) do sections[k.section] = true end
    local more = { "man/leash.1", "man/leash-job.5", "man/leash.ini.5" }
    for _, f in ipairs(more) do files[#files + 1] = f end
    for _, f in ipairs(files) do
      local text = plain(read(ROOT .. "/" .. f))
      for s, k in text:gmatch("%[(%l+)%] (%l[%w_]*)") do
        if sections[s] then
          assert.is_table(config.key(s, k), ("%s names [%s] %s, which is not a key"):format(f, s, k))
        end
      end
    end
  end)
end)

-- tools/fuzz.lua: a fuzz pass over job files and store rows (issue 37's
-- "done when"), meant for a sanitizer build: make fuzz (mk/fuzz.mk).
--
--   lua5.4 tools/fuzz.lua LEASH_BINARY [ROUNDS] [SEED]
--
-- Job files: mutants of the example jobs and of a few shapes (bytes
-- flipped, cut, spliced, Lua snippets that loop, allocate or raise put in),
-- fifty to a directory, each directory through `leash check`.  Rows: a
-- SQLite store made by a short `leash run`, its lease, ledger and replica
-- rows then written with random values (huge, negative, NULL, invalid
-- UTF-8, control bytes), read by status (text, --json, --check, --leases)
-- and history, and run on by `leash run` for a few seconds.  A finding is a
-- sanitizer report, a signal, an exit code the command never gives, or a
-- `leash run` that does not stop cleanly.  Prints each finding and a
-- closing line `fuzz: N cases, N findings`; exits 1 when there is one.
local bin, rounds, seed = arg[1], tonumber(arg[2] or "4"), tonumber(arg[3] or os.time())
assert(bin, "usage: lua5.4 tools/fuzz.lua LEASH_BINARY [ROUNDS] [SEED]")
math.randomseed(seed)

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
local function sh(cmd)
  local p = io.popen("(" .. cmd .. ") 2>&1")
  local out = p:read("a")
  local _, how, code = p:close()
  return how == "signal" and 128 + code or code, out
end
local function write(path, s) local f = assert(io.open(path, "wb")); f:write(s); f:close() end
local function read(path) local f = io.open(path, "rb"); if not f then return "" end
  local s = f:read("a"); f:close(); return s end

local tmp = select(2, sh("mktemp -d /tmp/leash-fuzz.XXXXXX")):gsub("%s+$", "")
local cases, findings = 0, {}
local SAN = { "AddressSanitizer", "LeakSanitizer", "runtime error:", "UndefinedBehaviorSanitizer" }
local function judge(what, code, out, ok_codes)
  cases = cases + 1
  for _, m in ipairs(SAN) do
    if out:find(m, 1, true) then
      findings[#findings + 1] = what .. ": " .. m .. "\n" .. out:sub(1, 3000)
      return
    end
  end
  if not ok_codes[code] then
    findings[#findings + 1] = ("%s: exit %s\n%s"):format(what, tostring(code), out:sub(1, 2000))
  end
end

-- ---- job files ----
local seeds = {
  'return { every = "1s", run = function(ctx) ctx.log("info", "x", { a = 1 }) end }',
  'return { cron = "*/5 * * * *", tz = "Europe/Paris", jitter = "2s", overlap = "queue",'
    .. ' missed = "all", missed_within = "1m", timeout = "10s", run = function() end,'
    .. ' on_failure = function(ctx, run) end }',
  'return { run = function(ctx) while true do ctx.sleep(1) end end }',
  'local t = {} for i = 1, 10 do t[i] = i end return { every = "30s", weight = 3,'
    .. ' description = "d", run = function() return #t end }',
}
for _, f in ipairs { "jobs/mcp-discovery.lua", "jobs/model-health.lua" } do
  local s = read(f)
  if #s > 0 then seeds[#seeds + 1] = s end
end
local snippets = {
  "while true do end", "(\"x\"):rep(1e9)", "error(setmetatable({}, {__tostring = error}))",
  "string.rep('a', 2^31)", "table.move({}, 1, 2^62, 1, {})", "collectgarbage('step', 1e9)",
  "print(('y'):rep(1e6))", "os.exit(3)", "return nil", "\0", "\255\254", "]]", "--[[",
  "setmetatable(_G, {__index = function() return 1 end})", "coroutine.wrap(function() end)()",
  "local a = {} a[a] = a return a", "return { every = 1e308 }", "return { every = -0.0 }",
  "return { cron = '* * * * * * * *' }", "return { tz = ('../'):rep(50) }",
}
local function mutate(s)
  for _ = 1, math.random(1, 4) do
    local r, n = math.random(), #s
    local at = math.random(0, math.max(n, 1))
    if r < 0.25 and n > 0 then                      -- flip a byte
      s = s:sub(1, at - 1) .. string.char(math.random(0, 255)) .. s:sub(at + 1)
    elseif r < 0.4 then                              -- cut
      s = s:sub(1, at)
    elseif r < 0.6 then                              -- splice two seeds
      local o = seeds[math.random(#seeds)]
      s = s:sub(1, at) .. o:sub(math.random(1, #o))
    else                                             -- a snippet in
      s = s:sub(1, at) .. "\n" .. snippets[math.random(#snippets)] .. "\n" .. s:sub(at + 1)
    end
  end
  return s
end
local ini_text = "[leash]\njobs = jobs\nload_timeout = 1s\nreplica = fz\n"
for round = 1, rounds do
  local d = ("%s/jobs%d"):format(tmp, round)
  sh("mkdir -p " .. q(d .. "/jobs"))
  write(d .. "/leash.ini", ini_text)
  for i = 1, 50 do
    write(("%s/jobs/j%02d.lua"):format(d, i), mutate(seeds[math.random(#seeds)]))
  end
  local code, out = sh(("cd %s && timeout 600 %s check -c leash.ini"):format(q(d), q(bin)))
  judge("check " .. d, code, out, { [0] = true, [1] = true })
end

-- ---- rows ----
local function rnd_int()
  local pick = {
    "NULL", "0", "-1", "-4", "9223372036854775807", "-9223372036854775808", "4611686018427387904",
    "253402300799999", "253402300800000", "1e300", "'text'", "x'ff00fe'", tostring(math.random(0, 2^40)),
  }
  return pick[math.random(#pick)]
end
local function rnd_text()
  local pick = { "NULL", "''", "'x'", "x'ff'", "x'1b5b33316d'", "'" .. ("z"):rep(5000) .. "'",
                 "'a\nb'", "'r1:1:deadbeef'", "'" .. ("é"):rep(300) .. "'", "x'00'" }
  return pick[math.random(#pick)]
end
for round = 1, rounds do
  local d = ("%s/rows%d"):format(tmp, round)
  sh("mkdir -p " .. q(d .. "/jobs"))
  write(d .. "/jobs/tick.lua", 'return { every = "1s", run = function() end }')
  write(d .. "/jobs/svc.lua", 'return { run = function(ctx) while true do ctx.sleep(1) end end }')
  write(d .. "/leash.ini", "[leash]\njobs = jobs\nreplica = fz\ngrace = 1s\n[singleton]\n"
    .. "enabled = true\nlease = 3s\n[sqlite]\npath = leash.db\n")
  local code, out = sh(("cd %s && timeout --preserve-status -s INT 4 %s run -c leash.ini"):format(q(d), q(bin)))
  judge("seed run " .. d, code, out, { [0] = true })
  local sql = {}
  for _ = 1, 6 do
    sql[#sql + 1] = ("UPDATE leash_leases SET token = %s, last_fire = %s, expires_at = %s, owner = %s"
      .. " WHERE name = '%s';"):format(rnd_int(), rnd_int(), rnd_int(), rnd_text(),
        math.random() < 0.5 and "tick" or "svc")
    sql[#sql + 1] = ("INSERT OR REPLACE INTO leash_leases_runs (job, scheduled_at, owner, token,"
      .. " outcome, started_at, ended_at, error) VALUES (%s, %s, %s, %s, %s, %s, %s, %s);")
      :format(math.random() < 0.7 and "'tick'" or rnd_text(), rnd_int(), rnd_text(), rnd_int(),
        math.random() < 0.5 and "'ok'" or rnd_text(), rnd_int(), rnd_int(), rnd_text())
    sql[#sql + 1] = ("INSERT OR REPLACE INTO leash_leases_replicas (owner, host, pid, version,"
      .. " started_at, heartbeat, draining, jobs_hash, jobs) VALUES (%s, %s, %s, %s, %s, %s, %s,"
      .. " %s, %s);"):format(rnd_text(), rnd_text(), rnd_int(), rnd_text(), rnd_int(), rnd_int(),
        rnd_int(), rnd_text(), rnd_text())
  end
  write(d .. "/rows.sql", table.concat(sql, "\n"))
  sh(("cd %s && sqlite3 leash.db < rows.sql"):format(q(d)))
  for _, args in ipairs { "status", "status --json", "status --check", "status --leases",
                          "history --json", "history tick --limit 50" } do
    code, out = sh(("cd %s && timeout 60 %s %s -c leash.ini"):format(q(d), q(bin), args))
    judge(args .. " " .. d, code, out, { [0] = true, [1] = true, [2] = true, [3] = true })
  end
  code, out = sh(("cd %s && timeout --preserve-status -s INT 5 %s run -c leash.ini"):format(q(d), q(bin)))
  judge("run on the rows " .. d, code, out, { [0] = true })
end

for _, f in ipairs(findings) do print("FINDING " .. f .. "\n") end
print(("fuzz: %d cases, %d findings (seed %d, files in %s)"):format(cases, #findings, seed, tmp))
os.exit(#findings == 0 and 0 or 1)

-- bench/tricks_bench.lua: what each trick that only makes starts faster buys
-- (src/core/tune.h), measured alone: the burst benchmark (bench/burst_bench.lua,
-- one replica holding N jobs of every = "1s") with everything on, then with one
-- trick off (LEASH_TUNE_OFF=name), each in turn, TRICKS_ROUNDS times in
-- alternation so that a busy machine weighs on all alike.  Prints each run's
-- start p99 as it comes, then per trick the median of its runs' p50 and p99 and
-- the p99's ratio to everything on (> 1: the trick helps).
-- Run with `make bench-tricks` (TRICKS_ROUNDS=5 TRICKS_JOBS=100,1000
-- TRICKS_WINDOW=5 TRICKS=warm,huge,...).
local ROUNDS = tonumber(os.getenv("TRICKS_ROUNDS") or "5")
local JOBS = os.getenv("TRICKS_JOBS") or "100,1000"
local WINDOW = os.getenv("TRICKS_WINDOW") or "5"
local TRICKS = { "" }
for t in (os.getenv("TRICKS") or "warm,huge,tidy,defer"):gmatch("[%w]+") do
  TRICKS[#TRICKS + 1] = t
end

local function median(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  if #s == 0 then return 0 / 0 end
  return #s % 2 == 1 and s[(#s + 1) // 2] or (s[#s // 2] + s[#s // 2 + 1]) / 2
end

local function label(t) return t == "" and "all on" or t .. " off" end

-- got[trick][n] = { p50 = {...}, p99 = {...} }
local got = {}
print(("tricks benchmark: %d rounds, N = %s, %ss windows; %s"):format(ROUNDS, JOBS, WINDOW,
  os.date("!%Y-%m-%dT%H:%M:%SZ")))
for round = 1, ROUNDS do
  for _, t in ipairs(TRICKS) do
    local cmd = ("LEASH_TUNE_OFF=%s BURST_JOBS=%s BURST_WINDOW=%s lua5.4 bench/burst_bench.lua 2>&1")
      :format(t, JOBS, WINDOW)
    local p = assert(io.popen(cmd))
    for l in p:lines() do
      local n, p50, p99 = l:match("^%s*(%d+)%s+%d+%s+%d+%s+([%d.]+)/([%d.]+)/[%d.]+")
      if n then
        got[t] = got[t] or {}
        got[t][n] = got[t][n] or { p50 = {}, p99 = {} }
        table.insert(got[t][n].p50, tonumber(p50))
        table.insert(got[t][n].p99, tonumber(p99))
        print(("round %d  %-12s N=%-5s start p50 %6.1f  p99 %6.1f ms"):format(round, label(t), n,
          tonumber(p50), tonumber(p99)))
        io.stdout:flush()
      end
    end
    if not p:close() then io.stderr:write("tricks: burst_bench failed for ", label(t), "\n") end
  end
end

print()
print("medians over the rounds (start ms; ratio: this p99 / all on's p99, > 1 means the trick helps)")
local ns = {}
for n in JOBS:gmatch("%d+") do ns[#ns + 1] = n end
for _, n in ipairs(ns) do
  local base = got[""] and got[""][n] and median(got[""][n].p99)
  for _, t in ipairs(TRICKS) do
    local g = got[t] and got[t][n]
    if g then
      local p99 = median(g.p99)
      print(("N=%-5s %-12s p50 %6.1f  p99 %6.1f  ratio %5.2f  (%d runs)"):format(n, label(t),
        median(g.p50), p99, base and p99 / base or 0 / 0, #g.p99))
    end
  end
end

-- leash.sandbox: the environment a job file's top level runs in, and the
-- budget it runs under.
--
-- The job's run function has to live in the scheduler's own Lua state (every
-- forked run calls it), so the top level runs in the parent.  It runs there
-- second: src/plan/job.c first loads every file in a forked checking process,
-- bounded by the wall clock ([leash] load_timeout), while the scheduler's
-- loop goes on; a file that runs past it, or dies there, is a load error and
-- never runs in the parent.  Only a file that passed is loaded again in the
-- parent, under the same budget and deadline, which then are a backstop for
-- a file that behaves differently the second time.  So what a file is given
-- cannot reach the scheduler, leash's own modules or another file:
--  * its own views of string, table, math, utf8, coroutine and os (one
--    shared copy each, see own), so what it changes in them stays its own;
--    no debug, no package;
--  * require gives only leash.core (a view of it) while loading; in the
--    run's child it is the real require;
--  * getmetatable sees only tables' metatables (never the string one);
--    setmetatable refuses __gc while loading: a finalizer would run later,
--    inside the scheduler, outside any budget;
--  * calls that block or end the process (os.exit, os.execute, io.*,
--    leash.core's sleep and exec, dofile, ...) raise while loading and work
--    in the run's child, which is another process;
--  * load makes text chunks in the file's environment;
--  * collectgarbage only counts, collects and steps while loading, at most
--    GC_MAX times;
--  * print writes at most PRINT_MAX bytes while loading.
-- M.run runs a function under the budget: a fixed number of instructions,
-- bytes (net, and allocated in all) and a deadline that no Lua code can
-- catch, clear or reset (see src/core/budget.c).  The budget counts Lua
-- instructions: a single C library call that loops without allocating is
-- not counted: string.rep of "" and table.move are bounded here (whatever
-- type their counts come as: C converts strings and whole floats), and so
-- are string patterns (by the steps they could take).  What is left is the
-- checking process's wall clock.
local core = require "leash.core"

local M = {}

local loading = false

local function refuse(name)
  error(name .. " is not available while loading: the top level runs inside the scheduler "
    .. "and should only build the job table; call it in run(ctx)", 3)
end

-- A table of real's fields (looked up when used, so a child sees what it
-- changed), refusing while loading all but the names in `now`.
local function later(real, prefix, now)
  local t = {}
  for k in pairs(now or {}) do t[k] = real[k] end
  return setmetatable(t, { __index = function(self, k)
    local v = real[k]
    if type(v) ~= "function" then
      if v ~= nil and loading then refuse(prefix .. tostring(k)) end
      return v
    end
    local f = function(...)
      if loading then refuse(prefix .. k) end
      return real[k](...)
    end
    rawset(self, k, f)
    return f
  end })
end

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

-- An integer argument as C reads it (luaL_checkinteger takes a whole
-- float and a string that converts to one), or nil when C would refuse it.
local function as_integer(v)
  if type(v) == "string" then v = tonumber(v) end
  return math.tointeger(v)
end

-- C loops the count hook cannot see, made bounded while loading.
local GUARDED_STRING = copy(string)
function GUARDED_STRING.rep(s, n, sep)
  -- Empty s and sep: the C loop would run n times for nothing.
  if loading and s == "" and (sep == nil or sep == "") and as_integer(n) then return "" end
  return string.rep(s, n, sep)
end
local MOVE_MAX = 1 << 24
local function guarded_move(a1, f, e, t, a2)
  local fi, ei = as_integer(f), as_integer(e)
  if loading and fi and ei and ei // 2 - fi // 2 >= MOVE_MAX // 2 then
    error(("table.move: more than %d elements while loading"):format(MOVE_MAX), 2)
  end
  return table.move(a1, f, e, t, a2)
end

-- A pattern with k backtracking quantifiers (* + - ?) on n bytes can take
-- about n^(k+1) steps inside one C call, where the count hook never fires
-- (("a"):rep(3000):find(".-.-.-.-b") would run for hours).  A plain search
-- (or a pattern with no special character) compares the pattern at each
-- byte: n * m steps.  While loading, a match whose bound passes
-- PATTERN_STEPS is refused; run(ctx) has no bound.
local PATTERN_STEPS = 1e8
local gsub, find = string.gsub, string.find
local function pattern_cost(subject, pat, plain)
  if plain or not find(pat, "[%^%$%*%+%?%.%(%)%[%]%%%-]") then
    return (#subject + 1) * (#pat + 1)
  end
  local body = gsub(gsub(pat, "%%.", "x"), "%[%^?%]?[^%]]*%]", "x")
  local _, k = gsub(body, "[%*%+%-%?]", "")
  local anchored = pat:sub(1, 1) == "^"
  return (#subject + 1) ^ (k + (anchored and 0 or 1)) * (#pat + 1)
end
local function guard_pattern(name, f, plain_at)
  return function(subject, pat, ...)
    if loading and type(subject) == "string" and type(pat) == "string"
        and pattern_cost(subject, pat, plain_at and select(plain_at, ...)) > PATTERN_STEPS then
      error(("string.%s: the pattern %q on %d bytes could run for too long while loading "
        .. "(match in run(ctx) instead)"):format(name, pat:sub(1, 40), #subject), 2)
    end
    return f(subject, pat, ...)
  end
end
GUARDED_STRING.find = guard_pattern("find", string.find, 2)
GUARDED_STRING.match = guard_pattern("match", string.match)
GUARDED_STRING.gmatch = guard_pattern("gmatch", string.gmatch)
GUARDED_STRING.gsub = guard_pattern("gsub", string.gsub)

local SAFE_OS = { clock = true, date = true, difftime = true, time = true }
local SAFE_CORE = { now = true, monotonic = true, version = true }
local GC_WHILE_LOADING = { collect = true, count = true, step = true, isrunning = true }
-- A full collection walks the scheduler's whole heap: a file may ask for a
-- few, not for one per allocation.
local GC_MAX = 8
local gc_left = 0
-- What print may write while loading, per file (the journal is no place for
-- a file's output; run(ctx) prints into the run's log).
local PRINT_MAX = 64 * 1024
local print_left = 0

-- What every file's environment shares: one copy of each library table (a
-- file writes into a view of its own, see own), built once.
local SHARED_TABLE = copy(table)
SHARED_TABLE.move = guarded_move
local SHARED_MATH = copy(math)
function SHARED_MATH.randomseed(...)
  -- The generator is the scheduler's (and every run's, forked from it).
  if loading then refuse("math.randomseed") end
  return math.randomseed(...)
end
local SHARED_UTF8 = copy(utf8)
local SHARED_COROUTINE = copy(coroutine)
-- A new thread's first tick of instructions is not counted by the hook.
function SHARED_COROUTINE.create(f)
  core.budget_charge()
  return coroutine.create(f)
end
function SHARED_COROUTINE.wrap(f)
  core.budget_charge()
  return coroutine.wrap(f)
end
local SHARED_OS = later(os, "os.", SAFE_OS)
-- leash's own secrets (its HTTP token, its database's password and PG*
-- variables) are not a job's: os.getenv does not see them, here while
-- loading, and a run's environment lacks them (src/launch/child.c).
local getenv = os.getenv
function SHARED_OS.getenv(name)
  if type(name) == "string" and core.env_hidden(name) then return nil end
  return getenv(name)
end
local SHARED_IO = later(io, "io.")
local SHARED_CORE = later(core, "leash.core.", SAFE_CORE)
local SHARED_LIMITS = copy(core.limits)
local LATER_G = later(_G, "", {})
local DOFILE, LOADFILE = LATER_G.dofile, LATER_G.loadfile

local function getmetatable_(v)
  if type(v) == "table" then return getmetatable(v) end
  return nil
end

local function setmetatable_(t, mt)
  if loading and type(mt) == "table" and rawget(mt, "__gc") ~= nil then
    error("setmetatable: __gc is not allowed while loading: a finalizer would run later, "
      .. "inside the scheduler", 2)
  end
  return setmetatable(t, mt)
end

local function collectgarbage_(opt, ...)
  if not loading then return collectgarbage(opt, ...) end
  if opt ~= nil and not GC_WHILE_LOADING[opt] then
    refuse(("collectgarbage(%q)"):format(tostring(opt)))
  end
  if opt == nil or opt == "collect" or opt == "step" then
    if gc_left == 0 then
      error(("collectgarbage: more than %d collections while loading"):format(GC_MAX), 2)
    end
    gc_left = gc_left - 1
    local r = table.pack(collectgarbage(opt, ...))
    core.budget_charge(0)       -- the deadline: a collection takes time, no instructions
    return table.unpack(r, 1, r.n)
  end
  return collectgarbage(opt, ...)
end

local function print_(...)
  if not loading then return print(...) end
  local n = select("#", ...)
  local parts = table.pack(...)
  for i = 1, n do parts[i] = tostring(parts[i]) end
  local line = table.concat(parts, "\t", 1, n) .. "\n"
  if #line > print_left then
    print_left = 0
    error(("print: more than %d bytes of output while loading"):format(PRINT_MAX), 2)
  end
  print_left = print_left - #line
  io.stdout:write(line)
  io.stdout:flush()
end

-- One file's view of a shared library table: it reads the shared fields and
-- keeps what the file assigns to itself (assigning nil to a shared field
-- does not hide it); pairs lists both.  A thousand job files would hold a
-- thousand copies of every library otherwise (7 KB a file, in the
-- scheduler and in every run forked from it).
local VIEWS = setmetatable({}, { __mode = "k" })
local function own(shared)
  local mt = VIEWS[shared]
  if not mt then
    -- (__metatable: a file can neither see nor change the one all share.)
    mt = { __index = shared, __metatable = "a leash library view", __pairs = function(t)
      local mine, k = true, nil
      return function()
        local v
        if mine then
          k, v = next(t, k)
          if k ~= nil then return k, v end
          mine = false
        end
        repeat
          k, v = next(shared, k)
        until k == nil or rawget(t, k) == nil
        return k, v
      end, t, nil
    end }
    VIEWS[shared] = mt
  end
  return setmetatable({}, mt)
end

-- A fresh environment for one job file.
function M.env()
  local env = {}
  for _, k in ipairs { "assert", "error", "ipairs", "next", "pairs", "pcall",
      "rawequal", "rawget", "rawlen", "rawset", "select", "tonumber", "tostring", "type",
      "xpcall", "_VERSION" } do
    env[k] = _G[k]
  end
  env._G = env
  env.string = own(GUARDED_STRING)
  env.table = own(SHARED_TABLE)
  env.math = own(SHARED_MATH)
  env.utf8 = own(SHARED_UTF8)
  env.coroutine = own(SHARED_COROUTINE)
  env.os = own(SHARED_OS)
  env.io = own(SHARED_IO)
  local core_view = own(SHARED_CORE)
  rawset(core_view, "limits", own(SHARED_LIMITS))
  env.dofile = DOFILE
  env.loadfile = LOADFILE
  function env.require(name)
    if name == "leash.core" then return core_view end
    if loading then
      error(("require %s: while loading, a job file may only require \"leash.core\"")
        :format(type(name) == "string" and ("%q"):format(name) or "(a " .. type(name) .. ")"), 2)
    end
    return require(name)
  end
  function env.load(chunk, name, mode, ...)
    if loading then mode = "t" end
    if select("#", ...) == 0 then return load(chunk, name, mode, env) end
    return load(chunk, name, mode, ...)
  end
  env.getmetatable = getmetatable_
  env.setmetatable = setmetatable_
  env.collectgarbage = collectgarbage_
  env.print = print_
  return env
end

-- Runs fn() under the budget (limits.instructions, limits.bytes,
-- limits.allocated, limits.ms from now), with the guards of M.env on; errors
-- are located in chunkname ("@path").  Returns true and fn's results, or
-- false, "error"|"instructions"|"memory"|"allocated"|"time", the line of
-- chunkname (or nil) and the error value.
function M.run(chunkname, limits, fn)
  local smt = getmetatable("")
  local index = smt.__index
  -- Method calls on strings ("":rep(n)) reach the guarded functions too.
  smt.__index = GUARDED_STRING
  loading, gc_left, print_left = true, GC_MAX, PRINT_MAX
  local res = table.pack(core.budget_run(fn, chunkname, limits.instructions, limits.bytes,
    limits.allocated or 0, limits.ms or 0))
  loading = false
  smt.__index = index
  return table.unpack(res, 1, res.n)
end

return M

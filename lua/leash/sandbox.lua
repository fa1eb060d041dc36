-- leash.sandbox: the environment a job file's top level runs in, and the
-- budget it runs under.
--
-- Why not load in a forked process with rlimits and a timeout: the job's
-- run function has to live in the scheduler's own Lua state (every forked
-- run calls it), so a forked loader would only check the file and the
-- parent would still have to run its top level again, with whatever it does
-- the second time.  So the top level runs in the parent, and what a file is
-- given cannot reach the scheduler, leash's own modules or another file:
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
--  * collectgarbage only counts, collects and steps while loading.
-- M.run runs a function under the budget: a fixed number of instructions
-- and bytes that no Lua code can catch, clear or reset (see src/budget.c).
-- The budget counts Lua instructions: a single C library call that loops
-- without allocating is not counted: string.rep of "" and table.move are
-- bounded here, and so are string patterns (by the steps they could take).
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

-- C loops the count hook cannot see, made bounded while loading.
local GUARDED_STRING = copy(string)
function GUARDED_STRING.rep(s, n, sep)
  -- Empty s and sep: the C loop would run n times for nothing.
  if loading and s == "" and (sep == nil or sep == "") and math.type(n) then return "" end
  return string.rep(s, n, sep)
end
local MOVE_MAX = 1 << 24
local function guarded_move(a1, f, e, t, a2)
  if loading and math.type(f) == "integer" and math.type(e) == "integer"
      and e // 2 - f // 2 >= MOVE_MAX // 2 then
    error(("table.move: more than %d elements while loading"):format(MOVE_MAX), 2)
  end
  return table.move(a1, f, e, t, a2)
end

-- A pattern with k backtracking quantifiers (* + -) on n bytes can take
-- about n^(k+1) steps inside one C call, where the count hook never fires
-- (("a"):rep(3000):find(".-.-.-.-b") would run for hours).  While loading, a
-- match whose bound passes PATTERN_STEPS is refused; run(ctx) has no bound.
local PATTERN_STEPS = 1e8
local gsub = string.gsub
local function pattern_cost(subject, pat)
  local body = gsub(gsub(pat, "%%.", "x"), "%[%^?%]?[^%]]*%]", "x")
  local _, k = gsub(body, "[%*%+%-]", "")
  local anchored = pat:sub(1, 1) == "^"
  return (#subject + 1) ^ (k + (anchored and 0 or 1))
end
local function guard_pattern(name, f, plain_at)
  return function(subject, pat, ...)
    if loading and type(subject) == "string" and type(pat) == "string"
        and not (plain_at and select(plain_at, ...)) and pattern_cost(subject, pat) > PATTERN_STEPS then
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
-- loading, and a run's environment lacks them (src/child.c).
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
  if loading and opt ~= nil and not GC_WHILE_LOADING[opt] then
    refuse(("collectgarbage(%q)"):format(tostring(opt)))
  end
  return collectgarbage(opt, ...)
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
  for _, k in ipairs { "assert", "error", "ipairs", "next", "pairs", "pcall", "print",
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
  return env
end

-- Runs fn() under the budget (limits.instructions, limits.bytes), with the
-- guards of M.env on; errors are located in chunkname ("@path").  Returns
-- true and fn's results, or false, "error"|"instructions"|"memory", the
-- line of chunkname (or nil) and the error value.
function M.run(chunkname, limits, fn)
  local smt = getmetatable("")
  local index = smt.__index
  -- Method calls on strings ("":rep(n)) reach the guarded functions too.
  smt.__index = GUARDED_STRING
  loading = true
  local res = table.pack(core.budget_run(fn, chunkname, limits.instructions, limits.bytes))
  loading = false
  smt.__index = index
  return table.unpack(res, 1, res.n)
end

return M

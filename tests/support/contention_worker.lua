-- One contender of the conformance spec's contention test, run as its own
-- OS process: lua5.4 contention_worker.lua PROVIDER TABLE NAME OWNER ATTEMPTS LEASE_MS OUT
-- Records every grant as "owner token granted_at expires_at" (database time).
-- A holder keeps the lease for a few re-acquires, then goes quiet long enough
-- for it to expire, so the lease changes hands many times.
local core = require "leash.core"
local system = require "system"
local providers = require "providers"

local provider, tbl, name, owner, attempts, lease_ms, out = table.unpack(arg)
attempts, lease_ms = tonumber(attempts), tonumber(lease_ms)

local s = assert(core.open_store(assert(providers.get(provider, tbl))))
local f = assert(io.open(out, "w"))
local errors, streak = 0, 0
math.randomseed(os.time() + #owner * 7919 + (tonumber(owner:match("%d+")) or 0))

for _ = 1, attempts do
  local ok, info = s:try_acquire(name, owner, lease_ms)
  if ok == nil then
    errors = errors + 1
    io.stderr:write(owner, ": ", tostring(info), "\n")
  elseif ok then
    f:write(("%s %d %d %d\n"):format(owner, info.token, info.now, info.expires_at))
    streak = streak + 1
    if streak >= math.random(1, 4) then
      streak = 0
      system.sleep((lease_ms + math.random(0, 20)) / 1000)   -- let it expire
    else
      system.sleep(math.random(5, 20) / 1000)
    end
  else
    system.sleep(math.random(1, 5) / 1000)
  end
end
f:close()
s:close()
os.exit(errors == 0 and 0 or 1)

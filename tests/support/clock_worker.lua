-- Run by the conformance spec under faketime: asks the store about a lease
-- another process holds, and takes a fresh one, printing one line:
--   <local wall ms> <taken?> <holder> <holder expires_at> <db now> <fresh lease expires_at - now> <fresh token>
local core = require "leash.core"
local providers = require "providers"

local provider, tbl, name = table.unpack(arg)
local s = assert(core.open_store(assert(providers.get(provider, tbl))))
local ok, info = s:try_acquire(name, "B", 1000)
assert(ok ~= nil, info)
local fresh = ("clock-%d-%d"):format(os.time(), math.random(1, 1e9))
local got, mine = s:try_acquire(fresh, "C", 1000)
assert(got, "fresh lease not taken")
io.write(("%d %s %s %d %d %d %d\n"):format(os.time() * 1000, tostring(ok), info.owner,
  info.expires_at, info.now, mine.expires_at - mine.now, mine.token))
s:close()

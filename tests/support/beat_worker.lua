-- The beating replica of the presence conformance spec's undrain race, run
-- as its own OS process:
--   lua5.4 beat_worker.lua PROVIDER TABLE OWNER NAME STOP_FILE SECONDS
-- Beats as OWNER (of NAME) back to back, with no pause, until STOP_FILE
-- exists or SECONDS pass, so that every drain and undrain of the spec meets
-- a beat in flight.  Prints the number of beats; exits 1 on any error.
local core = require "leash.core"
local providers = require "providers"

local provider, tbl, owner, name, stop, secs = table.unpack(arg)
local s = assert(core.open_store(assert(providers.get(provider, tbl))))
local me = { owner = owner, host = "host-b", pid = 7, version = "0.9.0", draining = false,
             jobs_hash = "h1", jobs = "a\n", name = name }
local deadline, n = os.time() + tonumber(secs), 0

while os.time() < deadline do
  local rows, err = s:beat(me, 60000)
  if not rows then
    io.stderr:write(owner, ": ", tostring(err), "\n")
    os.exit(1)
  end
  n = n + 1
  if n % 16 == 0 then
    local f = io.open(stop)
    if f then f:close(); break end
  end
end
s:close()
print(n)

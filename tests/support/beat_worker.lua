-- The beating replica of the presence conformance spec's undrain race, run
-- as its own OS process:
--   lua5.4 beat_worker.lua PROVIDER TABLE OWNER NAME STOP_FILE SECONDS
-- Beats as OWNER (of NAME) back to back until STOP_FILE exists or SECONDS
-- pass, so that every drain and undrain of the spec meets a beat in flight.
-- Prints the number of beats; exits 1 on any error.  On SQLite, which
-- serialises writers (a write takes the lock before it reads, so no beat is
-- ever in flight there), it lets a millisecond pass every fourth beat:
-- SQLite's busy wait is not a queue, and a writer that never paused kept the
-- spec's first drain out past its 5 s busy timeout on a busy disk ("database
-- is locked", three runs in three under a disk hog; none with the pause).
local core = require "leash.core"
local providers = require "providers"
local system = require "system"

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
  if provider == "sqlite" and n % 4 == 0 then system.sleep(0.001) end
  if n % 16 == 0 then
    local f = io.open(stop)
    if f then f:close(); break end
  end
end
s:close()
print(n)

-- The parent pushes each running child's self-fencing deadline with a
-- real-time signal after every good renew.  A child that got one before it
-- installed its handler used to die of it ("killed by signal 35"): with 300
-- jobs firing each second and a renew every 50 ms, pushes meet children a
-- few microseconds old all the time.  No run may end by a signal of ours.
local L = require "e2e"

describe("deadline pushes under load", function()
  it("300 jobs every second, renew every 50 ms: no run is killed by a signal", function()
    -- Under ASan 300 forks in a row outlast a 400 ms lease (no renew
    -- meanwhile): there the lease is longer; the pushes come as often.
    local sanitized = os.getenv("LEASH_SANITIZE")
    local d = L.dir { config = {
      leash = { grace = "500ms" },
      singleton = { enabled = "true", lease = sanitized and "3s" or "400ms", renew = "50ms",
                    retry = "100ms" },
      store = { provider = "sqlite" },
      sqlite = { path = "leases.db" },
    } }
    for i = 1, 300 do
      d.write_job(("j%03d"):format(i), 'return { every = "1s", run = function() end }')
    end
    local p = L.spawn(d)
    assert(p:wait_log("holding the lease", 10), "no lease taken")
    L.sleep(6)
    assert.equal(0, p:stop(10))
    -- An instrumented build is far slower (ASan copies its shadow memory at
    -- every fork): renewals then miss deadlines and the self-fencing
    -- SIGKILL strikes, as it must.  There only a kill by one of our
    -- real-time signals fails it; in the plain build any kill does, unless
    -- the log says a renew missed its deadline (a commit held up that long
    -- by a busy disk: SQLite's fsync under a disk hog).
    local fenced = p:log_text():find("lease deadline reached", 1, true)
    local function ours(line)
      if sanitized then return line:find("Real%-time signal") end
      return not (fenced and line:find("killed by signal 9 ", 1, true))
    end
    local finished, killed = 0, {}
    for _, line in ipairs(p:log_lines()) do
      if line:find("] finished in ", 1, true) then finished = finished + 1 end
      if line:find("failed after", 1, true) and line:find("killed by signal", 1, true) and ours(line) then
        killed[#killed + 1] = line
      end
    end
    local slowest = 0
    for ms in p:log_text():gmatch("statements took (%d+)ms") do slowest = math.max(slowest, tonumber(ms)) end
    assert.same({}, killed, ("the slowest store step took %d ms; a deadline reached: %s"):format(
      slowest, tostring(fenced ~= nil)))
    local want = sanitized and 20 or 1000
    assert.is_true(finished >= want, "only " .. finished .. " runs finished")
  end)
end)

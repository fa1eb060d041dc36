-- The hand-off decision (src/cluster/handoff.c) through leash.core.handoff_decide,
-- with made-up inputs and times: the races of issue 32 item 1, each a line.
local core = require "leash.core"

local LEASE = 15000

-- A held service whose placement prefers another replica that is live.
local function service(t)
  local d = { other = true, fresh = true, moved = true, held = 60000, lease = LEASE,
              service = true, busy = true, now = 1000000, handover = 50 }
  for k, v in pairs(t or {}) do d[k] = v end
  return d
end

local function decide(t)
  return (core.handoff_decide(t))
end

describe("hand-off decision", function()
  it("a lease just taken from a replica that is stopping is not handed back to it", function()
    -- p3 took worker at once when p1 released it; p3's view still shows p1
    -- live and preferred, but it was read before the lease was taken.
    assert.equal("keep", decide(service { fresh = false, held = 20, moved = false }))
    -- A fresh view (p1's row gone) no longer prefers another: it stays.
    assert.equal("keep", decide(service { other = false, held = 5000 }))
  end)

  it("a service goes in two steps: stop the run, then release once it ended", function()
    assert.equal("stop", decide(service {}))
    assert.equal("wait", decide(service { handing_off = true, handing = 100 }))
    assert.equal("release", decide(service { handing_off = true, handing = 900, busy = false }))
  end)

  it("a hand-off whose target went away is called off at once: the service runs again", function()
    assert.equal("cancel", decide(service { handing_off = true, handing = 800, other = false,
                                            busy = false }))
    -- (the target's heartbeat got old: spread says other = false then too)
    local what, why = core.handoff_decide(service { handing_off = true, other = false })
    assert.equal("cancel", what)
    assert.is_nil(why)
  end)

  it("a hand-off not done within the lease is abandoned", function()
    assert.equal("wait", decide(service { handing_off = true, handing = LEASE - 1 }))
    assert.equal("abandon", decide(service { handing_off = true, handing = LEASE }))
  end)

  it("no ping-pong: a lease taken under the same membership stays a lease", function()
    -- p2 handed worker to p3 and p3's view prefers p2 (the views differed
    -- for a moment): p3 keeps it for a lease, then the placement rules.
    assert.equal("keep", decide(service { moved = false, held = 0 }))
    assert.equal("keep", decide(service { moved = false, held = LEASE - 1 }))
    assert.equal("stop", decide(service { moved = false, held = LEASE }))
    -- The membership moved (a replica joined or left) since it was taken:
    -- the placement rules at once.
    assert.equal("stop", decide(service { moved = true, held = 10 }))
  end)

  it("a job taken through leash handoff stays until a replica joins or leaves", function()
    assert.equal("keep", decide(service { pinned = true, moved = false, held = 10 * LEASE }))
    assert.equal("stop", decide(service { pinned = true, moved = true, joined_left = true,
                                          held = 10 }))
    -- A heartbeat late a moment (a replica seen not live, then live again)
    -- changes the placement's inputs, not who is there: the pin holds (the
    -- service_handoff_spec flake: the job went back to the preferred one).
    assert.equal("keep", decide(service { pinned = true, moved = true, joined_left = false,
                                          held = 10 * LEASE }))
  end)

  it("leash handoff and leash drain go whatever the view says", function()
    local what, why = core.handoff_decide(service { manual = true, other = false, fresh = false,
                                                    moved = false, held = 0 })
    assert.same({ "stop", "leash handoff" }, { what, why })
    what, why = core.handoff_decide(service { draining = true, other = false, busy = false })
    assert.same({ "release", "leash drain" }, { what, why })
    assert.equal("preferred", select(2, core.handoff_decide(service {})))
  end)

  it("a periodic job goes at a safe point: idle, and no fire within the handover", function()
    local t = 1000000
    local job = { other = true, fresh = true, moved = true, held = 60000, lease = LEASE,
                  now = t, handover = 2400 }
    local function with(x)
      local d = {}
      for k, v in pairs(job) do d[k] = v end
      for k, v in pairs(x) do d[k] = v end
      return decide(d)
    end
    assert.equal("wait", with { busy = true, next_fire = t + 60000 })
    assert.equal("release", with { busy = false, next_fire = t + 60000 })
    assert.equal("wait", with { busy = false, next_fire = t + 1000, after_next = t + 61000 })
    -- fires more often than the handover: right after a run
    assert.equal("release", with { busy = false, next_fire = t + 1000, after_next = t + 2000 })
  end)
end)

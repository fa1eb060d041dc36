-- leash status's replicas section (lua/leash/status.lua): shares, states,
-- jobs/ drift and shared names, from made-up presence rows.
local status = require "leash.status"

local now = 1800000000000
local function rep(owner, t)
  t = t or {}
  return { owner = owner, name = owner:match("^(.*):[^:]*:[^:]*$"), host = t.host or "h1",
    pid = 1, version = t.version or "0.1.0", started_at = now - 60000,
    heartbeat = t.beat or now - 100, draining = t.draining or false,
    jobs_hash = t.hash or "aaaa", jobs = t.jobs or "a\nb\nc\n" }
end
local function lease(name, owner, left)
  return { name = name, owner = owner, token = 1, acquired_at = now - 1000,
    renewed_at = now - 100, expires_at = now + (left or 5000) }
end

describe("leash status replicas", function()
  it("shows each replica's state, leases and share, and no warning when all agree", function()
    local reps = { rep("r1:1:aa"), rep("r2:2:bb", { draining = true }), rep("r3:3:cc", { beat = now - 20000 }) }
    local rows = { lease("a", "r1:1:aa"), lease("b", "r1:1:aa"), lease("c", "r2:2:bb"),
                   lease("d", "r3:3:cc", -5) }
    local text = status.replicas_table(reps, rows, now, 15000)
    assert.matches("REPLICA%s+HOST%s+VERSION%s+STATE%s+LEASES%s+SHARE%s+JOBS HASH", text)
    assert.matches("r1:1:aa%s+h1%s+0%.1%.0%s+live%s+2%s+67%%%s+aaaa", text)
    assert.matches("r2:2:bb%s+h1%s+0%.1%.0%s+draining%s+1%s+33%%", text)
    assert.matches("r3:3:cc%s+h1%s+0%.1%.0%s+dead%s+0%s+0%%", text)
    assert.is_nil(text:find("warning"))
    assert.equal("", status.replicas_table({}, rows, now, 15000))
  end)

  it("warns when a replica has jobs the others lack", function()
    local reps = { rep("r1:1:aa"), rep("r2:2:bb", { hash = "bbbb", jobs = "a\nb\nc\nx\ny\n" }) }
    local w = status.drift(reps, now, 15000)
    assert.same({ "replica r2:2:bb has 2 jobs the others lack: x, y" }, w)
    assert.matches("warning: replica r2:2:bb has 2 jobs", status.replicas_table(reps, {}, now, 15000))
  end)

  it("reads a weighted job's line (\"name weight\") as its name", function()
    local reps = { rep("r1:1:aa", { jobs = "a\nb 5\nc\n" }), rep("r2:2:bb", { hash = "bbbb", jobs = "a\nb\nc 2\nx\n" }) }
    assert.same({ "replica r2:2:bb has 1 job the others lack: x" }, status.drift(reps, now, 15000))
  end)

  it("warns when the same jobs are defined differently, and ignores dead replicas", function()
    local reps = { rep("r1:1:aa"), rep("r2:2:bb", { hash = "cccc" }) }
    assert.matches("define the same jobs differently", status.drift(reps, now, 15000)[1])
    reps[2].heartbeat = now - 20000
    assert.same({}, status.drift(reps, now, 15000))
  end)

  it("warns about two live replicas under one name, and shows a garbled row without failing", function()
    local reps = { rep("vm:1:aa"), rep("vm:2:bb", { version = "\1??", hash = "not hex!" , jobs = "a\nb\nc\n" }) }
    local w = status.drift(reps, now, 15000)
    assert.matches("2 live replicas share the name vm %(vm:1:aa, vm:2:bb%)", w[#w])
    local j = status.json("sqlite", {}, now, reps, 15000)
    assert.matches('"replicas":%[{"owner":"vm:1:aa"', j)
    assert.matches('"version":"\\u0001%?%?"', j)
    assert.matches('"warnings":%[', j)
  end)
end)

-- Faults at the one door (store.c, LEASH_STORE_FAULT, as SQLite's
-- faultsim): two real `leash run` replicas of one job every second, and in
-- turn each store operation fails once in both, at its third call there (its
-- first for those a clean stop makes), as a timeout, a lost connection or a
-- refusal.  Whatever failed, the
-- promises hold: no fire runs twice, no two runs overlap, every fire from
-- the first run to the last is run or in the ledger, and a replica whose
-- call failed says so in its log once.
local L = require "e2e"
local R = require "replicas"

-- Every operation of store.h.  Those a run of a few seconds does not reach
-- (the commands' reads and controls) fail nowhere; the walk asserts that
-- most of a run's do.
local OPS = {
  "try_acquire", "renew", "release", "renew_all", "acquire_all", "release_all", "claim_all",
  "claim_runs", "record_runs", "read_runs", "last_runs", "renew_ctl", "control", "prune_runs",
  "list", "beat", "leave", "replicas", "unclaim_all", "renew_beat", "health", "drain", "repair",
  "corrupt_runs", "ctl_version",
}
local KINDS = { "timeout", "gone", "refused" }
-- Made once, at the stop: their first call fails.
local FIRST = { release = true, release_all = true, leave = true, unclaim_all = true }

local function count(text, plain)
  local n, at = 0, 1
  while true do
    local i, j = text:find(plain, at, true)
    if not i then return n end
    n, at = n + 1, j + 1
  end
end

describe("store faults, each operation failing once in a 2-replica run", function()
  local p = R.list_of()[1]           -- sqlite: the walk is about the scheduler, not the SQL
  local hit = {}

  for i, op in ipairs(OPS) do
    local kind = KINDS[(i - 1) % #KINDS + 1]
    it(("%s fails once (%s): no fire twice, no overlap, every fire accounted for"):format(op, kind),
      function()
        local tbl = ("fault_%d"):format(math.random(1, 1e8))
        local d = L.dir { config = R.config(p, tbl) }
        local out = d.out "rec"
        d.write_job("rec", R.job_src(out, "1s", "ctx.sleep(0.2)"))
        local env = { LEASH_STORE_FAULT = ("%s:%d:%s"):format(op, FIRST[op] and 1 or 3, kind) }
        local procs = {}
        for _ = 1, 2 do
          local proc = L.spawn(d, { env = env })
          proc.owner = assert(L.wait_for(function()
            return proc:log_text():match("replica (%S+),")
          end, 5), "a replica did not start")
          procs[#procs + 1] = proc
        end
        local ok, err = pcall(function()
          assert(L.wait_for(function()
            local n = 0
            for _, r in ipairs(R.runs(out)) do if r.ended then n = n + 1 end end
            return n >= 4
          end, 15), "fewer than four runs:\n" .. procs[1]:log_text() .. procs[2]:log_text())
        end)
        R.stop_all(procs)
        assert(ok, err)

        local runs = R.runs(out)
        R.assert_no_overlap(runs)
        local ran = {}
        for _, r in ipairs(runs) do
          assert(not ran[r.scheduled_at], ("fire %d ran twice"):format(r.scheduled_at))
          ran[r.scheduled_at] = r
        end
        local rowed = {}
        for _, row in ipairs(R.ledger(p, tbl)) do
          assert(not rowed[row.scheduled_at],
            ("fire %d has two ledger rows"):format(row.scheduled_at))
          rowed[row.scheduled_at] = row
        end
        for t = runs[1].scheduled_at, runs[#runs].scheduled_at, 1000 do
          assert(ran[t] or rowed[t], ("fire %d is neither run nor in the ledger"):format(t))
        end

        local said = op .. ": " .. ({ timeout = "no answer within the timeout",
          gone = "connection lost", refused = "refused by the server" })[kind]
        local failed = false
        for _, proc in ipairs(procs) do
          local n = count(proc:log_text(), said)
          assert(n <= 1, ("%s logged the fault %d times:\n%s"):format(proc.owner, n,
            proc:log_text()))
          failed = failed or n == 1
        end
        if failed then hit[#hit + 1] = op end
      end)
  end

  it("the walk failed most of the operations a run makes", function()
    io.stderr:write("store_fault_spec: failed and logged: ", table.concat(hit, " "), "\n")
    assert(#hit >= 5, ("only %d operations were reached and failed: %s"):format(#hit,
      table.concat(hit, " ")))
  end)
end)

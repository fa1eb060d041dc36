-- One contender of the conformance spec's claim race, run as its own OS
-- process:
--   lua5.4 claim_worker.lua PROVIDER TABLE NAME OWNER FIRES LEASE_MS SECONDS OUT [runs]
-- With "runs" it claims with claim_runs, each claim carrying the fire's
-- ledger row (outcome "running", the claim's token), so the spec can check
-- that a row exists iff its claim was accepted.
-- Loops until the cursor reaches FIRES (or SECONDS pass): takes the one lease
-- with try_acquire, and while it holds it claims the next fire after the
-- cursor it saw (1, 2, ..., FIRES) with its token.  It also tries what must
-- be refused: a claim with its token just after its lease ran out (before or
-- after another took it), a claim with its previous token while it holds a
-- newer one, and a claim with the holder's token under its own name.  Writes
-- lines (all times on the database's clock):
--   G owner token now expires_at      a grant (try_acquire answered ok)
--   C fire owner token now            an accepted claim
local core = require "leash.core"
local system = require "system"
local providers = require "providers"

local provider, tbl, name, owner, fires, lease_ms, secs, out, mode = table.unpack(arg)
fires, lease_ms, secs = tonumber(fires), tonumber(lease_ms), tonumber(secs)

local s = assert(core.open_store(assert(providers.get(provider, tbl))))
local f = assert(io.open(out, "w"))
local errors = 0
local deadline = os.time() + secs
math.randomseed(os.time() + (tonumber(owner:match("%d+")) or 0) * 7919)

local function sleep_ms(ms) system.sleep(ms / 1000) end

-- Claims fire with token; true when accepted (and recorded).
local function claim(token, fire)
  local claims = { { name = name, token = token, fire = fire } }
  local oks, now
  if mode == "runs" then
    oks, now = s:claim_runs(owner, claims, { { claim = 1, scheduled_at = fire, owner = owner,
                                                outcome = "running" } })
  else
    oks, now = s:claim_all(owner, claims)
  end
  if not oks then
    errors = errors + 1
    io.stderr:write(owner, ": claim: ", tostring(now), "\n")
    return false
  end
  if oks[1] then f:write(("C %d %s %d %d\n"):format(fire, owner, token, now)) end
  return oks[1]
end

local cursor, prev_token = 0, nil
while cursor < fires and os.time() < deadline do
  local ok, info = s:try_acquire(name, owner, lease_ms)
  if ok == nil then
    errors = errors + 1
    io.stderr:write(owner, ": try_acquire: ", tostring(info), "\n")
    sleep_ms(5)
  elseif ok then
    f:write(("G %s %d %d %d\n"):format(owner, info.token, info.now, info.expires_at))
    cursor = info.last_fire or 0
    if prev_token and prev_token < info.token and math.random(1, 2) == 1 and cursor < fires then
      claim(prev_token, cursor + 1)               -- our own, but an older lease
    end
    prev_token = info.token
    for _ = 1, math.random(1, 4) do
      if cursor >= fires or not claim(info.token, cursor + 1) then break end
      cursor = cursor + 1
      sleep_ms(math.random(0, 8))
    end
    if math.random(1, 4) == 1 and cursor < fires then
      sleep_ms(lease_ms + math.random(0, 4))      -- let it expire, then claim as a stale holder
      if claim(info.token, cursor + 1) then cursor = cursor + 1 end
    else
      sleep_ms(math.random(2, 15))
    end
  else
    cursor = info.last_fire or 0
    if math.random(1, 3) == 1 and cursor < fires then
      claim(info.token, cursor + 1)               -- the holder's token, not our lease
    end
    sleep_ms(math.random(1, 5))
  end
end
f:close()
s:close()
os.exit(errors == 0 and 0 or 1)

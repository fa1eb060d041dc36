-- leash status: rendering of one list() answer, as a table a person reads at
-- a glance and as the JSON object of DESIGN.md "Command line".  Pure: rows
-- and now (ms, the database's clock) in, text out.
local core = require "leash.core"
local text = require "leash.text"

local M = {}

local function state(r, now)
  return r.expires_at > now and "held" or "free"
end

-- "850ms", "12.3s", "4m05s", "2h03m": how long until a held lease expires.
function M.human(ms)
  if ms < 1000 then return ("%dms"):format(ms) end
  if ms < 60000 then return ("%.1fs"):format(math.floor(ms / 100) / 10) end
  local s = ms // 1000
  if s < 3600 then return ("%dm%02ds"):format(s // 60, s % 60) end
  return ("%dh%02dm"):format(s // 3600, (s % 3600) // 60)
end

function M.table(rows, now)
  if #rows == 0 then return "no leases\n" end
  local head = { "LEASE", "OWNER", "STATE", "EXPIRES IN", "TOKEN" }
  local lines = { head }
  for _, r in ipairs(rows) do
    local held = state(r, now) == "held"
    lines[#lines + 1] = { M.safe(r.name), M.safe(r.owner), state(r, now),
      held and M.human(r.expires_at - now) or "-", tostring(r.token) }
  end
  return text.columns(lines)
end

-- s as a JSON string: valid UTF-8 whatever s holds (invalid bytes as
-- U+FFFD), control characters escaped.  The C core's one writer (esc.h),
-- which the JSON log uses too.
M.json_string = core.json_string

-- Text from the store, made safe for a terminal: valid UTF-8, control
-- characters as \xNN, backslashes doubled (esc.h).
M.safe = core.safe

local function int(n) return ("%d"):format(n) end

-- ---- replicas (presence rows, issue 12) ----

-- A row's jobs text: a job a line, "name" or "name weight".
local function jobset(r)
  local t = {}
  for name in (r.jobs or ""):gmatch("[^\n ]+[^\n]*") do t[name:match("^%S+")] = true end
  return t
end

local function sorted_keys(t)
  local out = {}
  for k in pairs(t) do out[#out + 1] = k end
  table.sort(out)
  return out
end

-- Each replica's state ("live", "draining", "dead"), its leases held now
-- and its share of them: { r =, live =, leases =, share =, state = } in the
-- replicas' order (the status page draws them too).
function M.judge(replicas, rows, now, live_ms)
  local held, total = {}, 0
  for _, r in ipairs(rows) do
    if r.expires_at > now then
      held[r.owner] = (held[r.owner] or 0) + 1
      total = total + 1
    end
  end
  local out = {}
  for i, r in ipairs(replicas) do
    local live = now - r.heartbeat < live_ms
    out[i] = { r = r, live = live, leases = held[r.owner] or 0,
      share = total > 0 and (held[r.owner] or 0) / total or 0,
      state = not live and "dead" or (r.draining and "draining" or "live") }
  end
  return out
end

-- Warnings about the live replicas: job definitions that differ (jobs/
-- drift) and two replicas under one name.  A list of strings.
function M.drift(replicas, now, live_ms)
  local live = {}
  for _, r in ipairs(replicas) do
    if now - r.heartbeat < live_ms then live[#live + 1] = r end
  end
  local warn, hashes = {}, {}
  for _, r in ipairs(live) do hashes[r.jobs_hash] = true end
  if #sorted_keys(hashes) > 1 then
    local sets = {}
    for i, r in ipairs(live) do sets[i] = jobset(r) end
    local any = false
    for i, r in ipairs(live) do
      local extra = {}
      for name in pairs(sets[i]) do
        for k = 1, #live do
          if k ~= i and not sets[k][name] then extra[name] = true end
        end
      end
      local names = sorted_keys(extra)
      if #names > 0 then
        any = true
        local shown = {}
        for k = 1, math.min(#names, 10) do shown[k] = names[k] end
        warn[#warn + 1] = ("replica %s has %d job%s the others lack: %s%s"):format(r.owner, #names,
          #names == 1 and "" or "s", table.concat(shown, ", "), #names > 10 and ", ..." or "")
      end
    end
    if not any then
      warn[#warn + 1] = "the live replicas define the same jobs differently (their jobs hashes differ): "
        .. "jobs/ differs between them"
    end
  end
  local by_name = {}
  for _, r in ipairs(live) do
    local name = r.name or r.owner:match("^(.*):[^:]*:[^:]*$") or r.owner
    by_name[name] = by_name[name] or {}
    table.insert(by_name[name], r.owner)
  end
  for _, name in ipairs(sorted_keys(by_name)) do
    local owners = by_name[name]
    if #owners > 1 then
      warn[#warn + 1] = ("%d live replicas share the name %s (%s): a config with a fixed "
        .. "`replica =` copied to several hosts? Their owner ids keep their leases apart, "
        .. "but they share one place in the spread"):format(#owners, name, table.concat(owners, ", "))
    end
  end
  return warn
end

-- The replicas table and the warnings, for leash status; "" without rows.
function M.replicas_table(replicas, rows, now, live_ms)
  if not replicas or #replicas == 0 then return "" end
  local head = { "REPLICA", "HOST", "VERSION", "STATE", "LEASES", "SHARE", "JOBS HASH" }
  local lines = { head }
  for _, j in ipairs(M.judge(replicas, rows, now, live_ms)) do
    lines[#lines + 1] = { M.safe(j.r.owner), M.safe(j.r.host), M.safe(j.r.version), j.state,
      tostring(j.leases), ("%d%%"):format(math.floor(j.share * 100 + 0.5)), M.safe(j.r.jobs_hash) }
  end
  local out = { text.columns(lines):sub(1, -2) }
  for _, msg in ipairs(M.drift(replicas, now, live_ms)) do out[#out + 1] = "warning: " .. M.safe(msg) end
  return "\n" .. table.concat(out, "\n") .. "\n"
end

function M.json(provider, rows, now, replicas, live_ms)
  local leases = {}
  for _, r in ipairs(rows) do
    leases[#leases + 1] = ('{"name":%s,"owner":%s,"state":"%s","token":%s,"acquired_at":%s,'
      .. '"renewed_at":%s,"expires_at":%s,"expires_in_ms":%s}'):format(
      M.json_string(r.name), M.json_string(r.owner), state(r, now), int(r.token),
      int(r.acquired_at), int(r.renewed_at), int(r.expires_at),
      int(math.max(0, r.expires_at - now)))
  end
  local more = ""
  if replicas then
    local reps, warns = {}, {}
    for _, j in ipairs(M.judge(replicas, rows, now, live_ms)) do
      local r = j.r
      reps[#reps + 1] = ('{"owner":%s,"host":%s,"pid":%s,"version":%s,"state":"%s",'
        .. '"started_at":%s,"heartbeat":%s,"draining":%s,"leases":%s,"jobs_hash":%s}'):format(
        M.json_string(r.owner), M.json_string(r.host), int(r.pid), M.json_string(r.version),
        j.state, int(r.started_at), int(r.heartbeat), tostring(r.draining), int(j.leases),
        M.json_string(r.jobs_hash))
    end
    for _, msg in ipairs(M.drift(replicas, now, live_ms)) do warns[#warns + 1] = M.json_string(msg) end
    more = (',"replicas":[%s],"warnings":[%s]'):format(table.concat(reps, ","),
      table.concat(warns, ","))
  end
  return ('{"provider":%s,"now":%s,"leases":[%s]%s}'):format(M.json_string(provider), int(now),
    table.concat(leases, ","), more)
end

return M

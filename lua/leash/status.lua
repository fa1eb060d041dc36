-- leash status: rendering of one list() answer, as a table a person reads at
-- a glance and as the JSON object of DESIGN.md "Command line".  Pure: rows
-- and now (ms, the database's clock) in, text out.
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

local function width(s)
  local _, n = s:gsub("[^\128-\191]", "")   -- UTF-8 characters, not bytes
  return n
end

function M.table(rows, now)
  if #rows == 0 then return "no leases\n" end
  local head = { "LEASE", "OWNER", "STATE", "EXPIRES IN", "TOKEN" }
  local lines = { head }
  for _, r in ipairs(rows) do
    local held = state(r, now) == "held"
    lines[#lines + 1] = { r.name, r.owner, state(r, now),
      held and M.human(r.expires_at - now) or "-", tostring(r.token) }
  end
  local w = {}
  for _, l in ipairs(lines) do
    for i, c in ipairs(l) do w[i] = math.max(w[i] or 0, width(c)) end
  end
  local out = {}
  for _, l in ipairs(lines) do
    local cells = {}
    for i, c in ipairs(l) do
      if i == #l then
        cells[i] = c
      else
        cells[i] = c .. (" "):rep(w[i] - width(c))
      end
    end
    out[#out + 1] = table.concat(cells, "  ")
  end
  return table.concat(out, "\n") .. "\n"
end

local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f",
                  ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }

function M.json_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return escapes[c] or ("\\u%04x"):format(c:byte())
  end) .. '"'
end

local function int(n) return ("%d"):format(n) end

function M.json(provider, rows, now)
  local leases = {}
  for _, r in ipairs(rows) do
    leases[#leases + 1] = ('{"name":%s,"owner":%s,"state":"%s","token":%s,"acquired_at":%s,'
      .. '"renewed_at":%s,"expires_at":%s,"expires_in_ms":%s}'):format(
      M.json_string(r.name), M.json_string(r.owner), state(r, now), int(r.token),
      int(r.acquired_at), int(r.renewed_at), int(r.expires_at),
      int(math.max(0, r.expires_at - now)))
  end
  return ('{"provider":%s,"now":%s,"leases":[%s]}'):format(M.json_string(provider), int(now),
    table.concat(leases, ","))
end

return M

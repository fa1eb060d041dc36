-- leash.text: small text helpers shared by the policy modules.
local core = require "leash.core"

local M = {}

-- Quotes a value for a message: double quotes, control characters escaped,
-- long values cut so a message stays one short line.
function M.quote(s)
  s = tostring(s)
  if #s > 40 then s = core.utf8_cut(s, 37) .. "..." end
  s = s:gsub('[%c"\\]', function(c)
    if c == '"' or c == "\\" then return "\\" .. c end
    return ("\\%d"):format(c:byte())
  end)
  return '"' .. s .. '"'
end

-- The width of s on a terminal: its UTF-8 characters, not its bytes.
function M.width(s)
  local _, n = s:gsub("[^\128-\191]", "")
  return n
end

-- s cut to at most w characters, "~" marking a cut (no character split).
local function cut(s, w)
  if M.width(s) <= w then return s end
  local out, n = {}, 0
  for ch in s:gmatch("[^\128-\191][\128-\191]*") do
    if n == w - 1 then break end
    out[#out + 1], n = ch, n + 1
  end
  return table.concat(out) .. "~"
end

-- Rows of cells as columns padded to their widest cell, two spaces apart,
-- the last unpadded.  opts.max: the width the lines must fit in; to get
-- there, the columns of opts.cut ({ { column, narrowest width }, ... })
-- give way in that order, each down to its narrowest before the next, their
-- cells cut with "~".  A table still too wide after that stays so.
function M.columns(lines, opts)
  local w = {}
  for _, l in ipairs(lines) do
    for i, c in ipairs(l) do w[i] = math.max(w[i] or 0, M.width(c)) end
  end
  if opts and opts.max then
    local over = 2 * (#w - 1) - opts.max
    for _, x in ipairs(w) do over = over + x end
    for _, c in ipairs(opts.cut or {}) do
      local i, min = c[1], c[2]
      if over <= 0 then break end
      local give = math.max(0, math.min(over, (w[i] or 0) - min))
      if give > 0 then w[i], over = w[i] - give, over - give end
    end
  end
  local out = {}
  for _, l in ipairs(lines) do
    local cells = {}
    for i, c in ipairs(l) do
      c = cut(c, w[i])
      cells[i] = i == #l and c or c .. (" "):rep(w[i] - M.width(c))
    end
    out[#out + 1] = table.concat(cells, "  ")
  end
  return table.concat(out, "\n") .. "\n"
end

return M

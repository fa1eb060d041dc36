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

return M

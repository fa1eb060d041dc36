-- The folders of src/ are layers (src/README.md): a file includes headers
-- of its own folder or of a folder below it, never above, so there are no
-- circles between them.  Read from the #include lines of every file.
local L = require "e2e"

local RANK = { core = 1, store = 2, plan = 3, launch = 4, cluster = 5, bind = 6, web = 7 }
local TOP = 8           -- src/main.c, src/loop.c, src/cmd/: the program

local function rank_of(path)            -- "src/launch/prefork/spawn.c" -> 4
  local folder = path:match("^src/([%w_]+)/")
  if not folder then return TOP, "src" end
  if folder == "cmd" then return TOP, folder end
  return RANK[folder], folder
end

local function files()
  local list = {}
  local p = io.popen("cd " .. L.quote(os.getenv("LEASH_ROOT") or ".") ..
                     " && find src -name '*.[ch]' | sort")
  for f in p:lines() do list[#list + 1] = f end
  p:close()
  return list
end

describe("src/'s folders", function()
  it("each is a layer that includes only its own and those below it", function()
    local wrong, seen = {}, 0
    for _, f in ipairs(files()) do
      local r, folder = rank_of(f)
      assert(r, f .. ": a folder src/README.md does not name")
      local text = L.read((os.getenv("LEASH_ROOT") or ".") .. "/" .. f)
      for inc in text:gmatch('\n#include "([%w_/]+%.h)"') do
        seen = seen + 1
        local ir, ifolder = rank_of("src/" .. inc)
        if not ir or ir > r then
          wrong[#wrong + 1] = ("%s (%s) includes %s (%s)"):format(f, folder, inc, tostring(ifolder))
        end
      end
    end
    assert.is_true(seen > 100, "read only " .. seen .. " includes")
    assert.same({}, wrong)
  end)

  it("name each header with its folder, so an include says where it comes from", function()
    local bare = {}
    for _, f in ipairs(files()) do
      for inc in L.read((os.getenv("LEASH_ROOT") or ".") .. "/" .. f):gmatch('\n#include "([%w_/]+%.h)"') do
        local top = io.open((os.getenv("LEASH_ROOT") or ".") .. "/src/" .. inc)
        if top then top:close() end
        if not inc:find("/", 1, true) and not top then
          bare[#bare + 1] = f .. ": " .. inc
        end
      end
    end
    assert.same({}, bare)
  end)
end)

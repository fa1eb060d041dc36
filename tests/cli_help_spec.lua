-- leash CMD --help: every subcommand answers it with its usage line (exit 0),
-- and each option that line names is in leash(1)'s synopsis for CMD.
local L = require "e2e"

local COMMANDS = { "run", "status", "history", "check", "pause", "resume", "trigger", "repair",
                   "handoff", "drain", "undrain", "version" }

-- leash(1)'s synopsis of cmd: its options, as "--json", "-c", ...
local function synopsis_options(cmd)
  local man = L.read((os.getenv("LEASH_ROOT") or ".") .. "/man/leash.1")
  local syn = man:match("%.SH SYNOPSIS\n(.-)\n%.SH ")
  assert(syn, "leash(1) has no SYNOPSIS")
  for block in syn:gmatch("%.SY leash\n(.-)%.YS") do
    if block:match("^%.B " .. cmd .. "\n") then
      local opts = {}
      for o in block:gsub("\\%-", "-"):gmatch("%-%-?[%a][%w-]*") do opts[o] = true end
      return opts
    end
  end
end

describe("leash CMD --help", function()
  for _, cmd in ipairs(COMMANDS) do
    it(cmd .. " prints its usage line, as leash(1) has it, and exits 0", function()
      for _, flag in ipairs { "--help", "-h" } do
        local code, out, err = L.leash { cmd, flag }
        assert.equal(0, code, err)
        local line = out:match("^usage: (leash " .. cmd .. "[^\n]*)\n")
        assert(line, out)
        local man = assert(synopsis_options(cmd), "leash(1) has no synopsis of " .. cmd)
        for o in line:gmatch("%-%-?[%a][%w-]*") do
          assert(man[o], ("%s --help names %s, leash(1)'s synopsis does not"):format(cmd, o))
        end
      end
    end)
  end
end)

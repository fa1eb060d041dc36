describe("leash.core", function()
  it("loads and tells its version", function()
    local core = require "leash.core"
    assert.is_string(core.version)
    assert.matches("^%d+%.%d+%.%d+", core.version)
  end)
end)

-- leash status rendering: the table against a golden file, the JSON object.
local status = require "leash.status"
local json = require "dkjson"

local root = os.getenv("LEASH_ROOT") or "."
local now = 1795972914034

local rows = {
  { name = "billing-export", owner = "web-1:4242:a1b2c3d4", token = 7,
    acquired_at = now - 3600000, renewed_at = now - 2700, expires_at = now + 12300 },
  { name = "cache.warm", owner = "web-2:99:0f0e0d0c", token = 1,
    acquired_at = now - 90000, renewed_at = now - 90000, expires_at = now - 5 },
  { name = "model-health", owner = "web-3:7:deadbeef", token = 12,
    acquired_at = now - 1000, renewed_at = now - 1000, expires_at = now + 754000 },
  { name = "nightly", owner = "wéb-4:1:00000001", token = 3,
    acquired_at = now - 10, renewed_at = now - 10, expires_at = now + 850 },
  { name = "reindex", owner = "web-1:4242:a1b2c3d4", token = 40,
    acquired_at = now - 10, renewed_at = now - 10, expires_at = now + 7380000 },
  { name = "released", owner = "web-2:99:0f0e0d0c", token = 5,
    acquired_at = now - 5000, renewed_at = now - 5000, expires_at = now },
}

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

describe("leash status", function()
  it("renders the table of the golden file", function()
    assert.equal(read(root .. "/tests/golden/status.txt"), status.table(rows, now))
  end)

  it("says so when there are no leases", function()
    assert.equal("no leases\n", status.table({}, now))
  end)

  it("writes time left the way a person reads it", function()
    assert.equal("850ms", status.human(850))
    assert.equal("12.3s", status.human(12399))
    assert.equal("4m05s", status.human(245000))
    assert.equal("2h03m", status.human(7380000))
  end)

  it("prints DESIGN.md's JSON object", function()
    local text = status.json("postgres", rows, now)
    assert.not_matches("\n", text)
    local obj = assert(json.decode(text))
    assert.equal("postgres", obj.provider)
    assert.equal(now, obj.now)
    assert.equal(#rows, #obj.leases)
    local first = obj.leases[1]
    assert.same({ name = "billing-export", owner = "web-1:4242:a1b2c3d4", state = "held", token = 7,
                  acquired_at = now - 3600000, renewed_at = now - 2700, expires_at = now + 12300,
                  expires_in_ms = 12300 }, first)
    assert.equal("free", obj.leases[2].state)
    assert.equal(0, obj.leases[2].expires_in_ms)
    assert.equal("free", obj.leases[6].state)
    assert.equal("wéb-4:1:00000001", obj.leases[4].owner)
    assert.matches('^{"provider":"postgres","now":1795972914034,"leases":%[{"name":"billing%-export","owner"', text)
  end)

  it("escapes every string so the JSON stays valid", function()
    local odd = { { name = 'q"uote\\back\nline\ttab\1', owner = "o", token = 1,
                    acquired_at = 0, renewed_at = 0, expires_at = 0 } }
    local text = status.json('sq"l', odd, 1)
    local obj = assert(json.decode(text))
    assert.equal('sq"l', obj.provider)
    assert.equal('q"uote\\back\nline\ttab\1', obj.leases[1].name)
    assert.equal('{"provider":"sq\\"l","now":1,"leases":[]}', status.json('sq"l', {}, 1))
  end)
end)

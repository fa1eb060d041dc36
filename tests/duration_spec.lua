local duration = require "leash.duration"

local HINT = "(use 500ms, 30s, 5m, 1h or 1m30s)"

-- parse must fail, and its message must contain every given piece.
local function refused(v, ...)
  local ms, err = duration.parse(v)
  assert.is_nil(ms, ("%s was accepted as %s"):format(tostring(v), tostring(ms)))
  assert.is_string(err)
  for _, piece in ipairs { ... } do
    assert.is_truthy(err:find(piece, 1, true), ("%q lacks %q"):format(err, piece))
  end
  return err
end

describe("leash.duration.parse", function()
  it("reads each unit", function()
    assert.equal(500, duration.parse("500ms"))
    assert.equal(30000, duration.parse("30s"))
    assert.equal(300000, duration.parse("5m"))
    assert.equal(3600000, duration.parse("1h"))
    assert.equal(86400000, duration.parse("1d"))
    assert.equal(0, duration.parse("0s"))
    assert.equal(1, duration.parse("1ms"))
  end)

  it("reads combinations in descending order", function()
    assert.equal(90000, duration.parse("1m30s"))
    assert.equal(5400000, duration.parse("1h30m"))
    assert.equal(2 * 3600000 + 5000 + 500, duration.parse("2h0m5s500ms"))
    assert.equal(86400000 + 1, duration.parse("1d1ms"))
    assert.equal(1500, duration.parse("1s500ms"))
  end)

  it("reads a decimal fraction when the result is whole milliseconds", function()
    assert.equal(1500, duration.parse("1.5s"))
    assert.equal(90000, duration.parse("1.5m"))
    assert.equal(1, duration.parse("0.001s"))
    refused("0.5ms", "whole number of milliseconds")
    refused("0.0001s", "whole number of milliseconds")
  end)

  it("returns integers", function()
    assert.equal("integer", math.type(duration.parse("30s")))
    assert.equal("integer", math.type(duration.parse(0.5)))
    assert.equal("integer", math.type(duration.parse(30)))
  end)

  it("reads a number as seconds, fractions included", function()
    assert.equal(30000, duration.parse(30))
    assert.equal(500, duration.parse(0.5))
    assert.equal(1005, duration.parse(1.005))   -- 1004.999... in binary
    assert.equal(0, duration.parse(0))
  end)

  it("refuses an empty string", function()
    refused("", "empty", HINT)
  end)

  it("refuses negative durations", function()
    refused("-5s", '"-5s"', "negative", HINT)
    refused(-1, "negative")
    refused(-0.5, "negative")
    refused(-math.huge, "negative")
  end)

  it("refuses unknown units with the allowed forms", function()
    local err = refused("3x", '"3x" is not a duration', "unknown unit", HINT)
    assert.matches("^\"3x\" is not a duration", err)
    refused("5w", "unknown unit")
    refused("1H", "unknown unit")        -- units are lower case
    refused("1mss", "unknown unit")
  end)

  it("refuses a number without a unit", function()
    refused("30", '"30"', "unit", HINT)
    refused("1m30", "unit")
  end)

  it("refuses repeated and out-of-order units", function()
    refused("1s1s", "once each, largest first")
    refused("30s1m", "once each, largest first")
    refused("1m1h", "once each, largest first")
    refused("5ms1s", "once each, largest first")
  end)

  it("refuses malformed text", function()
    for _, s in ipairs { "ms", "s", "1 s", " 1s", "1s ", ".5s", "1.s", "1..5s", "+1s",
                         "1s-", "1e3s", "0x10s", "1,5s", "abc" } do
      refused(s, HINT)
    end
  end)

  it("refuses overflow", function()
    refused("99999999999999999999s", "too large")
    refused("9223372036854775807ms", "too large")
    refused("200000000d", "too large")
    refused(1e300, "too large")
    refused(math.huge, "too large")
    -- the largest accepted value is 2^53 ms
    assert.equal(1 << 53, duration.parse((1 << 53) .. "ms"))
    refused(((1 << 53) + 1) .. "ms", "too large")
    refused("9999999999999999d", "too large")
    refused("104249991d86400000s", "too large")
    -- integer seconds whose product with 1000 wraps past 2^63
    refused(2305843009213693957, "too large")
    refused(math.maxinteger, "too large")
    refused((1 << 53) // 1000 + 1, "too large")
    assert.equal((1 << 53) // 1000 * 1000, duration.parse((1 << 53) // 1000))
  end)

  it("refuses non-integer milliseconds", function()
    refused(0.0005, "whole number of milliseconds")
    refused(1.0001, "whole number of milliseconds")
  end)

  it("refuses NaN", function()
    refused(0 / 0, "not a duration")
  end)

  it("refuses other types", function()
    for _, v in ipairs { true, false, {}, print } do
      refused(v, "string or a number", type(v))
    end
    refused(nil, "string or a number", "nil")
  end)

  it("escapes odd characters in messages", function()
    local err = refused('1"\n', HINT)
    assert.is_falsy(err:find("\n", 1, true))
    assert.truthy(err:find('\\"', 1, true))
  end)
end)

describe("leash.duration.format", function()
  it("writes compact human strings", function()
    assert.equal("0s", duration.format(0))
    assert.equal("500ms", duration.format(500))
    assert.equal("1s", duration.format(1000))
    assert.equal("1m30s", duration.format(90000))
    assert.equal("2h", duration.format(7200000))
    assert.equal("1h30m", duration.format(5400000))
    assert.equal("1d", duration.format(86400000))
    assert.equal("1d1ms", duration.format(86400001))
    assert.equal("2h5s500ms", duration.format(7205500))
    assert.equal("-1s", duration.format(-1000))
  end)

  it("round-trips through parse", function()
    for _, ms in ipairs { 1, 999, 1000, 61000, 3599999, 86400000 * 3 + 7, 1 << 40 } do
      assert.equal(ms, duration.parse(duration.format(ms)))
    end
  end)
end)

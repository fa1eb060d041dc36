-- busted output handler: gtest-style lines per test, then the closing line
-- "N passed, N failed[, N skipped]" that CI reads.  Errors count as failures.
return function(options)
  local busted = require "busted"
  local handler = require "busted.outputHandlers.gtest"(options)
  local subscribe = handler.subscribe

  handler.subscribe = function(self, opts)
    subscribe(self, opts)
    busted.subscribe({ "suite", "end" }, function()
      local line = ("%d passed, %d failed"):format(handler.successesCount,
        handler.failuresCount + handler.errorsCount)
      if handler.pendingsCount > 0 then
        line = line .. (", %d skipped"):format(handler.pendingsCount)
      end
      io.write("\n", line, "\n")
      io.flush()
      return nil, true
    end)
  end
  return handler
end

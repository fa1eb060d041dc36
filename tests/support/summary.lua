-- busted output handler: gtest-style lines per test, then each spec file's
-- wall time (slowest first: tests/run.sh balances its lanes by these), then
-- the closing line "N passed, N failed[, N skipped]" that CI reads.  Errors
-- count as failures.
return function(options)
  local busted = require "busted"
  local handler = require "busted.outputHandlers.gtest"(options)
  local subscribe = handler.subscribe
  local files = {}

  handler.subscribe = function(self, opts)
    subscribe(self, opts)
    -- busted stamps starttick/endtick (monotonic seconds) on the element
    busted.subscribe({ "file", "end" }, function(file)
      files[#files + 1] = { name = file.name, secs = file.duration or 0 }
      return nil, true
    end)
    busted.subscribe({ "suite", "end" }, function()
      table.sort(files, function(a, b) return a.secs > b.secs end)
      if #files > 0 then
        io.write("\nwall time per spec file:\n")
        for _, f in ipairs(files) do
          io.write(("%8.1fs  %s\n"):format(f.secs, f.name))
        end
      end
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

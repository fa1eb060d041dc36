-- End to end: a provider's client library that cannot be loaded (libpq,
-- libsybdb and libsqlite3 are loaded with dlopen, src/store/*.c).  `leash
-- run` says which library and which Debian package (once), runs no
-- singleton job meanwhile, opens the store at a retry once the library is
-- back, and stops cleanly.  The
-- library is hidden in a mount namespace of the replica's own (unshare -m,
-- /dev/null bound over the file), so this needs root, as the suite has on a
-- fresh machine; elsewhere it is pending, never passed.
local L = require "e2e"
local R = require "replicas"

local LIBS = {
  sqlite = { "libsqlite3.so.0", "libsqlite3-0" },
  postgres = { "libpq.so.5", "libpq5" },
  mssql = { "libsybdb.so.5", "libsybdb5" },
}

-- The file the dynamic loader finds for soname, from its cache.
local function lib_path(soname)
  local _, out = L.sh("ldconfig -p")
  return out:match(soname:gsub("%p", "%%%0") .. " %([^)]*x86%-64[^)]*%) => (%S+)")
end

local root = select(2, L.sh("id -u")):match("%d+") == "0" and
             L.sh("unshare -m true") == 0

for _, p in ipairs(R.list_of()) do
  local soname, package = LIBS[p.provider][1], LIBS[p.provider][2]
  local said = "cannot load " .. soname:gsub("%p", "%%%0")

  describe("a " .. p.provider .. " replica without " .. soname, function()
    local proc
    after_each(function() if proc then proc:stop(10); proc = nil end end)

    it("says which library and package, runs nothing, opens the store once it is back, stops cleanly", function()
      if not root then
        pending("needs root and unshare -m to hide " .. soname)
        return
      end
      local path = assert(lib_path(soname), soname .. " is not in ldconfig's cache")
      local tbl = ("nolib_%d"):format(math.random(1, 1e8))
      local c = R.config(p, tbl)
      c.singleton.retry = "300ms"
      local d = L.dir { config = c }
      d.write_job("rec", R.job_src(d.out "rec", "1s", ""))
      proc = L.spawn_cmd(("exec unshare -m sh -c %s"):format(L.quote(
        ("mount --bind /dev/null %s && exec %s run -c %s"):format(L.quote(path), L.quote(L.bin),
          L.quote(d.config)))), { env = { LEASH_TEST_MSSQL_PASSWORD = p.password or "" } })
      local line = proc:wait_log(said, 5)
      assert(line, "no word of the missing library:\n" .. proc:log_text())
      assert.matches("install " .. package:gsub("%p", "%%%0"), line)
      -- said once, not at every retry; nothing runs, the process keeps going
      L.sleep(1.5)
      assert.equal(1, #proc:grep(said), proc:log_text())
      assert.is_true(proc:alive(), proc:log_text())
      assert.is_false(L.exists(d.out "rec"), "a singleton job ran without its store")
      -- the library back (in the replica's namespace): a retry opens the
      -- store and the job runs
      assert.equal(0, (L.sh(("nsenter -t %d -m umount %s"):format(proc.pid, L.quote(path)))))
      assert(L.wait_for(function() return #R.runs(d.out "rec") >= 1 end, 5),
        "the job did not run once the library was back:\n" .. proc:log_text())
      assert.equal(0, proc:stop(10), proc:log_text())
      proc = nil
    end)
  end)
end

-- packaging_spec: `make deb` and `make install` give a leash that works from
-- its installed layout alone: the binary finds its Lua modules relative to
-- itself (never LEASH_LUA_DIR, never the source tree), checks and runs the
-- installed example config and jobs, and the unit, man pages and package
-- metadata are what an operator on Debian 12 expects.
local config = require "leash.config"
local duration = require "leash.duration"

local ROOT = os.getenv("LEASH_ROOT") or "."
local TMP = assert(os.getenv("LEASH_TEST_TMP"), "run this spec through tests/run.sh")
local BUILD = os.getenv("LEASH_BUILD") or "build"

local function q(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

local function write(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

local function exists(path)
  return os.execute("test -e " .. q(path)) == true
end

-- Runs a shell command; returns exit code, stdout, stderr.
local errn = 0
local function run(cmd)
  errn = errn + 1
  local errf = ("%s/stderr.%d"):format(TMP, errn)
  local p = io.popen("(" .. cmd .. ") 2>" .. q(errf))
  local out = p:read("a")
  local _, _, code = p:close()
  local err = read(errf) or ""
  os.remove(errf)
  return code, out, err
end

local function mktemp(name)
  local code, out = run("mktemp -d " .. q(TMP .. "/" .. name .. ".XXXXXX"))
  assert(code == 0, "mktemp failed")
  return (out:gsub("%s+$", ""))
end

local function has(cmd)
  return os.execute("command -v " .. cmd .. " >/dev/null 2>&1") == true
end

local function lines_of(s)
  local t = {}
  for line in s:gmatch("[^\n]+") do t[#t + 1] = line end
  return t
end

local function ls(dir, pattern)
  local _, out = run("cd " .. q(dir) .. " && ls")
  local t = {}
  for _, name in ipairs(lines_of(out)) do
    if name:match(pattern) then t[#t + 1] = name end
  end
  table.sort(t)
  return t
end

local VERSION = (read(ROOT .. "/VERSION") or ""):gsub("%s+$", "")
local MODULES = ls(ROOT .. "/lua/leash", "%.lua$")
-- The man pages, as installed under MANDIR (tests/docs_spec.lua checks
-- what they say).
local PAGES = { "man1/leash.1", "man5/leash.ini.5", "man5/leash-job.5" }
-- The example jobs the package ships (mk/install.mk names them): never
-- whatever else the working tree's jobs/ holds.
local JOBS = { "mcp-discovery.lua", "model-health.lua" }
local ARCH = select(2, run("dpkg --print-architecture")):gsub("%s+$", "")

-- A leash binary run with nothing from the source tree or the environment
-- telling it where its modules are, from a directory without config/.
local function leash(bin, args)
  return run(("cd %s && env -u LEASH_LUA_DIR -u LEASH_CONFIG -u LUA_PATH -u LUA_CPATH %s %s")
    :format(q(TMP), q(bin), args))
end

-- The installed config names /etc/leash and /var/lib/leash; a copy pointing
-- into the unpacked root lets `leash check` and `leash run` use the
-- installed jobs without touching the real /etc.  Its jobs run as leash-jobs,
-- which the package's postinst creates: the copy's run as nobody (as root),
-- or as the user running the spec.
local AS_ROOT = io.popen("id -u"):read("l") == "0"
local function local_config(root, installed_ini)
  local ini = assert(read(installed_ini), "no config at " .. installed_ini)
  local copy = ini:gsub("/etc/leash/", function() return root .. "/etc/leash/" end)
    :gsub("/var/lib/leash/", function() return root .. "/var/lib/leash/" end)
    :gsub("\nrun_as = leash%-jobs\n", AS_ROOT and "\nrun_as = nobody\n" or "\nrun_as =\n")
  assert(run("mkdir -p " .. q(root .. "/var/lib/leash")) == 0)
  local path = root .. "/local-leash.ini"
  write(path, copy)
  return path, ini
end

-- The checks every installed tree must pass.  at.bin is the installed binary
-- and at.root the tree that holds etc/leash/, both set by the caller's setup.
local function installed_checks(at)
  it("runs `leash version` without LEASH_LUA_DIR", function()
    local bin = assert(at.bin, "nothing installed")
    local code, out, err = leash(bin, "version")
    assert.are.equal(0, code, err)
    assert.are.equal("leash " .. VERSION, out:match("^[^\n]*"))
  end)

  it("finds its Lua modules only next to itself (a lone copy of the binary cannot)", function()
    local bin = assert(at.bin, "nothing installed")
    local lone = mktemp("lone") .. "/bin"
    assert(run(("mkdir -p %s && cp %s %s/"):format(q(lone), q(bin), q(lone))) == 0)
    local code, _, err = leash(lone .. "/leash", "check -c " .. q(ROOT .. "/config/leash.ini"))
    assert.are.equal(2, code)
    assert.matches("cannot find leash's Lua modules", err, 1, true)
    -- and the installed one does, for the same config
    local code2, _, err2 = leash(bin, "check -c " .. q(ROOT .. "/config/leash.ini"))
    assert.are.equal(0, code2, err2)
  end)

  it("ships a config for /etc/leash that `leash check` accepts with its example jobs", function()
    local root, bin = assert(at.root, "nothing installed"), at.bin
    local path, ini = local_config(root, root .. "/etc/leash/leash.ini")
    assert.matches("\njobs = /etc/leash/jobs\n", ini, 1, true)
    assert.matches("\npath = /var/lib/leash/leash.db\n", ini, 1, true)
    assert.matches("\nenabled = true\n", ini, 1, true)
    assert.matches("\nrun_as = leash-jobs\n", ini, 1, true)
    local code, out, err = leash(bin, "check -c " .. q(path) .. " --next 1")
    assert.are.equal(0, code, out .. err)
    assert.matches((": %d jobs? ok, 0 problems"):format(#JOBS), err)
    for _, f in ipairs(JOBS) do
      assert.matches("\n?" .. f:gsub("%.lua$", ""):gsub("%p", "%%%0") .. " %d%d%d%d%-", out)
      assert.is_true(exists(root .. "/etc/leash/jobs/" .. f), f)
    end
  end)

  it("runs the example jobs with the installed config, holding their leases, and stops cleanly", function()
    local root, bin = assert(at.root, "nothing installed"), at.bin
    local path = local_config(root, root .. "/etc/leash/leash.ini")
    local log = mktemp("run") .. "/log"
    -- status until every job is held (at most 5 s), then SIGTERM
    local code, out = run(("cd %s && env -u LEASH_LUA_DIR %s run -c %s >%s 2>&1 & pid=$!; "
      .. "for i in $(seq 50); do sleep 0.1; s=$(env -u LEASH_LUA_DIR %s status -c %s --json); "
      .. "[ $(printf %%s \"$s\" | grep -o '\"held\"' | wc -l) -ge %d ] && break; done; echo \"$s\"; "
      .. "kill -TERM $pid; wait $pid; echo \"exit=$?\""):format(q(TMP), q(bin), q(path), q(log), q(bin), q(path), #JOBS))
    local text = read(log) or ""
    assert.are.equal(0, code)
    assert.are.equal("exit=0", out:match("exit=%d+"), text)
    for _, f in ipairs(JOBS) do
      local name = f:gsub("%.lua$", ""):gsub("%p", "%%%0")
      assert.matches('"name"%s*:%s*"' .. name .. '"[^}]-"state"%s*:%s*"held"', out, nil, false, out .. text)
    end
  end)
end

-- systemd-analyze verify on a unit whose ExecStart points at bin; the man
-- page it names is looked up in mandir.  Skipped (pending) without systemd.
local function verify_unit(unit, bin, mandir)
  if not has("systemd-analyze") then
    pending("systemd-analyze is not installed: the unit was not verified")
    return
  end
  local text = assert(read(unit), "no unit at " .. unit)
  local copy = mktemp("unit") .. "/leash.service"
  write(copy, (text:gsub("ExecStart=%S+", "ExecStart=" .. bin)))
  local code, out, err = run(("MANPATH=%s systemd-analyze verify %s"):format(q(mandir), q(copy)))
  assert.are.equal(0, code, out .. err)
  assert.are.equal("", err)
end

describe("make deb", function()
  local dir, deb, root, made
  local at = {}

  setup(function()
    dir = mktemp("deb")
    deb = ("%s/out/leash_%s_%s.deb"):format(dir, VERSION, ARCH)
    made = { run(("make -s -C %s deb DEB_BUILD=%s DEB_OUT=%s"):format(q(ROOT), q(dir .. "/build"),
      q(dir .. "/out"))) }
    root = dir .. "/root"
    if made[1] == 0 and run(("dpkg -x %s %s"):format(q(deb), q(root))) == 0 then
      at.root, at.bin = root, root .. "/usr/bin/leash"
    end
  end)

  it("builds leash_<VERSION>_<arch>.deb", function()
    assert.are.equal(0, made[1], made[2] .. made[3])
    assert.matches("^%d+%.%d+%.%d+", VERSION)
    assert.is_true(exists(deb), deb)
  end)

  it("takes its version from VERSION and depends on the runtime libraries", function()
    local code, out = run("dpkg-deb -f " .. q(deb) .. " Package Version Architecture Depends")
    assert.are.equal(0, code)
    assert.matches("\nVersion: " .. VERSION:gsub("%p", "%%%0") .. "\n", "\n" .. out)
    assert.matches("\nArchitecture: " .. ARCH .. "\n", "\n" .. out)
    local depends = out:match("Depends: ([^\n]*)")
    assert.is_string(depends)
    for _, pkg in ipairs { "libc6", "liblua5.4-0", "libpq5", "libsqlite3-0", "libsybdb5", "libinih1",
                            "libmicrohttpd12", "adduser" } do
      assert.matches("%f[%w]" .. pkg:gsub("%p", "%%%0") .. "%f[^%w.-]", depends, nil, false, pkg)
    end
  end)

  it("holds the binary, every Lua module, man pages, unit, config, jobs and docs, owned by root", function()
    local code, out = run("dpkg-deb -c " .. q(deb))
    assert.are.equal(0, code)
    local files = {}
    for _, line in ipairs(lines_of(out)) do
      local owner, path = line:match("^%S+ (%S+)%s+%d+ %S+ %S+ %.(/%S*)")
      if path then files[path] = owner end
    end
    local want = { "/usr/bin/leash", "/lib/systemd/system/leash.service",
      "/etc/leash/leash.ini", "/usr/share/doc/leash/copyright", "/usr/share/doc/leash/changelog.gz" }
    for _, m in ipairs(MODULES) do want[#want + 1] = "/usr/share/leash/lua/leash/" .. m end
    for _, j in ipairs(JOBS) do want[#want + 1] = "/etc/leash/jobs/" .. j end
    for _, p in ipairs(PAGES) do want[#want + 1] = "/usr/share/man/" .. p .. ".gz" end
    for _, path in ipairs(want) do
      assert.are.equal("root/root", files[path], path)
    end
    for path, owner in pairs(files) do
      assert.are.equal("root/root", owner, path)
    end
  end)

  it("marks the config and every example job as conffiles", function()
    local code, out = run("dpkg-deb -I " .. q(deb) .. " conffiles")
    assert.are.equal(0, code)
    local want = { "/etc/leash/leash.ini" }
    for _, j in ipairs(JOBS) do want[#want + 1] = "/etc/leash/jobs/" .. j end
    table.sort(want)
    local got = lines_of(out)
    table.sort(got)
    assert.are.same(want, got)
  end)

  it("has maintainer scripts that create the user and state directory and enable nothing", function()
    local ctl = dir .. "/control"
    assert.are.equal(0, (run(("dpkg-deb -e %s %s"):format(q(deb), q(ctl)))))
    local postinst = assert(read(ctl .. "/postinst"))
    assert.matches("adduser --system", postinst, 1, true)
    assert.matches("getent passwd leash-jobs", postinst, 1, true)
    assert.matches("chown root:leash /etc/leash/leash.ini", postinst, 1, true)
    assert.matches("chmod 0640 /etc/leash/leash.ini", postinst, 1, true)
    assert.matches("/var/lib/leash", postinst, 1, true)
    for _, script in ipairs { "postinst", "prerm", "postrm" } do
      local text = assert(read(ctl .. "/" .. script), script)
      assert.are.equal(0, (run("sh -n " .. q(ctl .. "/" .. script))), script)
      for line in text:gmatch("[^\n]+") do
        if not line:match("^%s*#") then
          assert.is_nil(line:match("enable"), script .. ": " .. line)
          assert.is_nil(line:match("systemctl start"), script .. ": " .. line)
        end
      end
    end
  end)

  it("ships a stripped binary", function()
    local code, out = run("readelf -S " .. q(root .. "/usr/bin/leash"))
    assert.are.equal(0, code)
    assert.is_nil(out:match("%.symtab"))
    assert.is_nil(out:match("%.debug_info"))
  end)

  describe("unpacked with dpkg -x", function()
    installed_checks(at)
  end)

  it("has a unit that runs leash as its own user, reloads on HUP and outwaits leash's stop", function()
    local unit = assert(read(root .. "/lib/systemd/system/leash.service"))
    local function key(k)
      local v = unit:match("\n" .. k .. "=([^\n]*)")
      return v
    end
    assert.are.equal("/usr/bin/leash run -c /etc/leash/leash.ini", key("ExecStart"))
    assert.are.equal("/bin/kill -HUP $MAINPID", key("ExecReload"))
    assert.are.equal("on-failure", key("Restart"))
    assert.are.equal("leash", key("User"))
    assert.are.equal("leash", key("Group"))
    assert.are.equal("leash", key("StateDirectory"))
    assert.are.equal("strict", key("ProtectSystem"))
    assert.are.equal("yes", key("NoNewPrivileges"))
    -- Only what switching runs to [leash] run_as and stopping them takes.
    assert.are.equal("CAP_SETUID CAP_SETGID CAP_KILL", key("AmbientCapabilities"))
    assert.are.equal("CAP_SETUID CAP_SETGID CAP_KILL", key("CapabilityBoundingSet"))
    assert.are.equal("yes", key("PrivateTmp"))
    assert.are.equal("AF_UNIX AF_INET AF_INET6", key("RestrictAddressFamilies"))
    assert.are.equal("multi-user.target", key("WantedBy"))
    -- stop: grace for the runs, then a release that may wait on connect and
    -- statement timeouts; systemd must not SIGKILL leash before that.
    local defaults = config.build("x.ini", "/", {})
    local cfg = local_config(root, root .. "/etc/leash/leash.ini")
    local entries, section = {}, ""
    for line in (read(cfg) .. "\n"):gmatch("([^\n]*)\n") do
      local s = line:match("^%[(.-)%]")
      local k, v = line:match("^(%w[%w_]*)%s*=%s*(.-)%s*$")
      if s then section = s elseif k then entries[#entries + 1] = { section = section, key = k, value = v, line = 1 } end
    end
    local c, errs = config.build(cfg, root, entries)
    assert.are.same({}, errs)
    assert.is_true(defaults.leash.grace > 0)
    local stop = assert(duration.parse(key("TimeoutStopSec")))
    assert.is_true(stop > c.leash.grace + c.store.connect_timeout + c.store.statement_timeout,
      "TimeoutStopSec " .. key("TimeoutStopSec") .. " is not longer than leash's stop")
  end)

  it("has a unit that systemd-analyze verify accepts", function()
    verify_unit(root .. "/lib/systemd/system/leash.service", root .. "/usr/bin/leash", root .. "/usr/share/man")
  end)

  it("has man pages that render without warnings and carry the version", function()
    if not has("man") then
      pending("man is not installed")
      return
    end
    for _, p in ipairs(PAGES) do
      local page = root .. "/usr/share/man/" .. p .. ".gz"
      local code, out, err = run("MANWIDTH=80 man -l --warnings " .. q(page))
      assert.are.equal(0, code, p .. ": " .. err)
      assert.are.equal("", err, p)
      assert.matches("leash " .. VERSION:gsub("%p", "%%%0"), out, nil, false, p)
    end
  end)

  it("passes lintian without errors", function()
    if not has("lintian") then
      pending("lintian is not installed")
      return
    end
    local code, out, err = run("lintian --tag-display-limit 0 " .. q(deb))
    local errors = {}
    for _, line in ipairs(lines_of(out)) do
      if line:match("^E:") then errors[#errors + 1] = line end
    end
    assert.are.same({}, errors)
    assert.are.equal(0, code, out .. err)
  end)
end)

describe("make install", function()
  local dest, made
  local at = {}
  local function install(d, prefix)
    return run(("make -s -C %s install BUILD=%s DESTDIR=%s PREFIX=%s"):format(q(ROOT), q(BUILD), q(d), prefix))
  end

  setup(function()
    dest = mktemp("dest")
    made = { install(dest, "/usr") }
    if made[1] == 0 then at.root, at.bin = dest, dest .. "/usr/bin/leash" end
  end)

  it("puts the binary, every Lua module, the man pages, unit, config and jobs in place", function()
    assert.are.equal(0, made[1], made[2] .. made[3])
    local want = { "/usr/bin/leash", "/usr/lib/systemd/system/leash.service", "/etc/leash/leash.ini" }
    for _, p in ipairs(PAGES) do want[#want + 1] = "/usr/share/man/" .. p end
    for _, m in ipairs(MODULES) do want[#want + 1] = "/usr/share/leash/lua/leash/" .. m end
    for _, j in ipairs(JOBS) do want[#want + 1] = "/etc/leash/jobs/" .. j end
    for _, path in ipairs(want) do
      assert.is_true(exists(dest .. path), path)
    end
    local unit = read(dest .. "/usr/lib/systemd/system/leash.service")
    assert.matches("\nExecStart=/usr/bin/leash run %-c /etc/leash/leash.ini\n", unit)
  end)

  installed_checks(at)

  it("installs a unit that systemd-analyze verify accepts", function()
    verify_unit(dest .. "/usr/lib/systemd/system/leash.service", dest .. "/usr/bin/leash", dest .. "/usr/share/man")
  end)

  it("never overwrites the operator's config or brings back a job they removed", function()
    local ini = dest .. "/etc/leash/leash.ini"
    local mine = read(ini) .. "; changed by the operator\n"
    write(ini, mine)
    local gone = dest .. "/etc/leash/jobs/" .. JOBS[1]
    assert.is_true(os.remove(gone))
    local code, out, err = install(dest, "/usr")
    assert.are.equal(0, code, out .. err)
    assert.are.equal(mine, read(ini))
    assert.is_false(exists(gone))
    assert.matches("keeping", out, 1, true)
    -- and still the new binary and modules
    assert.are.equal(0, (leash(dest .. "/usr/bin/leash", "version")))
  end)

  it("ships the example jobs only, whatever else the tree's jobs/ holds", function()
    -- a copy of the tree with a stray job file, installed with this build
    local tree = mktemp("tree")
    assert.are.equal(0, (run(("cd %s && cp -r Makefile VERSION mk lua man packaging jobs %s/"):format(q(ROOT), q(tree)))))
    write(tree .. "/jobs/stray.lua", 'return { every = "1s", run = function() end }\n')
    local bin = select(2, run("realpath " .. q(ROOT .. "/" .. BUILD))):gsub("%s+$", "")
    local d = mktemp("stray")
    local code, out, err = run(("make -s -C %s -o %s/leash install BUILD=%s DESTDIR=%s PREFIX=/usr")
      :format(q(tree), q(bin), q(bin), q(d)))
    assert.are.equal(0, code, out .. err)
    assert.are.same(JOBS, ls(d .. "/etc/leash/jobs", "."))
  end)

  it("with PREFIX=/usr/local keeps the config in /etc and points the unit at /usr/local/bin", function()
    local d = mktemp("local")
    local code, out, err = install(d, "/usr/local")
    assert.are.equal(0, code, out .. err)
    assert.is_true(exists(d .. "/etc/leash/leash.ini"))
    local unit = assert(read(d .. "/usr/local/lib/systemd/system/leash.service"))
    assert.matches("\nExecStart=/usr/local/bin/leash run %-c /etc/leash/leash.ini\n", unit)
    local vcode, vout = leash(d .. "/usr/local/bin/leash", "version")
    assert.are.equal(0, vcode)
    assert.are.equal("leash " .. VERSION, vout:match("^[^\n]*"))
  end)

  it("is undone by make uninstall, which keeps the config and jobs", function()
    local d = mktemp("un")
    assert.are.equal(0, (install(d, "/usr")))
    local code, out, err = run(("make -s -C %s uninstall DESTDIR=%s PREFIX=/usr"):format(q(ROOT), q(d)))
    assert.are.equal(0, code, out .. err)
    local gone = { "/usr/bin/leash", "/usr/lib/systemd/system/leash.service", "/usr/share/leash" }
    for _, p in ipairs(PAGES) do gone[#gone + 1] = "/usr/share/man/" .. p end
    for _, path in ipairs(gone) do
      assert.is_false(exists(d .. path), path)
    end
    assert.is_true(exists(d .. "/etc/leash/leash.ini"))
    for _, j in ipairs(JOBS) do assert.is_true(exists(d .. "/etc/leash/jobs/" .. j), j) end
  end)
end)

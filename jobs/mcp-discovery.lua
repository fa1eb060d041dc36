-- Sweeps the MCP servers listed in a file every 10 minutes and records which
-- answer.  It runs on one replica at a time; ctx.token, the lease's fencing
-- token, goes with what it writes so a store can refuse a stale writer.
local list = os.getenv("MCP_SERVERS_FILE") or "/etc/leash/mcp-servers.txt"

return {
  cron    = "*/10 * * * *",
  timeout = "5m",
  run = function(ctx)
    local f = io.open(list)
    if not f then
      ctx.log("info", "no server list; nothing to sweep", { file = list })
      return
    end
    local seen = 0
    for line in f:lines() do
      local name = line:match("^%s*([^#%s]+)")
      if name then
        seen = seen + 1
        ctx.log("info", "discovered", { server = name, token = ctx.token })
      end
    end
    f:close()
    ctx.log("info", "sweep done", { servers = seen, lease_left = ctx.lease_left() })
  end,
}

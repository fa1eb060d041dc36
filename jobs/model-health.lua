-- Probes a model server's health endpoint every 30 seconds, on one replica.
-- ctx.exec runs the command without a shell and gives back its exit code
-- and output; a failed probe is logged, never retried twice in a fire.
local url = os.getenv("MODEL_HEALTH_URL") or "http://127.0.0.1:8080/health"

return {
  every   = "30s",
  timeout = "20s",
  run = function(ctx)
    local ok, code, out, err = ctx.exec({ "curl", "-fsS", "--max-time", "5", url }, { timeout = 10 })
    if ok then
      ctx.log("info", "model healthy", { url = url, body = out:sub(1, 200) })
    elseif code == 127 then
      ctx.log("warn", "curl is not installed; nothing probed", { url = url })
    else
      ctx.log("warn", "model unhealthy", { url = url, exit = code, error = err:sub(1, 200) })
    end
  end,
}

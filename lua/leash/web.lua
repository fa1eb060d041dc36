local M = {}
M.page = "<!doctype html><title>leash</title>"
return M

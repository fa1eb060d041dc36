/* bind/cfg.c - core.config_load(path): the config exactly as `leash run` reads it
 * (inih, the long-value side table, leash.config's checks), for the specs. */
#include <lauxlib.h>

#include "cfg.h"
#include "bind/bind.h"
#include "lx.h"

#define SETSTR(k, v) (lua_pushstring(L, (v) ? (v) : ""), lua_setfield(L, -2, k))
#define SETINT(k, v) (lua_pushinteger(L, (lua_Integer)(v)), lua_setfield(L, -2, k))

/* core.config_load(path) -> { file=, jobs=, ..., pg_conninfo=, ... }, or nil
 * and every problem (one per line). */
static int l_config_load(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	char err[8192];
	struct cfg c;

	if (cfg_load(L, path, &c, err, sizeof err) < 0) {
		lua_pushnil(L);
		lua_pushstring(L, err);
		return 2;
	}
	lua_createtable(L, 0, 24);
	SETSTR("file", c.file);
	SETSTR("jobs", c.jobs);
	SETSTR("replica", c.replica);
	SETINT("log_json", c.log_json);
	SETINT("log_level", c.log_level);
	SETINT("grace_ms", c.grace_ms);
	SETINT("singleton", c.singleton);
	SETINT("lease_ms", c.lease_ms);
	SETINT("renew_ms", c.renew_ms);
	SETINT("retry_ms", c.retry_ms);
	SETINT("margin_ms", c.margin_ms);
	SETSTR("provider", c.provider);
	SETSTR("table", c.table);
	SETINT("connect_timeout_ms", c.connect_timeout_ms);
	SETINT("statement_timeout_ms", c.statement_timeout_ms);
	SETSTR("sqlite_path", c.sqlite_path);
	SETSTR("pg_conninfo", c.pg_conninfo);
	SETSTR("mssql_host", c.mssql_host);
	SETINT("mssql_port", c.mssql_port);
	SETSTR("mssql_user", c.mssql_user);
	SETSTR("mssql_password_env", c.mssql_password_env);
	SETSTR("mssql_database", c.mssql_database);
	cfg_free(&c);
	return 1;
}

void lx_cfg_lib(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{ "config_load", l_config_load },
		{ NULL, NULL },
	};
	luaL_setfuncs(L, fns, 0);
}

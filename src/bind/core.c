/* bind/core.c - the leash.core Lua module: the C core as busted sees it.
 * Each binding file adds the functions of one core concept to its table. */
#include <pwd.h>
#include <stdlib.h>
#include <time.h>

#include <lauxlib.h>
#include <lualib.h>

#include "bind/bind.h"
#include "launch/child.h"
#include "core/clock.h"
#include "cluster/place.h"
#include "store/store.h"


/* core.now(): wall clock seconds (float); core.monotonic(): monotonic seconds. */
static int l_now(lua_State *L)
{
	lua_pushnumber(L, clock_wall_s());
	return 1;
}

static int l_monotonic(lua_State *L)
{
	lua_pushnumber(L, clock_mono_s());
	return 1;
}

/* core.setenv(name, value|nil): for specs that need another TZ in-process. */
static int l_setenv(lua_State *L)
{
	const char *name = luaL_checkstring(L, 1);
	int rc = lua_isnoneornil(L, 2) ? unsetenv(name)
	                               : setenv(name, luaL_checkstring(L, 2), 1);

	tzset();
	lua_pushboolean(L, rc == 0);
	return 1;
}

/* core.user(name): the uid of a user of this host, or nil. */
static int l_user(lua_State *L)
{
	struct passwd *pw = getpwnam(luaL_checkstring(L, 1));

	if (!pw)
		return 0;
	lua_pushinteger(L, pw->pw_uid);
	return 1;
}

/* core.env_hidden(name): whether the variable is leash's own secret, which
 * no job sees (child_hide_env). */
static int l_env_hidden(lua_State *L)
{
	lua_pushboolean(L, child_env_hidden(luaL_checkstring(L, 1)));
	return 1;
}

void lx_core_lib(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{ "now", l_now },
		{ "monotonic", l_monotonic },
		{ "setenv", l_setenv },
		{ "user", l_user },
		{ "env_hidden", l_env_hidden },
		{ NULL, NULL },
	};
	luaL_setfuncs(L, fns, 0);
	lua_pushstring(L, LEASH_VERSION);
	lua_setfield(L, -2, "version");
	/* The limits the C core enforces, so leash.config and leash.job
	 * refuse exactly what would fail later. */
	lua_createtable(L, 0, 5);
	lua_pushinteger(L, STORE_NAME_MAX);
	lua_setfield(L, -2, "name_max");
	lua_pushinteger(L, STORE_DURATION_MAX);
	lua_setfield(L, -2, "duration_max_ms");
	lua_pushinteger(L, STORE_IDENT_MAX);
	lua_setfield(L, -2, "ident_max");
	lua_pushinteger(L, STORE_REPLICA_MAX);
	lua_setfield(L, -2, "replica_max");
	lua_pushinteger(L, PLACE_WEIGHT_MAX);
	lua_setfield(L, -2, "weight_max");
	lua_setfield(L, -2, "limits");
}

int luaopen_leash_core(lua_State *L)
{
	lua_newtable(L);
	lx_core_lib(L);
	lx_store_lib(L);
	lx_ctx_lib(L);
	lx_cfg_lib(L);
	lx_elect_lib(L);
	lx_sched_lib(L);
	lx_load_lib(L);
	lx_presence_lib(L);             /* after lx_store_lib: adds store methods */
	lx_metrics_lib(L);
	return 1;
}

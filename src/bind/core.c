/* bind/core.c - the leash.core Lua module: the C core as busted sees it.
 * Each binding file adds the functions of one core concept to its table. */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "bind/bind.h"
#include "launch/child.h"
#include "core/clock.h"
#include "cluster/place.h"
#include "core/esc.h"
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

static void put_lua(void *arg, const char *s, size_t n)
{
	luaL_addlstring(arg, s, n);
}

/* core.json_string(s[, max]): s as a JSON string, with its quotes (esc.h);
 * the Lua side's one JSON string writer. */
static int l_json_string(lua_State *L)
{
	size_t n;
	const char *s = luaL_checklstring(L, 1, &n);
	lua_Integer max = luaL_optinteger(L, 2, LUA_MAXINTEGER);
	luaL_Buffer b;

	luaL_buffinit(L, &b);
	esc_json(put_lua, &b, s, n, max < 0 ? 0 : (size_t)max);
	luaL_pushresult(&b);
	return 1;
}

/* core.safe(s[, max]): s made safe for a terminal or a text line (esc_text). */
static int l_safe(lua_State *L)
{
	lua_Integer max = luaL_optinteger(L, 2, LUA_MAXINTEGER);
	size_t n;
	const char *s = luaL_tolstring(L, 1, &n);     /* (pushed: read max first) */
	luaL_Buffer b;

	luaL_buffinit(L, &b);
	esc_text(put_lua, &b, s, n, max < 0 ? 0 : (size_t)max, ESC_TEXT);
	luaL_pushresult(&b);
	return 1;
}

/* core.utf8_cut(s, max): s's longest prefix of at most max bytes that does
 * not split a UTF-8 character. */
static int l_utf8_cut(lua_State *L)
{
	size_t n;
	const char *s = luaL_checklstring(L, 1, &n);
	lua_Integer max = luaL_checkinteger(L, 2);

	lua_pushlstring(L, s, esc_cut(s, n, max < 0 ? 0 : (size_t)max));
	return 1;
}

/* core.cut(s, max): s, or when it is longer than max bytes its longest
 * prefix that splits no character and ESC_CUT_FMT after it. */
static int l_cut(lua_State *L)
{
	size_t n;
	const char *s = luaL_checklstring(L, 1, &n);
	lua_Integer max = luaL_checkinteger(L, 2);
	char mark[64];
	luaL_Buffer b;

	if (max < 0 || n <= (size_t)max) {
		lua_settop(L, 1);
		return 1;
	}
	luaL_buffinit(L, &b);
	luaL_addlstring(&b, s, esc_cut(s, n, (size_t)max));
	snprintf(mark, sizeof mark, ESC_CUT_FMT, n);
	luaL_addstring(&b, mark);
	luaL_pushresult(&b);
	return 1;
}

/* core.hostname(): what `replica = auto` names a replica (cluster/owner.c). */
static int l_hostname(lua_State *L)
{
	char host[256] = "";

	if (gethostname(host, sizeof host - 1) < 0 || !host[0])
		snprintf(host, sizeof host, "localhost");
	lua_pushstring(L, host);
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
		{ "json_string", l_json_string },
		{ "safe", l_safe },
		{ "utf8_cut", l_utf8_cut },
		{ "cut", l_cut },
		{ "hostname", l_hostname },
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

/* lx.c - the core's Lua runtime: the state, where leash's Lua modules live,
 * protected calls and their errors.
 *
 * The modules are looked up relative to the binary, never the working
 * directory: PREFIX/bin/leash finds PREFIX/share/leash/lua, and a binary in
 * the source tree's build directory finds the tree's lua/.  LEASH_LUA_DIR
 * overrides both.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lualib.h>

#include "core/lx.h"

#define REQUIRE_KEY "leash.require"

static int has_modules(const char *dir)
{
	char probe[PATH_MAX];

	if (snprintf(probe, sizeof probe, "%s/leash/job.lua", dir) >= (int)sizeof probe)
		return 0;
	return access(probe, R_OK) == 0;
}

static int lua_dir(char *out, size_t len)
{
	static const char *const rel[] = { "../share/leash/lua", "../lua" };
	const char *env = getenv("LEASH_LUA_DIR");
	char exe[PATH_MAX];
	ssize_t n;
	char *slash;

	if (env && *env) {
		snprintf(out, len, "%s", env);
		return has_modules(out) ? 0 : -1;
	}
	n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n < 0)
		return -1;
	exe[n] = '\0';
	slash = strrchr(exe, '/');
	if (!slash)
		return -1;
	*slash = '\0';
	for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
		if (snprintf(out, len, "%s/%s", exe, rel[i]) < (int)len && has_modules(out))
			return 0;
	}
	return -1;
}

lua_State *lx_new(lua_CFunction core_open, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	lua_State *L;

	if (lua_dir(dir, sizeof dir) < 0) {
		snprintf(err, errlen, "cannot find leash's Lua modules (leash/job.lua) next to the "
		         "binary: set LEASH_LUA_DIR");
		return NULL;
	}
	L = luaL_newstate();
	if (!L) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	luaL_openlibs(L);
	luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
	lua_pushcfunction(L, core_open);
	lua_setfield(L, -2, "leash.core");
	lua_pop(L, 1);
	lua_getglobal(L, "require");
	lua_setfield(L, LUA_REGISTRYINDEX, REQUIRE_KEY);
	lua_getglobal(L, "package");
	lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;", dir, dir);
	lua_getfield(L, -2, "path");
	lua_concat(L, 2);
	lua_setfield(L, -2, "path");
	lua_pop(L, 1);
	return L;
}

static int traceback(lua_State *L)
{
	const char *msg = lua_tostring(L, 1);

	if (!msg) {
		if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
			return 1;
		msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
	}
	luaL_traceback(L, L, msg, 1);
	return 1;
}

int lx_pcall(lua_State *L, int nargs, int nresults)
{
	int base = lua_gettop(L) - nargs;
	int rc;

	lua_pushcfunction(L, traceback);
	lua_insert(L, base);
	rc = lua_pcall(L, nargs, nresults, base);
	lua_remove(L, base);
	return rc;
}

int lx_require(lua_State *L, const char *mod)
{
	if (lua_getfield(L, LUA_REGISTRYINDEX, REQUIRE_KEY) != LUA_TFUNCTION) {
		lua_pop(L, 1);
		lua_getglobal(L, "require");    /* a state lx_new did not make: busted's */
	}
	lua_pushstring(L, mod);
	return lx_pcall(L, 1, 1);
}

int lx_callmod(lua_State *L, const char *mod, const char *fn, int nargs, int nresults)
{
	int rc = lx_require(L, mod);

	if (rc != LUA_OK) {
		lua_insert(L, -(nargs + 1));
		lua_pop(L, nargs);
		return rc;
	}
	lua_getfield(L, -1, fn);
	lua_remove(L, -2);
	lua_insert(L, -(nargs + 1));
	return lx_pcall(L, nargs, nresults);
}

const char *lx_report(lua_State *L, char *err, size_t errlen)
{
	const char *msg = lua_tostring(L, -1);

	if (!msg) {
		if (luaL_callmeta(L, -1, "__tostring") && lua_type(L, -1) == LUA_TSTRING) {
			lua_remove(L, -2);
			msg = lua_tostring(L, -1);
		} else {
			msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, -1));
			lua_remove(L, -2);
		}
	}
	snprintf(err, errlen, "%s", msg);
	lua_pop(L, 1);
	return err;
}

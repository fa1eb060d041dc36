/* lx.c - the scheduler's Lua state and where leash's Lua modules live.
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

#include "lx.h"

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

lua_State *lx_new(char *err, size_t errlen)
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
	lua_pushcfunction(L, luaopen_leash_core);
	lua_setfield(L, -2, "leash.core");
	lua_pop(L, 1);
	lua_getglobal(L, "package");
	lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;", dir, dir);
	lua_getfield(L, -2, "path");
	lua_concat(L, 2);
	lua_setfield(L, -2, "path");
	lua_pop(L, 1);
	return L;
}

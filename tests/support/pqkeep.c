/* pqkeep.c - a Lua module that loads libpq itself, as a job's own database
 * module would (spawner_spec: the spawner's store_unload must leave libpq
 * mapped for it).  Built by the spec with cc; version() calls into libpq. */
#include <dlfcn.h>
#include <lauxlib.h>
#include <lua.h>

int luaopen_pqkeep(lua_State *L);

static int (*lib_version)(void);

static int l_version(lua_State *L)
{
	lua_pushinteger(L, lib_version());
	return 1;
}

int luaopen_pqkeep(lua_State *L)
{
	void *h = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);

	if (!h || !(lib_version = (int (*)(void))dlsym(h, "PQlibVersion")))
		return luaL_error(L, "pqkeep: %s", dlerror());
	lua_newtable(L);
	lua_pushcfunction(L, l_version);
	lua_setfield(L, -2, "version");
	return 1;
}

/* bind/ctx.c - what ctx is built on in a run's child (lua/leash/run.lua):
 * log records, sleep, exit, exec without a shell, the time left.  The work
 * is child.c's; this only moves values between Lua and C. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lauxlib.h>

#include "bind/bind.h"
#include "launch/child.h"

/* core.lease_left(): seconds until the body will be stopped; math.huge when
 * nothing will stop it. */
static int l_lease_left(lua_State *L)
{
	lua_pushnumber(L, child_left_s());
	return 1;
}

/* core.child_log(record): one line to the parent. */
static int l_child_log(lua_State *L)
{
	size_t n;
	const char *s = luaL_checklstring(L, 1, &n);
	char *line = malloc(n + 1);

	if (!line)
		return luaL_error(L, "out of memory");
	memcpy(line, s, n);
	line[n] = '\n';
	child_log(line, n + 1);
	free(line);
	return 0;
}

static int l_sleep(lua_State *L)
{
	child_sleep(luaL_checknumber(L, 1));
	return 0;
}

static int l_child_exit(lua_State *L)
{
	int code = lua_isboolean(L, 1) ? (lua_toboolean(L, 1) ? 0 : 1)
	                               : (int)luaL_optinteger(L, 1, 0);
	fflush(NULL);
	_exit(code);
}

/* core.exec(argv, timeout_seconds|nil) -> ok, exit_code, stdout, stderr. */
static int l_exec(lua_State *L)
{
	double timeout = luaL_optnumber(L, 2, 0);
	struct child_buf out = { 0 }, err = { 0 };
	char **argv;
	int n, code;

	luaL_checktype(L, 1, LUA_TTABLE);
	n = (int)luaL_len(L, 1);
	if (n < 1)
		return luaL_argerror(L, 1, "argv is empty");
	argv = lua_newuserdatauv(L, sizeof(char *) * (n + 1), 0);
	lua_createtable(L, n, 0);       /* keeps the argument strings alive */
	for (int i = 0; i < n; i++) {
		lua_geti(L, 1, i + 1);
		if (!lua_isstring(L, -1))
			return luaL_error(L, "ctx.exec: argv[%d] is a %s, expected a string", i + 1,
			                  luaL_typename(L, -1));
		lua_pushstring(L, lua_tostring(L, -1));
		argv[i] = (char *)lua_tostring(L, -1);
		lua_rawseti(L, -3, i + 1);
		lua_pop(L, 1);
	}
	argv[n] = NULL;
	code = child_exec(argv, timeout, &out, &err);
	if (code < 0) {
		int e = errno;
		free(out.b);
		free(err.b);
		return luaL_error(L, "ctx.exec: %s", strerror(e));
	}
	lua_pushboolean(L, code == 0);
	lua_pushinteger(L, code);
	lua_pushlstring(L, out.b ? out.b : "", out.n);
	lua_pushlstring(L, err.b ? err.b : "", err.n);
	free(out.b);
	free(err.b);
	return 4;
}

void lx_ctx_lib(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{ "child_log", l_child_log },
		{ "child_exit", l_child_exit },
		{ "sleep", l_sleep },
		{ "exec", l_exec },
		{ "lease_left", l_lease_left },
		{ NULL, NULL },
	};
	luaL_setfuncs(L, fns, 0);
}

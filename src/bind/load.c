/* bind/load.c - what leash.job needs to load a job file inside the
 * scheduler: read it with bounds, run its top level under a budget.
 *
 *   core.read_job(path, max)   -> text | nil, reason
 *   core.budget_run(fn, chunkname, instructions, bytes [, allocated [, ms]])
 *       -> true, fn's results | false, "error"|"instructions"|"memory"|"allocated"|"time",
 *          line|nil, value
 *       (allocated: every byte allocated, freed or not; ms: from now; 0 or nil: no bound)
 *   core.budget_charge([0])    charge a new coroutine's first tick to the running budget
 *                              (0: only look at the deadline)
 */
#include <stdlib.h>

#include <lauxlib.h>

#include "bind/bind.h"
#include "core/budget.h"
#include "core/clock.h"
#include "plan/job.h"

static int l_read_job(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	lua_Integer max = luaL_checkinteger(L, 2);
	char err[512], *src;
	size_t len;

	luaL_argcheck(L, max >= 0, 2, "a size >= 0");
	if (job_read(path, (size_t)max, &src, &len, err, sizeof err) < 0) {
		luaL_pushfail(L);
		lua_pushstring(L, err);
		return 2;
	}
	lua_pushlstring(L, src, len);
	free(src);
	return 1;
}

static int l_budget_run(lua_State *L)
{
	static const char *const kinds[] = {
		[BUDGET_ERROR] = "error",
		[BUDGET_INSTRUCTIONS] = "instructions",
		[BUDGET_MEMORY] = "memory",
		[BUDGET_ALLOCATED] = "allocated",
		[BUDGET_TIME] = "time",
	};
	struct budget_limits lim;
	int line, status;

	luaL_checktype(L, 1, LUA_TFUNCTION);
	lim.chunkname = luaL_checkstring(L, 2);
	lim.instructions = (long)luaL_checkinteger(L, 3);
	lim.bytes = (size_t)luaL_checkinteger(L, 4);
	lim.allocated = (size_t)luaL_optinteger(L, 5, 0);
	{
		lua_Integer ms = luaL_optinteger(L, 6, 0);

		lim.deadline_ms = ms > 0 ? clock_mono_ms() + ms : 0;
	}
	lua_settop(L, 4);
	/* chunkname stays at index 2 for as long as the budget reads it. */
	lua_pushvalue(L, 1);
	status = budget_call(L, &lim, 0, LUA_MULTRET, &line);
	if (status == BUDGET_OK) {
		lua_pushboolean(L, 1);
		lua_replace(L, 4);
		return lua_gettop(L) - 3;
	}
	lua_pushboolean(L, 0);
	lua_pushstring(L, kinds[status]);
	if (line)
		lua_pushinteger(L, line);
	else
		lua_pushnil(L);
	lua_rotate(L, -4, -1);
	return 4;
}

static int l_budget_charge(lua_State *L)
{
	budget_charge(L, luaL_optinteger(L, 1, BUDGET_TICK) == 0 ? 0 : BUDGET_TICK);
	return 0;
}

void lx_load_lib(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{ "read_job", l_read_job },
		{ "budget_run", l_budget_run },
		{ "budget_charge", l_budget_charge },
		{ NULL, NULL },
	};
	luaL_setfuncs(L, fns, 0);
}

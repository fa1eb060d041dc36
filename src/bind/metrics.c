/* bind/metrics.c - leash.core.metrics: what /metrics would show, in-process.
 *
 *   core.metrics() -> text       the exposition of this process's records (in
 *                                a run's child: the parent's, live)
 *   local m = core.metrics_job(name)   a record of its own, for specs and the
 *                                bench (a job name leash.job would refuse too)
 *   m:run(outcome, ran_ms, wall_ms)    m:fire(scheduled_ms, started_ms)
 *   m:skip(outcome)  m:lease(gained)   m:remove() (or collected)
 *
 * The job table's records are made by sched.c itself (leash.core.sched).
 */
#include <stdlib.h>

#include <lauxlib.h>

#include "bind/bind.h"
#include "core/metrics.h"

#define MJOB_MT "leash.metrics_job"

struct lmjob {
	struct metrics_job *m;
};

static int l_metrics(lua_State *L)
{
	size_t n;
	char *text = metrics_render(&n);

	if (!text)
		return luaL_error(L, "metrics: out of memory");
	lua_pushlstring(L, text, n);
	free(text);
	return 1;
}

static struct lmjob *check(lua_State *L)
{
	return luaL_checkudata(L, 1, MJOB_MT);
}

static int l_job(lua_State *L)
{
	const char *name = luaL_checkstring(L, 1);
	struct lmjob *u = lua_newuserdatauv(L, sizeof *u, 0);

	u->m = metrics_job_add(name);
	luaL_setmetatable(L, MJOB_MT);
	if (!u->m)
		return luaL_error(L, "metrics_job: no slot left for %s", name);
	return 1;
}

static int l_run(lua_State *L)
{
	metrics_note_run(check(L)->m, luaL_checkstring(L, 2), luaL_checkinteger(L, 3),
	                 luaL_optinteger(L, 4, 0));
	return 0;
}

static int l_fire(lua_State *L)
{
	metrics_note_fire(check(L)->m, luaL_checkinteger(L, 2), 0, luaL_checkinteger(L, 3));
	return 0;
}

static int l_skip(lua_State *L)
{
	metrics_note_skip(check(L)->m, luaL_checkstring(L, 2));
	return 0;
}

static int l_lease(lua_State *L)
{
	metrics_note_lease(check(L)->m, lua_toboolean(L, 2));
	return 0;
}

static int l_remove(lua_State *L)
{
	struct lmjob *u = check(L);

	metrics_job_remove(u->m);
	u->m = NULL;
	return 0;
}

void lx_metrics_lib(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{ "run", l_run },
		{ "fire", l_fire },
		{ "skip", l_skip },
		{ "lease", l_lease },
		{ "remove", l_remove },
		{ "__gc", l_remove },
		{ NULL, NULL },
	};
	static const luaL_Reg fns[] = {
		{ "metrics", l_metrics },
		{ "metrics_job", l_job },
		{ NULL, NULL },
	};

	if (luaL_newmetatable(L, MJOB_MT)) {
		luaL_setfuncs(L, methods, 0);
		lua_pushvalue(L, -1);
		lua_setfield(L, -2, "__index");
	}
	lua_pop(L, 1);
	luaL_setfuncs(L, fns, 0);
}

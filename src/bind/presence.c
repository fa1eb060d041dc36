/* bind/presence.c - leash.core's presence: the rendezvous function, the
 * preferred holder over made-up rows, the hand-off decision, and the store
 * methods beat, leave and replicas. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "bind/bind.h"
#include "cluster/presence.h"
#include "store/store.h"

/* Copies field k; a value too long for dst is cut to "" plus one byte
 * too many, so the wrapper refuses it as the C caller's would be. */
static void field_str(lua_State *L, int t, const char *k, char *dst, size_t size)
{
	size_t len = 0;
	const char *v;

	lua_getfield(L, t, k);
	v = lua_tolstring(L, -1, &len);
	if (v && len >= size)
		memset(dst, 'x', size);         /* no terminator within: too long */
	else
		snprintf(dst, size, "%s", v ? v : "");
	lua_pop(L, 1);
}

int64_t lx_field_int(lua_State *L, int t, const char *k, int64_t dflt)
{
	int isint;
	lua_Integer v;

	lua_getfield(L, t, k);
	v = lua_tointegerx(L, -1, &isint);
	lua_pop(L, 1);
	return isint ? (int64_t)v : dflt;
}

/* A row from a Lua table {owner=, host=, pid=, version=, started_at=,
 * heartbeat=, draining=, jobs_hash=, jobs=, broken=}; jobs is strdup'd when
 * given and copy_jobs; broken is borrowed from the table, and read only
 * for a beat (copy_jobs 0). */
static void row_from(lua_State *L, int t, struct store_replica *r, int copy_jobs)
{
	memset(r, 0, sizeof *r);
	field_str(L, t, "owner", r->owner, sizeof r->owner);
	field_str(L, t, "host", r->host, sizeof r->host);
	field_str(L, t, "version", r->version, sizeof r->version);
	field_str(L, t, "jobs_hash", r->jobs_hash, sizeof r->jobs_hash);
	field_str(L, t, "name", r->name, sizeof r->name);
	r->pid = lx_field_int(L, t, "pid", 0);
	r->started_at = lx_field_int(L, t, "started_at", 0);
	r->heartbeat = lx_field_int(L, t, "heartbeat", 0);
	lua_getfield(L, t, "draining");
	r->draining = lua_toboolean(L, -1);
	lua_pop(L, 1);
	lua_getfield(L, t, "jobs");
	if (lua_type(L, -1) == LUA_TSTRING)
		r->jobs = copy_jobs ? strdup(lua_tostring(L, -1)) : (char *)lua_tostring(L, -1);
	lua_pop(L, 1);
	lua_getfield(L, t, "broken");
	if (lua_type(L, -1) == LUA_TSTRING && !copy_jobs)
		r->broken = (char *)lua_tostring(L, -1);
	lua_pop(L, 1);
}

void lx_push_replicas(lua_State *L, const struct store_replica *rows, size_t n)
{
	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		const struct store_replica *r = &rows[i];
		char name[STORE_NAME_MAX + 1];

		lua_createtable(L, 0, 11);
		lua_pushstring(L, r->owner);
		lua_setfield(L, -2, "owner");
		presence_name_of(r->owner, name, sizeof name);
		lua_pushstring(L, name);
		lua_setfield(L, -2, "name");
		lua_pushstring(L, r->host);
		lua_setfield(L, -2, "host");
		lua_pushinteger(L, r->pid);
		lua_setfield(L, -2, "pid");
		lua_pushstring(L, r->version);
		lua_setfield(L, -2, "version");
		lua_pushinteger(L, r->started_at);
		lua_setfield(L, -2, "started_at");
		lua_pushinteger(L, r->heartbeat);
		lua_setfield(L, -2, "heartbeat");
		lua_pushboolean(L, r->draining);
		lua_setfield(L, -2, "draining");
		lua_pushstring(L, r->jobs_hash);
		lua_setfield(L, -2, "jobs_hash");
		if (r->jobs) {
			lua_pushstring(L, r->jobs);
			lua_setfield(L, -2, "jobs");
		}
		if (r->broken) {
			lua_pushstring(L, r->broken);
			lua_setfield(L, -2, "broken");
		}
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
}

/* core.rendezvous(job, { {name=, owner=}, ... }) -> the chosen index (from
 * 1), or nil for an empty list. */
static int l_rendezvous(lua_State *L)
{
	const char *job = luaL_checkstring(L, 1);
	size_t n;
	struct presence_cand *c;
	int w;

	luaL_checktype(L, 2, LUA_TTABLE);
	n = lua_rawlen(L, 2);
	c = lua_newuserdatauv(L, (n ? n : 1) * sizeof *c, 0);
	for (size_t i = 0; i < n; i++) {
		lua_rawgeti(L, 2, (lua_Integer)i + 1);
		lua_getfield(L, -1, "name");
		lua_getfield(L, -2, "owner");
		c[i].name = luaL_checkstring(L, -2);
		c[i].owner = lua_tostring(L, -1) ? lua_tostring(L, -1) : "";
		lua_pop(L, 3);          /* the strings stay alive in the argument table */
	}
	w = presence_pick(job, c, n);
	if (w < 0)
		lua_pushnil(L);
	else
		lua_pushinteger(L, w + 1);
	return 1;
}

static int l_score(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)presence_score(luaL_checkstring(L, 1),
	                                               luaL_checkstring(L, 2)));
	return 1;
}

/* core.presence_prefer(rows, now, me, live_ms, settle_ms, job [, my_jobs])
 * -> the preferred owner (or nil) and whether it is settled. */
static int l_prefer(lua_State *L)
{
	struct presence p = { .me = -1 };
	struct store_replica *rows;
	size_t n;
	int settled, w;

	luaL_checktype(L, 1, LUA_TTABLE);
	n = lua_rawlen(L, 1);
	rows = calloc(n ? n : 1, sizeof *rows);
	if (!rows)
		return luaL_error(L, "out of memory");
	for (size_t i = 0; i < n; i++) {
		lua_rawgeti(L, 1, (lua_Integer)i + 1);
		row_from(L, lua_gettop(L), &rows[i], 1);
		lua_pop(L, 1);
	}
	if (presence_set(&p, rows, n, luaL_checkinteger(L, 2), luaL_optstring(L, 3, NULL),
	                 luaL_optstring(L, 7, NULL), luaL_checkinteger(L, 4),
	                 luaL_checkinteger(L, 5)) < 0)
		return luaL_error(L, "out of memory");
	w = presence_prefer(&p, luaL_checkstring(L, 6), &settled);
	if (w < 0)
		lua_pushnil(L);
	else
		lua_pushstring(L, p.reps[w].row.owner);
	lua_pushboolean(L, settled);
	presence_free(&p);
	return 2;
}

#define PLACEMENT_MT "leash.placement"

static struct presence *check_placement(lua_State *L)
{
	return luaL_checkudata(L, 1, PLACEMENT_MT);
}

/* core.placement() -> an object that keeps its map across p:set calls, as
 * spread keeps it across beats. */
static int l_placement(lua_State *L)
{
	struct presence *p = lua_newuserdatauv(L, sizeof *p, 0);

	memset(p, 0, sizeof *p);
	p->me = -1;
	luaL_setmetatable(L, PLACEMENT_MT);
	return 1;
}

static int l_placement_gc(lua_State *L)
{
	presence_free(check_placement(L));
	return 0;
}

/* p:set(rows, { now=, me=, live_ms=, settle_ms=, jobs= }) -> whether the
 * map was made again (its inputs changed) */
static int l_placement_set(lua_State *L)
{
	struct presence *p = check_placement(L);
	struct store_replica *rows;
	const char *me, *jobs;
	size_t n;

	luaL_checktype(L, 2, LUA_TTABLE);
	luaL_checktype(L, 3, LUA_TTABLE);
	n = lua_rawlen(L, 2);
	lua_getfield(L, 3, "me");
	me = lua_tostring(L, -1);
	lua_getfield(L, 3, "jobs");
	jobs = lua_tostring(L, -1);             /* both stay on the stack */
	if (!(rows = calloc(n ? n : 1, sizeof *rows)))
		return luaL_error(L, "out of memory");
	for (size_t i = 0; i < n; i++) {
		lua_rawgeti(L, 2, (lua_Integer)i + 1);
		row_from(L, lua_gettop(L), &rows[i], 1);
		lua_pop(L, 1);
	}
	if (presence_set(p, rows, n, lx_field_int(L, 3, "now", 0), me, jobs,
	                 lx_field_int(L, 3, "live_ms", 0), lx_field_int(L, 3, "settle_ms", 0)) < 0)
		return luaL_error(L, "out of memory");
	lua_pushboolean(L, p->remade);
	return 1;
}

static void push_owner(lua_State *L, const struct presence *p, int i)
{
	if (i < 0)
		lua_pushnil(L);
	else
		lua_pushstring(L, p->reps[i].row.owner);
}

/* p:prefer(job) -> owner (or nil), settled */
static int l_placement_prefer(lua_State *L)
{
	struct presence *p = check_placement(L);
	int settled;

	push_owner(L, p, presence_prefer(p, luaL_checkstring(L, 2), &settled));
	lua_pushboolean(L, settled);
	return 2;
}

/* p:runner_up(job) -> the owner it goes to without its preferred one, or nil */
static int l_placement_runner_up(lua_State *L)
{
	struct presence *p = check_placement(L);
	const char *job = luaL_checkstring(L, 2);
	int settled;

	push_owner(L, p, presence_runner_up(p, job, presence_prefer(p, job, &settled)));
	return 1;
}

/* p:map([owner]) -> { [job] = owner }, { [owner] = load }: every job of the
 * map, placed with every replica, or without the one named. */
static int l_placement_map(lua_State *L)
{
	struct presence *p = check_placement(L);
	const char *without = luaL_optstring(L, 2, NULL);
	const struct place_job *jobs;
	size_t n = p->place ? place_jobs(p->place, &jobs) : 0;
	int x = -1;

	for (size_t i = 0; without && i < p->n; i++)
		if (strcmp(p->reps[i].row.owner, without) == 0)
			x = (int)i;
	lua_createtable(L, 0, (int)n);
	lua_newtable(L);
	for (size_t j = 0; j < n; j++) {
		int settled, at = place_at(p->place, (int)j, x, &settled);

		if (at < 0)
			continue;
		lua_pushstring(L, p->reps[at].row.owner);
		lua_pushvalue(L, -1);
		lua_setfield(L, -4, jobs[j].name);
		lua_pushvalue(L, -1);
		lua_gettable(L, -3);
		lua_pushinteger(L, lua_tointeger(L, -1) + jobs[j].weight);
		lua_remove(L, -2);
		lua_settable(L, -3);
	}
	return 2;
}

/* core.safe_point{service=, busy=, now=, next_fire=, after_next=,
 * handover=} -> "wait" | "release" | "stop" */
static int l_safe_point(lua_State *L)
{
	static const char *const what[] = { "wait", "release", "stop" };
	int service, busy;

	luaL_checktype(L, 1, LUA_TTABLE);
	lua_getfield(L, 1, "service");
	service = lua_toboolean(L, -1);
	lua_getfield(L, 1, "busy");
	busy = lua_toboolean(L, -1);
	lua_pop(L, 2);
	lua_pushstring(L, what[presence_safe_point(service, busy, lx_field_int(L, 1, "now", 0),
	                                           lx_field_int(L, 1, "next_fire", -1),
	                                           lx_field_int(L, 1, "after_next", -1),
	                                           lx_field_int(L, 1, "handover", 0))]);
	return 1;
}

/* core.presence_jobs({ {name, digest [, weight]}, ... }) -> hash, text */
static int l_jobs(lua_State *L)
{
	size_t n;
	const char **names, **digests;
	int *weights;
	char hash[STORE_HASH_MAX + 1], *text;

	luaL_checktype(L, 1, LUA_TTABLE);
	n = lua_rawlen(L, 1);
	names = lua_newuserdatauv(L, (n ? n : 1) * sizeof *names, 0);
	digests = lua_newuserdatauv(L, (n ? n : 1) * sizeof *digests, 0);
	weights = lua_newuserdatauv(L, (n ? n : 1) * sizeof *weights, 0);
	for (size_t i = 0; i < n; i++) {
		lua_rawgeti(L, 1, (lua_Integer)i + 1);
		lua_rawgeti(L, -1, 1);
		lua_rawgeti(L, -2, 2);
		lua_rawgeti(L, -3, 3);
		names[i] = luaL_checkstring(L, -3);
		digests[i] = lua_tostring(L, -2);
		weights[i] = (int)luaL_optinteger(L, -1, 1);
		lua_pop(L, 4);
	}
	if (presence_jobs(names, digests, weights, n, hash, &text) < 0)
		return luaL_error(L, "out of memory");
	lua_pushstring(L, hash);
	lua_pushstring(L, text);
	free(text);
	return 2;
}

static int push_err(lua_State *L, struct store *s)
{
	lua_pushnil(L);
	lua_pushstring(L, s->err[0] ? s->err : "store error");
	return 2;
}

static struct store *check_store(lua_State *L)
{
	struct store *s = lx_test_store(L, 1);

	if (!s)
		luaL_error(L, "leash.core store: not a store, or it is closed");
	return s;
}

/* s:beat({owner=, host=, pid=, version=, name=, jobs_hash=, jobs=, broken=},
 * prune_ms) -> rows, now | nil, err */
static int l_beat(lua_State *L)
{
	struct store *s = check_store(L);
	struct store_replica me, *rows = NULL;
	size_t n = 0;
	int64_t now = 0;
	int isint;
	lua_Integer prune;

	luaL_checktype(L, 2, LUA_TTABLE);
	row_from(L, 2, &me, 0);
	prune = lua_tointegerx(L, 3, &isint);
	if (store_beat(s, &me, isint ? (int64_t)prune : 0, &rows, &n, &now) != STORE_OK)
		return push_err(L, s);
	lx_push_replicas(L, rows, n);
	store_free_replicas(rows, n);
	lua_pushinteger(L, now);
	return 2;
}

static int l_leave(lua_State *L)
{
	struct store *s = check_store(L);
	const char *owner = lua_tostring(L, 2);

	if (store_leave(s, owner) != STORE_OK)
		return push_err(L, s);
	lua_pushboolean(L, 1);
	return 1;
}

static int l_replicas(lua_State *L)
{
	struct store *s = check_store(L);
	struct store_replica *rows = NULL;
	size_t n = 0;
	int64_t now = 0;

	if (store_replicas(s, &rows, &n, &now) != STORE_OK)
		return push_err(L, s);
	lx_push_replicas(L, rows, n);
	store_free_replicas(rows, n);
	lua_pushinteger(L, now);
	return 2;
}

/* s:drain(name|nil, { owner, ... }, on) -> changed, now | nil, err */
static int l_drain(lua_State *L)
{
	struct store *s = check_store(L);
	const char *name = luaL_optstring(L, 2, NULL);
	const char **owners;
	size_t n;
	int64_t changed = 0, now = 0;

	luaL_checktype(L, 3, LUA_TTABLE);
	n = lua_rawlen(L, 3);
	owners = lua_newuserdatauv(L, (n ? n : 1) * sizeof *owners, 0);
	for (size_t i = 0; i < n; i++) {
		lua_rawgeti(L, 3, (lua_Integer)i + 1);
		owners[i] = luaL_checkstring(L, -1);
		lua_pop(L, 1);          /* the string stays alive in the argument table */
	}
	if (store_drain(s, name, owners, n, lua_toboolean(L, 4), &changed, &now) != STORE_OK)
		return push_err(L, s);
	lua_pushinteger(L, changed);
	lua_pushinteger(L, now);
	return 2;
}

/* s:renew_beat(owner, names, ms, me, prune_ms) -> renewed (as renew_ctl's),
 * rows, now | nil, err */
static int l_renew_beat(lua_State *L)
{
	struct store *s = check_store(L);
	size_t n, nrows = 0;
	const char **names = lx_names_arg(L, 3, &n);
	int64_t *tokens = lua_newuserdatauv(L, (n ? n : 1) * sizeof *tokens, 0), now = 0;
	struct store_ctl *ctl = lua_newuserdatauv(L, (n ? n : 1) * sizeof *ctl, 0);
	struct store_replica me, *rows = NULL;
	int isint;
	lua_Integer ms, prune;

	luaL_checktype(L, 5, LUA_TTABLE);
	row_from(L, 5, &me, 0);
	ms = lua_tointegerx(L, 4, &isint);
	if (!isint)
		ms = 0;
	prune = lua_tointegerx(L, 6, &isint);
	if (store_renew_beat(s, luaL_optstring(L, 2, NULL), names, n, (int64_t)ms, tokens, ctl, &me,
	                     isint ? (int64_t)prune : 0, &rows, &nrows, &now) != STORE_OK)
		return push_err(L, s);
	lx_push_renewed(L, names, n, tokens, ctl);
	lx_push_replicas(L, rows, nrows);
	store_free_replicas(rows, nrows);
	lua_pushinteger(L, now);
	return 3;
}

void lx_presence_lib(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{ "rendezvous", l_rendezvous },
		{ "rendezvous_score", l_score },
		{ "presence_prefer", l_prefer },
		{ "safe_point", l_safe_point },
		{ "presence_jobs", l_jobs },
		{ "placement", l_placement },
		{ NULL, NULL },
	};
	static const luaL_Reg placement[] = {
		{ "set", l_placement_set },
		{ "prefer", l_placement_prefer },
		{ "runner_up", l_placement_runner_up },
		{ "map", l_placement_map },
		{ NULL, NULL },
	};
	static const luaL_Reg methods[] = {
		{ "beat", l_beat },
		{ "leave", l_leave },
		{ "replicas", l_replicas },
		{ "drain", l_drain },
		{ "renew_beat", l_renew_beat },
		{ NULL, NULL },
	};

	luaL_setfuncs(L, fns, 0);
	if (luaL_newmetatable(L, PLACEMENT_MT)) {
		luaL_newlib(L, placement);
		lua_setfield(L, -2, "__index");
		lua_pushcfunction(L, l_placement_gc);
		lua_setfield(L, -2, "__gc");
	}
	lua_pop(L, 1);
	/* The store's methods live in its metatable's __index (bind/store.c). */
	if (luaL_getmetatable(L, "leash.store") == LUA_TTABLE &&
	    lua_getfield(L, -1, "__index") == LUA_TTABLE)
		luaL_setfuncs(L, methods, 0);
	lua_pop(L, 2);
}

/* bind/elect.c - leash.core.elector: the election state machine as busted sees
 * it, with an injected clock and either a real store or a fake one written
 * in Lua (a table with try_acquire, renew, release and renew_all methods,
 * and optionally release_all, answering as the real store's methods do). */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "cluster/elect.h"
#include "cluster/handoff.h"
#include "bind/bind.h"
#include "core/lx.h"

#define ELECTOR_MT "leash.elector"

/* ---- a store whose operations are Lua functions ---- */

struct fake_store {
	struct store base;
	lua_State *L;
	int ref;                        /* the Lua table */
};

/* Calls self:method(...) with nargs already pushed; leaves nres results. */
static int call(struct fake_store *f, const char *method, int nargs, int nres)
{
	lua_State *L = f->L;

	lua_rawgeti(L, LUA_REGISTRYINDEX, f->ref);
	lua_getfield(L, -1, method);
	lua_insert(L, -2 - nargs);
	lua_insert(L, -1 - nargs);      /* fn, self, args... */
	if (lua_pcall(L, nargs + 1, nres, 0) != LUA_OK) {
		store_fail(&f->base, "fake store %s: %s", method, lua_tostring(L, -1));
		lua_pop(L, 1);
		return STORE_ERR;
	}
	return STORE_OK;
}

static void read_info(lua_State *L, int i, struct lease_info *out)
{
	i = lua_absindex(L, i);
	memset(out, 0, sizeof *out);
	if (!lua_istable(L, i))
		return;
	lua_getfield(L, i, "owner");
	if (lua_isstring(L, -1))
		strncpy(out->owner, lua_tostring(L, -1), STORE_NAME_MAX);
	lua_getfield(L, i, "token");
	out->token = lua_tointeger(L, -1);
	lua_getfield(L, i, "expires_at");
	out->expires_at = lua_tointeger(L, -1);
	lua_getfield(L, i, "now");
	out->now = lua_tointeger(L, -1);
	lua_pop(L, 4);
}

/* true|false, info  or  nil, err */
static int answer(struct fake_store *f, struct lease_info *out)
{
	lua_State *L = f->L;
	int rc;

	if (lua_isnil(L, -2)) {
		store_fail(&f->base, "%s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "error");
		rc = STORE_ERR;
	} else {
		rc = lua_toboolean(L, -2) ? STORE_OK : STORE_NO;
		if (out)
			read_info(L, -1, out);
	}
	lua_pop(L, 2);
	return rc;
}

static int fake_acquire(struct store *s, const char *name, const char *owner, int64_t ms,
                        struct lease_info *out)
{
	struct fake_store *f = (struct fake_store *)s;

	lua_pushstring(f->L, name);
	lua_pushstring(f->L, owner);
	lua_pushinteger(f->L, ms);
	return call(f, "try_acquire", 3, 2) == STORE_OK ? answer(f, out) : STORE_ERR;
}

static int fake_renew(struct store *s, const char *name, const char *owner, int64_t ms,
                      struct lease_info *out)
{
	struct fake_store *f = (struct fake_store *)s;

	lua_pushstring(f->L, name);
	lua_pushstring(f->L, owner);
	lua_pushinteger(f->L, ms);
	return call(f, "renew", 3, 2) == STORE_OK ? answer(f, out) : STORE_ERR;
}

static int fake_release(struct store *s, const char *name, const char *owner)
{
	struct fake_store *f = (struct fake_store *)s;

	lua_pushstring(f->L, name);
	lua_pushstring(f->L, owner);
	return call(f, "release", 2, 2) == STORE_OK ? answer(f, NULL) : STORE_ERR;
}

static int fake_renew_all(struct store *s, const char *owner, const char *const *names,
                          size_t n, int64_t ms, int64_t *tokens)
{
	struct fake_store *f = (struct fake_store *)s;
	lua_State *L = f->L;
	int rc = STORE_OK;

	lua_pushstring(L, owner);
	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		lua_pushstring(L, names[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	lua_pushinteger(L, ms);
	if (call(f, "renew_all", 3, 2) != STORE_OK)
		return STORE_ERR;
	if (!lua_istable(L, -2)) {
		store_fail(s, "%s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "error");
		rc = STORE_ERR;
	} else {
		for (size_t i = 0; i < n; i++) {
			lua_getfield(L, -2, names[i]);
			tokens[i] = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : -1;
			lua_pop(L, 1);
		}
	}
	lua_pop(L, 2);
	return rc;
}

/* owner, names -> true  or  nil, err */
static int fake_release_all(struct store *s, const char *owner, const char *const *names,
                            size_t n)
{
	struct fake_store *f = (struct fake_store *)s;
	lua_State *L = f->L;

	lua_pushstring(L, owner);
	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		lua_pushstring(L, names[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	return call(f, "release_all", 2, 2) == STORE_OK ? answer(f, NULL) : STORE_ERR;
}

static int fake_list(struct store *s, struct lease_row **rows, size_t *n, int64_t *now)
{
	(void)rows;
	(void)n;
	(void)now;
	return store_fail(s, "fake store: list is not supported");
}

static void fake_close(struct store *s)
{
	(void)s;                        /* the elector's userdata owns it */
}

/* Lets a spec see the timeout each call was given (optional method). */
static void fake_set_timeout(struct store *s, int ms)
{
	struct fake_store *f = (struct fake_store *)s;
	lua_State *L = f->L;

	lua_rawgeti(L, LUA_REGISTRYINDEX, f->ref);
	if (lua_getfield(L, -1, "set_timeout") == LUA_TFUNCTION) {
		lua_insert(L, -2);
		lua_pushinteger(L, ms);
		if (lua_pcall(L, 2, 0, 0) != LUA_OK)
			lua_pop(L, 1);
	} else {
		lua_pop(L, 2);
	}
}

/* -> version, now  or  nil, err (a fake without the method answers that) */
static int fake_ctl_version(struct store *s, int64_t *version, int64_t *now)
{
	struct fake_store *f = (struct fake_store *)s;
	lua_State *L = f->L;
	int rc = STORE_OK;

	if (call(f, "ctl_version", 0, 2) != STORE_OK)
		return STORE_ERR;
	if (!lua_isinteger(L, -2)) {
		store_fail(s, "%s", lua_isstring(L, -1) ? lua_tostring(L, -1) : "error");
		rc = STORE_ERR;
	} else {
		*version = lua_tointeger(L, -2);
		*now = lua_tointeger(L, -1);
	}
	lua_pop(L, 2);
	return rc;
}

#define FAKE_OPS \
	.name = "fake", .try_acquire = fake_acquire, .renew = fake_renew, \
	.release = fake_release, .renew_all = fake_renew_all, .list = fake_list, \
	.close = fake_close, .set_timeout = fake_set_timeout, .ctl_version = fake_ctl_version

/* A fake with a release_all method gets the batched op; one without it
 * shows the wrappers' fallback. */
static const struct store_ops fake_ops = { FAKE_OPS };
static const struct store_ops fake_ops_release_all = { FAKE_OPS,
                                                       .release_all = fake_release_all };

/* ---- the elector ---- */

struct lelector {
	struct elector el;
	lua_State *L;
	int clock_ref, store_ref, events_ref;
	struct fake_store fake;
};

static int64_t lua_clock(void *arg)
{
	struct lelector *le = arg;
	int64_t t;

	lua_rawgeti(le->L, LUA_REGISTRYINDEX, le->clock_ref);
	lua_call(le->L, 0, 1);
	t = lua_tointeger(le->L, -1);
	lua_pop(le->L, 1);
	return t;
}

static void record(void *arg, struct elect_job *j, int gained, const char *why)
{
	struct lelector *le = arg;
	lua_State *L = le->L;

	lua_rawgeti(L, LUA_REGISTRYINDEX, le->events_ref);
	lua_createtable(L, 0, 4);
	lua_pushstring(L, j->name);
	lua_setfield(L, -2, "name");
	lua_pushboolean(L, gained);
	lua_setfield(L, -2, "gained");
	lua_pushstring(L, why);
	lua_setfield(L, -2, "why");
	lua_pushinteger(L, j->token);
	lua_setfield(L, -2, "token");
	lua_rawseti(L, -2, luaL_len(L, -2) + 1);
	lua_pop(L, 1);
}

static void record_error(void *arg, const char *what, const char *err)
{
	struct lelector *le = arg;
	lua_State *L = le->L;

	lua_rawgeti(L, LUA_REGISTRYINDEX, le->events_ref);
	lua_createtable(L, 0, 2);
	lua_pushstring(L, what);
	lua_setfield(L, -2, "error");
	lua_pushstring(L, err);
	lua_setfield(L, -2, "why");
	lua_rawseti(L, -2, luaL_len(L, -2) + 1);
	lua_pop(L, 1);
}

/* Callbacks run on the calling thread: busted runs specs in coroutines. */
static struct lelector *check(lua_State *L)
{
	struct lelector *le = luaL_checkudata(L, 1, ELECTOR_MT);

	le->L = L;
	le->fake.L = L;
	return le;
}

static struct elect_job *find(struct lelector *le, const char *name)
{
	for (size_t i = 0; i < le->el.n; i++)
		if (strcmp(le->el.jobs[i]->name, name) == 0)
			return le->el.jobs[i];
	return NULL;
}

static struct elect_job *check_job(lua_State *L)
{
	struct lelector *le = check(L);
	const char *name = luaL_checkstring(L, 2);
	struct elect_job *j = find(le, name);

	if (!j)
		luaL_error(L, "elector: no job named \"%s\"", name);
	return j;
}

static int field_ms(lua_State *L, const char *k, int64_t dflt, int64_t *out)
{
	lua_getfield(L, 1, k);
	*out = lua_isnil(L, -1) ? dflt : lua_tointeger(L, -1);
	lua_pop(L, 1);
	return *out > 0;
}

/* core.elector{owner=, lease=, renew=, retry=, margin=, timeout=, store=,
 * clock=, seed=, probe=, ctl_poll=} (all times in ms; probe:
 * elector.probe_ms, ctl_poll: elector.ctl_poll_ms) */
static int l_elector(lua_State *L)
{
	struct elect_cfg cfg;
	struct lelector *le;
	const char *owner;
	lua_Integer seed, probe, ctl_poll;

	luaL_checktype(L, 1, LUA_TTABLE);
	lua_getfield(L, 1, "owner");
	owner = luaL_optstring(L, -1, "test-owner");
	lua_pop(L, 1);
	if (!field_ms(L, "lease", 15000, &cfg.lease_ms) ||
	    !field_ms(L, "renew", cfg.lease_ms / 3, &cfg.renew_ms) ||
	    !field_ms(L, "retry", 2000, &cfg.retry_ms) ||
	    !field_ms(L, "margin", cfg.lease_ms / 5, &cfg.margin_ms) ||
	    !field_ms(L, "timeout", 5000, &cfg.timeout_ms))
		return luaL_error(L, "elector: lease, renew, retry, margin and timeout must be > 0");
	lua_getfield(L, 1, "seed");
	seed = luaL_optinteger(L, -1, 1);
	lua_pop(L, 1);
	lua_getfield(L, 1, "probe");
	probe = luaL_optinteger(L, -1, 0);
	lua_pop(L, 1);
	lua_getfield(L, 1, "ctl_poll");
	ctl_poll = luaL_optinteger(L, -1, 0);
	lua_pop(L, 1);

	le = lua_newuserdatauv(L, sizeof *le, 0);
	memset(le, 0, sizeof *le);
	le->L = L;
	le->clock_ref = le->store_ref = le->events_ref = LUA_NOREF;
	luaL_setmetatable(L, ELECTOR_MT);
	lua_getfield(L, 1, "clock");
	luaL_argcheck(L, lua_isfunction(L, -1), 1, "clock must be a function returning ms");
	le->clock_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	lua_newtable(L);
	le->events_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	elect_init(&le->el, &cfg, owner, lua_clock, le, (uint64_t)seed);
	le->el.probe_ms = probe;
	le->el.ctl_poll_ms = ctl_poll;
	le->el.on_change = record;
	le->el.on_error = record_error;
	le->el.arg = le;

	lua_getfield(L, 1, "store");
	if (lx_test_store(L, -1)) {
		le->el.store = lx_test_store(L, -1);
		le->store_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	} else if (lua_istable(L, -1)) {
		int batched = lua_getfield(L, -1, "release_all") == LUA_TFUNCTION;

		lua_pop(L, 1);
		le->fake.base.ops = batched ? &fake_ops_release_all : &fake_ops;
		le->fake.L = L;
		le->fake.ref = luaL_ref(L, LUA_REGISTRYINDEX);
		le->el.store = &le->fake.base;
	} else {
		lua_pop(L, 1);              /* no store: every call is an error */
	}
	return 1;
}

/* el:add(name [, lease, renew, margin]): a job with its own lease gives all
 * three (leash.config.timing derives them), as leash run does. */
static int l_add(lua_State *L)
{
	struct lelector *le = check(L);
	const char *name = luaL_checkstring(L, 2);
	lua_Integer lease = luaL_optinteger(L, 3, 0);
	lua_Integer renew = lease ? luaL_checkinteger(L, 4) : 0;
	lua_Integer margin = lease ? luaL_checkinteger(L, 5) : 0;

	if (find(le, name))
		return luaL_error(L, "elector: job \"%s\" was added already", name);
	if (!elect_add(&le->el, name, lease, renew, margin, NULL))
		return luaL_error(L, "elector: out of memory");
	return 0;
}

static int l_remove(lua_State *L)
{
	struct lelector *le = check(L);

	elect_remove(&le->el, check_job(L));
	return 0;
}

static int l_step(lua_State *L)
{
	int64_t next = elect_step(&check(L)->el);

	if (next == INT64_MAX)
		lua_pushnil(L);
	else
		lua_pushinteger(L, next);
	return 1;
}

/* el:events() -> the changes and errors since the last call */
static int l_events(lua_State *L)
{
	struct lelector *le = check(L);

	lua_rawgeti(L, LUA_REGISTRYINDEX, le->events_ref);
	luaL_unref(L, LUA_REGISTRYINDEX, le->events_ref);
	lua_newtable(L);
	le->events_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	return 1;
}

static void set_time(lua_State *L, const char *k, int64_t v)
{
	if (v == INT64_MAX)
		lua_pushnil(L);
	else
		lua_pushinteger(L, v);
	lua_setfield(L, -2, k);
}

static int l_state(lua_State *L)
{
	struct elect_job *j = check_job(L);

	lua_createtable(L, 0, 8);
	lua_pushstring(L, j->state == ELECT_HOLDER ? "holder" : "follower");
	lua_setfield(L, -2, "state");
	lua_pushinteger(L, j->token);
	lua_setfield(L, -2, "token");
	if (j->state == ELECT_HOLDER) {
		set_time(L, "deadline", j->deadline);
		set_time(L, "renew_due", j->renew_due);
	} else {
		set_time(L, "next_try", j->next_try);
		set_time(L, "wake_at", j->wake_at);
		lua_pushstring(L, j->holder ? j->holder : "");
		lua_setfield(L, -2, "holder");
		if (j->other_preferred)
			set_time(L, "not_before", j->not_before);
		if (j->hold_until)
			set_time(L, "hold_until", j->hold_until);
		if (j->next_probe)
			set_time(L, "next_probe", j->next_probe);
	}
	if (elect_paused(j) < 0)
		lua_pushliteral(L, "unknown");
	else
		lua_pushboolean(L, elect_paused(j));
	lua_setfield(L, -2, "paused");
	return 1;
}

/* el:hold(name, until): elect_hold (after a manual hand-off). */
static int l_hold(lua_State *L)
{
	struct lelector *le = check(L);
	const char *name = luaL_checkstring(L, 2);
	struct elect_job *j = find(le, name);

	if (!j)
		return luaL_error(L, "elector: no job named \"%s\"", name);
	elect_hold(&le->el, j, (int64_t)luaL_checkinteger(L, 3));
	return 0;
}

/* el:drain(on): elect_drain (leash drain). */
static int l_drain(lua_State *L)
{
	elect_drain(&check(L)->el, lua_toboolean(L, 2));
	return 0;
}

static int l_wake(lua_State *L)
{
	struct lelector *le = check(L);

	elect_wake(&le->el, luaL_checkstring(L, 2));
	return 0;
}

/* el:look(name): elect_look (a lease passed to a named replica). */
static int l_look(lua_State *L)
{
	struct lelector *le = check(L);

	elect_look(&le->el, luaL_checkstring(L, 2));
	return 0;
}

static int l_release(lua_State *L)
{
	struct lelector *le = check(L);
	struct elect_job *j = check_job(L);

	if (elect_release(&le->el, j) != STORE_OK) {
		lua_pushnil(L);
		lua_pushstring(L, le->el.store ? le->el.store->err : "no store");
		return 2;
	}
	lua_pushboolean(L, 1);
	return 1;
}

/* el:release_all() -> how many were released, or nil, err */
static int l_release_all(lua_State *L)
{
	struct lelector *le = check(L);
	size_t n;

	if (elect_release_all(&le->el, &n) != STORE_OK) {
		lua_pushnil(L);
		lua_pushstring(L, le->el.store ? le->el.store->err : "no store");
		return 2;
	}
	lua_pushinteger(L, (lua_Integer)n);
	return 1;
}

/* el:prefer(name, other [, next_in_line]): spread's word on the job (other:
 * 0 me or nobody, 1 another replica, 2 another, settled). */
static int l_prefer(lua_State *L)
{
	struct lelector *le = check(L);
	struct elect_job *j = check_job(L);

	/* true, or 2 (ELECT_BEHIND_HOLDER: the preferred replica holds it) */
	j->next_in_line = lua_isinteger(L, 4) ? (int)lua_tointeger(L, 4) : lua_toboolean(L, 4);
	elect_prefer(&le->el, j, (int)luaL_checkinteger(L, 3));
	return 0;
}

/* el:handoff(name, ...) -> true | nil, err */
static int l_handoff(lua_State *L)
{
	struct lelector *le = check(L);
	int n = lua_gettop(L) - 1;
	struct elect_job **js = lua_newuserdatauv(L, (size_t)(n > 0 ? n : 1) * sizeof *js, 0);

	for (int i = 0; i < n; i++) {
		const char *name = luaL_checkstring(L, i + 2);
		if (!(js[i] = find(le, name)))
			return luaL_error(L, "elector: no job named \"%s\"", name);
	}
	if (elect_handoff(&le->el, js, (size_t)n) != STORE_OK) {
		lua_pushnil(L);
		lua_pushstring(L, le->el.store ? le->el.store->err : "no store");
		return 2;
	}
	lua_pushboolean(L, 1);
	return 1;
}

static int l_gc(lua_State *L)
{
	struct lelector *le = check(L);

	elect_free(&le->el);
	luaL_unref(L, LUA_REGISTRYINDEX, le->clock_ref);
	luaL_unref(L, LUA_REGISTRYINDEX, le->events_ref);
	luaL_unref(L, LUA_REGISTRYINDEX, le->store_ref);
	if (le->fake.base.ops)
		luaL_unref(L, LUA_REGISTRYINDEX, le->fake.ref);
	le->clock_ref = le->events_ref = le->store_ref = LUA_NOREF;
	le->fake.base.ops = NULL;
	return 0;
}

static int opt_bool(lua_State *L, const char *k)
{
	int v;

	lua_getfield(L, 1, k);
	v = lua_toboolean(L, -1);
	lua_pop(L, 1);
	return v;
}

/* core.handoff_decide{manual=, draining=, other=, fresh=, moved=, pinned=, joined_left=,
 * held=, lease=, handing_off=, handing=, service=, busy=, now=, next_fire=,
 * after_next=, handover=} -> "keep" | "wait" | "stop" | "release" | "cancel"
 * | "abandon", and the reason ("leash handoff", "leash drain", "preferred")
 * or nil */
static int l_handoff_decide(lua_State *L)
{
	static const char *const what[] = { "keep", "wait", "stop", "release", "cancel",
	                                    "abandon" };
	struct handoff_in in;

	luaL_checktype(L, 1, LUA_TTABLE);
	in = (struct handoff_in){
		.manual = opt_bool(L, "manual"), .draining = opt_bool(L, "draining"),
		.other = opt_bool(L, "other"), .fresh = opt_bool(L, "fresh"),
		.moved = opt_bool(L, "moved"), .pinned = opt_bool(L, "pinned"),
		.joined_left = opt_bool(L, "joined_left"),
		.held_ms = lx_field_int(L, 1, "held", 0), .lease_ms = lx_field_int(L, 1, "lease", 15000),
		.handing_off = opt_bool(L, "handing_off"), .handing_ms = lx_field_int(L, 1, "handing", 0),
		.service = opt_bool(L, "service"), .busy = opt_bool(L, "busy"),
		.now = lx_field_int(L, 1, "now", 0), .next_fire = lx_field_int(L, 1, "next_fire", -1),
		.after_next = lx_field_int(L, 1, "after_next", -1), .handover_ms = lx_field_int(L, 1, "handover", 0),
	};
	lua_pushstring(L, what[handoff_decide(&in)]);
	if (handoff_reason(&in))
		lua_pushstring(L, handoff_reason(&in));
	else
		lua_pushnil(L);
	return 2;
}

void lx_elect_lib(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{ "add", l_add },
		{ "remove", l_remove },
		{ "step", l_step },
		{ "events", l_events },
		{ "state", l_state },
		{ "wake", l_wake },
		{ "look", l_look },
		{ "release", l_release },
		{ "release_all", l_release_all },
		{ "prefer", l_prefer },
		{ "handoff", l_handoff },
		{ "hold", l_hold },
		{ "drain", l_drain },
		{ NULL, NULL },
	};

	if (luaL_newmetatable(L, ELECTOR_MT)) {
		luaL_newlib(L, methods);
		lua_setfield(L, -2, "__index");
		lua_pushcfunction(L, l_gc);
		lua_setfield(L, -2, "__gc");
	}
	lua_pop(L, 1);
	lua_pushcfunction(L, l_elector);
	lua_setfield(L, -2, "elector");
	lua_pushcfunction(L, l_handoff_decide);
	lua_setfield(L, -2, "handoff_decide");
}

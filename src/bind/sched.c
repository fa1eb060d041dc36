/* bind/sched.c - leash.core.sched: the job table on a fake clock, for specs.
 *
 *   local s = core.sched {
 *     jobs  = dir,                          -- a jobs/ directory
 *     wall  = function() return ms end,     -- the wall clock (fire times)
 *     mono  = function() return ms end,     -- the monotonic clock (services)
 *     holds = function(name) return b end,  -- optional: singleton mode; whether
 *                                           -- this replica holds the job's lease
 *     claim = function(list) ... end,       -- optional, with holds: claims
 *                                           -- { { name=, fire= }, ... } -> list of
 *                                           -- booleans, or nil, err (no answer)
 *     paused = function(name) return b end, -- optional, with claim: leash pause
 *     unclaim = function(list) ... end,     -- optional, with claim: gives claimed
 *                                           -- fires back at s:stopped(), as claim
 *     prepare = function(name, fire) return k end,  -- optional: forks a fire's
 *                                           -- process ahead: 1 made, 0 not in this
 *                                           -- turn, -1 failed
 *     take_back = function(name, fire) return b end, -- optional, with prepare:
 *                                           -- a claimed fire's start goes ahead to
 *                                           -- its process; this takes it back (true),
 *                                           -- or it is too late (false: it went)
 *   }
 *   s:load(reload)          s:due() -> ms to sleep
 *   s:broken() -> the broken files text a beat publishes (plan/sched.h), or nil
 *   s:ended(name, failed, ran_ms)           s:gained(name, last_fire or nil)
 *   s:body_over(name)       the run's body is over, its process not gone yet
 *   s:prep_started(name)    the process whose start went ahead ended, having
 *                           read it (before the turn that was to start it)
 *   s:drop_removed()        s:jobs() -> { [name] = { ... } }
 *   s:trigger(name) -> b    (leash trigger; a manual run starts as "start"
 *                            with a 4th field "manual")
 *   s:events() -> list of { "start", name, scheduled_ms } / { "stop", name,
 *                 reason } / { "enter", name } / { "leave", name } / { "log",
 *                 line } / { "account", name, fire, outcome, "claimed" or
 *                 "unclaimed", why } (with claim: a fire not run) / { "prepare",
 *                 name, fire } / { "discard", name, fire } (with prepare; a start
 *                 of a prepared process has a 4th field "prepared") / { "ahead",
 *                 name, fire } / { "take_back", name, fire, "taken" or "too late" }
 *                 (with take_back), taken (the list starts empty again)
 *   s:stop()                the shutdown: no new runs
 *   s:stopped()             the runs are over: what was claimed is given
 *                           back (unclaim), what is left dropped
 *
 * Runs are not processes here: "start" is an event, and the spec ends a run
 * with s:ended().  Log records go to the events too.
 */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "bind/bind.h"
#include "core/log.h"
#include "plan/sched.h"

#define SCHED_MT "leash.sched"

struct lsched {
	struct sched s;
	lua_State *L;
	int wall_ref, mono_ref, holds_ref, claim_ref, events_ref, paused_ref, prepare_ref;
	int unclaim_ref, take_back_ref;
	char *dir;
	long next_id;
	int open;
};

/* What j->run points at while a job "runs". */
struct fake_run {
	struct job *job;
	int64_t fire;                   /* a prepared one's */
	int over;                       /* s:body_over(name): only exiting */
};
static char fake_elect;                 /* and j->elect while it stands */

static void event4(struct lsched *ls, const char *what, const char *a, lua_Integer n,
                   const char *b, const char *c)
{
	lua_State *L = ls->L;

	lua_rawgeti(L, LUA_REGISTRYINDEX, ls->events_ref);
	lua_createtable(L, 3, 0);
	lua_pushstring(L, what);
	lua_rawseti(L, -2, 1);
	lua_pushstring(L, a);
	lua_rawseti(L, -2, 2);
	if (b)
		lua_pushstring(L, b);
	else
		lua_pushinteger(L, n);
	lua_rawseti(L, -2, 3);
	if (c) {
		lua_pushstring(L, c);
		lua_rawseti(L, -2, 4);
	}
	lua_rawseti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
	lua_pop(L, 1);
}

static void event(struct lsched *ls, const char *what, const char *a, lua_Integer n,
                  const char *b)
{
	event4(ls, what, a, n, b, NULL);
}

static int64_t call_clock(struct lsched *ls, int ref)
{
	lua_State *L = ls->L;
	int64_t v;

	lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
	lua_call(L, 0, 1);
	v = (int64_t)lua_tointeger(L, -1);
	lua_pop(L, 1);
	return v;
}

static int64_t now(void *arg, enum sched_clock which)
{
	struct lsched *ls = arg;

	return call_clock(ls, which == SCHED_WALL ? ls->wall_ref : ls->mono_ref);
}

static struct run *start(void *arg, struct job *j, int64_t scheduled_ms, int catchup,
                         struct run *prep, long *id)
{
	struct lsched *ls = arg;
	struct fake_run *r = prep ? (struct fake_run *)prep : malloc(sizeof *r);

	if (!r)
		return NULL;
	r->job = j;
	r->over = 0;
	event4(ls, "start", j->name, scheduled_ms, NULL, catchup == SCHED_MANUAL ? "manual"
	       : catchup ? "catchup" : prep ? "prepared" : NULL);
	*id = ++ls->next_id;
	return (struct run *)r;
}

static int prepare(void *arg, struct job *j, int64_t fire, struct run **out)
{
	struct lsched *ls = arg;
	lua_State *L = ls->L;
	struct fake_run *r;
	int rc;

	lua_rawgeti(L, LUA_REGISTRYINDEX, ls->prepare_ref);
	lua_pushstring(L, j->name);
	lua_pushinteger(L, fire);
	lua_call(L, 2, 1);
	rc = (int)lua_tointeger(L, -1);
	lua_pop(L, 1);
	if (rc != 1)
		return rc;
	if (!(r = malloc(sizeof *r)))
		return -1;
	r->job = j;
	r->fire = fire;
	r->over = 0;
	*out = (struct run *)r;
	event(ls, "prepare", j->name, fire, NULL);
	return 1;
}

static void discard(struct lsched *ls, struct run *run)
{
	struct fake_run *r = (struct fake_run *)run;

	if (ls->open)
		event(ls, "discard", r->job->name, r->fire, NULL);
	free(r);
}

/* Without the spec's take_back, no start goes ahead. */
static int go_ahead(struct lsched *ls, struct job *j, int64_t fire)
{
	if (ls->take_back_ref == LUA_NOREF)
		return -1;
	event(ls, "ahead", j->name, fire, NULL);
	return 0;
}

static int take_back(struct lsched *ls, struct run *run)
{
	struct fake_run *r = (struct fake_run *)run;
	lua_State *L = ls->L;
	int taken;

	lua_rawgeti(L, LUA_REGISTRYINDEX, ls->take_back_ref);
	lua_pushstring(L, r->job->name);
	lua_pushinteger(L, r->fire);
	lua_call(L, 2, 1);
	taken = lua_toboolean(L, -1);
	lua_pop(L, 1);
	event4(ls, "take_back", r->job->name, r->fire, NULL, taken ? "taken" : "too late");
	return taken ? 0 : -1;
}

static int64_t act(void *arg, enum sched_act what, struct run *r, struct job *j, int64_t fire,
                   const char *reason)
{
	struct lsched *ls = arg;

	switch (what) {
	case SCHED_STOP:
		event(ls, "stop", ((struct fake_run *)r)->job->name, 0, reason);
		return 0;
	case SCHED_ADOPT:
		((struct fake_run *)r)->job = j;
		return 0;
	case SCHED_DISCARD:
		discard(ls, r);
		return 0;
	case SCHED_GO_AHEAD:
		return go_ahead(ls, j, fire);
	case SCHED_TAKE_BACK:
		return take_back(ls, r);
	case SCHED_BODY_OVER:
		return ((const struct fake_run *)r)->over;
	case SCHED_PREP_COST:
		return 0;
	}
	return -1;
}

/* The spec's function ref called with the job's name, as a boolean. */
static int ask(struct lsched *ls, int ref, const struct job *j)
{
	lua_State *L = ls->L;
	int v;

	lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
	lua_pushstring(L, j->name);
	lua_call(L, 1, 1);
	v = lua_toboolean(L, -1);
	lua_pop(L, 1);
	return v;
}

/* The election's word: a job that says singleton takes part; it may run
 * as the spec's holds says, is paused as its paused says (never without
 * one, or without its claim). */
static int elect_ask(void *arg, const struct job *j, enum sched_ask what)
{
	struct lsched *ls = arg;

	switch (what) {
	case SCHED_TAKES_PART:
		return j->singleton;
	case SCHED_MAY_RUN:
		return ask(ls, ls->holds_ref, j);
	case SCHED_STALE:
		return j->elect && !j->singleton;
	case SCHED_PAUSED:
		if (ls->paused_ref == LUA_NOREF || ls->claim_ref == LUA_NOREF)
			return 0;
		return ask(ls, ls->paused_ref, j);
	}
	return 0;
}

static void stand(void *arg, struct job *j, int in)
{
	if (!j->elect != !in)
		event(arg, in ? "enter" : "leave", j->name, 0, NULL);
	j->elect = in ? &fake_elect : NULL;
}

/* The spec's claim (or unclaim, fn): a list of { name=, fire= } in, a list
 * of booleans or nil, err out.  An error is logged, as singleton.c's
 * store_failed does. */
static int call_claims(struct lsched *ls, int fn, struct job *const *jobs, const int64_t *fires,
                       size_t n, int *ok)
{
	lua_State *L = ls->L;
	int rc = 0;

	lua_rawgeti(L, LUA_REGISTRYINDEX, fn);
	lua_createtable(L, (int)n, 0);
	for (size_t i = 0; i < n; i++) {
		lua_createtable(L, 0, 2);
		lua_pushstring(L, jobs[i]->name);
		lua_setfield(L, -2, "name");
		lua_pushinteger(L, (lua_Integer)fires[i]);
		lua_setfield(L, -2, "fire");
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	lua_call(L, 1, 2);
	if (!lua_istable(L, -2)) {
		log_msg(LOG_ERROR, NULL, 0, "lease store: claim failed: %s",
		        lua_isstring(L, -1) ? lua_tostring(L, -1) : "?");
		rc = -1;
	} else {
		for (size_t i = 0; i < n; i++) {
			lua_rawgeti(L, -2, (lua_Integer)i + 1);
			ok[i] = lua_toboolean(L, -1);
			lua_pop(L, 1);
		}
	}
	lua_pop(L, 2);
	return rc;
}

/* Without the spec's unclaim, every fire given back is refused. */
static int claim(void *arg, struct job *const *jobs, const int64_t *fires, size_t n, int *ok,
                 int back)
{
	struct lsched *ls = arg;

	if (back && ls->unclaim_ref == LUA_NOREF) {
		for (size_t i = 0; i < n; i++)
			ok[i] = 0;
		return 0;
	}
	return call_claims(ls, back ? ls->unclaim_ref : ls->claim_ref, jobs, fires, n, ok);
}

/* A fire the table did not run: an event the spec reads. */
static void account(void *arg, struct job *j, int64_t fire, int claimed, const char *outcome,
                    const char *why)
{
	struct lsched *ls = arg;
	lua_State *L = ls->L;

	event4(ls, "account", j->name, fire, NULL, outcome);
	lua_rawgeti(L, LUA_REGISTRYINDEX, ls->events_ref);
	lua_rawgeti(L, -1, luaL_len(L, -1));
	lua_pushstring(L, claimed ? "claimed" : "unclaimed");
	lua_rawseti(L, -2, 5);
	lua_pushstring(L, why);
	lua_rawseti(L, -2, 6);
	lua_pop(L, 2);
}

static void sink(void *arg, enum log_level lv, const char *line)
{
	(void)lv;
	event(arg, "log", line, 0, NULL);
}

static struct lsched *check(lua_State *L)
{
	struct lsched *ls = luaL_checkudata(L, 1, SCHED_MT);

	luaL_argcheck(L, ls->open, 1, "the job table is closed");
	ls->L = L;
	log_set_sink(sink, ls);
	return ls;
}

/* Every call ends here: the log goes back to stderr. */
static int done(lua_State *L, int n)
{
	log_set_sink(NULL, NULL);
	return n;
}

static int l_load(lua_State *L)
{
	struct lsched *ls = check(L);

	sched_load(&ls->s, lua_toboolean(L, 2));
	return done(L, 0);
}

/* s:broken() -> the broken files text (plan/sched.h's sched_broken), or nil */
static int l_broken(lua_State *L)
{
	struct lsched *ls = check(L);

	if (sched_broken(&ls->s))
		lua_pushstring(L, sched_broken(&ls->s));
	else
		lua_pushnil(L);
	return 1;
}

static int l_due(lua_State *L)
{
	struct lsched *ls = check(L);

	lua_pushinteger(L, sched_start_due(&ls->s));
	return done(L, 1);
}

static struct job *find(lua_State *L, struct lsched *ls)
{
	struct job *j = sched_find(&ls->s, luaL_checkstring(L, 2));

	if (!j) {
		log_set_sink(NULL, NULL);
		luaL_error(L, "no job %s", lua_tostring(L, 2));
	}
	return j;
}

/* The job named by argument 2, with a run going (an error if not). */
static struct job *find_running(lua_State *L, struct lsched *ls)
{
	struct job *j = find(L, ls);

	if (!j->run) {
		log_set_sink(NULL, NULL);
		luaL_error(L, "%s has no run going", j->name);
	}
	return j;
}

static int l_body_over(lua_State *L)
{
	struct lsched *ls = check(L);
	struct job *j = find_running(L, ls);

	((struct fake_run *)j->run)->over = 1;
	return done(L, 0);
}

static int l_prep_started(lua_State *L)
{
	struct lsched *ls = check(L);
	struct job *j = find(L, ls);

	if (j->prep)
		sched_prep_started(&ls->s, j, j->prep);
	return done(L, 0);
}

static int l_ended(lua_State *L)
{
	struct lsched *ls = check(L);
	struct job *j = find_running(L, ls);

	free(j->run);
	sched_run_ended(&ls->s, j, lua_toboolean(L, 3), (int64_t)luaL_optinteger(L, 4, 0));
	return done(L, 0);
}

static int l_gained(lua_State *L)
{
	struct lsched *ls = check(L);
	struct job *j = find(L, ls);

	sched_gained(&ls->s, j, (int64_t)luaL_optinteger(L, 3, -1), luaL_optstring(L, 4, NULL));
	return done(L, 0);
}

static int l_trigger(lua_State *L)
{
	struct lsched *ls = check(L);
	struct job *j = find(L, ls);
	int ok = sched_trigger(&ls->s, j);

	lua_pushboolean(L, ok);
	return 1;
}

static int l_drop_removed(lua_State *L)
{
	struct lsched *ls = check(L);

	sched_drop_removed(&ls->s);
	return done(L, 0);
}

static int l_stop(lua_State *L)
{
	struct lsched *ls = check(L);

	ls->s.stopping = 1;
	return done(L, 0);
}

static int l_stopped(lua_State *L)
{
	struct lsched *ls = check(L);

	sched_stopped(&ls->s);
	return done(L, 0);
}

#define SETINT(k, v) (lua_pushinteger(L, (lua_Integer)(v)), lua_setfield(L, -2, k))

static int l_jobs(lua_State *L)
{
	static const char *const kinds[] = { "every", "cron", "service" };
	static const char *const overlaps[] = { "skip", "queue", "replace" };
	struct lsched *ls = check(L);

	lua_createtable(L, 0, (int)ls->s.njobs);
	for (size_t i = 0; i < ls->s.njobs; i++) {
		const struct job *j = ls->s.jobs[i];

		lua_createtable(L, 0, 17);
		lua_pushstring(L, kinds[j->kind]);
		lua_setfield(L, -2, "kind");
		lua_pushstring(L, j->describe);
		lua_setfield(L, -2, "describe");
		SETINT("next_fire_ms", j->next_fire_ms);
		lua_pushstring(L, overlaps[j->overlap]);
		lua_setfield(L, -2, "overlap");
		SETINT("pending_ms", j->pending_ms);
		SETINT("want_ms", j->fire.state == FIRE_DUE ? j->fire.at : 0);
		SETINT("claimed_ms", j->fire.state == FIRE_CLAIMED ? j->fire.at : 0);
		SETINT("backlog_ms", j->backlog_ms);
		SETINT("backlog_left", j->backlog_left);
		SETINT("restart_at", j->restart_at);
		SETINT("backoff_ms", j->backoff_ms);
		SETINT("lease_ms", j->lease_ms);
		SETINT("weight", j->weight);
		lua_pushboolean(L, j->run != NULL);
		lua_setfield(L, -2, "running");
		SETINT("run_id", j->run ? j->run_id : 0);
		lua_pushboolean(L, j->removed);
		lua_setfield(L, -2, "removed");
		lua_pushboolean(L, j->elect != NULL);
		lua_setfield(L, -2, "elected");
		lua_setfield(L, -2, j->name);
	}
	return done(L, 1);
}

static int l_events(lua_State *L)
{
	struct lsched *ls = luaL_checkudata(L, 1, SCHED_MT);

	lua_rawgeti(L, LUA_REGISTRYINDEX, ls->events_ref);
	luaL_unref(L, LUA_REGISTRYINDEX, ls->events_ref);
	lua_newtable(L);
	ls->events_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	return 1;
}

static int l_gc(lua_State *L)
{
	struct lsched *ls = luaL_checkudata(L, 1, SCHED_MT);

	if (ls->open) {
		ls->L = L;
		ls->open = 0;
		/* No election to leave; events and logs go nowhere now. */
		ls->s.env.stand = NULL;
		log_set_sink(NULL, NULL);
		for (size_t i = 0; i < ls->s.njobs; i++) {
			free(ls->s.jobs[i]->run);
			ls->s.jobs[i]->run = NULL;
		}
		sched_free(&ls->s);
		free(ls->dir);
		luaL_unref(L, LUA_REGISTRYINDEX, ls->wall_ref);
		luaL_unref(L, LUA_REGISTRYINDEX, ls->mono_ref);
		luaL_unref(L, LUA_REGISTRYINDEX, ls->holds_ref);
		luaL_unref(L, LUA_REGISTRYINDEX, ls->claim_ref);
		luaL_unref(L, LUA_REGISTRYINDEX, ls->unclaim_ref);
		luaL_unref(L, LUA_REGISTRYINDEX, ls->paused_ref);
		luaL_unref(L, LUA_REGISTRYINDEX, ls->prepare_ref);
		luaL_unref(L, LUA_REGISTRYINDEX, ls->take_back_ref);
		luaL_unref(L, LUA_REGISTRYINDEX, ls->events_ref);
	}
	return 0;
}

static int fn_ref(lua_State *L, const char *key, int required)
{
	lua_getfield(L, 1, key);
	if (lua_isnil(L, -1) && !required) {
		lua_pop(L, 1);
		return LUA_NOREF;
	}
	if (!lua_isfunction(L, -1))
		luaL_error(L, "core.sched: %s must be a function", key);
	return luaL_ref(L, LUA_REGISTRYINDEX);
}

static int l_sched(lua_State *L)
{
	struct lsched *ls;
	struct sched_env env = { 0 };
	const char *dir;

	luaL_checktype(L, 1, LUA_TTABLE);
	lua_getfield(L, 1, "jobs");
	dir = luaL_checkstring(L, -1);
	ls = lua_newuserdatauv(L, sizeof *ls, 0);
	memset(ls, 0, sizeof *ls);
	ls->wall_ref = ls->mono_ref = ls->holds_ref = ls->claim_ref = ls->events_ref = LUA_NOREF;
	ls->paused_ref = ls->prepare_ref = ls->unclaim_ref = ls->take_back_ref = LUA_NOREF;
	luaL_setmetatable(L, SCHED_MT);
	ls->L = L;
	ls->dir = strdup(dir);
	ls->wall_ref = fn_ref(L, "wall", 1);
	ls->mono_ref = fn_ref(L, "mono", 1);
	ls->holds_ref = fn_ref(L, "holds", 0);
	ls->claim_ref = fn_ref(L, "claim", 0);
	ls->paused_ref = fn_ref(L, "paused", 0);
	ls->unclaim_ref = fn_ref(L, "unclaim", 0);
	ls->prepare_ref = fn_ref(L, "prepare", 0);
	ls->take_back_ref = fn_ref(L, "take_back", 0);
	lua_newtable(L);
	ls->events_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	env.arg = env.elect_arg = ls;
	env.now = now;
	env.start = start;
	env.act = act;
	if (ls->prepare_ref != LUA_NOREF)
		env.prepare = prepare;
	if (ls->holds_ref != LUA_NOREF) {
		env.ask = elect_ask;
		env.stand = stand;
		if (ls->claim_ref != LUA_NOREF) {
			env.claim = claim;
			env.account = account;
		}
	}
	sched_init(&ls->s, L, ls->dir, &env);
	ls->open = 1;
	return 1;
}

void lx_sched_lib(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{ "load", l_load },
		{ "broken", l_broken },
		{ "due", l_due },
		{ "ended", l_ended },
		{ "body_over", l_body_over },
		{ "prep_started", l_prep_started },
		{ "gained", l_gained },
		{ "drop_removed", l_drop_removed },
		{ "trigger", l_trigger },
		{ "jobs", l_jobs },
		{ "events", l_events },
		{ "stop", l_stop },
		{ "stopped", l_stopped },
		{ "__gc", l_gc },
		{ NULL, NULL },
	};
	static const luaL_Reg fns[] = {
		{ "sched", l_sched },
		{ NULL, NULL },
	};

	if (luaL_newmetatable(L, SCHED_MT)) {
		luaL_setfuncs(L, methods, 0);
		lua_pushvalue(L, -1);
		lua_setfield(L, -2, "__index");
	}
	lua_pop(L, 1);
	luaL_setfuncs(L, fns, 0);
}

/* bind/store.c - leash.core store bindings: core.open_store{...} and its methods,
 * as DESIGN.md "The C core as a Lua module" shows.  Every call goes through
 * the store_*() wrappers, so arguments are checked before any SQL.  A method
 * that fails answers nil, err, kind (store_kind_name: "timeout", "gone",
 * "refused", "duplicate" or "other"). */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <sqlite3.h>

#include "bind/bind.h"
#include "core/lx.h"
#include "store/store.h"

/* A lease row as Lua sees it (leash.core, status, the page). */
static void push_row(lua_State *L, const struct lease_row *r)
{
	lua_createtable(L, 0, 7);
	lua_pushstring(L, r->name);
	lua_setfield(L, -2, "name");
	lua_pushstring(L, r->owner);
	lua_setfield(L, -2, "owner");
	lua_pushinteger(L, r->token);
	lua_setfield(L, -2, "token");
	lua_pushinteger(L, r->acquired_at);
	lua_setfield(L, -2, "acquired_at");
	lua_pushinteger(L, r->renewed_at);
	lua_setfield(L, -2, "renewed_at");
	lua_pushinteger(L, r->expires_at);
	lua_setfield(L, -2, "expires_at");
	if (r->last_fire >= 0) {                /* nil: no fire claimed yet */
		lua_pushinteger(L, r->last_fire);
		lua_setfield(L, -2, "last_fire");
	}
	if (r->paused_until >= 0) {             /* nil: not paused (leash pause) */
		lua_pushinteger(L, r->paused_until);
		lua_setfield(L, -2, "paused_until");
	}
	{
		int64_t v = 0;
		const char *col = store_lease_corrupt(r->token, r->last_fire, &v);

		if (col) {                      /* nil: within store.h's bounds */
			lua_pushfstring(L, "%s = %I", col, (lua_Integer)v);
			lua_setfield(L, -2, "corrupt");
		}
	}
}

void lx_push_rows(lua_State *L, const struct lease_row *rows, size_t n)
{
	lua_createtable(L, (int)n, 0);
	for (size_t k = 0; k < n; k++) {
		push_row(L, &rows[k]);
		lua_rawseti(L, -2, (lua_Integer)k + 1);
	}
}

#define STORE_MT "leash.store"

struct lstore {
	struct store *s;
};

struct store *lx_test_store(lua_State *L, int idx)
{
	struct lstore *ls = luaL_testudata(L, idx, STORE_MT);

	return ls ? ls->s : NULL;
}

static struct store *check_open(lua_State *L)
{
	struct lstore *ls = luaL_checkudata(L, 1, STORE_MT);

	if (!ls->s)
		luaL_error(L, "leash.core store: the store is closed");
	return ls->s;
}

/* A string argument, or NULL so the wrapper refuses it with its message. */
static const char *opt_str(lua_State *L, int i)
{
	return lua_type(L, i) == LUA_TSTRING ? lua_tostring(L, i) : NULL;
}

/* A duration in ms; anything not an integer becomes 0, which is refused. */
static int64_t opt_ms(lua_State *L, int i)
{
	int isint;
	lua_Integer v = lua_tointegerx(L, i, &isint);

	return isint ? (int64_t)v : 0;
}

static int push_err(lua_State *L, struct store *s)
{
	lua_pushnil(L);
	lua_pushstring(L, s->err[0] ? s->err : "store error");
	lua_pushstring(L, store_kind_name(s->kind));
	return 3;
}

static void push_info(lua_State *L, const struct lease_info *in)
{
	lua_createtable(L, 0, 5);
	lua_pushstring(L, in->owner);
	lua_setfield(L, -2, "owner");
	lua_pushinteger(L, in->token);
	lua_setfield(L, -2, "token");
	lua_pushinteger(L, in->expires_at);
	lua_setfield(L, -2, "expires_at");
	lua_pushinteger(L, in->now);
	lua_setfield(L, -2, "now");
	if (in->last_fire >= 0) {               /* nil: no fire claimed yet */
		lua_pushinteger(L, in->last_fire);
		lua_setfield(L, -2, "last_fire");
	}
}

static int answer(lua_State *L, struct store *s, int rc, const struct lease_info *in)
{
	if (rc == STORE_ERR)
		return push_err(L, s);
	lua_pushboolean(L, rc == STORE_OK);
	push_info(L, in);
	return 2;
}

static int l_try_acquire(lua_State *L)
{
	struct store *s = check_open(L);
	struct lease_info in;

	memset(&in, 0, sizeof in);
	in.last_fire = STORE_NO_FIRE;
	return answer(L, s, store_try_acquire(s, opt_str(L, 2), opt_str(L, 3), opt_ms(L, 4), &in),
	              &in);
}

static int l_renew(lua_State *L)
{
	struct store *s = check_open(L);
	struct lease_info in;

	memset(&in, 0, sizeof in);
	in.last_fire = STORE_NO_FIRE;
	return answer(L, s, store_renew(s, opt_str(L, 2), opt_str(L, 3), opt_ms(L, 4), &in), &in);
}

static int l_release(lua_State *L)
{
	struct store *s = check_open(L);

	if (store_release(s, opt_str(L, 2), opt_str(L, 3)) == STORE_ERR)
		return push_err(L, s);
	lua_pushboolean(L, 1);
	return 1;
}

static void set_time(lua_State *L, const char *field, int64_t t)
{
	if (t == STORE_NO_TIME)
		return;
	lua_pushinteger(L, t);
	lua_setfield(L, -2, field);
}

/* s:renew_ctl(owner, names, ms) -> { [name] = { token, paused_until,
 * trigger_at, handoff_at } } for the renewed ones (NULL columns absent), now */
static int l_renew_ctl(lua_State *L);

/* s:control(name, "pause"|"resume"|"trigger"|"handoff", until, to) -> true
 * (or false when there is no such row), now */
static int l_control(lua_State *L)
{
	static const char *const whats[] = { "pause", "resume", "trigger", "handoff", NULL };
	struct store *s = check_open(L);
	int what = luaL_checkoption(L, 3, NULL, whats) + STORE_CTL_PAUSE;
	int64_t until = (int64_t)luaL_optinteger(L, 4, 0), now;
	int rc = store_control(s, opt_str(L, 2), what, until, luaL_optstring(L, 5, NULL), &now);

	if (rc == STORE_ERR)
		return push_err(L, s);
	lua_pushboolean(L, rc == STORE_OK);
	lua_pushinteger(L, now);
	return 2;
}

/* s:ctl_version() -> version, now | nil, err */
static int l_ctl_version(lua_State *L)
{
	struct store *s = check_open(L);
	int64_t version, now;

	if (store_ctl_version(s, &version, &now) != STORE_OK)
		return push_err(L, s);
	lua_pushinteger(L, version);
	lua_pushinteger(L, now);
	return 2;
}

/* s:handoff(name, owner, ms, live_ms) -> true, to ("" freed) | false | nil, err */
static int l_handoff(lua_State *L)
{
	struct store *s = check_open(L);
	char to[STORE_NAME_MAX + 1];
	int rc = store_handoff(s, opt_str(L, 2), opt_str(L, 3), (int64_t)luaL_checkinteger(L, 4),
	                       (int64_t)luaL_checkinteger(L, 5), to);

	if (rc == STORE_ERR)
		return push_err(L, s);
	lua_pushboolean(L, rc == STORE_OK);
	if (rc != STORE_OK)
		return 1;
	lua_pushstring(L, to);
	return 2;
}

/* s:health(owner, name, token, failing) -> changed (boolean) */
static int l_health(lua_State *L)
{
	struct store *s = check_open(L);
	int changed;
	int rc = store_health(s, opt_str(L, 2), opt_str(L, 3), (int64_t)luaL_checkinteger(L, 4),
	                      lua_toboolean(L, 5), &changed);

	if (rc == STORE_ERR)
		return push_err(L, s);
	lua_pushboolean(L, changed);
	return 1;
}

static void set_int(lua_State *L, const char *k, int64_t v, int64_t null);

/* s:repair(name) -> { found=, lease_bad=, token=, last_fire= (nil for
 * NULL), new_token=, dropped=, now= }, or nil, err. */
static int l_repair(lua_State *L)
{
	struct store *s = check_open(L);
	struct store_repair r;

	if (store_repair(s, opt_str(L, 2), &r) == STORE_ERR)
		return push_err(L, s);
	lua_createtable(L, 0, 7);
	lua_pushboolean(L, r.found);
	lua_setfield(L, -2, "found");
	lua_pushboolean(L, r.lease_bad);
	lua_setfield(L, -2, "lease_bad");
	set_int(L, "token", r.token, INT64_MIN);
	set_int(L, "last_fire", r.last_fire, STORE_NO_FIRE);
	set_int(L, "new_token", r.new_token, INT64_MIN);
	set_int(L, "dropped", r.dropped, INT64_MIN);
	set_int(L, "now", r.now, INT64_MIN);
	return 1;
}

/* s:corrupt_runs() -> { { job=, scheduled_at= }, ... }, or nil, err. */
static int l_corrupt_runs(lua_State *L)
{
	struct store *s = check_open(L);
	struct store_bad_run rows[STORE_BAD_RUNS_MAX];
	size_t n = 0;

	if (store_corrupt_runs(s, rows, &n) == STORE_ERR)
		return push_err(L, s);
	lua_createtable(L, (int)n, 0);
	for (size_t k = 0; k < n; k++) {
		lua_createtable(L, 0, 2);
		lua_pushstring(L, rows[k].job);
		lua_setfield(L, -2, "job");
		lua_pushinteger(L, rows[k].scheduled_at);
		lua_setfield(L, -2, "scheduled_at");
		lua_rawseti(L, -2, (lua_Integer)k + 1);
	}
	return 1;
}

/* The names of a Lua list at index i, in a userdata-free malloc'd array
 * whose strings stay anchored in the Lua list.  NULL entries for non-strings
 * (the wrapper refuses them). */
const char **lx_names_arg(lua_State *L, int i, size_t *n)
{
	const char **names;

	luaL_checktype(L, i, LUA_TTABLE);
	*n = (size_t)lua_rawlen(L, i);
	names = lua_newuserdatauv(L, (*n ? *n : 1) * sizeof *names, 0);
	for (size_t k = 0; k < *n; k++) {
		lua_rawgeti(L, i, (lua_Integer)k + 1);
		names[k] = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
		lua_pop(L, 1);
	}
	return names;
}

static int l_renew_ctl(lua_State *L)
{
	struct store *s = check_open(L);
	size_t n;
	const char **names = lx_names_arg(L, 3, &n);
	int64_t *tokens = lua_newuserdatauv(L, (n ? n : 1) * sizeof *tokens, 0), now;
	struct store_ctl *ctl = lua_newuserdatauv(L, (n ? n : 1) * sizeof *ctl, 0);

	if (store_renew_ctl(s, opt_str(L, 2), names, n, opt_ms(L, 4), tokens, ctl, &now) ==
	    STORE_ERR)
		return push_err(L, s);
	lx_push_renewed(L, names, n, tokens, ctl);
	lua_pushinteger(L, now);
	return 2;
}

void lx_push_renewed(lua_State *L, const char *const *names, size_t n, const int64_t *tokens,
                     const struct store_ctl *ctl)
{
	lua_newtable(L);
	for (size_t k = 0; k < n; k++) {
		if (tokens[k] < 0)
			continue;
		lua_createtable(L, 0, 4);
		lua_pushinteger(L, tokens[k]);
		lua_setfield(L, -2, "token");
		set_time(L, "paused_until", ctl[k].paused_until);
		set_time(L, "trigger_at", ctl[k].trigger_at);
		set_time(L, "handoff_at", ctl[k].handoff_at);
		lua_setfield(L, -2, names[k]);
	}
}

/* renew_all, or held (a read: the leases owner holds, nothing renewed). */
static int renew_or_held(lua_State *L, int held)
{
	struct store *s = check_open(L);
	size_t n;
	const char **names = lx_names_arg(L, 3, &n);
	int64_t *tokens = lua_newuserdatauv(L, (n ? n : 1) * sizeof *tokens, 0);

	if ((held ? store_held(s, opt_str(L, 2), names, n, 1000, tokens)
	          : store_renew_all(s, opt_str(L, 2), names, n, opt_ms(L, 4), tokens)) == STORE_ERR)
		return push_err(L, s);
	lua_newtable(L);
	for (size_t k = 0; k < n; k++) {
		if (tokens[k] < 0)
			continue;
		lua_pushinteger(L, tokens[k]);
		lua_setfield(L, -2, names[k]);
	}
	return 1;
}

static int l_renew_all(lua_State *L)
{
	return renew_or_held(L, 0);
}

/* s:held(owner, names) -> { [name] = token } of the leases owner holds
 * unexpired, or nil, err */
static int l_held(lua_State *L)
{
	return renew_or_held(L, 1);
}

/* s:release_all(owner, names) -> true, in one statement per chunk where the
 * provider can; nil, err. */
static int l_release_all(lua_State *L)
{
	struct store *s = check_open(L);
	size_t n;
	const char **names = lx_names_arg(L, 3, &n);

	if (store_release_all(s, opt_str(L, 2), names, n) == STORE_ERR)
		return push_err(L, s);
	lua_pushboolean(L, 1);
	return 1;
}

/* s:acquire_all(owner, names, ms) -> { [name] = { ok=, owner=, token=,
 * expires_at=, now= } } in one statement where the provider can. */
static int l_acquire_all(lua_State *L)
{
	struct store *s = check_open(L);
	size_t n;
	const char **names = lx_names_arg(L, 3, &n);
	struct lease_info *out = lua_newuserdatauv(L, (n ? n : 1) * sizeof *out, 0);
	int *got = lua_newuserdatauv(L, (n ? n : 1) * sizeof *got, 0);

	memset(out, 0, (n ? n : 1) * sizeof *out);
	memset(got, 0, (n ? n : 1) * sizeof *got);
	if (store_acquire_all(s, opt_str(L, 2), names, n, opt_ms(L, 4), out, got) == STORE_ERR)
		return push_err(L, s);
	lua_newtable(L);
	for (size_t k = 0; k < n; k++) {
		push_info(L, &out[k]);
		lua_pushboolean(L, got[k]);
		lua_setfield(L, -2, "ok");
		lua_setfield(L, -2, names[k]);
	}
	return 1;
}

/* An integer field of the table at the top, or dflt when it is missing or
 * not an integer number (the wrapper refuses the defaults). */
static int64_t int_field(lua_State *L, const char *k, int64_t dflt)
{
	int isint;
	lua_Integer v;

	lua_getfield(L, -1, k);
	v = lua_tointegerx(L, -1, &isint);
	isint = isint && lua_type(L, -1) == LUA_TNUMBER;   /* not "5" */
	lua_pop(L, 1);
	return isint ? (int64_t)v : dflt;
}

/* The claims list at index i: { { name=, token=, fire= }, ... } into a
 * userdata array left on the stack (names anchored in the claim tables);
 * a missing or wrong field becomes a value the wrapper refuses. */
static struct store_claim *claims_arg(lua_State *L, int i, size_t *n)
{
	struct store_claim *c;

	luaL_checktype(L, i, LUA_TTABLE);
	*n = (size_t)lua_rawlen(L, i);
	c = lua_newuserdatauv(L, (*n ? *n : 1) * sizeof *c, 0);
	for (size_t k = 0; k < *n; k++) {
		c[k] = (struct store_claim){ NULL, 0, -1 };
		if (lua_rawgeti(L, i, (lua_Integer)k + 1) == LUA_TTABLE) {
			lua_getfield(L, -1, "name");
			c[k].name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
			lua_pop(L, 1);
			c[k].token = int_field(L, "token", 0);
			c[k].fire = int_field(L, "fire", -1);
		}
		lua_pop(L, 1);
	}
	return c;
}

/* s:claim_all(owner, { { name=, token=, fire= }, ... }) -> { true|false, ... }
 * (in the order given), the database's now; or nil, err.  One statement
 * per chunk. */
static int l_claim_all(lua_State *L)
{
	struct store *s = check_open(L);
	size_t n;
	struct store_claim *c = claims_arg(L, 3, &n);
	int *ok = lua_newuserdatauv(L, (n ? n : 1) * sizeof *ok, 0);
	int64_t now = 0;

	if (store_claim_all(s, opt_str(L, 2), c, n, ok, &now) == STORE_ERR)
		return push_err(L, s);
	lua_createtable(L, (int)n, 0);
	for (size_t k = 0; k < n; k++) {
		lua_pushboolean(L, ok[k]);
		lua_rawseti(L, -2, (lua_Integer)k + 1);
	}
	lua_pushinteger(L, now);
	return 2;
}

/* s:unclaim_all(owner, claims as claim_all takes them) -> { true|false, ... }
 * (a fire given back: its cursor stepped back); or nil, err. */
static int l_unclaim_all(lua_State *L)
{
	struct store *s = check_open(L);
	size_t n;
	struct store_claim *c = claims_arg(L, 3, &n);
	int *ok = lua_newuserdatauv(L, (n ? n : 1) * sizeof *ok, 0);

	if (store_unclaim_all(s, opt_str(L, 2), c, n, ok) == STORE_ERR)
		return push_err(L, s);
	lua_createtable(L, (int)n, 0);
	for (size_t k = 0; k < n; k++) {
		lua_pushboolean(L, ok[k]);
		lua_rawseti(L, -2, (lua_Integer)k + 1);
	}
	return 1;
}

/* ---- the run ledger ---- */

/* An integer field of the table at the top that may be nil (absent): dflt
 * when nil; when present but not an integer number, *wrong = k and bad. */
static int64_t nil_int_field(lua_State *L, const char *k, int64_t dflt, int64_t bad,
                             const char **wrong)
{
	int isint;
	lua_Integer v;
	int64_t r;

	lua_getfield(L, -1, k);
	if (lua_isnil(L, -1))
		r = dflt;
	else {
		v = lua_tointegerx(L, -1, &isint);
		r = isint && lua_type(L, -1) == LUA_TNUMBER ? (int64_t)v : bad;
		if (r == bad && wrong)
			*wrong = k;
	}
	lua_pop(L, 1);
	return r;
}

/* exit_code / exit_signal: nil is STORE_NO_CODE, anything not an int in
 * range is below it (refused). */
static int code_field(lua_State *L, const char *k, const char **wrong)
{
	int64_t v = nil_int_field(L, k, STORE_NO_CODE, INT64_MIN, wrong);

	if (v != INT64_MIN && (v < STORE_NO_CODE || v > 0x7fffffff)) {
		*wrong = k;
		v = INT64_MIN;
	}
	return v == INT64_MIN ? STORE_NO_CODE - 1 : (int)v;
}

/* A string field of the table at the top, anchored there; NULL when nil.
 * *wrong = k when it is present but not a string, or holds a NUL byte (a C
 * string would cut it silently). */
static const char *str_field(lua_State *L, const char *k, const char **wrong)
{
	const char *v = NULL;
	size_t len;

	lua_getfield(L, -1, k);
	if (lua_type(L, -1) == LUA_TSTRING) {
		v = lua_tolstring(L, -1, &len);
		if (strlen(v) != len)
			*wrong = k;
	} else if (!lua_isnil(L, -1))
		*wrong = k;
	lua_pop(L, 1);
	return v;
}

/* The error text of the run table at the top: NULL when nil.  A NUL byte
 * becomes '?' like any byte the ledger cannot keep, in a copy anchored at
 * the top of the stack under the run table (only the bytes the wrapper
 * may keep, and a few for the character that straddles the cut). */
static const char *error_field(lua_State *L, const char **wrong)
{
	const char *v;
	size_t len;
	char *copy;

	lua_getfield(L, -1, "error");
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		return NULL;
	}
	if (lua_type(L, -1) != LUA_TSTRING) {
		lua_pop(L, 1);
		*wrong = "error";
		return NULL;
	}
	v = lua_tolstring(L, -1, &len);
	lua_pop(L, 1);                  /* anchored in the run table */
	if (!memchr(v, '\0', len))
		return v;
	if (len > STORE_RUN_ERROR_MAX + 4)
		len = STORE_RUN_ERROR_MAX + 4;
	luaL_checkstack(L, 2, "record_runs: too many error texts");
	copy = lua_newuserdatauv(L, len + 1, 0);
	for (size_t i = 0; i < len; i++)
		copy[i] = v[i] ? v[i] : '?';
	copy[len] = '\0';
	lua_insert(L, -2);              /* under the run table, popped with it later */
	return copy;
}

/* Reads the list of run tables at index i into a userdata array (left on
 * the stack; the strings stay anchored in the tables or just above).  A
 * run's claim is 1-based in Lua; job and token default to that claim's.
 * A field of the wrong kind makes *bad the 1-based row number and *wrong
 * the field's name. */
static struct store_run *runs_arg(lua_State *L, int i, size_t *n,
                                  const struct store_claim *claims, size_t nclaims,
                                  size_t *bad, const char **wrong)
{
	struct store_run *runs;

	luaL_checktype(L, i, LUA_TTABLE);
	*n = (size_t)lua_rawlen(L, i);
	*bad = 0;
	runs = lua_newuserdatauv(L, (*n ? *n : 1) * sizeof *runs, 0);
	for (size_t k = 0; k < *n; k++) {
		struct store_run *r = &runs[k];
		const char *w = NULL;
		int64_t claim;

		memset(r, 0, sizeof *r);
		r->scheduled_at = -1;
		r->token = -1;
		if (lua_rawgeti(L, i, (lua_Integer)k + 1) != LUA_TTABLE) {
			lua_pop(L, 1);
			if (!*bad) {
				*bad = k + 1;
				*wrong = "the row itself (not a table)";
			}
			continue;
		}
		claim = claims ? nil_int_field(L, "claim", 0, INT64_MIN, &w) : 1;
		r->claim = claim >= 1 ? (size_t)(claim - 1) : (size_t)-1;
		r->job = str_field(L, "job", &w);
		r->owner = str_field(L, "owner", &w);
		r->outcome = str_field(L, "outcome", &w);
		r->actor = str_field(L, "actor", &w);
		r->how = str_field(L, "how", &w);
		r->run_id = nil_int_field(L, "run_id", 0, INT64_MIN, &w);
		r->scheduled_at = nil_int_field(L, "scheduled_at", -1, INT64_MIN, &w);
		r->token = nil_int_field(L, "token", INT64_MIN + 1, INT64_MIN, &w);
		if (claims && r->claim < nclaims) {
			if (!r->job)
				r->job = claims[r->claim].name;
			if (r->token == INT64_MIN + 1)
				r->token = claims[r->claim].token;
		}
		if (r->token == INT64_MIN + 1)
			r->token = -1;          /* missing: refused */
		r->claimed_at = nil_int_field(L, "claimed_at", STORE_NO_TIME, INT64_MIN, &w);
		r->started_at = nil_int_field(L, "started_at", STORE_NO_TIME, INT64_MIN, &w);
		r->ended_at = nil_int_field(L, "ended_at", STORE_NO_TIME, INT64_MIN, &w);
		r->duration_ms = nil_int_field(L, "duration_ms", STORE_NO_TIME, INT64_MIN, &w);
		r->exit_code = code_field(L, "exit_code", &w);
		r->exit_signal = code_field(L, "exit_signal", &w);
		r->error = error_field(L, &w);
		lua_pop(L, 1);
		if (w && !*bad) {
			*bad = k + 1;
			*wrong = w;
		}
	}
	return runs;
}

static int bad_run(lua_State *L, size_t k, const char *field)
{
	lua_pushnil(L);
	lua_pushfstring(L, "run %d: %s has the wrong type (a string without NUL bytes, an "
	                "integer number, or nil)", (int)k, field);
	return 2;
}

/* s:claim_runs(owner, claims, runs) -> { true|false, ... }, now; or nil,
 * err.  claims as claim_all takes them; runs = { { claim = i (1-based),
 * scheduled_at=, outcome=, owner=, [job=, token=,] started_at=, ... }, ... },
 * nil for NULL fields. */
static int l_claim_runs(lua_State *L)
{
	struct store *s = check_open(L);
	size_t n, nruns, bad;
	const char *wrong = NULL;
	struct store_claim *c = claims_arg(L, 3, &n);
	struct store_run *runs = runs_arg(L, 4, &nruns, c, n, &bad, &wrong);
	int *ok = lua_newuserdatauv(L, (n ? n : 1) * sizeof *ok, 0);
	int64_t now = 0;

	if (bad)
		return bad_run(L, bad, wrong);
	if (store_claim_runs(s, opt_str(L, 2), c, n, runs, nruns, ok, &now) == STORE_ERR)
		return push_err(L, s);
	lua_createtable(L, (int)n, 0);
	for (size_t k = 0; k < n; k++) {
		lua_pushboolean(L, ok[k]);
		lua_rawseti(L, -2, (lua_Integer)k + 1);
	}
	lua_pushinteger(L, now);
	return 2;
}

/* s:record_runs(runs) -> true, or nil, err. */
static int l_record_runs(lua_State *L)
{
	struct store *s = check_open(L);
	size_t n, bad;
	const char *wrong = NULL;
	struct store_run *runs = runs_arg(L, 2, &n, NULL, 0, &bad, &wrong);

	if (bad)
		return bad_run(L, bad, wrong);
	if (store_record_runs(s, runs, n) == STORE_ERR)
		return push_err(L, s);
	lua_pushboolean(L, 1);
	return 1;
}

static void set_int(lua_State *L, const char *k, int64_t v, int64_t null)
{
	if (v != null) {
		lua_pushinteger(L, v);
		lua_setfield(L, -2, k);
	}
}

static void set_str(lua_State *L, const char *k, const char *v)
{
	if (v[0]) {
		lua_pushstring(L, v);
		lua_setfield(L, -2, k);
	}
}

/* A ledger row as a table, nil for NULL fields. */
static void push_run_row(lua_State *L, const struct store_run_row *r)
{
	lua_createtable(L, 0, 16);
	lua_pushstring(L, r->job);
	lua_setfield(L, -2, "job");
	lua_pushstring(L, r->owner);
	lua_setfield(L, -2, "owner");
	lua_pushstring(L, r->outcome);
	lua_setfield(L, -2, "outcome");
	set_str(L, "actor", r->actor);
	set_str(L, "error", r->error);
	lua_pushinteger(L, r->scheduled_at);
	lua_setfield(L, -2, "scheduled_at");
	lua_pushinteger(L, r->token);
	lua_setfield(L, -2, "token");
	set_int(L, "claimed_at", r->claimed_at, STORE_NO_TIME);
	set_int(L, "started_at", r->started_at, STORE_NO_TIME);
	set_int(L, "ended_at", r->ended_at, STORE_NO_TIME);
	set_int(L, "duration_ms", r->duration_ms, STORE_NO_TIME);
	set_int(L, "recorded_at", r->recorded_at, STORE_NO_TIME);
	set_int(L, "exit_code", r->exit_code, STORE_NO_CODE);
	set_int(L, "exit_signal", r->exit_signal, STORE_NO_CODE);
	set_int(L, "run_id", r->run_id, 0);
	set_str(L, "how", r->how);
	{
		int64_t v = 0;
		const char *col = store_run_corrupt(r, &v);

		if (col) {                      /* nil: within store.h's bounds */
			lua_pushfstring(L, "%s = %I", col, (lua_Integer)v);
			lua_setfield(L, -2, "corrupt");
		}
	}
}

/* s:read_runs{ job=, since=, limit= (default 100) } -> rows, now; or nil,
 * err.  Each row a table with nil for NULL fields. */
static int l_read_runs(lua_State *L)
{
	struct store *s = check_open(L);
	struct store_run_row *rows = NULL;
	size_t n = 0;
	int64_t now = 0, since, limit;
	const char *job;
	const char *wrong = NULL;
	int rc;

	luaL_checktype(L, 2, LUA_TTABLE);
	lua_pushvalue(L, 2);
	job = str_field(L, "job", &wrong);
	since = nil_int_field(L, "since", STORE_NO_TIME, INT64_MIN, &wrong);
	limit = nil_int_field(L, "limit", 100, 0, &wrong);
	if (wrong) {
		lua_pushnil(L);
		lua_pushfstring(L, "read_runs: %s has the wrong type", wrong);
		return 2;
	}
	rc = store_read_runs(s, job, since, limit < 1 ? 0 : (size_t)limit, &rows, &n, &now);
	if (rc == STORE_ERR) {
		free(rows);
		return push_err(L, s);
	}
	lua_createtable(L, (int)n, 0);
	for (size_t k = 0; k < n; k++) {
		push_run_row(L, &rows[k]);
		lua_rawseti(L, -2, (lua_Integer)k + 1);
	}
	free(rows);
	lua_pushinteger(L, now);
	return 2;
}

/* Pushes one store_job_runs as { job=, last=, ok=, failed= (rows or nil),
 * fails=, handled_at= (nil when none) }. */
void lx_push_job_runs(lua_State *L, const struct store_job_runs *j)
{
	lua_createtable(L, 0, 6);
	lua_pushstring(L, j->job);
	lua_setfield(L, -2, "job");
	if (j->last.job[0]) {
		push_run_row(L, &j->last);
		lua_setfield(L, -2, "last");
	}
	if (j->ok.job[0]) {
		push_run_row(L, &j->ok);
		lua_setfield(L, -2, "ok");
	}
	if (j->failed.job[0]) {
		push_run_row(L, &j->failed);
		lua_setfield(L, -2, "failed");
	}
	lua_pushinteger(L, j->fails);
	lua_setfield(L, -2, "fails");
	set_int(L, "handled_at", j->handled_at, STORE_NO_TIME);
	{
		char buf[96];

		if (store_runs_corrupt_text(j, buf, sizeof buf)) {
			lua_pushstring(L, buf);
			lua_setfield(L, -2, "corrupt");
		}
	}
}

/* s:last_runs() -> { [job] = { job=, last=, ok=, failed=, fails=,
 * handled_at= }, ... }, now; or nil, err. */
static int l_last_runs(lua_State *L)
{
	struct store *s = check_open(L);
	struct store_job_runs *rows = NULL;
	size_t n = 0;
	int64_t now = 0;

	if (store_last_runs(s, &rows, &n, &now) == STORE_ERR) {
		free(rows);
		return push_err(L, s);
	}
	lua_createtable(L, 0, (int)n);
	for (size_t k = 0; k < n; k++) {
		lx_push_job_runs(L, &rows[k]);
		lua_setfield(L, -2, rows[k].job);
	}
	free(rows);
	lua_pushinteger(L, now);
	return 2;
}

/* s:prune_runs{ keep= (ms), keep_per_job=, max_rows= } -> changed, or nil,
 * err. */
static int l_prune_runs(lua_State *L)
{
	struct store *s = check_open(L);
	int64_t keep, per_job, max_rows, changed = 0;

	luaL_checktype(L, 2, LUA_TTABLE);
	lua_pushvalue(L, 2);
	keep = nil_int_field(L, "keep", 0, 0, NULL);
	per_job = nil_int_field(L, "keep_per_job", 0, 0, NULL);
	max_rows = nil_int_field(L, "max_rows", 0, 0, NULL);
	if (store_prune_runs(s, keep, per_job, max_rows < 1 ? 0 : (size_t)max_rows,
	                     &changed) == STORE_ERR)
		return push_err(L, s);
	lua_pushinteger(L, changed);
	return 1;
}

static int l_list(lua_State *L)
{
	struct store *s = check_open(L);
	struct lease_row *rows = NULL;
	size_t n = 0;
	int64_t now = 0;

	if (store_list(s, &rows, &n, &now) == STORE_ERR) {
		free(rows);
		return push_err(L, s);
	}
	lx_push_rows(L, rows, n);
	free(rows);
	lua_pushinteger(L, now);
	return 2;
}

static int l_event_fd(lua_State *L)
{
	lua_pushinteger(L, store_event_fd(check_open(L)));
	return 1;
}

static void collect(void *arg, const char *name)
{
	lua_State *L = arg;

	lua_pushstring(L, name);
	lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
}

static int l_drain_events(lua_State *L)
{
	struct store *s = check_open(L);

	lua_newtable(L);
	if (store_drain_events(s, collect, L) == STORE_ERR)
		return push_err(L, s);
	return 1;
}

static int l_set_timeout(lua_State *L)
{
	store_set_timeout(check_open(L), (int)luaL_optinteger(L, 2, 0));
	return 0;
}

static int l_calls(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)check_open(L)->calls);
	return 1;
}

static int l_provider(lua_State *L)
{
	lua_pushstring(L, check_open(L)->ops->name);
	return 1;
}

static int l_close(lua_State *L)
{
	struct lstore *ls = luaL_checkudata(L, 1, STORE_MT);

	store_close(ls->s);
	ls->s = NULL;
	return 0;
}

static int l_tostring(lua_State *L)
{
	struct lstore *ls = luaL_checkudata(L, 1, STORE_MT);

	if (ls->s)
		lua_pushfstring(L, "leash.store (%s)", ls->s->ops->name);
	else
		lua_pushliteral(L, "leash.store (closed)");
	return 1;
}

static const char *field_str(lua_State *L, const char *k)
{
	const char *v;

	lua_getfield(L, 1, k);
	if (lua_isnil(L, -1))
		v = NULL;
	else if (lua_type(L, -1) == LUA_TSTRING)
		v = lua_tostring(L, -1);
	else {
		luaL_error(L, "open_store: %s must be a string", k);
		v = NULL;
	}
	lua_pop(L, 1);         /* the string stays anchored in the options table */
	return v;
}

static int field_int(lua_State *L, const char *k, int dflt)
{
	int isint;
	lua_Integer v;

	lua_getfield(L, 1, k);
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		return dflt;
	}
	v = lua_tointegerx(L, -1, &isint);
	if (!isint || v < 0 || v > 0x7fffffff)
		luaL_error(L, "open_store: %s must be a non-negative integer", k);
	lua_pop(L, 1);
	return (int)v;
}

/* core.open_store{ provider=, path=, table=, conninfo=, host=, port=, user=,
 * password=, database=, connect_timeout_ms=, statement_timeout_ms=,
 * mode= "run" (the default), "read" or "write" } ->
 * store, or nil, err. */
static int l_open_store(lua_State *L)
{
	struct store_opts o;
	const char *provider, *mode;
	char err[STORE_ERR_MAX];
	struct lstore *ls;

	luaL_checktype(L, 1, LUA_TTABLE);
	memset(&o, 0, sizeof o);
	provider = field_str(L, "provider");
	o.table = field_str(L, "table");
	o.path = field_str(L, "path");
	o.conninfo = field_str(L, "conninfo");
	o.host = field_str(L, "host");
	o.port = field_int(L, "port", 0);
	o.user = field_str(L, "user");
	o.password = field_str(L, "password");
	o.database = field_str(L, "database");
	o.connect_timeout_ms = field_int(L, "connect_timeout_ms", 5000);
	o.statement_timeout_ms = field_int(L, "statement_timeout_ms", 5000);
	mode = field_str(L, "mode");
	if (mode && strcmp(mode, "read") == 0)
		o.mode = STORE_READ;
	else if (mode && strcmp(mode, "write") == 0)
		o.mode = STORE_WRITE;
	else if (mode && strcmp(mode, "run") != 0)
		luaL_error(L, "open_store: mode \"%s\" is not run, read or write", mode);
	if (!provider) {
		lua_pushnil(L);
		lua_pushliteral(L, "open_store: provider is missing (sqlite, postgres or mssql)");
		return 2;
	}
	ls = lua_newuserdatauv(L, sizeof *ls, 0);
	ls->s = NULL;
	luaL_setmetatable(L, STORE_MT);
	err[0] = '\0';
	ls->s = store_open(provider, &o, err, sizeof err);
	if (!ls->s) {
		lua_pushnil(L);
		lua_pushstring(L, err[0] ? err : "open_store failed");
		return 2;
	}
	return 1;
}

/* A test hook: a VFS over the default one whose clock (what SQLite's 'now'
 * reads) is frozen at a given time, so specs can move the database's clock
 * without touching the process's.  core.sqlite_test_clock(ms) freezes it at
 * ms since the epoch; core.sqlite_test_clock(nil) lets it run again.  The
 * VFS becomes the default for connections opened afterwards. */
static struct {
	sqlite3_vfs vfs;                /* the test VFS */
	sqlite3_vfs *real;              /* the default one it wraps */
	int on;                         /* the clock frozen */
	sqlite3_int64 ms;               /* at this time */
} tv;

static int test_time64(sqlite3_vfs *v, sqlite3_int64 *out)
{
	if (tv.on) {
		*out = tv.ms + 210866760000000LL;   /* Julian day 0 in ms */
		return SQLITE_OK;
	}
	return tv.real->xCurrentTimeInt64(tv.real, out);
}

static int test_time(sqlite3_vfs *v, double *out)
{
	sqlite3_int64 t;
	int rc = test_time64(v, &t);

	*out = t / 86400000.0;
	return rc;
}

static int l_sqlite_test_clock(lua_State *L)
{
	if (!tv.real) {
		char err[256] = "";

		tv.real = store_sqlite_vfs_find(err, sizeof err);
		if (!tv.real || tv.real->iVersion < 2)
			return luaL_error(L, "sqlite_test_clock: no usable default VFS %s", err);
		tv.vfs = *tv.real;
		tv.vfs.zName = "leash-test-clock";
		tv.vfs.pNext = NULL;
		tv.vfs.xCurrentTime = test_time;
		tv.vfs.xCurrentTimeInt64 = test_time64;
		if (store_sqlite_vfs_register(&tv.vfs) < 0)
			return luaL_error(L, "sqlite_test_clock: cannot register the VFS");
	}
	tv.on = !lua_isnoneornil(L, 1);
	tv.ms = tv.on ? (sqlite3_int64)luaL_checkinteger(L, 1) : 0;
	return 0;
}

void lx_store_lib(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{ "try_acquire", l_try_acquire },
		{ "renew", l_renew },
		{ "release", l_release },
		{ "renew_all", l_renew_all },
		{ "acquire_all", l_acquire_all },
		{ "release_all", l_release_all },
		{ "claim_all", l_claim_all },
		{ "unclaim_all", l_unclaim_all },
		{ "claim_runs", l_claim_runs },
		{ "record_runs", l_record_runs },
		{ "read_runs", l_read_runs },
		{ "last_runs", l_last_runs },
		{ "renew_ctl", l_renew_ctl },
		{ "control", l_control },
		{ "ctl_version", l_ctl_version },
		{ "handoff", l_handoff },
		{ "held", l_held },
		{ "health", l_health },
		{ "repair", l_repair },
		{ "corrupt_runs", l_corrupt_runs },
		{ "prune_runs", l_prune_runs },
		{ "list", l_list },
		{ "event_fd", l_event_fd },
		{ "drain_events", l_drain_events },
		{ "set_timeout", l_set_timeout },
		{ "calls", l_calls },
		{ "provider", l_provider },
		{ "close", l_close },
		{ NULL, NULL },
	};
	static const luaL_Reg fns[] = {
		{ "open_store", l_open_store },
		{ "sqlite_test_clock", l_sqlite_test_clock },
		{ NULL, NULL },
	};

	if (luaL_newmetatable(L, STORE_MT)) {
		luaL_newlib(L, methods);
		lua_setfield(L, -2, "__index");
		lua_pushcfunction(L, l_close);
		lua_setfield(L, -2, "__gc");
		lua_pushcfunction(L, l_close);
		lua_setfield(L, -2, "__close");
		lua_pushcfunction(L, l_tostring);
		lua_setfield(L, -2, "__tostring");
	}
	lua_pop(L, 1);
	luaL_setfuncs(L, fns, 0);
}

/* bind/store.c - leash.core store bindings: core.open_store{...} and its methods,
 * as DESIGN.md "The C core as a Lua module" shows.  Every call goes through
 * the store_*() wrappers, so arguments are checked before any SQL. */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <sqlite3.h>

#include "bind/bind.h"
#include "lx.h"
#include "store/store.h"

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
	return 2;
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

/* The names of a Lua list at index i, in a userdata-free malloc'd array
 * whose strings stay anchored in the Lua list.  NULL entries for non-strings
 * (the wrapper refuses them). */
static const char **names_arg(lua_State *L, int i, size_t *n)
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

static int l_renew_all(lua_State *L)
{
	struct store *s = check_open(L);
	size_t n;
	const char **names = names_arg(L, 3, &n);
	int64_t *tokens = lua_newuserdatauv(L, (n ? n : 1) * sizeof *tokens, 0);

	if (store_renew_all(s, opt_str(L, 2), names, n, opt_ms(L, 4), tokens) == STORE_ERR)
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

/* s:release_all(owner, names) -> true, in one statement per chunk where the
 * provider can; nil, err. */
static int l_release_all(lua_State *L)
{
	struct store *s = check_open(L);
	size_t n;
	const char **names = names_arg(L, 3, &n);

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
	const char **names = names_arg(L, 3, &n);
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

/* s:claim_all(owner, { { name=, token=, fire= }, ... }) -> { true|false, ... }
 * (in the order given), the database's now; or nil, err.  One statement
 * per chunk. */
static int l_claim_all(lua_State *L)
{
	struct store *s = check_open(L);
	struct store_claim *c;
	int *ok;
	int64_t now = 0;
	size_t n;

	luaL_checktype(L, 3, LUA_TTABLE);
	n = (size_t)lua_rawlen(L, 3);
	c = lua_newuserdatauv(L, (n ? n : 1) * sizeof *c, 0);
	ok = lua_newuserdatauv(L, (n ? n : 1) * sizeof *ok, 0);
	for (size_t k = 0; k < n; k++) {
		c[k] = (struct store_claim){ NULL, 0, -1 };
		if (lua_rawgeti(L, 3, (lua_Integer)k + 1) == LUA_TTABLE) {
			lua_getfield(L, -1, "name");
			/* anchored: the claim table stays in the argument list */
			c[k].name = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
			lua_pop(L, 1);
			c[k].token = int_field(L, "token", 0);
			c[k].fire = int_field(L, "fire", -1);
		}
		lua_pop(L, 1);
	}
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
 * password=, database=, connect_timeout_ms=, statement_timeout_ms= } ->
 * store, or nil, err. */
static int l_open_store(lua_State *L)
{
	struct store_opts o;
	const char *provider;
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
static sqlite3_vfs test_vfs;
static sqlite3_vfs *real_vfs;
static int test_clock_on;
static sqlite3_int64 test_clock_ms;

static int test_time64(sqlite3_vfs *v, sqlite3_int64 *out)
{
	if (test_clock_on) {
		*out = test_clock_ms + 210866760000000LL;   /* Julian day 0 in ms */
		return SQLITE_OK;
	}
	return real_vfs->xCurrentTimeInt64(real_vfs, out);
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
	if (!real_vfs) {
		real_vfs = sqlite3_vfs_find(NULL);
		if (!real_vfs || real_vfs->iVersion < 2)
			return luaL_error(L, "sqlite_test_clock: no usable default VFS");
		test_vfs = *real_vfs;
		test_vfs.zName = "leash-test-clock";
		test_vfs.pNext = NULL;
		test_vfs.xCurrentTime = test_time;
		test_vfs.xCurrentTimeInt64 = test_time64;
		if (sqlite3_vfs_register(&test_vfs, 1) != SQLITE_OK)
			return luaL_error(L, "sqlite_test_clock: cannot register the VFS");
	}
	test_clock_on = !lua_isnoneornil(L, 1);
	test_clock_ms = test_clock_on ? (sqlite3_int64)luaL_checkinteger(L, 1) : 0;
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

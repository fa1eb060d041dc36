/* bind/cfg.c - core.config_load(path): the config exactly as `leash run` reads it
 * (inih, the long-value side table, leash.config's checks), for the specs. */
#include <ctype.h>
#include <string.h>

#include <lauxlib.h>

#include "core/cfg.h"
#include "bind/bind.h"
#include "core/lx.h"

static void push_str(lua_State *L, char *const *v)
{
	lua_pushstring(L, *v ? *v : "");
}

static void push_int(lua_State *L, const int *v)
{
	lua_pushinteger(L, *v);
}

static void push_ms(lua_State *L, const int64_t *v)
{
	lua_pushinteger(L, (lua_Integer)*v);
}

/* core.config_load(path) -> { file=, jobs=, ..., pg_conninfo=, ... } (one
 * field per struct cfg member), or nil and every problem (one per line). */
static int l_config_load(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	char err[8192];
	struct cfg c;

	if (cfg_load(L, path, &c, err, sizeof err) < 0) {
		lua_pushnil(L);
		lua_pushstring(L, err);
		return 2;
	}
	lua_createtable(L, 0, 24);
	push_str(L, &c.file);
	lua_setfield(L, -2, "file");
#define CFG_PUSH(section, key, kind, words, def, min, max, field, meaning) \
	_Generic(&c.field, char **: push_str, int *: push_int, int64_t *: push_ms)(L, &c.field); \
	lua_setfield(L, -2, #field);
	CFG_KEYS(CFG_PUSH)
#undef CFG_PUSH
	cfg_free(&c);
	return 1;
}

static void setstr(lua_State *L, const char *k, const char *v)
{
	lua_pushstring(L, v);
	lua_setfield(L, -2, k);
}

static void push_row(lua_State *L, const char *section, const char *key, const char *kind,
                     const char *words, const char *def, int64_t min, int64_t max,
                     const char *field, const char *meaning)
{
	lua_createtable(L, 0, 9);
	setstr(L, "section", section);
	setstr(L, "key", key);
	{
		char low[16];
		size_t i;
		for (i = 0; kind[i] && i < sizeof low - 1; i++)
			low[i] = (char)tolower((unsigned char)kind[i]);
		low[i] = '\0';
		setstr(L, "kind", low);
	}
	if (words) {
		int n = 0;
		lua_newtable(L);
		for (const char *p = words; p; p = strchr(p, '|') ? strchr(p, '|') + 1 : NULL) {
			lua_pushlstring(L, p, strcspn(p, "|"));
			lua_rawseti(L, -2, ++n);
		}
		lua_setfield(L, -2, "words");
	}
	if (def)
		setstr(L, "default", def);
	if (min || max) {
		lua_pushinteger(L, (lua_Integer)min);
		lua_setfield(L, -2, "min");
		lua_pushinteger(L, (lua_Integer)max);
		lua_setfield(L, -2, "max");
	}
	setstr(L, "field", field);
	setstr(L, "meaning", meaning);
}

/* core.config_keys: cfg_keys.h as a list of { section=, key=, kind= (lower
 * case), words= { ... } | nil, default= | nil, min=, max= | nil, field=,
 * meaning= }, in its order.  leash.config reads and checks by it. */
static void push_keys(lua_State *L)
{
	int n = 0;

	lua_newtable(L);
#define CFG_ROW(section, key, kind, words, def, min, max, field, meaning) \
	push_row(L, #section, #key, #kind, words, def, min, max, #field, meaning); \
	lua_rawseti(L, -2, ++n);
	CFG_KEYS(CFG_ROW)
#undef CFG_ROW
}

void lx_cfg_lib(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{ "config_load", l_config_load },
		{ NULL, NULL },
	};
	luaL_setfuncs(L, fns, 0);
	push_keys(L);
	lua_setfield(L, -2, "config_keys");
}

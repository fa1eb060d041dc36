/* cfg.c - reads the INI file and hands its entries to leash.config.
 *
 * inih's line buffer is fixed when the library is built (200 bytes on
 * Debian), and a longer line would reach us cut.  So inih reads through our
 * own reader, which keeps whole lines: a value too long for inih's buffer is
 * parked in a side table and inih sees a short reference to it instead.
 */
#include <errno.h>
#include <ini.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cfg.h"
#include "core/log.h"
#include "core/lx.h"

#define LONG_MARK "\x1b" "long:"
/* The longest line read: a libpq connection string fits many times over,
 * and a runaway file (a log, a binary) is refused before it is parsed. */
#define LINE_MAX_BYTES (64 * 1024)
#define PROBLEMS_MAX 16

struct reader {
	FILE *f;
	int line;                       /* of the line last handed to inih */
	lua_State *L;
	int entries;                    /* stack index of the entries table */
	int longs;                      /* stack index of the long values */
	char *pending;                  /* rest of a line we already read */
	int nlong;
	/* Lines the reader refused itself (inih never sees them). */
	struct { int line; char msg[96]; } problems[PROBLEMS_MAX];
	int nproblems;
};

static void refuse_line(struct reader *r, const char *msg)
{
	if (r->nproblems < PROBLEMS_MAX) {
		r->problems[r->nproblems].line = r->line;
		snprintf(r->problems[r->nproblems].msg, sizeof r->problems[0].msg, "%s", msg);
	}
	r->nproblems++;
}

static void trim(char *s)
{
	size_t n = strlen(s);
	char *p = s;

	while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\n'))
		s[--n] = '\0';
	while (*p == ' ' || *p == '\t')
		p++;
	memmove(s, p, strlen(p) + 1);
}

static void add_entry(struct reader *r, const char *section, const char *key,
                      const char *value, int header)
{
	lua_State *L = r->L;

	lua_createtable(L, 0, 5);
	lua_pushstring(L, section);
	lua_setfield(L, -2, "section");
	lua_pushinteger(L, r->line);
	lua_setfield(L, -2, "line");
	if (header) {
		lua_pushboolean(L, 1);
		lua_setfield(L, -2, "header");
	} else {
		lua_pushstring(L, key);
		lua_setfield(L, -2, "key");
		lua_pushstring(L, value);
		lua_setfield(L, -2, "value");
	}
	lua_rawseti(L, r->entries, luaL_len(L, r->entries) + 1);
}

/* -o options, in the order given (see cfg_option). */
static const char *options[CFG_OPTIONS_MAX];
static int noptions;

int cfg_option(const char *arg, char *err, size_t errlen)
{
	const char *dot = strchr(arg, '.'), *eq = strchr(arg, '=');

	if (!dot || !eq || dot > eq || dot == arg || eq == dot + 1) {
		snprintf(err, errlen, "leash: -o %s: not SECTION.KEY=VALUE (e.g. -o leash.replica=r2)", arg);
		return -1;
	}
	if (noptions == CFG_OPTIONS_MAX) {
		snprintf(err, errlen, "leash: -o %s: at most %d options", arg, CFG_OPTIONS_MAX);
		return -1;
	}
	options[noptions++] = arg;
	return 0;
}

int cfg_options(const char *const **list)
{
	*list = options;
	return noptions;
}

/* Each -o as an entry after the file's, with the option as it was given
 * for the messages. */
static void add_options(struct reader *r)
{
	lua_State *L = r->L;
	char *cwd = noptions ? getcwd(NULL, 0) : NULL;

	for (int i = 0; i < noptions; i++) {
		const char *dot = strchr(options[i], '.'), *eq = strchr(options[i], '=');

		lua_createtable(L, 0, 5);
		lua_pushlstring(L, options[i], (size_t)(dot - options[i]));
		lua_setfield(L, -2, "section");
		lua_pushlstring(L, dot + 1, (size_t)(eq - dot - 1));
		lua_setfield(L, -2, "key");
		lua_pushstring(L, eq + 1);
		lua_setfield(L, -2, "value");
		lua_pushfstring(L, "-o %s", options[i]);
		lua_setfield(L, -2, "option");
		/* a relative path in an option is the shell's: from here */
		lua_pushstring(L, cwd ? cwd : ".");
		lua_setfield(L, -2, "dir");
		lua_rawseti(L, r->entries, luaL_len(L, r->entries) + 1);
	}
	free(cwd);
}

static char *reader(char *str, int num, void *stream)
{
	struct reader *r = stream;
	char *line = NULL, *eq;
	size_t cap = 0;
	ssize_t n = getline(&line, &cap, r->f);

	if (n < 0) {
		free(line);
		return NULL;
	}
	r->line++;
	/* A NUL would end the value early (lease = 15s\0junk read as 15s),
	 * and an endless line would be kept whole: both are refused, and inih
	 * gets an empty line in their place. */
	if ((size_t)n > LINE_MAX_BYTES || memchr(line, '\0', (size_t)n)) {
		char msg[96];
		if ((size_t)n > LINE_MAX_BYTES)
			snprintf(msg, sizeof msg, "line too long (%zd bytes, at most %d)",
			         n - (line[n - 1] == '\n'), LINE_MAX_BYTES);
		else
			snprintf(msg, sizeof msg, "the line holds a NUL byte");
		refuse_line(r, msg);
		free(line);
		snprintf(str, num, "\n");
		return str;
	}
	{
		/* Section headers are noted here so an empty unknown section is
		 * still reported with its line. */
		char *p = line + strspn(line, " \t");
		char *end = strchr(p, ']');
		if (*p == '[' && end) {
			*end = '\0';
			add_entry(r, p + 1, NULL, NULL, 1);
			*end = ']';
		}
	}
	if (n < num - 1) {
		memcpy(str, line, n + 1);
		free(line);
		return str;
	}
	/* Too long for inih: keep the value whole on our side. */
	eq = strpbrk(line, "=:");
	if (!eq || (size_t)(eq - line) + sizeof LONG_MARK + 12 >= (size_t)num) {
		free(line);
		snprintf(str, num, "\x1b" "toolong\n");
		return str;
	}
	*eq = '\0';
	{
		char *v = eq + 1;
		char *c = strstr(v, " ;");
		if (c)
			*c = '\0';
		trim(v);
		lua_pushstring(r->L, v);
		lua_rawseti(r->L, r->longs, ++r->nlong);
		snprintf(str, num, "%s=" LONG_MARK "%d\n", line, r->nlong);
	}
	free(line);
	return str;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct reader *r = user;

	if (strncmp(value, LONG_MARK, sizeof LONG_MARK - 1) == 0) {
		lua_rawgeti(r->L, r->longs, atoi(value + sizeof LONG_MARK - 1));
		add_entry(r, section, name, lua_tostring(r->L, -1), 0);
		lua_pop(r->L, 1);
	} else {
		add_entry(r, section, name, value, 0);
	}
	return 1;
}

const char *cfg_locate(const char *path)
{
	static const char *const fallback[] = { "config/leash.ini", "/etc/leash/leash.ini" };
	const char *env = getenv("LEASH_CONFIG");

	if (path)
		return path;
	if (env && *env)
		return env;
	for (size_t i = 0; i < 2; i++)
		if (access(fallback[i], F_OK) == 0)
			return fallback[i];
	return fallback[1];
}

/* Pushes config[section][key] of the checked table on top of the stack. */
static void get_value(lua_State *L, const char *section, const char *key)
{
	lua_getfield(L, -1, section);
	lua_getfield(L, -1, key);
	lua_remove(L, -2);
}

static void get_str(lua_State *L, const char *section, const char *key,
                    const char *words, char **out)
{
	const char *s;

	get_value(L, section, key);
	s = lua_tostring(L, -1);
	*out = strdup(s ? s : "");
	lua_pop(L, 1);
}

/* A BOOL, a PORT, or the position of an INDEX's word in "a|b|c". */
static void get_int(lua_State *L, const char *section, const char *key,
                    const char *words, int *out)
{
	get_value(L, section, key);
	if (lua_isboolean(L, -1)) {
		*out = lua_toboolean(L, -1);
	} else if (words) {
		/* leash.config took only one of words: find which. */
		const char *w = lua_tostring(L, -1), *p = words;
		size_t n = w ? strlen(w) : 0;
		*out = 0;
		while (w && !(strncmp(p, w, n) == 0 && (p[n] == '|' || p[n] == '\0'))
		       && (p = strchr(p, '|'))) {
			p++;
			(*out)++;
		}
	} else {
		*out = (int)lua_tointeger(L, -1);
	}
	lua_pop(L, 1);
}

static void get_ms(lua_State *L, const char *section, const char *key,
                   const char *words, int64_t *out)
{
	get_value(L, section, key);
	*out = lua_tointeger(L, -1);
	lua_pop(L, 1);
}

_Static_assert(LOG_DEBUG == 0 && LOG_INFO == 1 && LOG_WARN == 2 && LOG_ERROR == 3,
               "[leash] log_level is an INDEX into debug|info|warn|error");

/* Copies the checked config table on top of the stack into c. */
static void fill(lua_State *L, struct cfg *c)
{
#define CFG_FILL(section, key, kind, words, def, min, max, field, meaning) \
	_Generic(&c->field, char **: get_str, int *: get_int, int64_t *: get_ms) \
		(L, #section, #key, words, &c->field);
	CFG_KEYS(CFG_FILL)
#undef CFG_FILL
}

int cfg_load(lua_State *L, const char *file, struct cfg *c, char *errs, size_t errlen)
{
	struct reader r = { 0 };
	int top = lua_gettop(L), rc = -1, syntax;
	char *slash, *dir = NULL, *real = NULL;
	size_t used = 0;

	memset(c, 0, sizeof *c);
	errs[0] = '\0';
	r.f = fopen(file, "r");
	if (!r.f) {
		snprintf(errs, errlen, "%s: cannot read the config file: %s", file, strerror(errno));
		return -1;
	}
	dir = strdup(file);
	slash = strrchr(dir, '/');
	if (slash)
		slash[slash == dir] = '\0';
	else
		strcpy(dir, ".");
	real = realpath(dir, NULL);

	if (lx_require(L, "leash.config") != LUA_OK)
		goto lua_fail;
	lua_getfield(L, -1, "build");
	lua_pushstring(L, file);
	lua_pushstring(L, real ? real : dir);
	lua_newtable(L);
	r.L = L;
	r.entries = lua_gettop(L);
	lua_newtable(L);
	r.longs = lua_gettop(L);
	syntax = ini_parse_stream(reader, &r, handler, &r);
	add_options(&r);
	lua_pop(L, 1);                  /* the long values */
	if (lx_pcall(L, 3, 2) != LUA_OK)
		goto lua_fail;
	for (int i = 0; i < r.nproblems && i < PROBLEMS_MAX && used < errlen; i++)
		used += snprintf(errs + used, errlen - used, "%s:%d: %s\n", file, r.problems[i].line,
		                 r.problems[i].msg);
	if (syntax > 0 && used < errlen)
		used += snprintf(errs + used, errlen - used,
		                 "%s:%d: not a [section] or key = value line\n", file, syntax);
	lua_pushnil(L);
	while (lua_next(L, -2)) {
		if (used < errlen)
			used += snprintf(errs + used, errlen - used, "%s\n", lua_tostring(L, -1));
		lua_pop(L, 1);
	}
	if (used == 0) {
		lua_pop(L, 1);
		fill(L, c);
		c->file = strdup(file);
		rc = 0;
	} else if (used < errlen) {
		errs[used - 1] = '\0';   /* the last newline */
	}
	goto done;
lua_fail:
	{
		char err[4096];
		snprintf(errs, errlen, "%s: %s", file, lx_report(L, err, sizeof err));
	}
done:
	lua_settop(L, top);
	fclose(r.f);
	free(dir);
	free(real);
	return rc;
}

static void free_str(char **p)
{
	free(*p);
	*p = NULL;
}

static void free_none(const void *p)
{
}

void cfg_free(struct cfg *c)
{
	free_str(&c->file);
#define CFG_FREE(section, key, kind, words, def, min, max, field, meaning) \
	_Generic(&c->field, char **: free_str, default: free_none)(&c->field);
	CFG_KEYS(CFG_FREE)
#undef CFG_FREE
}

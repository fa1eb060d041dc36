/* job.c - loading job files: the C side lists the directory, leash.job does
 * the rest in protected mode. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>

#include "plan/job.h"
#include "core/log.h"
#include "core/lx.h"

static const char *file_kind(mode_t m)
{
	return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
	     : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* stat() first, so a device is never even opened; fstat() after the open,
 * so what was read is what was checked.  O_NONBLOCK: a FIFO put there
 * between the two does not block open(). */
int job_read(const char *path, size_t max, char **src, size_t *len, char *err, size_t errlen)
{
	struct stat st;
	char *buf = NULL;
	size_t n = 0;
	int fd = -1;

	*src = NULL;
	*len = 0;
	if (stat(path, &st) < 0 || (fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) < 0 ||
	    fstat(fd, &st) < 0) {
		snprintf(err, errlen, "%s", strerror(errno));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "is %s, not a regular file: not read", file_kind(st.st_mode));
		goto fail;
	}
	if ((unsigned long long)st.st_size > max) {
		snprintf(err, errlen, "is %lld bytes, more than the %zu a job file may have: not read",
		         (long long)st.st_size, max);
		goto fail;
	}
	/* One byte more than allowed tells a file that grew since fstat. */
	if (!(buf = malloc(max + 1))) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	for (;;) {
		ssize_t r = read(fd, buf + n, max + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			snprintf(err, errlen, "%s", strerror(errno));
			goto fail;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > max) {
			snprintf(err, errlen, "grew past the %zu bytes a job file may have: not read", max);
			goto fail;
		}
	}
	close(fd);
	*src = buf;
	*len = n;
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	free(buf);
	return -1;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *field_dup(lua_State *L, int t, const char *k)
{
	const char *s;
	char *r;

	lua_getfield(L, t, k);
	s = lua_tostring(L, -1);
	r = s ? strdup(s) : NULL;
	lua_pop(L, 1);
	return r;
}

static int64_t field_int(lua_State *L, int t, const char *k)
{
	int64_t v;

	lua_getfield(L, t, k);
	v = lua_tointeger(L, -1);
	lua_pop(L, 1);
	return v;
}

/* The fields of a job table that leash.run and leash.job.next_fire read. */
static const char *const kept[] = { "name", "kind", "every_ms", "cron", "tz", "offset_ms", "run",
                                    "on_failure", "on_recover" };

/* Pushes field k of the job table at t if a run or next_fire needs it, and
 * says whether it did: not a nil, not tz but for a cron job (intervals
 * count from the epoch), not an offset of 0 (next_fire reads nil as 0).
 * An every job keeps name, kind, every_ms and run: four slots, not eight. */
static int push_kept(lua_State *L, int t, enum job_kind kind, const char *k)
{
	if (lua_getfield(L, t, k) == LUA_TNIL ||
	    (kind != JOB_CRON && strcmp(k, "tz") == 0) ||
	    (strcmp(k, "offset_ms") == 0 && lua_isinteger(L, -1) && lua_tointeger(L, -1) == 0)) {
		lua_pop(L, 1);
		return 0;
	}
	return 1;
}

/* The job's warnings (a list of lines) as one string, or NULL for none. */
static char *warnings_dup(lua_State *L, int t)
{
	char *r = NULL;
	int w;

	lua_getfield(L, t, "warnings");
	w = lua_gettop(L);
	if (lua_istable(L, w) && lua_rawlen(L, w) > 0) {
		luaL_Buffer b;

		luaL_buffinit(L, &b);
		for (lua_Unsigned i = 1; i <= lua_rawlen(L, w); i++) {
			if (i > 1)
				luaL_addchar(&b, '\n');
			lua_rawgeti(L, w, (lua_Integer)i);
			luaL_addvalue(&b);
		}
		luaL_pushresult(&b);
		r = strdup(lua_tostring(L, -1));
		lua_pop(L, 1);
	}
	lua_settop(L, w - 1);
	return r;
}

static uint64_t changes;         /* struct jobs made and freed so far */

uint64_t job_changes(void)
{
	return changes;
}

/* Turns the job table on top of the stack into a struct job (pops it). */
static struct job *from_table(lua_State *L)
{
	struct job *j = calloc(1, sizeof *j);
	int t = lua_gettop(L);
	char *kind;

	changes++;
	if (!j) {
		lua_pop(L, 1);
		return NULL;
	}
	j->name = field_dup(L, t, "name");
	j->file = field_dup(L, t, "file");
	kind = field_dup(L, t, "kind");
	j->kind = strcmp(kind, "every") == 0 ? JOB_EVERY
	        : strcmp(kind, "cron") == 0  ? JOB_CRON : JOB_SERVICE;
	free(kind);
	lua_getfield(L, t, "singleton");
	j->singleton = lua_toboolean(L, -1);
	lua_pop(L, 1);
	j->timeout_ms = field_int(L, t, "timeout_ms");
	j->digest = field_dup(L, t, "digest");
	if (!j->digest)
		j->digest = strdup("");
	j->lease_ms = field_int(L, t, "lease_ms");
	j->renew_ms = field_int(L, t, "renew_ms");
	j->margin_ms = field_int(L, t, "margin_ms");
	kind = field_dup(L, t, "overlap");
	j->overlap = !kind ? JOB_SKIP : strcmp(kind, "queue") == 0 ? JOB_QUEUE
	           : strcmp(kind, "replace") == 0 ? JOB_REPLACE : JOB_SKIP;
	free(kind);
	kind = field_dup(L, t, "missed");
	j->missed = !kind ? JOB_MISSED_ONCE : strcmp(kind, "skip") == 0 ? JOB_MISSED_SKIP
	          : strcmp(kind, "all") == 0 ? JOB_MISSED_ALL : JOB_MISSED_ONCE;
	free(kind);
	j->missed_within_ms = field_int(L, t, "missed_within_ms");
	j->missed_max = (int)field_int(L, t, "missed_max");
	j->weight = (int)field_int(L, t, "weight");
	if (j->weight < 1)
		j->weight = 1;
	lua_getfield(L, t, "on_failure");
	lua_getfield(L, t, "on_recover");
	j->hooks = (lua_isfunction(L, -2) ? JOB_ON_FAILURE : 0) |
	           (lua_isfunction(L, -1) ? JOB_ON_RECOVER : 0);
	lua_pop(L, 2);
	j->health = -1;
	j->seed_ms = -1;
	j->warnings = warnings_dup(L, t);
	lua_pushvalue(L, t);
	if (lx_callmod(L, "leash.job", "describe", 1, 1) == LUA_OK && lua_isstring(L, -1))
		j->describe = strdup(lua_tostring(L, -1));
	if (!j->describe)
		j->describe = strdup("?");
	lua_settop(L, t);
	/* Kept: only what runs and schedules need (the rest is in struct job),
	 * in a table sized for the fields it has: 1,000 jobs live in the
	 * parent all along. */
	{
		int n = 0;

		for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
			if (push_kept(L, t, j->kind, kept[i])) {
				n++;
				lua_pop(L, 1);
			}
		lua_createtable(L, 0, n);
	}
	for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++)
		if (push_kept(L, t, j->kind, kept[i]))
			lua_setfield(L, -2, kept[i]);
	lua_remove(L, t);
	j->ref = luaL_ref(L, LUA_REGISTRYINDEX);
	return j;
}

int job_load_dir(lua_State *L, const char *dir,
                 void (*good)(void *arg, struct job *),
                 void (*bad)(void *arg, const char *file, const char *msg), void *arg)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int top = lua_gettop(L);

	if (!d) {
		char msg[512];
		snprintf(msg, sizeof msg, "cannot read the jobs directory: %s", strerror(errno));
		bad(arg, dir, msg);
		return -1;
	}
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len < 5 || strcmp(e->d_name + len - 4, ".lua") != 0 || e->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 16) * sizeof *names);
			if (!nn)
				break;
			names = nn;
		}
		if (!(names[n] = strdup(e->d_name)))
			break;
		n++;
	}
	closedir(d);
	/* qsort's array must not be NULL, even for 0 elements. */
	if (n > 0)
		qsort(names, n, sizeof *names, cmp_str);

	if (lx_require(L, "leash.job") != LUA_OK) {
		char err[4096];
		bad(arg, dir, lx_report(L, err, sizeof err));
		lua_pushnil(L);
	}
	for (size_t i = 0; i < n && lua_istable(L, top + 1); i++) {
		char path[4096];
		size_t len = strlen(names[i]);

		snprintf(path, sizeof path, "%s/%s", dir, names[i]);
		names[i][len - 4] = '\0';
		lua_getfield(L, top + 1, "load");
		lua_pushstring(L, path);
		lua_pushstring(L, names[i]);
		if (lx_pcall(L, 2, 2) != LUA_OK) {
			char err[4096];
			bad(arg, path, lx_report(L, err, sizeof err));
		} else if (lua_istable(L, -2)) {
			struct job *j;
			lua_pop(L, 1);
			j = from_table(L);
			if (j)
				good(arg, j);
		} else {
			lua_pushnil(L);
			while (lua_next(L, -2)) {
				bad(arg, path, lua_tostring(L, -1));
				lua_pop(L, 1);
			}
		}
		lua_settop(L, top + 1);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	lua_settop(L, top);
	return (int)n;
}

int64_t job_next_fire(lua_State *L, const struct job *j, int64_t after_ms)
{
	int64_t t = -1;
	int top = lua_gettop(L);

	if (j->kind == JOB_SERVICE)
		return -1;
	lua_rawgeti(L, LUA_REGISTRYINDEX, j->ref);
	lua_pushinteger(L, after_ms);
	if (lx_callmod(L, "leash.job", "next_fire", 2, 1) != LUA_OK) {
		char err[4096];
		log_msg(LOG_ERROR, j->name, 0, "next fire time: %s", lx_report(L, err, sizeof err));
		lua_settop(L, top);
		return -1;
	}
	t = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : -1;
	if (t < 0)
		log_msg(LOG_ERROR, j->name, 0, "no fire time after %lld", (long long)after_ms);
	lua_settop(L, top);
	return t;
}

void job_free(lua_State *L, struct job *j)
{
	if (!j)
		return;
	changes++;
	luaL_unref(L, LUA_REGISTRYINDEX, j->ref);
	free(j->name);
	free(j->file);
	free(j->describe);
	free(j->digest);
	free(j->warnings);
	free(j->hook_wait);
	free(j);
}

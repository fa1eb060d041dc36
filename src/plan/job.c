/* job.c - loading job files: the C side lists the directory, leash.job does
 * the rest in protected mode.
 *
 * A job's run function must live in the scheduler's own Lua state, so a file
 * is loaded in the parent in the end; but its top level may do anything,
 * and a single C call (a pattern, a string.rep, a table.move: issue 37) can
 * take seconds where no instruction or memory budget looks.  So every file
 * is first loaded in a forked checking process, one file after the other,
 * each bounded by the wall clock ([leash] load_timeout): a file that runs
 * past it is killed with its process and judged a load error naming it; the
 * next process goes on with the following files.  Only the files that
 * passed are then loaded in the parent, under the same budget and a
 * deadline, and only if their text is the one that passed (its digest).
 * The checking process runs beside the loop (job_check_turn from its epoll
 * set, SIGHUP): the loop keeps firing while a bad file burns its second.
 * `leash check`, the first load of `leash run` and the HTTP server's view
 * wait for it (job_load_dir), so they refuse exactly the same files.
 * Why not judge in the checking process only: the parent would run a file
 * it never judged.  Why not the parent only: its budget cannot stop a C
 * call, and the loop would wait on it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lauxlib.h>

#include "core/clock.h"
#include "core/events.h"
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

/* ---- checking in a forked process, then loading ---- */

/* What one file's check said. */
struct verdict {
	int done, ok;
	char *digest;                   /* ok: of the text that passed */
	char *msgs;                     /* not ok: messages, each ended by '\0' */
	size_t msgs_len;
};

struct job_check {
	lua_State *L;
	char *dir;
	char **names;                   /* the .lua files, sorted, without ".lua" */
	size_t n;
	int listed;                     /* 0: dir could not be read (list_err) */
	char list_err[256];
	struct verdict *v;
	size_t next;                    /* the first file not judged yet */
	int64_t limit_ms;
	int64_t deadline;               /* mono: `next` is judged by then, or killed */
	pid_t pid;                      /* the checking process, or 0 */
	int reaped, status;             /* it was waited for (by the loop, maybe) */
	int fd;                         /* what it writes, or -1 */
	int epfd;                       /* the loop's epoll set, or -1 */
	struct watch *w;                /* what its pipe's events go to */
	char *buf;                      /* read, not parsed yet */
	size_t len, cap;
};

/* The checking process gets this much more than the limit before it is
 * killed: its own deadline (in the count hook) tells the line. */
#define CHECK_SLACK_MS 100
/* A message from the checking process is cut to this. */
#define CHECK_MSG_MAX (64 * 1024)
/* A load that left this much more heap is collected at once: garbage of
 * eight files of 30 MB each is 296 MB otherwise (issue 37). */
#define LOAD_GC_BYTES (4 * 1024 * 1024)
/* What a loaded job may keep in the scheduler's heap (its table, its
 * functions and their upvalues): the load's budget bounds what it makes
 * while loading, this what stays, in the scheduler and every run forked from
 * it.  A file's own text is at most 1 MiB. */
#define LOAD_KEEP_BYTES (8 * 1024 * 1024)

static size_t heap_bytes(lua_State *L)
{
	return (size_t)lua_gc(L, LUA_GCCOUNT) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB);
}

/* Calls leash.job.load (the table at mod) for one file: its two results,
 * or the error, on the stack (lx_pcall). */
static int load_one(lua_State *L, int mod, const char *path, const char *name, int64_t limit_ms,
                    const char *digest)
{
	size_t before = heap_bytes(L);
	int rc;

	lua_getfield(L, mod, "load");
	lua_pushstring(L, path);
	lua_pushstring(L, name);
	lua_pushinteger(L, limit_ms);
	if (digest)
		lua_pushstring(L, digest);
	else
		lua_pushnil(L);
	rc = lx_pcall(L, 4, 2);
	if (heap_bytes(L) > before + LOAD_GC_BYTES) {
		size_t held;

		lua_gc(L, LUA_GCCOLLECT);
		held = heap_bytes(L) > before ? heap_bytes(L) - before : 0;
		if (rc == LUA_OK && held > LOAD_KEEP_BYTES && lua_istable(L, -2)) {
			lua_pop(L, 2);
			lua_pushnil(L);
			lua_createtable(L, 1, 0);
			lua_pushfstring(L, "%s: the job keeps %d MiB after loading, more than the %d MiB "
			                "a job may keep (what it kept is referred to by its functions: "
			                "build large data in run(ctx))", path,
			                (int)(held / (1024 * 1024)), LOAD_KEEP_BYTES / (1024 * 1024));
			lua_rawseti(L, -2, 1);
			lua_gc(L, LUA_GCCOLLECT);
		}
	}
	return rc;
}

static int write_all(int fd, const void *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p = (const char *)p + w;
		n -= (size_t)w;
	}
	return 0;
}

/* A record: its kind ('m' a message, 'o' passed with the digest, 'e' the
 * end of a file that did not), the length of what follows (4 bytes), it. */
static void put(int fd, char kind, const char *s)
{
	size_t n = s ? strnlen(s, CHECK_MSG_MAX) : 0;
	uint32_t len = (uint32_t)n;
	char head[5];

	head[0] = kind;
	memcpy(head + 1, &len, 4);
	if (write_all(fd, head, 5) < 0 || write_all(fd, s, n) < 0)
		_exit(1);
}

/* The checking process: loads the files from c->next on, as the parent
 * would, and says what each did.  Never returns. */
static void check_child(struct job_check *c, int fd)
{
	lua_State *L = c->L;
	int null = open("/dev/null", O_WRONLY | O_CLOEXEC), mod;

	/* print at load time shows once: when the parent loads the file. */
	if (null >= 0)
		dup2(null, STDOUT_FILENO);
	if (lx_require(L, "leash.job") != LUA_OK)
		_exit(1);
	mod = lua_gettop(L);
	for (size_t i = c->next; i < c->n; i++) {
		char path[4096];

		snprintf(path, sizeof path, "%s/%s.lua", c->dir, c->names[i]);
		if (load_one(L, mod, path, c->names[i], c->limit_ms, NULL) != LUA_OK) {
			char err[4096];
			put(fd, 'm', lx_report(L, err, sizeof err));
			put(fd, 'e', NULL);
		} else if (lua_istable(L, -2)) {
			lua_getfield(L, -2, "digest");
			put(fd, 'o', lua_tostring(L, -1));
		} else {
			lua_pushnil(L);
			while (lua_next(L, -2)) {
				put(fd, 'm', lua_tostring(L, -1));
				lua_pop(L, 1);
			}
			put(fd, 'e', NULL);
		}
		lua_settop(L, mod);
	}
	_exit(0);
}

static void unwatch(struct job_check *c)
{
	if (c->fd < 0)
		return;
	if (c->epfd >= 0)
		events_forget(c->epfd, c->fd);
	close(c->fd);
	c->fd = -1;
}

/* Ends the checking process (killed if it still goes) and waits for it. */
static void end_child(struct job_check *c)
{
	unwatch(c);
	if (c->pid > 0 && !c->reaped) {
		kill(c->pid, SIGKILL);
		while (waitpid(c->pid, &c->status, 0) < 0 && errno == EINTR)
			;
	}
	c->pid = 0;
	c->len = 0;
}

static void add_msg(struct verdict *v, const char *s, size_t n)
{
	char *m = realloc(v->msgs, v->msgs_len + n + 1);

	if (!m)
		return;
	memcpy(m + v->msgs_len, s, n);
	m[v->msgs_len + n] = '\0';
	v->msgs = m;
	v->msgs_len += n + 1;
}

/* Judges the file in progress bad without its check's word: it ran out of
 * time (why NULL) or the checking process ended for why. */
static void judge_bad(struct job_check *c, const char *why)
{
	char path[4096], msg[4400];
	lua_State *L = c->L;
	int top = lua_gettop(L), n;

	snprintf(path, sizeof path, "%s/%s.lua", c->dir, c->names[c->next]);
	lua_pushstring(L, path);
	lua_pushliteral(L, "timeout");
	lua_pushnil(L);
	lua_pushinteger(L, c->limit_ms);
	if (!why && lx_callmod(L, "leash.job", "load_error", 4, 1) == LUA_OK && lua_isstring(L, -1))
		n = snprintf(msg, sizeof msg, "%s", lua_tostring(L, -1));
	else
		n = snprintf(msg, sizeof msg, "%s: loading it ended the process that checks job files "
		             "(%s); the file should only build and return the job table", path,
		             why ? why : "timeout");
	lua_settop(L, top);
	add_msg(&c->v[c->next], msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1);
	c->v[c->next].done = 1;
	c->next++;
}

/* Forks a checking process for the files from c->next on. */
static void fork_child(struct job_check *c)
{
	int p[2];

	c->reaped = 0;
	c->len = 0;
	while (c->next < c->n) {
		pid_t parent = getpid();

		if (pipe2(p, O_CLOEXEC) < 0) {
			judge_bad(c, strerror(errno));
			continue;
		}
		fflush(NULL);           /* nothing buffered is written twice */
		c->pid = fork();
		if (c->pid == 0) {
			close(p[0]);
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != parent)
				_exit(1);
			check_child(c, p[1]);
		}
		close(p[1]);
		if (c->pid < 0) {
			c->pid = 0;
			close(p[0]);
			judge_bad(c, strerror(errno));
			continue;
		}
		c->fd = p[0];
		fcntl(c->fd, F_SETFL, O_NONBLOCK);
		if (c->epfd >= 0) {
			events_add(c->epfd, c->fd, c->w);
		}
		c->deadline = clock_mono_ms() + c->limit_ms + CHECK_SLACK_MS;
		return;
	}
}

/* Takes the complete records read so far. */
static void parse(struct job_check *c)
{
	size_t at = 0;

	while (c->len - at >= 5 && c->next < c->n) {
		uint32_t n;
		char kind = c->buf[at];
		struct verdict *v = &c->v[c->next];

		memcpy(&n, c->buf + at + 1, 4);
		if (c->len - at - 5 < n)
			break;
		if (kind == 'm') {
			add_msg(v, c->buf + at + 5, n);
		} else {
			v->done = 1;
			v->ok = kind == 'o';
			if (v->ok)
				v->digest = strndup(c->buf + at + 5, n);
			c->next++;
			c->deadline = clock_mono_ms() + c->limit_ms + CHECK_SLACK_MS;
		}
		at += 5 + n;
	}
	memmove(c->buf, c->buf + at, c->len - at);
	c->len -= at;
}

int job_check_reaped(struct job_check *c, pid_t pid, int status)
{
	if (!c || c->pid != pid || pid <= 0 || c->reaped)
		return 0;
	c->reaped = 1;
	c->status = status;
	return 1;
}

int64_t job_check_turn(struct job_check *c)
{
	while (c->fd >= 0) {
		ssize_t r;

		if (c->cap - c->len < 4096) {
			char *nb = realloc(c->buf, c->cap = c->cap * 2 + 8192);
			if (!nb) {
				end_child(c);
				break;
			}
			c->buf = nb;
		}
		r = read(c->fd, c->buf + c->len, c->cap - c->len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r > 0) {
			c->len += (size_t)r;
			parse(c);
			continue;
		}
		if (r < 0 && errno == EAGAIN)
			break;
		/* The end: every file judged, or the process died in one. */
		end_child(c);
		if (c->next < c->n) {
			char why[64];

			if (WIFSIGNALED(c->status))
				snprintf(why, sizeof why, "%s", strsignal(WTERMSIG(c->status)));
			else
				snprintf(why, sizeof why, "exit %d", WEXITSTATUS(c->status));
			judge_bad(c, why);
			fork_child(c);
		}
	}
	if (c->next < c->n && c->fd >= 0 && clock_mono_ms() >= c->deadline) {
		end_child(c);
		judge_bad(c, NULL);
		fork_child(c);
	}
	if (c->next >= c->n) {
		end_child(c);
		return -1;
	}
	{
		int64_t left = c->deadline - clock_mono_ms();
		return left < 0 ? 0 : left;
	}
}

/* dir as a path from the current directory when it lies below it (jobs/,
 * not /home/me/demo/jobs/): the name every message and traceback gives a
 * job file is the one the operator would type.  Under a service (its
 * directory /) it stays whole.  leash never changes its directory (a run's
 * process does, after its files are loaded). */
static char *shown_dir(const char *dir)
{
	char *cwd = getcwd(NULL, 0), *out;
	size_t n = cwd ? strlen(cwd) : 0;

	if (n > 1 && strncmp(dir, cwd, n) == 0 && dir[n] == '/' && dir[n + 1])
		out = strdup(dir + n + 1);
	else
		out = strdup(dir);
	free(cwd);
	return out;
}

struct job_check *job_check_start(lua_State *L, const char *dir, int64_t limit_ms, int epfd,
                                  struct watch *w)
{
	struct job_check *c = calloc(1, sizeof *c);
	DIR *d;
	struct dirent *e;
	size_t cap = 0;

	if (!c || !(c->dir = shown_dir(dir))) {
		free(c);
		return NULL;
	}
	c->L = L;
	c->fd = -1;
	c->epfd = epfd;
	c->w = w;
	c->limit_ms = limit_ms > 0 ? limit_ms : JOB_LOAD_TIMEOUT_MS;
	if (!(d = opendir(dir))) {
		snprintf(c->list_err, sizeof c->list_err, "cannot read the jobs directory: %s",
		         strerror(errno));
		return c;
	}
	c->listed = 1;
	while ((e = readdir(d))) {
		size_t len = strlen(e->d_name);
		if (len < 5 || strcmp(e->d_name + len - 4, ".lua") != 0 || e->d_name[0] == '.')
			continue;
		if (c->n == cap) {
			char **nn = realloc(c->names, (cap = cap ? cap * 2 : 16) * sizeof *nn);
			if (!nn)
				break;
			c->names = nn;
		}
		if (!(c->names[c->n] = strndup(e->d_name, len - 4)))
			break;
		c->n++;
	}
	closedir(d);
	/* qsort's array must not be NULL, even for 0 elements. */
	if (c->n > 0)
		qsort(c->names, c->n, sizeof *c->names, cmp_str);
	if (!(c->v = calloc(c->n + 1, sizeof *c->v))) {
		c->n = 0;
		return c;
	}
	fork_child(c);
	return c;
}

static void check_wait(struct job_check *c)
{
	int64_t left;

	while ((left = job_check_turn(c)) >= 0) {
		struct pollfd p = { .fd = c->fd, .events = POLLIN };

		if (c->fd >= 0)
			poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
	}
}

void job_check_free(struct job_check *c)
{
	if (!c)
		return;
	end_child(c);
	for (size_t i = 0; i < c->n; i++) {
		free(c->names[i]);
		free(c->v[i].digest);
		free(c->v[i].msgs);
	}
	free(c->names);
	free(c->v);
	free(c->buf);
	free(c->dir);
	free(c);
}

int job_load_checked(lua_State *L, struct job_check *c,
                     void (*good)(void *arg, struct job *),
                     void (*bad)(void *arg, const char *file, const char *msg), void *arg)
{
	int top = lua_gettop(L);

	if (!c->listed) {
		bad(arg, c->dir, c->list_err);
		return -1;
	}
	check_wait(c);
	if (lx_require(L, "leash.job") != LUA_OK) {
		char err[4096];
		bad(arg, c->dir, lx_report(L, err, sizeof err));
		lua_pushnil(L);
	}
	for (size_t i = 0; i < c->n && lua_istable(L, top + 1); i++) {
		struct verdict *v = &c->v[i];
		char path[4096];

		snprintf(path, sizeof path, "%s/%s.lua", c->dir, c->names[i]);
		if (!v->ok) {
			/* Refused by the checking process: never run here. */
			for (size_t at = 0; at < v->msgs_len; at += strlen(v->msgs + at) + 1)
				bad(arg, path, v->msgs + at);
			if (!v->msgs_len)
				bad(arg, path, "not loaded: its check said nothing");
		} else if (load_one(L, top + 1, path, c->names[i], c->limit_ms, v->digest) != LUA_OK) {
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
	lua_settop(L, top);
	return (int)c->n;
}

int job_load_dir(lua_State *L, const char *dir, int64_t limit_ms,
                 void (*good)(void *arg, struct job *),
                 void (*bad)(void *arg, const char *file, const char *msg), void *arg)
{
	struct job_check *c = job_check_start(L, dir, limit_ms, -1, NULL);
	int n;

	if (!c) {
		bad(arg, dir, "out of memory");
		return -1;
	}
	n = job_load_checked(L, c, good, bad, arg);
	job_check_free(c);
	return n;
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

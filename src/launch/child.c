/* child.c - everything after fork(): the run's child, its self-fencing
 * timers, and the primitives ctx is built on. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/capability.h>

#include "core/tune.h"
#include "core/cfg.h"
#include "launch/child.h"
#include "core/clock.h"
#include "plan/job.h"
#include "core/lx.h"
#include "launch/runner.h"
#include "launch/prefork/warm.h"

struct go_shared;

/* The file's state.  In the parent: the soft file limit runs get back, and
 * the futex page children forked ahead sleep on.  In a child: its log pipe,
 * its heap's size after loading, and its fence (the timers that stop it at
 * its lease's deadline, read by the signal handlers). */
static struct child_state {
	int log_fd;                     /* the log-record pipe, in a child */
	int gc_base_kb;
	rlim_t nofile_soft;             /* RLIM_INFINITY: as inherited */
	struct go_shared *shared;
	int go_written;                 /* the parent: starts not woken yet */
	timer_t fence_group_timer, fence_timer;
	volatile sig_atomic_t fence_armed;
	volatile int64_t fence_stop_ms; /* boottime: the parent stops the body here */
	int64_t fence_slack_ms;         /* and the child kills itself this much later */
	int64_t run_stop_ms;            /* boottime: the run's own timeout, 0 = none */
} cs = { .log_fd = -1, .nofile_soft = RLIM_INFINITY };

/* ---- what a run is not given: leash's secrets, leash's user ---- */

static struct guard {
	char *hidden[2];                /* what [http] token_env, [mssql] password_env name */
	int hide_pg;                    /* and every PG* variable (a postgres store) */
	int switch_user;                /* become run_as: */
	uid_t uid;
	gid_t gid;
	gid_t *groups;
	int ngroups;
	char *user, *home;
} guard;

void child_hide_env(const struct cfg *c)
{
	const char *names[2] = { c->http_token_env, c->mssql_password_env };

	for (int i = 0; i < 2; i++) {
		free(guard.hidden[i]);
		guard.hidden[i] = names[i] && names[i][0] ? strdup(names[i]) : NULL;
	}
	guard.hide_pg = strcmp(c->provider, "postgres") == 0;
}

/* Whether the variable named by name's first n bytes is hidden. */
static int hidden_name(const char *name, size_t n)
{
	if (guard.hide_pg && n > 2 && memcmp(name, "PG", 2) == 0)
		return 1;
	for (int i = 0; i < 2; i++)
		if (guard.hidden[i] && strlen(guard.hidden[i]) == n && memcmp(guard.hidden[i], name, n) == 0)
			return 1;
	return 0;
}

int child_env_hidden(const char *name)
{
	return hidden_name(name, strlen(name));
}

/* Takes the hidden variables out of environ, their values zeroed where they
 * lie (the block /proc/PID/environ shows, too). */
static void scrub_env(void)
{
	char **keep = environ;

	if (!environ)
		return;
	for (char **e = environ; *e; e++) {
		char *eq = strchr(*e, '=');

		if (eq && hidden_name(*e, (size_t)(eq - *e))) {
			memset(eq + 1, 0, strlen(eq + 1));
			continue;
		}
		*keep++ = *e;
	}
	*keep = NULL;
}

static uint64_t effective_caps(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d) < 0)
		return 0;
	return d[0].effective | (uint64_t)d[1].effective << 32;
}

int child_run_as(const struct cfg *c, char *err, size_t errlen)
{
	const uint64_t need = 1ULL << CAP_SETUID | 1ULL << CAP_SETGID | 1ULL << CAP_KILL;
	struct passwd *pw;
	gid_t *groups = NULL;
	int n = 32;

	if (!c->run_as[0])
		return geteuid() == 0;
	errno = 0;
	pw = getpwnam(c->run_as);
	if (!pw) {
		snprintf(err, errlen, "%s: [leash] run_as: \"%s\" is not a user of this host%s%s",
		         c->file, c->run_as, errno ? ": " : "", errno ? strerror(errno) : "");
		return -1;
	}
	if (pw->pw_uid == geteuid() && pw->pw_gid == getegid())
		return geteuid() == 0;  /* leash's own user: nothing to switch */
	if ((effective_caps() & need) != need) {
		snprintf(err, errlen, "%s: [leash] run_as = %s: leash runs as uid %u without "
		         "CAP_SETUID, CAP_SETGID and CAP_KILL, which it needs to run jobs as another "
		         "user and stop them (run it as root, or give them with AmbientCapabilities=)",
		         c->file, c->run_as, (unsigned)geteuid());
		return -1;
	}
	for (;;) {
		gid_t *more = realloc(groups, (size_t)n * sizeof *groups);
		int want = n;

		if (!more) {
			free(groups);
			snprintf(err, errlen, "[leash] run_as = %s: out of memory", c->run_as);
			return -1;
		}
		groups = more;
		if (getgrouplist(pw->pw_name, pw->pw_gid, groups, &n) >= 0)
			break;
		if (n <= want)
			n = want * 2;
	}
	guard.uid = pw->pw_uid;
	guard.gid = pw->pw_gid;
	guard.groups = groups;
	guard.ngroups = n;
	guard.user = strdup(pw->pw_name);
	guard.home = strdup(pw->pw_dir && pw->pw_dir[0] ? pw->pw_dir : "/");
	if (!guard.user || !guard.home) {
		snprintf(err, errlen, "[leash] run_as = %s: out of memory", c->run_as);
		return -1;
	}
	guard.switch_user = 1;
	return guard.uid == 0;
}

/* Becomes the run_as user for good: groups, gid, uid, then no capability
 * left (a leash that is not root switches with capabilities, which a
 * change between uids other than 0 keeps); its HOME, USER and LOGNAME, its
 * home as the working directory (leash's may be closed to it), else /.
 * 0, or -1 with errno. */
static int become_user(void)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct none[2];
	uid_t r, e, s;

	memset(none, 0, sizeof none);
	if (setgroups((size_t)guard.ngroups, guard.groups) < 0 ||
	    setresgid(guard.gid, guard.gid, guard.gid) < 0 ||
	    setresuid(guard.uid, guard.uid, guard.uid) < 0)
		return -1;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return -1;
	if (guard.uid != 0 && syscall(SYS_capset, &h, none) < 0)
		return -1;
	if (getresuid(&r, &e, &s) < 0 || r != guard.uid || e != guard.uid || s != guard.uid ||
	    (guard.uid != 0 && effective_caps() != 0)) {
		errno = EPERM;
		return -1;
	}
	if (setenv("HOME", guard.home, 1) < 0 || setenv("USER", guard.user, 1) < 0 ||
	    setenv("LOGNAME", guard.user, 1) < 0)
		return -1;
	if (chdir(guard.home) < 0 && chdir("/") < 0)
		return -1;
	return 0;
}

void child_fence_sigset(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, CHILD_FENCE_SIGNAL);
	sigaddset(set, CHILD_FENCE_KILL_SIGNAL);
}

/* Builds ctx and calls leash.run.main(job, ctx); its answer is the exit code. */
/* The child's heap is the parent's, shared copy-on-write: a collection
 * would touch every page of it and copy the lot (the parent's 10 MB with a
 * thousand jobs, per child: most of a burst's cost).  So the collector waits
 * until the body has grown the heap by CHILD_GC_GROWTH_KB of its own, checked
 * every CHILD_GC_CHECK instructions; short runs never collect. */
#define CHILD_GC_GROWTH_KB 16384
#define CHILD_GC_CHECK 100000


/* A run that ends closer than this to its job's next fire exits at once,
 * at its own priority. */
#define CHILD_EXIT_NEAR_MS 250

static void gc_hook(lua_State *L, lua_Debug *ar)
{
	(void)ar;
	if (lua_gc(L, LUA_GCCOUNT) - cs.gc_base_kb > CHILD_GC_GROWTH_KB) {
		lua_gc(L, LUA_GCRESTART);
		lua_sethook(L, NULL, 0, 0);
	}
}

static void hold_gc(lua_State *L)
{
	lua_gc(L, LUA_GCSTOP);
	cs.gc_base_kb = lua_gc(L, LUA_GCCOUNT);
	lua_sethook(L, gc_hook, LUA_MASKCOUNT, CHILD_GC_CHECK);
}

static void set_int(lua_State *L, const char *k, int64_t v, int64_t none)
{
	if (v == none)
		return;
	lua_pushinteger(L, v);
	lua_setfield(L, -2, k);
}

/* A failure hook's info.hook (its name) and info.run (the ledger fields of
 * the run that changed the job's health; times in ms on the wall clock). */
static void push_report(lua_State *L, const struct run_report *h)
{
	lua_pushstring(L, h->hook);
	lua_setfield(L, -2, "hook");
	lua_createtable(L, 0, 10);
	lua_getfield(L, -3, "name");
	lua_setfield(L, -2, "job");
	set_int(L, "scheduled_at", h->scheduled_ms, 0);
	set_int(L, "token", h->token, 0);
	set_int(L, "started_at", h->started_ms, 0);
	set_int(L, "ended_at", h->ended_ms, 0);
	set_int(L, "duration_ms", h->ended_ms - h->started_ms, -1);
	set_int(L, "exit_code", h->exit_code, -1);
	set_int(L, "exit_signal", h->exit_signal, -1);
	lua_pushstring(L, h->outcome);
	lua_setfield(L, -2, "outcome");
	if (h->error[0]) {
		lua_pushstring(L, h->error);
		lua_setfield(L, -2, "error");
	}
	lua_setfield(L, -2, "run");
}

/* Pushes the job's table and the info table leash.run builds ctx from. */
static void push_info(lua_State *L, const struct job *job, const struct run_info *info, long id)
{
	lua_rawgeti(L, LUA_REGISTRYINDEX, job->ref);
	lua_createtable(L, 0, 5);
	lua_pushstring(L, info->replica);
	lua_setfield(L, -2, "replica");
	lua_pushinteger(L, info->token);
	lua_setfield(L, -2, "token");
	lua_pushinteger(L, id > 0 ? id : 0);   /* a hook's: 0 */
	lua_setfield(L, -2, "run_id");
	if (info->scheduled_ms)
		lua_pushinteger(L, info->scheduled_ms / 1000);
	else
		lua_pushnil(L);
	lua_setfield(L, -2, "scheduled_at");
	lua_pushboolean(L, info->catchup);
	lua_setfield(L, -2, "catchup");
	lua_pushboolean(L, info->manual);
	lua_setfield(L, -2, "manual");
	if (info->hook)
		push_report(L, info->hook);
}

/* A child forked ahead builds ctx while it waits (job, info on the stack;
 * ctx, or nil when that failed, pushed): the start then only sets what came
 * with it, and the run's first instructions find their pages copied. */
static void prebuild_ctx(lua_State *L)
{
	lua_pushvalue(L, -2);
	lua_pushvalue(L, -2);
	if (lx_callmod(L, "leash.run", "ctx", 2, 1) != LUA_OK || !lua_istable(L, -1)) {
		lua_pop(L, 1);
		lua_pushnil(L);
	}
}

/* What the start says, in info and in the prebuilt ctx (job, info, ctx on
 * the stack). */
static void set_started(lua_State *L, int64_t token, long id)
{
	for (int at = -2; at <= -1; at++) {
		if (!lua_istable(L, at))
			continue;
		lua_pushinteger(L, token);
		lua_setfield(L, at - 1, "token");
		lua_pushinteger(L, id);
		lua_setfield(L, at - 1, "run_id");
	}
}

/* Calls leash.run.main(job, info, ctx) (job, info, ctx or nil on the
 * stack); its answer is the exit code. */
static int run_body(lua_State *L)
{
	int ok = 0;

	if (lx_callmod(L, "leash.run", "main", 3, 1) == LUA_OK) {
		ok = lua_toboolean(L, -1);
	} else {
		char err[4096];
		fprintf(stderr, "%s\n", lx_report(L, err, sizeof err));
	}
	return ok ? 0 : 1;
}

static void fence_off(void);


void child_parent_init(const sigset_t *mask)
{
	struct rlimit rl;
	sigset_t fence;

	sigprocmask(SIG_BLOCK, mask, NULL);
	/* Never delivered to the parent; blocked so that every child starts
	 * with them blocked (this file unblocks them once it can take them). */
	child_fence_sigset(&fence);
	sigprocmask(SIG_BLOCK, &fence, NULL);
	signal(SIGPIPE, SIG_IGN);
	/* What a run's ctx.exec leaves behind is reparented to the parent and
	 * reaped by its waitpid(-1), never left as a zombie. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	/* Without a soft limit of its own a thousand runs' pipes would not fit
	 * in systemd's 1024; a run gets the soft limit back. */
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
		return;
	cs.nofile_soft = rl.rlim_cur;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
}

/* ---- starting a child forked ahead ----
 *
 * Its struct child_go comes through its own pipe, but the child does not
 * sleep on the pipe: a write would wake it there and then, and the children
 * of a burst, started one by one, would take the parent's CPU before the
 * parent had started the rest.  They sleep on one futex word in memory
 * shared by all (mapped before the first of them is forked); the parent
 * writes every start of a turn, then wakes them all at once.
 *
 * A start may also be written ahead of the fire, once its claim is in (see
 * runner_go_ahead): the child then wakes itself at the fire's time, on its
 * own timer, and reads it; the parent, whose turn at that instant may wait
 * behind other processes' runs, wakes nobody.  So a child never reads its
 * pipe before its fire's time: until it has, the parent can take the start
 * back (read it out of the pipe itself), and whichever of the two reads it
 * decides whether the fire started.
 */

struct go_shared {
	uint32_t word;                  /* the futex word starts wake */
};


int child_go_init(void)
{
	void *p;

	if (cs.shared)
		return 0;
	p = mmap(NULL, sizeof *cs.shared, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	cs.shared = p;
	return 0;
}

/* ns from now until the wall clock reaches at_ms (<= 0: it has).  A
 * relative wait: what the process's clock says (faketime's, in tests) is
 * what counts, not the kernel's own wall clock. */
static int64_t ns_until(int64_t at_ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (at_ms - (int64_t)ts.tv_sec * 1000) * 1000000 - ts.tv_nsec;
}

int child_go_send(int fd, const struct child_go *go, int64_t ahead_of)
{
	/* Whole: an empty pipe, and less than PIPE_BUF. */
	if (write(fd, go, sizeof *go) != (ssize_t)sizeof *go)
		return -1;
	/* Ahead, unless the time came while it was written: the child may
	 * have looked already. */
	if (!ahead_of || ns_until(ahead_of) <= 0)
		cs.go_written = 1;
	return 0;
}

int child_go_take_back(int rfd)
{
	struct child_go go;

	/* Whole or nothing, like the child's read (one write, < PIPE_BUF). */
	return read(rfd, &go, sizeof go) == (ssize_t)sizeof go ? 0 : -1;
}

void child_go_wake(void)
{
	if (!cs.go_written)
		return;
	cs.go_written = 0;
	__atomic_add_fetch(&cs.shared->word, 1, __ATOMIC_SEQ_CST);
	syscall(SYS_futex, &cs.shared->word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* A child forked ahead of its fire at at_ms (wall clock): waits for its
 * start (fd non-blocking), read no earlier than at_ms.  0 with *go filled,
 * or -1 when the parent closed the pipe instead (the fire will not start
 * here) or is gone. */
static int wait_go(int fd, struct child_go *go, pid_t parent, int64_t at_ms)
{
	/* Its own wake-up at the fire, to the µs (not the 50 µs slack). */
	prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
	for (;;) {
		uint32_t seen = __atomic_load_n(&cs.shared->word, __ATOMIC_SEQ_CST);
		int64_t left = ns_until(at_ms);
		struct timespec wait = { 1, 0 };

		if (left <= 0) {
			ssize_t n = read(fd, go, sizeof *go);

			if (n == (ssize_t)sizeof *go)
				break;
			if (n >= 0 || (errno != EAGAIN && errno != EINTR))
				return -1;      /* closed (or cut short: the parent died writing) */
		}
		if (left > 0 && left < 1000000000) {
			wait.tv_sec = 0;
			wait.tv_nsec = (long)left;
		}
		/* Woken at the fire, by a start written late (maybe another's),
		 * a signal, or after a second to see whether the parent is still
		 * there. */
		if (syscall(SYS_futex, &cs.shared->word, FUTEX_WAIT, seen, &wait, NULL, 0) < 0 &&
		    errno == ETIMEDOUT && getppid() != parent)
			return -1;
	}
	close(fd);
	prctl(PR_SET_TIMERSLACK, 0UL, 0UL, 0UL, 0UL);   /* the body's: the default */
	return 0;
}

void child_pipes_close(int fds[][2], int go[2])
{
	int e = errno;

	for (int i = 0; i < RUN_STREAMS; i++)
		for (int k = 0; k < 2; k++)
			if (fds[i][k] >= 0) {
				close(fds[i][k]);
				fds[i][k] = -1;
			}
	for (int k = 0; go && k < 2; k++)
		if (go[k] >= 0) {
			close(go[k]);
			go[k] = -1;
		}
	errno = e;
}

int child_pipes(int fds[][2], int go[2])
{
	for (int i = 0; i < RUN_STREAMS; i++)
		fds[i][0] = fds[i][1] = -1;
	if (go)
		go[0] = go[1] = -1;
	for (int i = 0; i < RUN_STREAMS; i++)
		if (pipe2(fds[i], O_CLOEXEC) < 0)
			goto fail;
	if (go && pipe2(go, O_CLOEXEC) < 0)
		goto fail;
	return 0;
fail:
	child_pipes_close(fds, go);
	return -1;
}

static int64_t timeout_stop(const struct job *job, const struct run_info *info)
{
	int64_t ms = info->timeout_ms ? info->timeout_ms : job->timeout_ms;

	return ms ? clock_boot_ms() + ms : 0;
}

/* The child's first step: its own process group (a stop reaches what its
 * body starts), default signal dispositions, the fence signals blocked
 * (as the parent had them at fork) until their handlers are in place: a
 * deadline push that arrives now waits instead of killing the run with its
 * default action. */
static void reset_signals(void)
{
	sigset_t fence;

	setpgid(0, 0);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);
	child_fence_sigset(&fence);
	sigprocmask(SIG_SETMASK, &fence, NULL);
}

/* Its descriptors: stdin /dev/null, stdout, stderr and fd 3 its pipes, the
 * go pipe (go, -1: none) at fd 4; nothing else it inherited.  Returns the
 * go pipe's new number (or -1). */
static int take_streams(int fds[][2], int go)
{
	int devnull;

	/* The go pipe out of the way of the dup2s below (above fd 4). */
	if (go >= 0)
		go = fcntl(go, F_DUPFD_CLOEXEC, 5);
	devnull = open("/dev/null", O_RDONLY);
	if (devnull >= 0)
		dup2(devnull, STDIN_FILENO);
	dup2(fds[0][1], STDOUT_FILENO);
	dup2(fds[1][1], STDERR_FILENO);
	dup2(fds[2][1], 3);
	/* dup2 drops close-on-exec: put it back, or every program ctx.exec
	 * starts inherits the log-record pipe (and one that lingers keeps the
	 * run from ending). */
	fcntl(3, F_SETFD, FD_CLOEXEC);
	if (go >= 0) {
		dup3(go, 4, O_CLOEXEC);
		go = 4;
		fcntl(go, F_SETFL, O_NONBLOCK);
	}
	/* Whatever else the parent had open (the database socket above all)
	 * is not the child's. */
	syscall(SYS_close_range, go >= 0 ? 5U : 4U, ~0U, 0U);
	cs.log_fd = 3;
	setvbuf(stdout, NULL, _IOLBF, 0);
	return go;
}

/* Before any Lua runs: leash's secrets are not the run's, nor is its user
 * (a run that cannot shed it does not run), nor its raised file limit. */
static void shed_leash(void)
{
	scrub_env();
	if (guard.switch_user && become_user() < 0) {
		fprintf(stderr, "leash: cannot run the job as %s: %s\n", guard.user, strerror(errno));
		_exit(126);
	}
	if (cs.nofile_soft != RLIM_INFINITY) {
		struct rlimit rl;

		if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
			rl.rlim_cur = cs.nofile_soft;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
}

/* Forked ahead of the fire: nothing runs until it starts.  It warms up
 * and waits for its start on go; then its ctx has the start's token and
 * id, and its fence the start's deadline.  No start (the parent gone, or
 * the fire dropped): it exits here.  Returns whether its warm-up learns
 * (warm_learn at the end). */
static int await_start(lua_State *L, const struct job *job, const struct run_info *info,
                       int go, pid_t parent)
{
	struct child_go g;
	int learn;

	prebuild_ctx(L);
	learn = tune_off(TUNE_WARM) ? 0 : warm_up(job, ns_until(info->scheduled_ms));
	if (wait_go(go, &g, parent, info->scheduled_ms) < 0)
		_exit(0);
	set_started(L, g.token, g.run_id);
	child_fence_start(g.fence_stop_ms, timeout_stop(job, info));
	return learn;
}

/* The body is over: its end made final, then the process goes.  Tearing
 * down a copy of the parent's address space (a third of a millisecond)
 * yields to the runs starting now, so a burst's bodies start one after the
 * other, not each after the previous one's exit.  (Lowering the priority
 * alone does not give the CPU up.) */
static _Noreturn void exit_run(const struct job *job, const struct run_info *info,
                               int64_t next_ms, int learn, int code)
{
	sigset_t all;

	/* First the body's end is made final: the log-record pipe closes (the
	 * parent stops no run whose records ended, see runner_stop) and no
	 * signal can turn the exit code into a death. */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	close(STDOUT_FILENO);
	close(STDERR_FILENO);
	close(3);
	fence_off();
	/* Unless its job's next fire is near: the run is not over for the
	 * overlap rule until this process is gone, and one at the lowest
	 * priority on busy CPUs took 40-60 ms to be, its next fire skipped. */
	if (!tune_off(TUNE_DEFER) &&
	    (next_ms < 0 || next_ms - clock_wall_ms() >= CHILD_EXIT_NEAR_MS)) {
		setpriority(PRIO_PROCESS, 0, 19);
		sched_yield();
	}
	if (learn)
		warm_learn(job);
	_exit(code);
}

void child_main(lua_State *L, const struct job *job, const struct run_info *info, long id,
                int fds[][2], int go)
{
	pid_t parent = getppid();
	sigset_t none;
	int code, learn = 0;
	int64_t next_ms;

	reset_signals();
	go = take_streams(fds, go);
	shed_leash();
	if (child_fence(info->fence_stop_ms, info->fence_slack_ms,
	                go >= 0 ? 0 : timeout_stop(job, info)) < 0)
		fprintf(stderr, "leash: cannot arm the self-fencing timer: %s\n", strerror(errno));
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);

	hold_gc(L);
	push_info(L, job, info, id);
	next_ms = job_next_fire(L, job, info->scheduled_ms);
	if (go >= 0)
		learn = await_start(L, job, info, go, parent);
	else
		lua_pushnil(L);
	code = run_body(L);
	fflush(NULL);
	exit_run(job, info, next_ms, learn, code);
}

/* ---- self-fencing ----
 *
 * Two timers on CLOCK_BOOTTIME, both re-armed whenever the parent pushes the
 * deadline forward.  At the kill time the first delivers a signal whose
 * handler SIGKILLs the child's whole process group, so programs started by
 * ctx.exec die with it; a moment later the second delivers SIGKILL to the
 * child itself, which works even when the child is stopped and cannot run
 * a handler (its exec'd children then get SIGKILL through PR_SET_PDEATHSIG).
 */

#define FENCE_BACKSTOP_MS 20


static void arm(int64_t stop_ms)
{
	struct itimerspec its = { 0 };
	int64_t kill_ms = stop_ms + cs.fence_slack_ms;

	its.it_value.tv_sec = kill_ms / 1000;
	its.it_value.tv_nsec = (kill_ms % 1000) * 1000000;
	timer_settime(cs.fence_group_timer, TIMER_ABSTIME, &its, NULL);   /* async-signal-safe */
	kill_ms += FENCE_BACKSTOP_MS;
	its.it_value.tv_sec = kill_ms / 1000;
	its.it_value.tv_nsec = (kill_ms % 1000) * 1000000;
	timer_settime(cs.fence_timer, TIMER_ABSTIME, &its, NULL);
}

static void on_fence_kill(int sig)
{
	(void)sig;
	kill(0, SIGKILL);               /* the child's process group, itself included */
}

static void on_fence_push(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	if (!cs.fence_armed)
		return;
	cs.fence_stop_ms = (int64_t)(intptr_t)si->si_value.sival_ptr;
	arm(cs.fence_stop_ms);
}

int child_fence(int64_t stop_ms, int64_t slack_ms, int64_t timeout_stop_ms)
{
	struct sigevent sev = { 0 };
	struct sigaction sa = { 0 };

	cs.run_stop_ms = timeout_stop_ms;
	sa.sa_sigaction = on_fence_push;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(CHILD_FENCE_SIGNAL, &sa, NULL) < 0)
		return -1;
	if (stop_ms <= 0)
		return 0;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_fence_kill;
	sigemptyset(&sa.sa_mask);
	if (sigaction(CHILD_FENCE_KILL_SIGNAL, &sa, NULL) < 0)
		return -1;
	sev.sigev_notify = SIGEV_SIGNAL;
	sev.sigev_signo = CHILD_FENCE_KILL_SIGNAL;
	if (timer_create(CLOCK_BOOTTIME, &sev, &cs.fence_group_timer) < 0)
		return -1;
	sev.sigev_signo = SIGKILL;
	if (timer_create(CLOCK_BOOTTIME, &sev, &cs.fence_timer) < 0)
		return -1;
	cs.fence_slack_ms = slack_ms;
	cs.fence_stop_ms = stop_ms;
	arm(stop_ms);
	cs.fence_armed = 1;
	return 0;
}

void child_fence_start(int64_t stop_ms, int64_t timeout_stop_ms)
{
	sigset_t set, old;

	cs.run_stop_ms = timeout_stop_ms;
	if (!stop_ms)
		return;
	/* A push may come meanwhile: one of the two wins, both are current. */
	child_fence_sigset(&set);
	sigprocmask(SIG_BLOCK, &set, &old);
	if (cs.fence_armed && stop_ms != cs.fence_stop_ms) {
		cs.fence_stop_ms = stop_ms;
		arm(stop_ms);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
}

/* The body is over: nothing to fence any more (a deadline now would kill
 * a process that only exits). */
static void fence_off(void)
{
	if (!cs.fence_armed)
		return;
	cs.fence_armed = 0;
	timer_delete(cs.fence_group_timer);
	timer_delete(cs.fence_timer);
}

double child_left_s(void)
{
	int64_t stop = 0, now = clock_boot_ms();

	if (cs.fence_armed)
		stop = cs.fence_stop_ms;
	if (cs.run_stop_ms && (!stop || cs.run_stop_ms < stop))
		stop = cs.run_stop_ms;
	if (!stop)
		return HUGE_VAL;
	return stop > now ? (stop - now) / 1000.0 : 0.0;
}

/* ---- log records, sleep ---- */

void child_log(const char *rec, size_t n)
{
	int fd = cs.log_fd >= 0 ? cs.log_fd : STDERR_FILENO;

	/* One write per record: a pipe keeps writes up to PIPE_BUF whole. */
	for (size_t off = 0; off < n;) {
		ssize_t w = write(fd, rec + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			break;
		off += (size_t)w;
	}
}

void child_sleep(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (time_t)s) * 1e9) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* ---- exec ---- */

/* Reads what is there: 0 at EOF, 1 when more may come, -1 out of memory. */
static int drain(int fd, struct child_buf *g)
{
	char chunk[4096];

	for (;;) {
		ssize_t r = read(fd, chunk, sizeof chunk);
		if (r > 0) {
			if (g->n + (size_t)r > g->cap) {
				size_t cap = (g->cap ? g->cap * 2 : 8192) + (size_t)r;
				char *nb = realloc(g->b, cap);
				if (!nb)
					return -1;
				g->b = nb;
				g->cap = cap;
			}
			memcpy(g->b + g->n, chunk, (size_t)r);
			g->n += (size_t)r;
			continue;
		}
		if (r == 0)
			return 0;
		if (errno == EINTR)
			continue;
		return 1;                       /* EAGAIN: more later */
	}
}

static __attribute__((noreturn)) void exec_child(char **argv, pid_t parent, int out, int err)
{
	sigset_t none;
	const char *why;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* Dies with the run, however the run ends (self-fencing too). */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(127);
	dup2(out, STDOUT_FILENO);
	dup2(err, STDERR_FILENO);
	fcntl(STDOUT_FILENO, F_SETFL, 0);
	fcntl(STDERR_FILENO, F_SETFL, 0);
	execvp(argv[0], argv);
	why = strerror(errno);
	if (write(STDERR_FILENO, argv[0], strlen(argv[0])) < 0 || write(STDERR_FILENO, ": ", 2) < 0 ||
	    write(STDERR_FILENO, why, strlen(why)) < 0)
		_exit(127);
	_exit(127);
}

int child_exec(char **argv, double timeout_s, struct child_buf *go, struct child_buf *ge)
{
	int out[2] = { -1, -1 }, err[2] = { -1, -1 }, status = 0;
	int64_t deadline, kill_at = 0;
	int open_out = 1, open_err = 1, timed_out = 0, exited = 0;
	pid_t pid, parent = getpid();

	if (pipe2(out, O_CLOEXEC | O_NONBLOCK) < 0 || pipe2(err, O_CLOEXEC | O_NONBLOCK) < 0)
		goto fail;
	pid = fork();
	if (pid < 0)
		goto fail;
	if (pid == 0)
		exec_child(argv, parent, out[1], err[1]);
	close(out[1]);
	close(err[1]);
	deadline = timeout_s > 0 ? clock_mono_ms() + (int64_t)(timeout_s * 1000) : 0;
	while (!exited || open_out || open_err) {
		struct pollfd p[2] = { { out[0], POLLIN, 0 }, { err[0], POLLIN, 0 } };
		int wait_ms = 50;
		int64_t now = clock_mono_ms();

		if (!exited && waitpid(pid, &status, WNOHANG) == pid)
			exited = 1;
		if (exited) {
			/* All it wrote before exiting is in the pipes; a grandchild
			 * that kept them open does not hold us up. */
			if (open_out)
				drain(out[0], go);
			if (open_err)
				drain(err[0], ge);
			break;
		}
		if (deadline && now >= deadline && !timed_out) {
			timed_out = 1;
			kill(pid, SIGTERM);
			kill_at = now + 1000;
		}
		if (kill_at && now >= kill_at) {
			kill(pid, SIGKILL);
			kill_at = 0;
		}
		if (deadline && !timed_out && deadline - now < wait_ms)
			wait_ms = (int)(deadline - now);
		p[0].fd = open_out ? out[0] : -1;
		p[1].fd = open_err ? err[0] : -1;
		if (poll(p, 2, wait_ms < 0 ? 0 : wait_ms) > 0) {
			if (open_out && p[0].revents && drain(out[0], go) == 0)
				open_out = 0;
			if (open_err && p[1].revents && drain(err[0], ge) == 0)
				open_err = 0;
		}
	}
	close(out[0]);
	close(err[0]);
	if (timed_out)
		return 124;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
fail:
	{
		int e = errno;
		for (int i = 0; i < 2; i++) {
			if (out[i] >= 0)
				close(out[i]);
			if (err[i] >= 0)
				close(err[i]);
		}
		errno = e;
		return -1;
	}
}

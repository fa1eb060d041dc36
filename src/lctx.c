/* lctx.c - the primitives behind ctx in a run's child: log records, sleep,
 * exec without a shell, the time left before the body is stopped, and the
 * self-fencing kill timer on CLOCK_BOOTTIME. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>

#include "lx.h"
#include "runner.h"

int lx_child_log_fd = -1;

static int64_t boot_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
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

static timer_t fence_group_timer, fence_timer;
static volatile sig_atomic_t fence_armed;
static volatile int64_t fence_stop_ms;  /* boottime: the parent stops the body here */
static int64_t fence_slack_ms;           /* and the child kills itself this much later */
static int64_t run_stop_ms;              /* boottime: the run's own timeout, 0 = none */

static void arm(int64_t stop_ms)
{
	struct itimerspec its = { 0 };
	int64_t kill_ms = stop_ms + fence_slack_ms;

	its.it_value.tv_sec = kill_ms / 1000;
	its.it_value.tv_nsec = (kill_ms % 1000) * 1000000;
	timer_settime(fence_group_timer, TIMER_ABSTIME, &its, NULL);   /* async-signal-safe */
	kill_ms += FENCE_BACKSTOP_MS;
	its.it_value.tv_sec = kill_ms / 1000;
	its.it_value.tv_nsec = (kill_ms % 1000) * 1000000;
	timer_settime(fence_timer, TIMER_ABSTIME, &its, NULL);
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
	if (!fence_armed)
		return;
	fence_stop_ms = (int64_t)(intptr_t)si->si_value.sival_ptr;
	arm(fence_stop_ms);
}

int runner_fence_child(int64_t stop_ms, int64_t slack_ms, int64_t timeout_stop_ms)
{
	struct sigevent sev = { 0 };
	struct sigaction sa = { 0 };

	run_stop_ms = timeout_stop_ms;
	sa.sa_sigaction = on_fence_push;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	if (sigaction(RUNNER_FENCE_SIGNAL, &sa, NULL) < 0)
		return -1;
	if (stop_ms <= 0)
		return 0;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_fence_kill;
	sigemptyset(&sa.sa_mask);
	if (sigaction(RUNNER_FENCE_KILL_SIGNAL, &sa, NULL) < 0)
		return -1;
	sev.sigev_notify = SIGEV_SIGNAL;
	sev.sigev_signo = RUNNER_FENCE_KILL_SIGNAL;
	if (timer_create(CLOCK_BOOTTIME, &sev, &fence_group_timer) < 0)
		return -1;
	sev.sigev_signo = SIGKILL;
	if (timer_create(CLOCK_BOOTTIME, &sev, &fence_timer) < 0)
		return -1;
	fence_slack_ms = slack_ms;
	fence_stop_ms = stop_ms;
	arm(stop_ms);
	fence_armed = 1;
	return 0;
}

/* core.lease_left(): seconds until the body will be stopped; math.huge when
 * nothing will stop it. */
static int l_lease_left(lua_State *L)
{
	int64_t stop = 0, now = boot_ms();

	if (fence_armed)
		stop = fence_stop_ms;
	if (run_stop_ms && (!stop || run_stop_ms < stop))
		stop = run_stop_ms;
	if (!stop)
		lua_pushnumber(L, HUGE_VAL);
	else
		lua_pushnumber(L, stop > now ? (stop - now) / 1000.0 : 0.0);
	return 1;
}

/* ---- log records, sleep, exit ---- */

static int l_child_log(lua_State *L)
{
	size_t n;
	const char *s = luaL_checklstring(L, 1, &n);
	int fd = lx_child_log_fd >= 0 ? lx_child_log_fd : STDERR_FILENO;
	char *line = malloc(n + 1);

	if (!line)
		return luaL_error(L, "out of memory");
	memcpy(line, s, n);
	line[n] = '\n';
	/* One write per record: a pipe keeps writes up to PIPE_BUF whole. */
	for (size_t off = 0; off <= n;) {
		ssize_t w = write(fd, line + off, n + 1 - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			break;
		off += (size_t)w;
	}
	free(line);
	return 0;
}

static int l_sleep(lua_State *L)
{
	double s = luaL_checknumber(L, 1);
	struct timespec ts = { (time_t)s, (long)((s - (time_t)s) * 1e9) };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	return 0;
}

static int l_child_exit(lua_State *L)
{
	int code = lua_isboolean(L, 1) ? (lua_toboolean(L, 1) ? 0 : 1)
	                               : (int)luaL_optinteger(L, 1, 0);
	fflush(NULL);
	_exit(code);
}

/* ---- exec ---- */

struct grow {
	char *b;
	size_t n, cap;
};

static int drain(int fd, struct grow *g)
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
			return 0;               /* EOF */
		if (errno == EINTR)
			continue;
		return 1;                       /* EAGAIN: more later */
	}
}

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* core.exec(argv, timeout_seconds|nil) -> ok, exit_code, stdout, stderr.
 * No shell.  Exit code 124 after a timeout, 127 when argv[0] cannot run,
 * 128 + N when killed by signal N. */
static int l_exec(lua_State *L)
{
	int n, out[2] = { -1, -1 }, err[2] = { -1, -1 }, status = 0, code;
	double timeout = luaL_optnumber(L, 2, 0);
	char **argv;
	struct grow go = { 0 }, ge = { 0 };
	int64_t deadline, kill_at = 0;
	int open_out = 1, open_err = 1, timed_out = 0, exited = 0;
	pid_t pid, parent;

	luaL_checktype(L, 1, LUA_TTABLE);
	n = (int)luaL_len(L, 1);
	if (n < 1)
		return luaL_argerror(L, 1, "argv is empty");
	argv = lua_newuserdatauv(L, sizeof(char *) * (n + 1), 0);
	lua_createtable(L, n, 0);       /* keeps the argument strings alive */
	for (int i = 0; i < n; i++) {
		lua_geti(L, 1, i + 1);
		if (!lua_isstring(L, -1))
			return luaL_error(L, "ctx.exec: argv[%d] is a %s, expected a string", i + 1,
			                  luaL_typename(L, -1));
		lua_pushstring(L, lua_tostring(L, -1));
		argv[i] = (char *)lua_tostring(L, -1);
		lua_rawseti(L, -3, i + 1);
		lua_pop(L, 1);
	}
	argv[n] = NULL;
	if (pipe2(out, O_CLOEXEC | O_NONBLOCK) < 0 || pipe2(err, O_CLOEXEC | O_NONBLOCK) < 0)
		goto sysfail;
	parent = getpid();
	pid = fork();
	if (pid < 0)
		goto sysfail;
	if (pid == 0) {
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* Dies with the run, however the run ends (self-fencing too). */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(127);
		dup2(out[1], STDOUT_FILENO);
		dup2(err[1], STDERR_FILENO);
		fcntl(STDOUT_FILENO, F_SETFL, 0);
		fcntl(STDERR_FILENO, F_SETFL, 0);
		execvp(argv[0], argv);
		{
			const char *why = strerror(errno);
			if (write(STDERR_FILENO, argv[0], strlen(argv[0])) < 0 ||
			    write(STDERR_FILENO, ": ", 2) < 0 ||
			    write(STDERR_FILENO, why, strlen(why)) < 0)
				_exit(127);
		}
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	out[1] = err[1] = -1;
	deadline = timeout > 0 ? mono_ms() + (int64_t)(timeout * 1000) : 0;
	while (!exited || open_out || open_err) {
		struct pollfd p[2] = { { out[0], POLLIN, 0 }, { err[0], POLLIN, 0 } };
		int wait_ms = 50;
		int64_t now = mono_ms();

		if (!exited && waitpid(pid, &status, WNOHANG) == pid)
			exited = 1;
		if (exited) {
			/* All it wrote before exiting is in the pipes; a grandchild
			 * that kept them open does not hold us up. */
			if (open_out)
				drain(out[0], &go);
			if (open_err)
				drain(err[0], &ge);
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
			if (open_out && p[0].revents && drain(out[0], &go) == 0)
				open_out = 0;
			if (open_err && p[1].revents && drain(err[0], &ge) == 0)
				open_err = 0;
		}
	}
	close(out[0]);
	close(err[0]);
	if (timed_out)
		code = 124;
	else if (WIFEXITED(status))
		code = WEXITSTATUS(status);
	else
		code = 128 + WTERMSIG(status);
	lua_pushboolean(L, code == 0 && !timed_out);
	lua_pushinteger(L, code);
	lua_pushlstring(L, go.b ? go.b : "", go.n);
	lua_pushlstring(L, ge.b ? ge.b : "", ge.n);
	free(go.b);
	free(ge.b);
	return 4;
sysfail:
	{
		int e = errno;
		for (int i = 0; i < 2; i++) {
			if (out[i] >= 0)
				close(out[i]);
			if (err[i] >= 0)
				close(err[i]);
		}
		return luaL_error(L, "ctx.exec: %s", strerror(e));
	}
}

void lx_ctx_lib(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{ "child_log", l_child_log },
		{ "child_exit", l_child_exit },
		{ "sleep", l_sleep },
		{ "exec", l_exec },
		{ "lease_left", l_lease_left },
		{ NULL, NULL },
	};
	luaL_setfuncs(L, fns, 0);
}

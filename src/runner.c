/* runner.c - fork a child per run, carry its output to the log, stop it.
 *
 * The child is the leader of its own process group, so stopping a run also
 * stops whatever its ctx.exec started.  It never returns into scheduler
 * code: it closes every descriptor it does not need (database sockets
 * above all), runs the body through leash.run, and ends with _exit().
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>

#include "log.h"
#include "lx.h"
#include "runner.h"

static long next_run_id;

static int64_t clock_ms(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t runner_mono_ms(void) { return clock_ms(CLOCK_MONOTONIC); }
int64_t runner_boot_ms(void) { return clock_ms(CLOCK_BOOTTIME); }
int64_t runner_wall_ms(void) { return clock_ms(CLOCK_REALTIME); }

static void child_main(lua_State *L, struct job *job, const struct run_info *info,
                       long id, int fds[3][2])
{
	sigset_t fence;
	int ok = 0, devnull;

	setpgid(0, 0);
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP)
			signal(s, SIG_DFL);
	/* The fence signals stay blocked (as the parent had them at fork)
	 * until their handlers are in place: a deadline push that arrives
	 * now waits instead of killing the run with its default action. */
	runner_fence_sigset(&fence);
	sigprocmask(SIG_SETMASK, &fence, NULL);

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
	syscall(SYS_close_range, 4U, ~0U, 0U);
	lx_child_log_fd = 3;
	setvbuf(stdout, NULL, _IOLBF, 0);

	if (runner_fence_child(info->fence_stop_ms, info->fence_slack_ms,
	                       job->timeout_ms ? runner_boot_ms() + job->timeout_ms : 0) < 0)
		fprintf(stderr, "leash: cannot arm the self-fencing timer: %s\n", strerror(errno));
	sigemptyset(&fence);
	sigprocmask(SIG_SETMASK, &fence, NULL);

	lua_getglobal(L, "require");
	lua_pushstring(L, "leash.run");
	if (lx_pcall(L, 1, 1) == LUA_OK) {
		lua_getfield(L, -1, "main");
		lua_rawgeti(L, LUA_REGISTRYINDEX, job->ref);
		lua_createtable(L, 0, 4);
		lua_pushstring(L, info->replica);
		lua_setfield(L, -2, "replica");
		lua_pushinteger(L, info->token);
		lua_setfield(L, -2, "token");
		lua_pushinteger(L, id);
		lua_setfield(L, -2, "run_id");
		if (info->scheduled_ms)
			lua_pushinteger(L, info->scheduled_ms / 1000);
		else
			lua_pushnil(L);
		lua_setfield(L, -2, "scheduled_at");
		if (lx_pcall(L, 2, 1) == LUA_OK)
			ok = lua_toboolean(L, -1);
		else
			fprintf(stderr, "%s\n", lua_tostring(L, -1));
	} else {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
	}
	fflush(NULL);
	_exit(ok ? 0 : 1);
}

void runner_fence_sigset(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, RUNNER_FENCE_SIGNAL);
	sigaddset(set, RUNNER_FENCE_KILL_SIGNAL);
}

struct run *runner_start(lua_State *L, struct job *job, const struct run_info *info)
{
	int fds[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } };
	struct run *r = calloc(1, sizeof *r);
	pid_t pid;

	if (!r)
		goto fail;
	for (int i = 0; i < 3; i++)
		if (pipe2(fds[i], O_CLOEXEC) < 0)
			goto fail;
	r->id = ++next_run_id;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		goto fail;
	if (pid == 0)
		child_main(L, job, info, r->id, fds);
	setpgid(pid, pid);              /* also here, so a kill right away finds the group */
	r->pid = pid;
	r->job = job;
	r->grace_ms = info->grace_ms;
	r->started_ms = runner_mono_ms();
	r->timeout_at = job->timeout_ms ? r->started_ms + job->timeout_ms : 0;
	for (int i = 0; i < 3; i++) {
		close(fds[i][1]);
		r->fd[i] = fds[i][0];
		fcntl(r->fd[i], F_SETFL, O_NONBLOCK);
	}
	if (info->token)
		log_msg(LOG_INFO, job->name, r->id, "started pid=%d token=%lld", (int)pid,
		        (long long)info->token);
	else
		log_msg(LOG_INFO, job->name, r->id, "started pid=%d", (int)pid);
	return r;
fail:
	log_msg(LOG_ERROR, job->name, 0, "cannot start a run: %s", strerror(errno));
	for (int i = 0; i < 3; i++)
		for (int k = 0; k < 2; k++)
			if (fds[i][k] >= 0)
				close(fds[i][k]);
	free(r);
	return NULL;
}

/* A ctx.log record: level, message, then key/value pairs, tab-separated
 * with \\, \t and \n escaped (lua/leash/run.lua writes them). */
static void unescape(char *s)
{
	char *w = s;

	for (char *p = s; *p; p++) {
		if (*p == '\\' && p[1]) {
			p++;
			*w++ = *p == 't' ? '\t' : *p == 'n' ? '\n' : *p;
		} else {
			*w++ = *p;
		}
	}
	*w = '\0';
}

static void log_record(struct run *r, char *line)
{
	const char *parts[66];
	size_t n = 0;
	int lv;
	char *save = NULL;

	for (char *tok = strtok_r(line, "\t", &save); tok && n < 65;
	     tok = strtok_r(NULL, "\t", &save)) {
		unescape(tok);
		parts[n++] = tok;
	}
	if (n < 2 || (lv = log_level_parse(parts[0])) < 0) {
		log_msg(LOG_WARN, r->job->name, r->id, "%s", n ? parts[0] : "");
		return;
	}
	log_rec(lv, r->job->name, r->id, parts[1], parts + 2, (n - 2) / 2);
}

static void emit(struct run *r, int i, char *line)
{
	static const char *const out[] = { "stream", "stdout" };
	static const char *const err[] = { "stream", "stderr" };

	if (i == 2)
		log_record(r, line);
	else
		log_rec(i == 0 ? LOG_INFO : LOG_WARN, r->job->name, r->id, line,
		        i == 0 ? out : err, 1);
}

void runner_read(struct run *r, int i)
{
	struct linebuf *lb = &r->lb[i];

	for (;;) {
		ssize_t got = read(r->fd[i], lb->b + lb->n, sizeof lb->b - 1 - lb->n);
		char *start, *nl;

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			if (got == 0 || errno != EAGAIN) {
				if (lb->n) {    /* a last line without newline */
					lb->b[lb->n] = '\0';
					emit(r, i, lb->b);
					lb->n = 0;
				}
				close(r->fd[i]);
				r->fd[i] = -1;
			}
			return;
		}
		lb->n += (size_t)got;
		lb->b[lb->n] = '\0';
		start = lb->b;
		while ((nl = memchr(start, '\n', lb->n - (size_t)(start - lb->b)))) {
			*nl = '\0';
			emit(r, i, start);
			start = nl + 1;
		}
		lb->n -= (size_t)(start - lb->b);
		memmove(lb->b, start, lb->n);
		if (lb->n == sizeof lb->b - 1) {    /* a line too long: log it in pieces */
			lb->b[lb->n] = '\0';
			emit(r, i, lb->b);
			lb->n = 0;
		}
	}
}

void runner_stop(struct run *r, const char *reason)
{
	if (r->exited || r->kill_at)
		return;
	r->stop_reason = reason;
	r->kill_at = runner_mono_ms() + r->grace_ms;
	log_msg(LOG_WARN, r->job->name, r->id, "stopping (%s): SIGTERM, SIGKILL in %lldms",
	        reason, (long long)r->grace_ms);
	kill(-r->pid, SIGTERM);
}

int64_t runner_tick(struct run *r, int64_t now)
{
	if (r->exited)
		return INT64_MAX;
	if (r->kill_at) {
		if (now >= r->kill_at) {
			kill(-r->pid, SIGKILL);
			r->kill_at = INT64_MAX;  /* sent; nothing more to do */
			return INT64_MAX;
		}
		return r->kill_at;
	}
	if (r->timeout_at) {
		if (now >= r->timeout_at) {
			runner_stop(r, "timeout");
			return r->kill_at;
		}
		return r->timeout_at;
	}
	return INT64_MAX;
}

void runner_push_fence(struct run *r, int64_t stop_ms)
{
	union sigval v;

	if (r->exited)
		return;
	v.sival_ptr = (void *)(intptr_t)stop_ms;
	sigqueue(r->pid, RUNNER_FENCE_SIGNAL, v);
}

void runner_exited(struct run *r, int status)
{
	r->exited = 1;
	r->status = status;
	/* Whatever the body started dies with it. */
	kill(-r->pid, SIGKILL);
}

int runner_done(struct run *r)
{
	return r->exited && r->fd[0] < 0 && r->fd[1] < 0 && r->fd[2] < 0;
}

void runner_report(struct run *r, int *failed)
{
	double secs = (runner_mono_ms() - r->started_ms) / 1000.0;
	int st = r->status;

	*failed = 1;
	if (r->stop_reason) {
		log_msg(LOG_WARN, r->job->name, r->id, "stopped (%s) after %.3fs", r->stop_reason,
		        secs);
	} else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		*failed = 0;
		log_msg(LOG_INFO, r->job->name, r->id, "finished in %.3fs", secs);
	} else if (WIFEXITED(st) && WEXITSTATUS(st) == 1) {
		log_msg(LOG_ERROR, r->job->name, r->id, "failed after %.3fs: the body raised an error",
		        secs);
	} else if (WIFEXITED(st)) {
		log_msg(LOG_ERROR, r->job->name, r->id, "failed after %.3fs: exit status %d", secs,
		        WEXITSTATUS(st));
	} else if (WIFSIGNALED(st)) {
		log_msg(LOG_ERROR, r->job->name, r->id, "failed after %.3fs: killed by signal %d (%s)",
		        secs, WTERMSIG(st), strsignal(WTERMSIG(st)));
	}
}

void runner_free(struct run *r)
{
	for (int i = 0; i < 3; i++)
		if (r->fd[i] >= 0)
			close(r->fd[i]);
	free(r);
}

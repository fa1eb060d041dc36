/* child.h - everything after fork(): a run's child process.
 *
 * The child resets what it inherited, arms its self-fencing timers, runs the
 * job's body through leash.run with a ctx, and ends with _exit(); it never
 * returns into scheduler code.  The rest are the primitives ctx is built on
 * (bind/ctx.c hands them to Lua). */
#ifndef LEASH_CHILD_H
#define LEASH_CHILD_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <lua.h>

struct cfg;
struct job;
struct run_info;

/* What a run's process is not given (leash's own secrets, leash's own user),
 * decided once in the parent; child_main applies it before anything else.
 *
 * The hidden variables are the ones c's [http] token_env and [mssql]
 * password_env name and, with [store] provider = postgres, every PG* one
 * (libpq reads them).  The parent keeps them (it reconnects, and `leash
 * _http` reads the token); a run's environment lacks them, their values
 * zeroed in its copy of the environment block (/proc/PID/environ), and the
 * load sandbox's os.getenv does not see them. */
void child_hide_env(const struct cfg *c);
int child_env_hidden(const char *name);

/* c's [leash] run_as (empty: none), looked up now: a run's process takes on
 * its uid, gid, groups, HOME, USER and LOGNAME, works in its home (or /),
 * and keeps no capability.  0; 1 when runs will be root's (no run_as and
 * leash is root, or run_as is root); or -1 with the reason in err: the user
 * is gone, or leash lacks a capability it needs to switch to it
 * (CAP_SETUID, CAP_SETGID) or to stop a run that did (CAP_KILL). */
int child_run_as(const struct cfg *c, char *err, size_t errlen);

/* The parent pushes a child's stop deadline forward with this real-time
 * signal; its value is the new deadline in CLOCK_BOOTTIME milliseconds. */
#define CHILD_FENCE_SIGNAL (SIGRTMIN + 1)
/* A child's own fence timer raises this to kill its process group. */
#define CHILD_FENCE_KILL_SIGNAL (SIGRTMIN + 2)

/* The fence signals.  The parent keeps them blocked all along, so that a
 * child inherits them blocked across fork() and unblocks them only once its
 * handlers are set: a push never meets a child that would die of it. */
void child_fence_sigset(sigset_t *);

/* What the parent sends a process forked ahead of its fire when the fire
 * starts (a pipe's one write). */
struct child_go {
	int64_t token;
	int64_t fence_stop_ms;          /* boottime, as run_info's */
	long run_id;
};

/* The parent's side of starting children forked ahead: the shared word they
 * sleep on, mapped once before the first is forked (0, or -1); a start
 * written to a child's go pipe (0, or -1 when the child is gone), ahead_of:
 * 0, or the time of the fire (wall clock ms) it is written ahead of (the
 * child reads it at that time by itself: not woken for it, unless the time
 * came while it was written); a start written ahead taken back out of the
 * pipe through its read end rfd (0, or -1: the child read it first, so the
 * fire started); and the wake-up of every child whose start was written
 * (once a turn). */
int child_go_init(void);
int child_go_send(int fd, const struct child_go *, int64_t ahead_of);
int child_go_take_back(int rfd);
void child_go_wake(void);

/* A child's pipes, made before it is forked (all close-on-exec): stdout,
 * stderr and log records in fds, and with go the pipe a child forked ahead
 * waits on.  0, or -1 with errno (those made are closed again).  Closing
 * leaves -1 in each, and errno as it was. */
int child_pipes(int fds[][2], int go[2]);
void child_pipes_close(int fds[][2], int go[2]);

/* The child's life: fds are the stdout, stderr and log-record pipes.  go:
 * -1, or the read end of a pipe on which the child waits, forked ahead of
 * the fire at info->scheduled_ms, for its struct child_go (the run's id and
 * token come with it), read no earlier than that time; it exits quietly
 * when the pipe closes without one. */
__attribute__((noreturn))
void child_main(lua_State *L, const struct job *job, const struct run_info *info, long run_id,
                int fds[][2], int go);

/* The parent's side, before its first fork: blocks mask (the signals it
 * takes through a signalfd) and the fence signals (so that every child
 * starts with them blocked), ignores SIGPIPE, becomes the subreaper of what
 * runs leave behind, and raises its soft RLIMIT_NOFILE for a thousand runs'
 * pipes (a run gets the old soft limit back). */
void child_parent_init(const sigset_t *mask);

/* Installs the fence handlers and arms the self-fencing kill timer; stop_ms
 * 0 = none (a push is then ignored).  timeout_stop_ms (boottime, 0 = none)
 * only bounds what child_left_s says. */
int child_fence(int64_t stop_ms, int64_t slack_ms, int64_t timeout_stop_ms);

/* A child forked ahead starts: the stop deadline the parent sent with the
 * start, and the run's own timeout (boottime, 0 = none) from now on. */
void child_fence_start(int64_t stop_ms, int64_t timeout_stop_ms);

/* Seconds until the body will be stopped (fence or timeout), or HUGE_VAL. */
double child_left_s(void);

/* Writes one ctx.log record (a line) to the parent, whole. */
void child_log(const char *rec, size_t n);

/* Sleeps s seconds, through signals. */
void child_sleep(double s);

/* What child_exec collected from one stream. */
struct child_buf {
	char *b;
	size_t n, cap;
};

/* Runs argv (no shell) to its end, collecting stdout and stderr; timeout_s
 * 0 = none.  Returns the exit code (124 after a timeout, 127 when argv[0]
 * cannot run, 128 + N when killed by signal N), or -1 with errno set when it
 * could not start.  The caller frees out->b and err->b. */
int child_exec(char **argv, double timeout_s, struct child_buf *out, struct child_buf *err);

#endif

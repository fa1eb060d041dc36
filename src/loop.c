/* loop.c - `leash run`: the single-threaded parent's poll loop.
 *
 * Each turn runs the timers (core/events.h): what the job table has due
 * (and starts it), the election's store work unless a fire is moments away
 * and what it just allowed, the HTTP server's snapshot, a reload's check.
 * Then it sleeps in epoll_wait() until the nearest deadline or until a
 * watched descriptor is ready: signals through a signalfd, runs' output
 * through pipes, release events through the store's socket, the spawner's
 * answers through its own (src/launch/prefork/spawn.c).  The epoll set
 * lives across turns: a run's pipes join it when it is forked and leave as
 * they close.  Then it reaps children, finishes the runs that ended
 * (src/runs.c) and drops removed jobs.  It knows descriptors, timers and
 * signals; what a job is, is the job table's business, and what a run is,
 * runs.c's and src/launch/'s.
 */
#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch/child.h"
#include "core/clock.h"
#include "web/http.h"
#include "core/log.h"
#include "loop.h"
#include "runs.h"
#include "core/lx.h"
#include "cluster/hooks.h"
#include "launch/runner.h"
#include "plan/job.h"
#include "plan/sched.h"
#include "cluster/singleton.h"
#include "launch/prefork/spawn.h"
#include "cluster/owner.h"

/* ---- runs ---- */

/* Children that exited, by pid (what ctx.exec left behind is reaped too:
 * leash is their subreaper). */
static void reap_children(struct loop *lp)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		struct run *r;

		if (http_reaped(&lp->http, pid, status) || spawn_reaped(pid, status) ||
		    job_check_reaped(lp->check, pid, status))
			continue;
		for (r = lp->runs; r && r->pid != pid; r = r->next)
			;
		if (r)
			runner_exited(r, status);
		else
			runner_reaped_unknown(pid, status);
	}
}

static int64_t due(struct loop *lp)
{
	int64_t ms = sched_start_due(&lp->sched);

	runner_wake();          /* every run just started, at once */
	return runs_tick(lp, ms);
}

/* A reload checks jobs/ in a forked process while the loop goes on
 * (src/plan/job.c), then takes the files in. */
static void reload_start(struct loop *lp)
{
	lp->reload_again = 0;
	lp->check = job_check_start(lp->L, lp->cfg->jobs, lp->cfg->load_timeout_ms, lp->epfd,
	                            &lp->check_w);
	if (!lp->check)
		log_msg(LOG_ERROR, NULL, 0, "reloading %s: out of memory", lp->cfg->jobs);
}

/* The reload's turn: ms until it wants another, INT64_MAX when none goes;
 * 0 too when it just ended (the job table's turn, at once). */
static int64_t reload_turn(struct loop *lp)
{
	int64_t left;

	if (!lp->check)
		return INT64_MAX;
	if ((left = job_check_turn(lp->check)) >= 0)
		return left;
	sched_load_checked(&lp->sched, 1, lp->check);
	job_check_free(lp->check);
	lp->check = NULL;
	lp->reloads++;
	if (lp->reload_again) {
		log_msg(LOG_INFO, NULL, 0, "reloading %s again: a SIGHUP came meanwhile",
		        lp->cfg->jobs);
		reload_start(lp);
	}
	return 0;
}

/* Whether a signal but SIGCHLD came. */
static int on_signal(struct loop *lp)
{
	struct signalfd_siginfo si;
	int other = 0;

	while (read(lp->sigfd, &si, sizeof si) == sizeof si) {
		other |= si.ssi_signo != SIGCHLD;
		switch (si.ssi_signo) {
		case SIGCHLD:
			reap_children(lp);
			break;
		case SIGHUP:
			log_msg(LOG_INFO, NULL, 0, "SIGHUP: reloading %s", lp->cfg->jobs);
			if (lp->check)
				lp->reload_again = 1;
			else if (!lp->stopping)
				reload_start(lp);
			break;
		case SIGTERM:
		case SIGINT:
			if (lp->stopping) {
				lp->stopping = 2;
				log_msg(LOG_WARN, NULL, 0, "%s again: killing every run now",
				        strsignal(si.ssi_signo));
				for (struct run *r = lp->runs; r; r = r->next)
					runner_kill(r);
				break;
			}
			lp->stopping = 1;
			lp->sched.stopping = 1;
			job_check_free(lp->check);      /* the reload is dropped */
			lp->check = NULL;
			log_msg(LOG_INFO, NULL, 0, "%s: stopping", strsignal(si.ssi_signo));
			/* (The processes forked ahead go with the job table's
			 * next turn; those still asked for, now: a spawner that
			 * does not answer cannot hold the stop up.) */
			spawn_stop();
			for (struct run *r = lp->runs; r; r = r->next)
				if (!runner_prepared(r))
					runner_stop(r, RUN_STOP_STOPPED, "shutdown");
			break;
		}
	}
	return other;
}

static int on_sigfd(struct watch *w)
{
	return on_signal(LOOP_OF(w, sig_w));
}

/* The store's notices (PostgreSQL's NOTIFY: a lease released). */
static int on_store(struct watch *w)
{
	singleton_events(&LOOP_OF(w, store_w)->sg);
	return 1;
}

/* What the reload's checking process said. */
static int on_check(struct watch *w)
{
	return reload_turn(LOOP_OF(w, check_w)) == 0;
}

/* The spawner's answers: a run waiting for its child starts as it comes. */
static int on_spawner(struct watch *w)
{
	(void)w;
	spawn_collect();
	runner_wake();
	return 0;
}

/* ---- timers: each turn, in this order (core/events.h) ---- */

/* What the job table and the runs have due. */
static int64_t on_due(struct timer *t, int64_t wait_ms)
{
	return due(LOOP_OF(t, due_t));
}

/* The election's store work (unless a fire is imminent: wait_ms says),
 * then what it just allowed, measured after the store calls. */
static int64_t on_elect(struct timer *t, int64_t wait_ms)
{
	struct loop *lp = LOOP_OF(t, elect_t);
	int64_t elect_in = singleton_turn(&lp->sg, wait_ms), again = due(lp);

	for (struct run *r = lp->runs; r; r = r->next)
		singleton_push_fence(&lp->sg, r);
	return elect_in < again ? elect_in : again;
}

/* The HTTP server's snapshot (never while a fire is imminent). */
static int64_t on_http(struct timer *t, int64_t wait_ms)
{
	struct loop *lp = LOOP_OF(t, http_t);
	const struct cfg *cfg = lp->cfg;
	struct http_live live = {
		.answered_at = cfg->singleton ? lp->sg.answered_at : -1,
		.lease_ms = cfg->lease_ms, .singleton = cfg->singleton, .reloads = lp->reloads,
	};

	return http_turn(&lp->http, &live, wait_ms);
}

/* A reload's checking process: its deadline. */
static int64_t on_reload(struct timer *t, int64_t wait_ms)
{
	return reload_turn(LOOP_OF(t, reload_t));
}

/* The turn's walk over the job table and the runs waits at most this long
 * for what only runs' output and ends asked for: under a burst a thousand
 * runs end one by one, and a walk for each (800 a second, each over every
 * job twice) was a third of the parent's CPU, taken from the runs
 * starting.  What is due at a time (a fire, a renewal, a timeout) ends the
 * wait when it is due, as does anything else that comes. */
#define LOOP_BATCH_MS 5

/* Everything leash run needs before its first turn: signals, the event
 * set, the HTTP server's socket, the store, the job table.  0, or the
 * exit code with the reason logged (and everything opened closed again). */
static int loop_open(struct loop *lp)
{
	const struct cfg *cfg = lp->cfg;
	struct sched_env env;
	sigset_t mask;
	char err[512];

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	child_parent_init(&mask);
	lp->sig_w.fn = on_sigfd;
	lp->store_w.fn = on_store;
	lp->spawner_w.fn = on_spawner;
	lp->check_w.fn = on_check;
	lp->due_t.fn = on_due;
	lp->elect_t.fn = on_elect;
	lp->http_t.fn = on_http;
	lp->reload_t.fn = on_reload;
	timers_add(&lp->timers, &lp->due_t);
	if (cfg->singleton)
		timers_add(&lp->timers, &lp->elect_t);
	timers_add(&lp->timers, &lp->http_t);
	timers_add(&lp->timers, &lp->reload_t);
	lp->evfd = -1;
	lp->sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	lp->epfd = events_open();
	if (lp->sigfd < 0 || lp->epfd < 0 || events_add(lp->epfd, lp->sigfd, &lp->sig_w) < 0) {
		log_msg(LOG_ERROR, NULL, 0, "signalfd, epoll: %s", strerror(errno));
		if (lp->sigfd >= 0)
			close(lp->sigfd);
		if (lp->epfd >= 0)
			close(lp->epfd);
		return 1;
	}
	runner_watch(lp->epfd);
	spawn_watch(lp->epfd, &lp->spawner_w);
	/* A long-lived parent: large buffers (a renew_all of 1,000 names, its
	 * answer) go to mmap and back when freed; no slack at the heap's top. */
	mallopt(M_MMAP_THRESHOLD, 32 * 1024);
	mallopt(M_TOP_PAD, 0);
	mallopt(M_TRIM_THRESHOLD, 64 * 1024);
	lp->started_ms = clock_mono_ms();
	owner_id(cfg->replica, lp->owner, sizeof lp->owner);
	/* The socket first: a port in use stops leash before any job runs. */
	if (http_open(&lp->http, cfg, err, sizeof err) < 0 ||
	    (cfg->singleton && singleton_init(&lp->sg, cfg, &lp->sched, lp->owner, err,
	                                      sizeof err) < 0)) {
		log_msg(LOG_ERROR, NULL, 0, "%s", err);
		http_close(&lp->http);
		runner_watch(-1);
		close(lp->epfd);
		close(lp->sigfd);
		return 2;
	}
	runs_env(lp, &env);
	lp->hooks = (struct hooks){ .L = lp->L, .replica = lp->owner, .grace_ms = cfg->grace_ms,
	                            .runs = &lp->runs };
	if (cfg->singleton) {
		lp->hooks.record = singleton_health;
		lp->hooks.arg = &lp->sg;
	}
	sched_init(&lp->sched, lp->L, cfg->jobs, &env);
	lp->sched.load_timeout_ms = cfg->load_timeout_ms;
	log_msg(LOG_INFO, NULL, 0, "leash %s starting: replica %s, config %s, jobs %s, singleton %s",
	        LEASH_VERSION, lp->owner, cfg->file, cfg->jobs, cfg->singleton ? "on" : "off");
	/* Loaded once here, so each forked run finds it compiled. */
	if (lx_require(lp->L, "leash.run") != LUA_OK) {
		char msg[4096];
		log_msg(LOG_ERROR, NULL, 0, "%s", lx_report(lp->L, msg, sizeof msg));
	} else {
		lua_pop(lp->L, 1);
	}
	sched_load(&lp->sched, 0);
	return 0;
}

/* The store's socket in the event set: it changes when the store
 * reconnects, maybe under the same number (told apart by its inode; the
 * old one left the set as it closed). */
static void watch_store(struct loop *lp)
{
	int fd = lp->cfg->singleton ? singleton_event_fd(&lp->sg) : -1;
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0) {
		lp->evfd = -1;
	} else if (fd != lp->evfd || st.st_ino != lp->evino) {
		if (events_add(lp->epfd, fd, &lp->store_w) == 0 || errno == EEXIST) {
			lp->evfd = fd;
			lp->evino = st.st_ino;
		}
	}
}

/* One turn: the timers (what is due first, then the election unless a
 * fire is imminent, then the HTTP server and a reload); then the events
 * until what is due next.  1: stopped (every run over), 0: go on, -1: the wait
 * failed. */
static int loop_turn(struct loop *lp)
{
	int64_t turn_ms = clock_mono_ms(), now, batch_end;
	int64_t wait_ms = timers_run(lp->timers);
	int urgent;

	if (lp->stopping && !lp->runs)
		return 1;
	/* NOTIFYs libpq read in the turn's store calls (epoll sees none): now. */
	if (singleton_events(&lp->sg) > 0)
		wait_ms = 0;
	watch_store(lp);
	runner_wake();          /* what else started this turn */
	/* Runs' output and ends: more of them until the batch's end (and
	 * never past what is due). */
	now = clock_mono_ms();
	batch_end = turn_ms + LOOP_BATCH_MS;
	urgent = events_wait(lp->epfd, wait_ms);
	if (batch_end > now + wait_ms)
		batch_end = now + wait_ms;
	while (urgent == 0 && (now = clock_mono_ms()) < batch_end)
		urgent = events_wait(lp->epfd, batch_end - now);
	if (urgent < 0)
		return -1;
	runs_finish(lp);
	sched_drop_removed(&lp->sched);
	return 0;
}

/* The end: after a clean stop (rc 0) the ledger gets what it still lacks
 * and what is held is released in one batch; then every job leaves the
 * election, which only forgets it.  Otherwise no store calls. */
static int loop_close(struct loop *lp, int rc)
{
	const struct cfg *cfg = lp->cfg;

	if (rc == 0) {
		sched_stopped(&lp->sched);
		if (cfg->singleton) {
			singleton_flush(&lp->sg);
			singleton_release_all(&lp->sg);
		}
	} else {
		lp->sched.env.stand = NULL;
	}
	sched_free(&lp->sched);
	if (cfg->singleton)
		singleton_free(&lp->sg, clock_mono_ms() - lp->started_ms);
	if (rc == 0)
		log_msg(LOG_INFO, NULL, 0, "stopped");
	job_check_free(lp->check);
	spawn_stop();
	spawn_watch(-1, NULL);
	http_close(&lp->http);
	runner_watch(-1);
	close(lp->epfd);
	close(lp->sigfd);
	return rc;
}

int loop_run(lua_State *L, const struct cfg *cfg)
{
	struct loop lp = { .L = L, .cfg = cfg, .sigfd = -1, .epfd = -1 };
	int rc = loop_open(&lp);

	if (rc != 0)
		return rc;
	while ((rc = loop_turn(&lp)) == 0)
		;
	return loop_close(&lp, rc > 0 ? 0 : 1);
}

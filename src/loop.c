/* loop.c - `leash run`: the single-threaded parent's poll loop.
 *
 * Each turn asks the job table what is due (and starts it), lets the
 * singleton glue do the election's store work unless a fire is moments away,
 * asks the job table again (the election may just have allowed a run), then
 * sleeps in ppoll() until the nearest deadline or until a descriptor is
 * ready: signals arrive through a signalfd, runs' output through pipes,
 * release events through the store's socket.  Then it dispatches, reaps
 * children, finishes the runs that ended and drops removed jobs.  It knows
 * runs and descriptors; what a job is, is the job table's business.
 */
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child.h"
#include "clock.h"
#include "http.h"
#include "log.h"
#include "loop.h"
#include "lx.h"
#include "hooks.h"
#include "runner.h"
#include "sched.h"
#include "singleton.h"

struct loop {
	lua_State *L;
	const struct cfg *cfg;
	char owner[STORE_NAME_MAX + 1];
	struct sched sched;
	struct singleton sg;            /* singleton mode only */
	struct run *runs;
	struct hooks hooks;
	struct http http;               /* [http] listen: the server process */
	unsigned reloads;               /* SIGHUPs so far, for the server */
	int sigfd;
	int stopping;                   /* 1: SIGTERM/SIGINT seen; 2: twice */
};

void loop_owner_id(const struct cfg *cfg, char *out, size_t len)
{
	char host[256] = "localhost";
	const char *name = cfg->replica;
	unsigned char rnd[4] = { 0 };

	if (strcmp(name, "auto") == 0) {
		gethostname(host, sizeof host - 1);
		name = host;
	}
	if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd) {
		/* Not fatal: the pid still tells this process from the others
		 * alive now, and a restart gets another pid soon enough. */
		int64_t t = clock_boot_ms() * 1000003;
		memcpy(rnd, &t, sizeof rnd);
	}
	snprintf(out, len, "%.*s:%d:%02x%02x%02x%02x", LOOP_REPLICA_MAX, name, (int)getpid(),
	         rnd[0], rnd[1], rnd[2], rnd[3]);
}

/* ---- the job table's environment ---- */

static int64_t wall(void *arg) { (void)arg; return clock_wall_ms(); }
static int64_t mono(void *arg) { (void)arg; return clock_mono_ms(); }

static struct run *start_run(void *arg, struct job *j, int64_t scheduled_ms, int catchup,
                             long *id)
{
	struct loop *lp = arg;
	struct run_info info = {
		.replica = lp->owner,
		.scheduled_ms = scheduled_ms,
		.catchup = catchup == 1,
		.manual = catchup == SCHED_MANUAL,
		.grace_ms = lp->cfg->grace_ms,
	};
	struct run *r;

	if (lp->cfg->singleton)
		singleton_run_info(&lp->sg, j, &info);
	r = runner_start(lp->L, j, &info);
	if (!r)
		return NULL;
	r->scheduled_ms = scheduled_ms;
	r->token = info.token;
	r->manual = info.manual;
	r->started_wall = clock_wall_ms();
	if (lp->cfg->singleton)
		singleton_run_started(&lp->sg, r);
	r->next = lp->runs;
	lp->runs = r;
	*id = r->id;
	return r;
}

static void stop_run(void *arg, struct run *r, const char *reason)
{
	(void)arg;
	runner_stop(r, reason);
}

static void adopt_run(void *arg, struct run *r, struct job *j)
{
	(void)arg;
	r->job = j;
}

/* ---- runs ---- */

/* Children that exited, by pid (what ctx.exec left behind is reaped too:
 * leash is their subreaper). */
static void reap_children(struct loop *lp)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		if (!http_reaped(&lp->http, pid, status))
			for (struct run *r = lp->runs; r; r = r->next)
				if (r->pid == pid)
					runner_exited(r, status);
}

/* Runs whose child exited and whose pipes are drained: logged, handed back
 * to the job table, freed. */
static void finish_done_runs(struct loop *lp)
{
	struct run **p = &lp->runs;

	while (*p) {
		struct run *r = *p;
		int failed;

		if (!runner_done(r)) {
			p = &r->next;
			continue;
		}
		*p = r->next;
		runner_report(r, &failed);
		if (r->hook) {
			hooks_hook_ended(&lp->hooks, r, lp->stopping);
			runner_free(r);
			continue;
		}
		if (lp->cfg->singleton)
			singleton_run_ended(&lp->sg, r);
		if (r->job) {
			hooks_run_ended(&lp->hooks, r, lp->stopping);
			sched_run_ended(&lp->sched, r->job, failed, clock_mono_ms() - r->started_ms);
		}
		runner_free(r);
	}
}

/* Timeouts and kills that are due; returns ms until the next one. */
static int64_t tick_runs(struct loop *lp, int64_t sleep_ms)
{
	int64_t now = clock_mono_ms();

	for (struct run *r = lp->runs; r; r = r->next) {
		int64_t t = runner_tick(r, now);
		if (t != INT64_MAX && t - now < sleep_ms)
			sleep_ms = t - now;
	}
	return sleep_ms < 0 ? 0 : sleep_ms;
}

static int64_t due(struct loop *lp)
{
	return tick_runs(lp, sched_start_due(&lp->sched));
}

static void on_signal(struct loop *lp)
{
	struct signalfd_siginfo si;

	while (read(lp->sigfd, &si, sizeof si) == sizeof si) {
		switch (si.ssi_signo) {
		case SIGCHLD:
			reap_children(lp);
			break;
		case SIGHUP:
			log_msg(LOG_INFO, NULL, 0, "SIGHUP: reloading %s", lp->cfg->jobs);
			sched_load(&lp->sched, 1);
			lp->reloads++;
			break;
		case SIGTERM:
		case SIGINT:
			if (lp->stopping) {
				lp->stopping = 2;
				log_msg(LOG_WARN, NULL, 0, "%s again: killing every run now",
				        strsignal(si.ssi_signo));
				for (struct run *r = lp->runs; r; r = r->next)
					kill(-r->pid, SIGKILL);
				break;
			}
			lp->stopping = 1;
			lp->sched.stopping = 1;
			log_msg(LOG_INFO, NULL, 0, "%s: stopping", strsignal(si.ssi_signo));
			for (struct run *r = lp->runs; r; r = r->next)
				runner_stop(r, "shutdown");
			break;
		}
	}
}

/* The descriptors to wait on: the signalfd, the store's events, and every
 * run's open streams. */
struct watch {
	struct pollfd *pfd;
	struct run **run;
	enum run_stream *stream;
	size_t n, cap;
	size_t events;                  /* index of the store's fd, or 0 */
};

static int watch_add(struct watch *w, int fd, struct run *r, enum run_stream st)
{
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 16;
		struct pollfd *pfd = realloc(w->pfd, cap * sizeof *pfd);
		struct run **run = pfd ? realloc(w->run, cap * sizeof *run) : NULL;
		enum run_stream *stream = run ? realloc(w->stream, cap * sizeof *stream) : NULL;
		if (pfd)
			w->pfd = pfd;
		if (run)
			w->run = run;
		if (!stream)
			return -1;
		w->stream = stream;
		w->cap = cap;
	}
	w->pfd[w->n] = (struct pollfd){ fd, POLLIN, 0 };
	w->run[w->n] = r;
	w->stream[w->n] = st;
	w->n++;
	return 0;
}

static void block_signals(sigset_t *mask)
{
	sigset_t fence;

	sigemptyset(mask);
	sigaddset(mask, SIGCHLD);
	sigaddset(mask, SIGTERM);
	sigaddset(mask, SIGINT);
	sigaddset(mask, SIGHUP);
	sigprocmask(SIG_BLOCK, mask, NULL);
	/* Never delivered to the parent; blocked so that every child starts
	 * with them blocked (child.c unblocks them once it can take them). */
	child_fence_sigset(&fence);
	sigprocmask(SIG_BLOCK, &fence, NULL);
	signal(SIGPIPE, SIG_IGN);
}

int loop_run(lua_State *L, const struct cfg *cfg)
{
	struct loop lp = { .L = L, .cfg = cfg, .sigfd = -1 };
	struct sched_env env = {
		.arg = &lp, .wall_ms = wall, .mono_ms = mono, .start = start_run, .stop = stop_run,
		.adopt = adopt_run,
	};
	struct watch w = { 0 };
	sigset_t mask;
	int64_t started_ms;
	int rc = 1;

	block_signals(&mask);
	/* What a run's ctx.exec leaves behind is reparented here and reaped by
	 * the same waitpid(-1) loop, never left as a zombie. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	lp.sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (lp.sigfd < 0) {
		log_msg(LOG_ERROR, NULL, 0, "signalfd: %s", strerror(errno));
		return 1;
	}
	/* A long-lived parent: large buffers (a renew_all of 1,000 names and its
	 * answer) go to mmap and back to the system when freed, and the heap
	 * keeps no slack at its top. */
	mallopt(M_MMAP_THRESHOLD, 32 * 1024);
	mallopt(M_TOP_PAD, 0);
	mallopt(M_TRIM_THRESHOLD, 64 * 1024);
	started_ms = clock_mono_ms();
	loop_owner_id(cfg, lp.owner, sizeof lp.owner);
	/* The socket first: a port in use stops leash before any job runs. */
	{
		char err[512];

		if (http_open(&lp.http, cfg, err, sizeof err) < 0) {
			log_msg(LOG_ERROR, NULL, 0, "%s", err);
			close(lp.sigfd);
			return 2;
		}
	}
	if (cfg->singleton) {
		char err[512];

		if (singleton_init(&lp.sg, cfg, &lp.sched, lp.owner, err, sizeof err) < 0) {
			log_msg(LOG_ERROR, NULL, 0, "%s", err);
			http_close(&lp.http);
			close(lp.sigfd);
			return 2;
		}
		env.elect_arg = &lp.sg;
		env.takes_part = singleton_takes_part;
		env.may_run = singleton_may_run;
		env.enter = singleton_enter;
		env.leave = singleton_leave;
		env.stale = singleton_stale;
		env.claim = singleton_claim;
		env.account = singleton_account;
		env.paused = singleton_paused;
	}
	lp.hooks = (struct hooks){ .L = L, .replica = lp.owner, .grace_ms = cfg->grace_ms,
	                           .runs = &lp.runs };
	if (cfg->singleton) {
		lp.hooks.record = singleton_health;
		lp.hooks.arg = &lp.sg;
	}
	sched_init(&lp.sched, L, cfg->jobs, &env);
	log_msg(LOG_INFO, NULL, 0, "leash %s starting: replica %s, config %s, jobs %s, singleton %s",
	        LEASH_VERSION, lp.owner, cfg->file, cfg->jobs, cfg->singleton ? "on" : "off");
	/* Loaded once here, so each forked run finds it compiled. */
	if (lx_require(L, "leash.run") != LUA_OK) {
		char err[4096];
		log_msg(LOG_ERROR, NULL, 0, "%s", lx_report(L, err, sizeof err));
	} else {
		lua_pop(L, 1);
	}
	sched_load(&lp.sched, 0);

	for (;;) {
		/* What is due first, then the election (unless a fire is
		 * imminent), then what the election just allowed. */
		int64_t wait_ms = due(&lp);
		struct timespec ts;
		int evfd;

		if (cfg->singleton) {
			int64_t elect_in = singleton_turn(&lp.sg, wait_ms);
			int64_t again = due(&lp);   /* measured after the store calls */
			for (struct run *r = lp.runs; r; r = r->next)
				singleton_push_fence(&lp.sg, r);
			wait_ms = elect_in < again ? elect_in : again;
		}
		if (lp.stopping && !lp.runs)
			break;
		{
			/* The server's snapshot (never while a fire is imminent). */
			struct http_live live = {
				.answered_at = cfg->singleton ? lp.sg.answered_at : -1,
				.lease_ms = cfg->lease_ms, .singleton = cfg->singleton,
				.reloads = lp.reloads,
			};
			int64_t t0 = clock_mono_ms();
			int64_t http_in = http_turn(&lp.http, &live, wait_ms);

			/* What the snapshot took comes off the sleep. */
			wait_ms -= clock_mono_ms() - t0;
			if (http_in < wait_ms)
				wait_ms = http_in;
			if (wait_ms < 0)
				wait_ms = 0;
		}
		w.n = 0;
		w.events = 0;
		if (watch_add(&w, lp.sigfd, NULL, 0) < 0)
			goto oom;
		evfd = cfg->singleton ? singleton_event_fd(&lp.sg) : -1;
		if (evfd >= 0) {
			w.events = w.n;
			if (watch_add(&w, evfd, NULL, 0) < 0)
				goto oom;
		}
		for (struct run *r = lp.runs; r; r = r->next)
			for (enum run_stream i = 0; i < RUN_STREAMS; i++)
				if (r->fd[i] >= 0 && watch_add(&w, r->fd[i], r, i) < 0)
					goto oom;
		ts.tv_sec = wait_ms / 1000;
		ts.tv_nsec = (wait_ms % 1000) * 1000000;
		if (ppoll(w.pfd, w.n, &ts, NULL) < 0 && errno != EINTR) {
			log_msg(LOG_ERROR, NULL, 0, "ppoll: %s", strerror(errno));
			goto done;
		}
		for (size_t i = 1; i < w.n; i++)
			if (w.pfd[i].revents && w.run[i])
				runner_read(w.run[i], w.stream[i]);
		if (w.events && w.pfd[w.events].revents)
			singleton_events(&lp.sg);
		if (w.pfd[0].revents)
			on_signal(&lp);
		finish_done_runs(&lp);
		sched_drop_removed(&lp.sched);
	}
	/* The ledger gets what it still lacks, what is held is released in
	 * one batch; then every job leaves the election, which only forgets it. */
	sched_stopped(&lp.sched);
	if (cfg->singleton) {
		singleton_flush(&lp.sg);
		singleton_release_all(&lp.sg);
	}
	sched_free(&lp.sched);
	if (cfg->singleton)
		singleton_free(&lp.sg, clock_mono_ms() - started_ms);
	log_msg(LOG_INFO, NULL, 0, "stopped");
	rc = 0;
	goto done;
oom:
	log_msg(LOG_ERROR, NULL, 0, "out of memory");
done:
	free(w.pfd);
	free(w.run);
	free(w.stream);
	if (rc != 0) {
		lp.sched.env.leave = NULL;      /* no store calls on the way out */
		sched_free(&lp.sched);
		if (cfg->singleton)
			singleton_free(&lp.sg, clock_mono_ms() - started_ms);
	}
	http_close(&lp.http);
	close(lp.sigfd);
	return rc;
}

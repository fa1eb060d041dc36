/* loop.c - the parent: jobs, their schedules, the children, signals.
 *
 * One thread.  Each turn computes the nearest deadline (a fire time on the
 * wall clock, a restart or kill time on the monotonic clock), sleeps in
 * ppoll() until then or until a descriptor is ready (signals arrive through
 * a signalfd, children's output through pipes), then does what is due.
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
#include "elect.h"
#include "job.h"
#include "log.h"
#include "loop.h"
#include "lx.h"
#include "runner.h"

#define SERVICE_BACKOFF_MIN 1000
#define SERVICE_BACKOFF_MAX 60000
#define FIRE_GUARD_MS 30                /* no store call this close to a fire */

struct sched {
	lua_State *L;
	const struct cfg *cfg;
	char owner[512];
	struct job **jobs;
	size_t njobs, cap;
	struct run *runs;
	int sigfd;
	int stopping;                   /* 1: SIGTERM/SIGINT seen; 2: twice */

	/* Singleton mode only; never touched (nor the store opened) without it. */
	struct elector el;
	struct store_opts store_opts;
	int64_t store_retry_at;         /* boottime: next attempt to open the store */
	char store_err[STORE_ERR_MAX + 128]; /* the last open or call error logged */
	int release_failed;             /* at shutdown: stop trying to release */
	int64_t deferred_since;         /* boottime: store calls held back for a fire */
};

static int64_t boot_clock(void *arg)
{
	(void)arg;
	return clock_boot_ms();
}

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

/* ---- the job list ---- */

static struct job *find_job(struct sched *s, const char *name)
{
	for (size_t i = 0; i < s->njobs; i++)
		if (strcmp(s->jobs[i]->name, name) == 0)
			return s->jobs[i];
	return NULL;
}

static void add_job(struct sched *s, struct job *j)
{
	if (s->njobs == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 16;
		struct job **nj = realloc(s->jobs, cap * sizeof *nj);
		if (!nj) {
			log_msg(LOG_ERROR, j->name, 0, "out of memory: job not added");
			job_free(s->L, j);
			return;
		}
		s->jobs = nj;
		s->cap = cap;
	}
	s->jobs[s->njobs++] = j;
}

static int elected(struct sched *s, struct job *j)
{
	return s->cfg->singleton && j->singleton;
}

/* The job's place in the election no longer fits its definition (a reload
 * made it singleton = false, or gave it another lease): it must stand again. */
static int election_stale(struct sched *s, struct job *j)
{
	struct elect_job *ej = j->elect;

	return ej && (!elected(s, j) ||
	              ej->lease_ms != (j->lease_ms ? j->lease_ms : s->cfg->lease_ms));
}

static void join_election(struct sched *s, struct job *j)
{
	if (elected(s, j) && !j->elect) {
		j->elect = elect_add(&s->el, j->name, j->lease_ms, j->renew_ms, j->margin_ms, j);
		if (!j->elect)
			log_msg(LOG_ERROR, j->name, 0, "out of memory: the job is not elected");
	}
}

/* Leaves the election: releases the lease when held (the body has
 * stopped by then) and forgets the job. */
static void leave_election(struct sched *s, struct job *j)
{
	struct elect_job *ej = j->elect;

	if (!ej)
		return;
	if (ej->state == ELECT_HOLDER && s->release_failed) {
		/* The store did not answer a release just now: the others would
		 * each wait out a timeout too.  Their leases expire by themselves. */
		log_msg(LOG_WARN, j->name, 0, "not released (the store is not answering): the lease "
		        "expires by itself");
	} else if (ej->state == ELECT_HOLDER) {
		if (elect_release(&s->el, ej) == STORE_OK)
			log_msg(LOG_INFO, j->name, 0, "released the lease");
		else
			s->release_failed = s->stopping;
	}
	elect_remove(&s->el, ej);
	j->elect = NULL;
}

static void schedule(struct sched *s, struct job *j)
{
	if (j->kind == JOB_SERVICE)
		j->restart_at = clock_mono_ms();
	else
		j->next_fire_ms = job_next_fire(s->L, j, clock_wall_ms());
}

/* Loading, first time and on SIGHUP: what a reload found. */
struct reload {
	struct sched *s;
	struct job **fresh;
	size_t nfresh, cap;
	char **broken;                  /* names whose file has problems */
	size_t nbroken;
};

static void on_good(void *arg, struct job *j)
{
	struct reload *r = arg;

	if (r->nfresh == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 16;
		struct job **nf = realloc(r->fresh, cap * sizeof *nf);
		if (!nf) {
			job_free(r->s->L, j);
			return;
		}
		r->fresh = nf;
		r->cap = cap;
	}
	r->fresh[r->nfresh++] = j;
}

static void on_bad(void *arg, const char *file, const char *msg)
{
	struct reload *r = arg;
	const char *base = strrchr(file, '/');
	size_t n;
	char **nb;

	log_msg(LOG_ERROR, NULL, 0, "%s", msg);
	base = base ? base + 1 : file;
	n = strlen(base);
	if (n < 5 || strcmp(base + n - 4, ".lua") != 0)
		return;
	nb = realloc(r->broken, (r->nbroken + 1) * sizeof *nb);
	if (!nb)
		return;
	r->broken = nb;
	r->broken[r->nbroken++] = strndup(base, n - 4);
}

static int is_broken(struct reload *r, const char *name)
{
	for (size_t i = 0; i < r->nbroken; i++)
		if (strcmp(r->broken[i], name) == 0)
			return 1;
	return 0;
}

/* Takes in a fresh definition for a job that exists: the schedule state and
 * a run in progress stay, the definition is replaced. */
static void replace_job(struct sched *s, struct job *old, struct job *fresh)
{
	int changed = strcmp(old->describe, fresh->describe) != 0;
	int edited = strcmp(old->digest, fresh->digest) != 0;

	fresh->next_fire_ms = old->next_fire_ms;
	fresh->restart_at = old->restart_at;
	fresh->backoff_ms = old->backoff_ms;
	fresh->run = old->run;
	fresh->elect = old->elect;
	if (fresh->run)
		fresh->run->job = fresh;
	if (fresh->elect) {
		struct elect_job *ej = fresh->elect;
		ej->user = fresh;
		if (election_stale(s, fresh)) {
			/* Leaves once the run is over (finish_run), then joins
			 * again with the new settings. */
			if (fresh->run && ej->state == ELECT_HOLDER)
				runner_stop(fresh->run, "the job's lease settings changed");
			if (!fresh->run)
				leave_election(s, fresh);
		}
	}
	if (edited && !changed)
		log_msg(LOG_INFO, fresh->name, 0, "reloaded: %s (the next run uses the new file)",
		        fresh->describe);
	if (changed) {
		log_msg(LOG_INFO, fresh->name, 0, "reloaded: %s", fresh->describe);
		if (fresh->kind != JOB_SERVICE)
			fresh->next_fire_ms = job_next_fire(s->L, fresh, clock_wall_ms());
		else if (old->kind != JOB_SERVICE)
			fresh->restart_at = clock_mono_ms();
	}
	old->run = NULL;
	old->elect = NULL;
	job_free(s->L, old);
}

static void load_jobs(struct sched *s, int reload)
{
	struct reload r = { .s = s };
	int seen = job_load_dir(s->L, s->cfg->jobs, on_good, on_bad, &r);

	if (seen == 0)
		log_msg(LOG_WARN, NULL, 0, "no job files in %s (add NAME.lua files, then send SIGHUP)",
		        s->cfg->jobs);
	/* Jobs whose file is gone: stopped, then dropped.  A broken file keeps
	 * its last good definition. */
	for (size_t i = 0; i < s->njobs; i++) {
		struct job *j = s->jobs[i];
		int present = is_broken(&r, j->name);

		if (present && reload)
			log_msg(LOG_WARN, j->name, 0, "keeps its last good definition: %s has problems",
			        j->file);
		for (size_t k = 0; k < r.nfresh && !present; k++)
			present = strcmp(r.fresh[k]->name, j->name) == 0;
		if (!present && seen >= 0 && !j->removed) {
			j->removed = 1;
			log_msg(LOG_INFO, j->name, 0, "removed: %s is gone", j->file);
			if (j->run)
				runner_stop(j->run, "job file removed");
		}
	}
	for (size_t k = 0; k < r.nfresh; k++) {
		struct job *old = find_job(s, r.fresh[k]->name);

		if (old) {
			/* Also a job removed a moment ago whose run is still
			 * stopping: it comes back as the same job, so the new
			 * definition cannot start beside the old run. */
			if (old->removed)
				log_msg(LOG_INFO, old->name, 0, "back: %s", r.fresh[k]->file);
			old->removed = 0;
			for (size_t i = 0; i < s->njobs; i++)
				if (s->jobs[i] == old)
					s->jobs[i] = r.fresh[k];
			replace_job(s, old, r.fresh[k]);
		} else {
			add_job(s, r.fresh[k]);
			schedule(s, r.fresh[k]);
			join_election(s, r.fresh[k]);
			log_msg(LOG_INFO, r.fresh[k]->name, 0, "%s: %s",
			        reload ? "added" : "loaded", r.fresh[k]->describe);
		}
	}
	for (size_t i = 0; i < s->njobs; i++)
		if (!s->jobs[i]->removed && !s->jobs[i]->run)
			join_election(s, s->jobs[i]);
	for (size_t i = 0; i < r.nbroken; i++)
		free(r.broken[i]);
	free(r.broken);
	free(r.fresh);
	/* Loading leaves sources and compiler garbage behind; the parent
	 * lives long, so give it back now rather than at the GC's leisure. */
	lua_gc(s->L, LUA_GCCOLLECT);
	malloc_trim(0);
}

/* ---- runs ---- */

/* Whether this replica may run the job now.  The election gates singleton
 * jobs here once singleton mode is on. */
static int may_run(struct sched *s, struct job *j)
{
	struct elect_job *ej = j->elect;

	if (j->removed)
		return 0;
	if (!elected(s, j))
		return 1;
	return ej && ej->state == ELECT_HOLDER && clock_boot_ms() < ej->deadline;
}

static void start_run(struct sched *s, struct job *j, int64_t scheduled_ms)
{
	struct elect_job *ej = j->elect;
	struct run_info info = {
		.replica = s->owner,
		.token = 0,
		.scheduled_ms = scheduled_ms,
		.grace_ms = s->cfg->grace_ms,
	};
	struct run *r;

	if (ej) {
		info.token = ej->token;
		info.fence_stop_ms = ej->deadline;
		info.fence_slack_ms = ej->margin_ms / 2;
	}
	r = runner_start(s->L, j, &info);
	if (!r)
		return;
	r->fence_ms = info.fence_stop_ms;
	j->run = r;
	r->next = s->runs;
	s->runs = r;
}

static void finish_run(struct sched *s, struct run *r)
{
	struct job *j = r->job;
	int failed;
	int64_t ran;

	runner_report(r, &failed);
	ran = clock_mono_ms() - r->started_ms;
	if (j) {
		j->run = NULL;
		if (election_stale(s, j)) {
			leave_election(s, j);
			join_election(s, j);
		}
		if (j->kind == JOB_SERVICE && !s->stopping) {
			if (ran >= SERVICE_BACKOFF_MAX)
				j->backoff_ms = 0;
			j->backoff_ms = j->backoff_ms ? j->backoff_ms * 2 : SERVICE_BACKOFF_MIN;
			if (j->backoff_ms > SERVICE_BACKOFF_MAX)
				j->backoff_ms = SERVICE_BACKOFF_MAX;
			j->restart_at = clock_mono_ms() + j->backoff_ms;
			log_msg(LOG_INFO, j->name, 0, "service %s; restarting in %.1fs",
			        failed ? "failed" : "returned", j->backoff_ms / 1000.0);
		}
	}
}

static void reap(struct sched *s)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
		for (struct run *r = s->runs; r; r = r->next)
			if (r->pid == pid)
				runner_exited(r, status);
}

static void collect(struct sched *s)
{
	struct run **p = &s->runs;

	while (*p) {
		struct run *r = *p;
		if (runner_done(r)) {
			*p = r->next;
			finish_run(s, r);
			runner_free(r);
		} else {
			p = &r->next;
		}
	}
}

/* Drops removed jobs once their run is over. */
static void sweep(struct sched *s)
{
	size_t w = 0;

	for (size_t i = 0; i < s->njobs; i++) {
		struct job *j = s->jobs[i];
		if (j->removed && !j->run) {
			leave_election(s, j);
			job_free(s->L, j);
		} else
			s->jobs[w++] = j;
	}
	s->njobs = w;
}

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* Starts what is due; returns the time to sleep in ms. */
static int64_t due(struct sched *s)
{
	int64_t wall = clock_wall_ms(), mono = clock_mono_ms();
	int64_t sleep_ms = 60000;

	for (size_t i = 0; i < s->njobs && !s->stopping; i++) {
		struct job *j = s->jobs[i];

		if (!may_run(s, j)) {
			/* A follower's fire times pass too, so that when it
			 * becomes the holder it neither repeats nor catches up. */
			if (j->kind != JOB_SERVICE && j->next_fire_ms >= 0 && !j->removed) {
				if (wall >= j->next_fire_ms)
					j->next_fire_ms = job_next_fire(s->L, j, wall);
				if (j->next_fire_ms >= 0)
					sleep_ms = min64(sleep_ms, j->next_fire_ms - wall);
			}
			continue;
		}
		if (j->kind == JOB_SERVICE) {
			if (!j->run && mono >= j->restart_at)
				start_run(s, j, 0);
			if (!j->run)
				sleep_ms = min64(sleep_ms, j->restart_at - mono);
			continue;
		}
		if (j->next_fire_ms < 0)
			continue;
		if (wall >= j->next_fire_ms) {
			if (j->run) {
				char at[32];

				log_msg(LOG_WARN, j->name, 0, "skipped the fire at %s: run %ld is still going",
				        clock_iso(at, sizeof at, j->next_fire_ms, 0), j->run->id);
			} else {
				start_run(s, j, j->next_fire_ms);
			}
			j->next_fire_ms = job_next_fire(s->L, j, wall);
			if (j->next_fire_ms < 0)
				continue;
		}
		sleep_ms = min64(sleep_ms, j->next_fire_ms - wall);
	}
	for (struct run *r = s->runs; r; r = r->next) {
		int64_t t = runner_tick(r, mono);
		if (t != INT64_MAX)
			sleep_ms = min64(sleep_ms, t - mono);
	}
	return sleep_ms < 0 ? 0 : sleep_ms;
}

/* ---- the election ---- */

static void on_change(void *arg, struct elect_job *ej, int gained, const char *why)
{
	struct job *j = ej->user;

	(void)arg;
	if (gained) {
		log_msg(LOG_INFO, j->name, 0, "holding the lease (token %lld)", (long long)ej->token);
		if (j->kind == JOB_SERVICE) {
			j->restart_at = clock_mono_ms();
			j->backoff_ms = 0;
		}
		return;
	}
	log_msg(LOG_WARN, j->name, 0, "%s", why);
	if (j->run)
		runner_stop(j->run, "lease lost");
}

static void on_error(void *arg, const char *what, const char *err)
{
	struct sched *s = arg;

	/* An outage logs once, not once per try. */
	if (strcmp(s->store_err, err) == 0)
		return;
	snprintf(s->store_err, sizeof s->store_err, "%s", err);
	log_msg(LOG_ERROR, NULL, 0, "lease store: %s failed: %s", what, err);
}

static void on_release_event(void *arg, const char *name)
{
	struct sched *s = arg;

	elect_wake(&s->el, name);
}

/* Opens the store when needed, lets the elector do what is due, and moves
 * the running children's self-fencing deadlines after good renewals.
 * Returns the time to sleep in ms. */
static int64_t elect_turn(struct sched *s, int64_t due_in)
{
	int64_t now = clock_boot_ms(), next;

	if (!s->cfg->singleton)
		return INT64_MAX;
	/* A fire (or a restart) is moments away: a store call now could
	 * hold it up by a round trip or a lock wait, while the renewals have
	 * seconds to spare.  Check the deadlines only, and do the rest right
	 * after.  Never for long, so nothing can starve the election. */
	if (due_in < FIRE_GUARD_MS && (!s->deferred_since || now - s->deferred_since < FIRE_GUARD_MS)) {
		if (!s->deferred_since)
			s->deferred_since = now;
		next = elect_hold(&s->el);
		return next == INT64_MAX ? INT64_MAX : (next > now ? next - now : 0);
	}
	s->deferred_since = 0;
	if (!s->el.store && now >= s->store_retry_at) {
		char err[STORE_ERR_MAX + 128];

		s->el.store = store_open(s->cfg->provider, &s->store_opts, err, sizeof err);
		if (s->el.store) {
			log_msg(LOG_INFO, NULL, 0, "lease store: %s open, table %s", s->cfg->provider,
			        s->cfg->table);
			s->store_err[0] = '\0';
		} else {
			s->store_retry_at = now + s->cfg->retry_ms;
			if (strcmp(s->store_err, err) != 0) {
				snprintf(s->store_err, sizeof s->store_err, "%s", err);
				log_msg(LOG_ERROR, NULL, 0, "lease store: cannot open %s: %s (retrying every %lldms)",
				        s->cfg->provider, err, (long long)s->cfg->retry_ms);
			}
		}
	}
	/* libpq may have read release events off the socket during a call, so
	 * they are drained around every step, not only when it is readable. */
	if (s->el.store)
		store_drain_events(s->el.store, on_release_event, s);
	{
		int64_t t0 = clock_mono_ms();
		uint64_t c0 = s->el.store ? s->el.store->calls : 0;
		next = elect_step(&s->el);
		if (clock_mono_ms() - t0 >= 5)
			log_msg(LOG_DEBUG, NULL, 0, "lease store: %llu statements took %lldms",
			        (unsigned long long)((s->el.store ? s->el.store->calls : 0) - c0),
			        (long long)(clock_mono_ms() - t0));
	}
	if (s->el.store && store_drain_events(s->el.store, on_release_event, s) > 0)
		next = elect_step(&s->el);
	if (s->el.store && !s->el.store->err[0] && s->store_err[0]) {
		log_msg(LOG_INFO, NULL, 0, "lease store: answering again");
		s->store_err[0] = '\0';
	}
	for (struct run *r = s->runs; r; r = r->next) {
		struct elect_job *ej = r->job ? r->job->elect : NULL;

		if (ej && ej->state == ELECT_HOLDER && r->fence_ms && ej->deadline != r->fence_ms) {
			runner_push_fence(r, ej->deadline);
			r->fence_ms = ej->deadline;
		}
	}
	if (!s->el.store)
		next = min64(next, s->store_retry_at);
	now = clock_boot_ms();
	return next == INT64_MAX ? INT64_MAX : (next > now ? next - now : 0);
}

static void on_signal(struct sched *s)
{
	struct signalfd_siginfo si;

	while (read(s->sigfd, &si, sizeof si) == sizeof si) {
		switch (si.ssi_signo) {
		case SIGCHLD:
			reap(s);
			break;
		case SIGHUP:
			log_msg(LOG_INFO, NULL, 0, "SIGHUP: reloading %s", s->cfg->jobs);
			load_jobs(s, 1);
			break;
		case SIGTERM:
		case SIGINT:
			if (s->stopping) {
				s->stopping = 2;
				log_msg(LOG_WARN, NULL, 0, "%s again: killing every run now",
				        strsignal(si.ssi_signo));
				for (struct run *r = s->runs; r; r = r->next)
					kill(-r->pid, SIGKILL);
				break;
			}
			s->stopping = 1;
			log_msg(LOG_INFO, NULL, 0, "%s: stopping", strsignal(si.ssi_signo));
			for (struct run *r = s->runs; r; r = r->next)
				runner_stop(r, "shutdown");
			break;
		}
	}
}

static size_t count_runs(struct sched *s)
{
	size_t n = 0;

	for (struct run *r = s->runs; r; r = r->next)
		n++;
	return n;
}

int loop_run(lua_State *L, const struct cfg *cfg)
{
	struct sched s = { .L = L, .cfg = cfg, .sigfd = -1 };
	struct pollfd *pfd = NULL;
	struct run **pruns = NULL;
	int *pidx = NULL;
	sigset_t mask;
	int64_t started_ms;
	int rc = 1;

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	{
		sigset_t fence;
		child_fence_sigset(&fence);
		sigprocmask(SIG_BLOCK, &fence, NULL);
	}
	signal(SIGPIPE, SIG_IGN);
	/* What a run's ctx.exec leaves behind is reparented here and reaped by
	 * the same waitpid(-1) loop, never left as a zombie. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	s.sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (s.sigfd < 0) {
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
	loop_owner_id(cfg, s.owner, sizeof s.owner);
	if (cfg->singleton) {
		struct elect_cfg ec = {
			.lease_ms = cfg->lease_ms, .renew_ms = cfg->renew_ms,
			.retry_ms = cfg->retry_ms, .margin_ms = cfg->margin_ms,
			.timeout_ms = cfg->statement_timeout_ms,
		};
		uint64_t seed = 0;
		char err[512];

		if (cfg_store_opts(cfg, &s.store_opts, err, sizeof err) < 0) {
			log_msg(LOG_ERROR, NULL, 0, "%s", err);
			close(s.sigfd);
			return 2;
		}
		if (getrandom(&seed, sizeof seed, 0) != sizeof seed)
			seed = (uint64_t)getpid() * 2654435761u;
		elect_init(&s.el, &ec, s.owner, boot_clock, NULL, seed);
		s.el.on_change = on_change;
		s.el.on_error = on_error;
		s.el.arg = &s;
	}
	log_msg(LOG_INFO, NULL, 0, "leash %s starting: replica %s, config %s, jobs %s, singleton %s",
	        LEASH_VERSION, s.owner, cfg->file, cfg->jobs, cfg->singleton ? "on" : "off");
	/* Loaded once here, so each forked run finds it compiled. */
	if (lx_require(L, "leash.run") != LUA_OK) {
		char err[4096];
		log_msg(LOG_ERROR, NULL, 0, "%s", lx_report(L, err, sizeof err));
	} else {
		lua_pop(L, 1);
	}
	load_jobs(&s, 0);

	for (;;) {
		/* What is due first, then the election (unless a fire is
		 * imminent), then what the election just allowed. */
		int64_t due_in = due(&s);
		int64_t elect_in = elect_turn(&s, due_in);
		int64_t wait_ms = min64(elect_in, due(&s));   /* measured after the store calls */
		size_t nruns = count_runs(&s), n = 0, evi = 0;
		struct timespec ts;
		int evfd;

		if (s.stopping && !s.runs)
			break;
		pfd = realloc(pfd, (2 + 3 * nruns) * sizeof *pfd);
		pruns = realloc(pruns, (2 + 3 * nruns) * sizeof *pruns);
		pidx = realloc(pidx, (2 + 3 * nruns) * sizeof *pidx);
		if (!pfd || !pruns || !pidx) {
			log_msg(LOG_ERROR, NULL, 0, "out of memory");
			goto done;
		}
		pfd[n++] = (struct pollfd){ s.sigfd, POLLIN, 0 };
		evfd = s.el.store ? store_event_fd(s.el.store) : -1;
		if (evfd >= 0) {
			evi = n;
			pfd[n++] = (struct pollfd){ evfd, POLLIN, 0 };
		}
		for (struct run *r = s.runs; r; r = r->next)
			for (int i = 0; i < 3; i++)
				if (r->fd[i] >= 0) {
					pruns[n] = r;
					pidx[n] = i;
					pfd[n++] = (struct pollfd){ r->fd[i], POLLIN, 0 };
				}
		ts.tv_sec = wait_ms / 1000;
		ts.tv_nsec = (wait_ms % 1000) * 1000000;
		if (ppoll(pfd, n, &ts, NULL) < 0 && errno != EINTR) {
			log_msg(LOG_ERROR, NULL, 0, "ppoll: %s", strerror(errno));
			goto done;
		}
		for (size_t i = 1; i < n; i++)
			if (pfd[i].revents && i != evi)
				runner_read(pruns[i], pidx[i]);
		if (evi && pfd[evi].revents)
			store_drain_events(s.el.store, on_release_event, &s);
		if (pfd[0].revents)
			on_signal(&s);
		collect(&s);
		sweep(&s);
	}
	if (cfg->singleton) {
		for (size_t i = 0; i < s.njobs; i++)
			leave_election(&s, s.jobs[i]);
		if (s.el.store)
			log_msg(LOG_INFO, NULL, 0, "lease store: %llu statements in %.1fs",
			        (unsigned long long)s.el.store->calls,
			        (clock_mono_ms() - started_ms) / 1000.0);
	}
	log_msg(LOG_INFO, NULL, 0, "stopped");
	rc = 0;
done:
	free(pfd);
	free(pruns);
	free(pidx);
	for (size_t i = 0; i < s.njobs; i++)
		job_free(L, s.jobs[i]);
	free(s.jobs);
	if (cfg->singleton) {
		store_close(s.el.store);
		elect_free(&s.el);
	}
	close(s.sigfd);
	return rc;
}

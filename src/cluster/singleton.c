/* singleton.c - singleton mode's glue: the store, the elector's callbacks,
 * fence pushes, and the store's health as the log tells it. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/clock.h"
#include "cluster/hooks.h"
#include "core/log.h"
#include "core/metrics.h"
#include "launch/runner.h"
#include "plan/sched.h"
#include "cluster/singleton.h"

static int64_t boot_clock(void *arg)
{
	(void)arg;
	return clock_boot_ms();
}

/* ---- the store's health ----
 *
 * An outage is logged once when it starts (with the reason), at most once a
 * SINGLETON_OUTAGE_LOG_MS while it lasts (with its duration), and once when
 * it ends.  Only the outcome of whole steps decides: a step in which any
 * call failed is down, a step that made calls and saw no failure is up. */

/* The store did not answer; why is what the log says ("renew failed: ..."). */
static void store_down(struct singleton *sg, const char *why)
{
	int64_t now = clock_boot_ms();

	sg->step_failed = 1;
	if (!sg->down) {
		sg->down = 1;
		sg->down_since = sg->down_logged = now;
		log_msg(LOG_ERROR, NULL, 0, "lease store: %s", why);
	} else if (now - sg->down_logged >= SINGLETON_OUTAGE_LOG_MS) {
		sg->down_logged = now;
		log_msg(LOG_ERROR, NULL, 0, "lease store: not answering for %llds: %s",
		        (long long)((now - sg->down_since) / 1000), why);
	}
}

static void store_failed(struct singleton *sg, const char *what, const char *err)
{
	char why[STORE_ERR_MAX + 160];

	snprintf(why, sizeof why, "%s failed: %s", what, err);
	store_down(sg, why);
}

static void store_answered(struct singleton *sg)
{
	sg->answered_at = clock_boot_ms();
	if (!sg->down)
		return;
	sg->down = 0;
	sg->outage_end = sg->answered_at;
	log_msg(LOG_INFO, NULL, 0, "lease store: answering again after %.1fs",
	        (clock_boot_ms() - sg->down_since) / 1000.0);
}

/* ---- the elector's callbacks ---- */

/* Why the fires of a job just taken, after its cursor, did not run, for
 * the ledger (sched_gained's cause): the store was down since the cursor's
 * fire, or the holder this replica followed stopped renewing (its last
 * renewal: the expiry last seen less a lease); NULL when neither is known. */
static const char *gain_cause(const struct singleton *sg, const struct elect_job *ej,
                              char *buf, size_t len)
{
	int64_t now = clock_boot_ms(), wall = clock_wall_ms();
	int64_t end = sg->down ? now : sg->outage_end;
	char at[32];

	if (end > 0 && ej->last_fire >= 0 && wall - (now - end) > ej->last_fire)
		return "the store did not answer";
	if (!ej->holder)
		return NULL;
	snprintf(buf, len, "the holder %s stopped renewing at %s", ej->holder,
	         clock_iso(at, sizeof at, ej->holder_expires - ej->lease_ms, 1));
	return buf;
}

static void on_change(void *arg, struct elect_job *ej, int gained, const char *why)
{
	struct singleton *sg = arg;
	struct job *j = ej->user;
	char cause[STORE_NAME_MAX + 96];

	if (gained) {
		log_msg(LOG_INFO, j->name, 0, "holding the lease (token %lld)", (long long)ej->token);
		j->follow_logged = 0;
		ej->gained_sig = sg->spread.sig;
		ej->gained_members = sg->spread.members;
		ej->keep_until = 0;
		ledger_forget(&sg->ledger, j->name);
		sched_gained(sg->sched, j, ej->last_fire, gain_cause(sg, ej, cause, sizeof cause));
		return;
	}
	log_msg(LOG_WARN, j->name, 0, "%s", why);
	ledger_forget(&sg->ledger, j->name);
	if (j->run)
		runner_stop(j->run, RUN_STOP_LOST, "lease lost");
}

static void on_error(void *arg, const char *what, const char *err)
{
	store_failed(arg, what, err);
}

static void on_follow(void *arg, struct elect_job *ej, const char *holder, int64_t expires_at)
{
	struct job *j = ej->user;
	char at[32];

	(void)arg;
	/* Once at info (a newcomer sees why its replica runs nothing, and an
	 * operator sees a job move), then at debug. */
	log_msg(j->follow_logged ? LOG_DEBUG : LOG_INFO, j->name, 0, "following: held by %s until %s",
	        *holder ? holder : "nobody", clock_iso(at, sizeof at, expires_at, 1));
	j->follow_logged = 1;
}

static void on_corrupt(void *arg, struct elect_job *ej, const char *column, int64_t value)
{
	struct job *j = ej->user;

	(void)arg;
	if (column)
		log_msg(LOG_ERROR, j->name, 0, "corrupt lease row: %s = %lld is out of bounds; the "
		        "job runs nowhere until `leash repair %s` resets it", column, (long long)value,
		        j->name);
	else
		log_msg(LOG_INFO, j->name, 0, "the lease row is within bounds again (repaired): "
		        "taking it as usual");
}

static void on_release_event(void *arg, const char *name)
{
	struct singleton *sg = arg;
	size_t k = strlen(STORE_EVENT_CONTROL);

	if (strncmp(name, STORE_EVENT_CONTROL, k) == 0 && strcmp(name + k, STORE_EVENT_DRAIN) == 0)
		spread_poke(sg);
	else if (strncmp(name, STORE_EVENT_HANDOFF, strlen(STORE_EVENT_HANDOFF)) == 0)
		elect_look(&sg->el, name + strlen(STORE_EVENT_HANDOFF));
	else if (strncmp(name, STORE_EVENT_CONTROL, k) == 0)
		elect_poke(&sg->el, name + k);
	else
		elect_wake(&sg->el, name);
}

int singleton_init(struct singleton *sg, const struct cfg *cfg, struct sched *sched,
                   const char *owner, char *err, size_t errlen)
{
	struct elect_cfg ec = {
		.lease_ms = cfg->lease_ms, .renew_ms = cfg->renew_ms,
		.retry_ms = cfg->retry_ms, .margin_ms = cfg->margin_ms,
		.timeout_ms = cfg->statement_timeout_ms,
	};
	uint64_t seed = 0;

	memset(sg, 0, sizeof *sg);
	sg->cfg = cfg;
	sg->sched = sched;
	sg->answered_at = -1;
	if (store_opts_from(cfg, &sg->opts, err, errlen) < 0)
		return -1;
	if (getrandom(&seed, sizeof seed, 0) != sizeof seed)
		seed = (uint64_t)getpid() * 2654435761u;
	elect_init(&sg->el, &ec, owner, boot_clock, NULL, seed);
	ledger_init(&sg->ledger, sg->el.owner, cfg->ledger_keep_ms, cfg->ledger_keep_per_job);
	sg->el.on_change = on_change;
	sg->el.on_corrupt = on_corrupt;
	sg->el.on_error = on_error;
	sg->el.on_follow = on_follow;
	sg->el.arg = sg;
	spread_init(sg);
	return 0;
}

/* ---- the job table's hooks ---- */

int singleton_takes_part(void *arg, const struct job *j)
{
	(void)arg;
	return j->singleton;
}

int singleton_may_run(void *arg, const struct job *j)
{
	const struct elect_job *ej = j->elect;

	(void)arg;
	return ej && ej->state == ELECT_HOLDER && clock_boot_ms() < ej->deadline &&
	       spread_may_run(arg, ej);
}

void singleton_enter(void *arg, struct job *j)
{
	struct singleton *sg = arg;

	spread_jobs_changed(sg);
	if (j->elect) {
		((struct elect_job *)j->elect)->user = j;   /* a reload's fresh definition */
		return;
	}
	j->elect = elect_add(&sg->el, j->name, j->lease_ms, j->renew_ms, j->margin_ms, j);
	if (!j->elect) {
		log_msg(LOG_ERROR, j->name, 0, "out of memory: the job is not elected");
	} else {
		((struct elect_job *)j->elect)->metrics = j->metrics;
		metrics_job_elected(j->metrics, 1);
		spread_job_added(sg, j->elect);
	}
}

void singleton_leave(void *arg, struct job *j)
{
	struct singleton *sg = arg;
	struct elect_job *ej = j->elect;

	if (!ej)
		return;
	if (ej->state == ELECT_HOLDER && sg->release_failed) {
		/* The store did not answer a release just now: the others would
		 * each wait out a timeout too.  Their leases expire by themselves. */
		log_msg(LOG_WARN, j->name, 0, "not released (the store is not answering): the lease "
		        "expires by itself");
	} else if (ej->state == ELECT_HOLDER) {
		if (elect_release(&sg->el, ej) == STORE_OK) {
			log_msg(LOG_INFO, j->name, 0, "released the lease");
		} else {
			store_failed(sg, "release", sg->el.store ? sg->el.store->err : "not open");
			sg->release_failed = sg->sched->stopping;
		}
	}
	elect_remove(&sg->el, ej);
	metrics_job_elected(j->metrics, 0);
	j->elect = NULL;
	ledger_forget(&sg->ledger, j->name);
	spread_jobs_changed(sg);
}

void singleton_release_all(struct singleton *sg)
{
	size_t held = 0, released;

	for (size_t i = 0; i < sg->el.n; i++)
		if (sg->el.jobs[i]->state == ELECT_HOLDER) {
			const struct job *j = sg->el.jobs[i]->user;

			log_msg(LOG_DEBUG, j->name, 0, "releasing the lease (token %lld)",
			        (long long)sg->el.jobs[i]->token);
			held++;
		}
	if (held == 0)
		return;
	if (elect_release_all(&sg->el, &released) == STORE_OK) {
		log_msg(LOG_INFO, NULL, 0, "released %zu lease%s", released, released == 1 ? "" : "s");
		return;
	}
	/* The elector reported the error (on_error); the leases it could not
	 * release expire by themselves, and leave tries no more. */
	sg->release_failed = 1;
	log_msg(LOG_WARN, NULL, 0, "%zu lease%s not released (the store is not answering): "
	        "they expire by themselves", held, held == 1 ? "" : "s");
}

/* The bound for a store call now: the configured statement timeout, or
 * less when a held lease's deadline comes sooner (an answer after it is of
 * no use). */
static int64_t call_bound(struct singleton *sg, int64_t now)
{
	int64_t timeout = sg->cfg->statement_timeout_ms;

	for (size_t i = 0; i < sg->el.n; i++) {
		const struct elect_job *ej = sg->el.jobs[i];

		if (ej->state == ELECT_HOLDER && ej->deadline - now < timeout)
			timeout = ej->deadline - now;
	}
	return timeout > 1 ? timeout : 1;
}

/* One claim_runs: the first nrun claims start fires, the rest carry
 * accounts only.  The store's answer. */
static int claim_runs(struct singleton *sg, const struct store_claim *c, size_t n, size_t nrun,
                      int *ok)
{
	struct store_run *runs;
	long nruns = ledger_claim_rows(&sg->ledger, c, n, nrun, &runs);
	int64_t dbnow = 0;
	int rc;

	if (nruns < 0) {
		free(runs);
		return store_fail(sg->el.store, "claim: out of memory");
	}
	rc = store_claim_runs(sg->el.store, sg->el.owner, c, n, runs, (size_t)nruns, ok, &dbnow);
	free(runs);
	ledger_claimed(&sg->ledger, rc);
	if (rc == STORE_OK)
		ledger_clock(&sg->ledger, dbnow, clock_wall_ms());
	return rc;
}

/* fires[i] of jobs[i], each with the token its lease is held by (malloc'd),
 * or NULL (logged as what failed) when out of memory or the store is not
 * open. */
static struct store_claim *claims_of(struct singleton *sg, const char *what,
                                     struct job *const *jobs, const int64_t *fires, size_t n)
{
	struct store_claim *c;

	if (!sg->el.store) {
		store_failed(sg, what, "the store is not open");
		return NULL;
	}
	if (!(c = malloc(n * sizeof *c))) {
		store_failed(sg, what, "out of memory");
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		const struct elect_job *ej = jobs[i]->elect;

		c[i] = (struct store_claim){ jobs[i]->name, ej ? ej->token : 0, fires[i] };
	}
	return c;
}

int singleton_claim(void *arg, struct job *const *jobs, const int64_t *fires, size_t n, int *ok)
{
	struct singleton *sg = arg;
	struct store_claim *c = claims_of(sg, "claim", jobs, fires, n);
	int64_t now = clock_boot_ms(), timeout = sg->cfg->statement_timeout_ms;
	int rc;

	if (!c)
		return -1;
	for (size_t i = 0; i < n; i++) {
		const struct elect_job *ej = jobs[i]->elect;

		/* A claim answered after the lease's deadline is no use. */
		if (ej && ej->deadline - now < timeout)
			timeout = ej->deadline - now;
	}
	store_set_timeout(sg->el.store, (int)(timeout > 1 ? timeout : 1));
	rc = claim_runs(sg, c, n, n, ok);
	free(c);
	if (rc != STORE_OK) {
		store_failed(sg, "claim", sg->el.store->err);
		return -1;
	}
	store_answered(sg);
	return 0;
}

int singleton_unclaim(void *arg, struct job *const *jobs, const int64_t *fires, size_t n, int *ok)
{
	struct singleton *sg = arg;
	struct store_claim *c = claims_of(sg, "unclaim", jobs, fires, n);
	int rc;

	if (!c)
		return -1;
	store_set_timeout(sg->el.store, 0);
	rc = store_unclaim_all(sg->el.store, sg->el.owner, c, n, ok);
	free(c);
	if (rc != STORE_OK) {
		store_failed(sg, "unclaim", sg->el.store->err);
		return -1;
	}
	store_answered(sg);
	return 0;
}

void singleton_account(void *arg, struct job *j, int64_t fire, int claimed, const char *outcome,
                       const char *why)
{
	struct singleton *sg = arg;
	const struct elect_job *ej = j->elect;
	struct ledger_row row = {
		.scheduled_at = fire, .token = ej ? ej->token : 0,
		.started_at = STORE_NO_TIME, .ended_at = STORE_NO_TIME, .duration_ms = STORE_NO_TIME,
		.exit_code = STORE_NO_CODE, .exit_signal = STORE_NO_CODE, .error = (char *)why,
	};

	if (!claimed) {
		ledger_account(&sg->ledger, j->name, fire, outcome, why);
		return;
	}
	/* Claimed: its row is in the ledger; it only changes outcome. */
	snprintf(row.job, sizeof row.job, "%s", j->name);
	snprintf(row.outcome, sizeof row.outcome, "%s", outcome);
	ledger_record(&sg->ledger, &row);
}

/* Whether this run's fire was claimed (and so has its row already). */
static int claimed_run(const struct run *r)
{
	return r->job && r->job->singleton && r->job->kind != JOB_SERVICE && r->token && !r->manual;
}

/* A service's row is keyed by its start; a fire's by its scheduled time. */
static int64_t run_key(const struct run *r)
{
	return r->scheduled_ms ? r->scheduled_ms : r->started_wall;
}

/* How the run came, for the ledger's how: NULL for a fire on time. */
static const char *run_how(const struct run *r)
{
	return r->manual ? "manual" : r->catchup ? "catch-up" : NULL;
}

void singleton_run_started(struct singleton *sg, struct run *r)
{
	struct ledger_row row = {
		.scheduled_at = run_key(r), .token = r->token, .started_at = r->started_wall,
		.ended_at = STORE_NO_TIME, .duration_ms = STORE_NO_TIME,
		.exit_code = STORE_NO_CODE, .exit_signal = STORE_NO_CODE,
		.run_id = r->id, .how = run_how(r),
	};

	if (claimed_run(r))
		return;         /* its row was written with the claim; the end says the rest */
	snprintf(row.job, sizeof row.job, "%s", r->job->name);
	snprintf(row.outcome, sizeof row.outcome, "running");
	ledger_record(&sg->ledger, &row);
}

void singleton_run_ended(struct singleton *sg, struct run *r)
{
	int64_t now = runner_ended_wall(r);
	struct ledger_row row = {
		.scheduled_at = run_key(r), .token = r->token, .started_at = r->started_wall,
		.ended_at = now, .duration_ms = now - r->started_wall,
		.error = r->error ? r->error : r->stop_reason[0] ? r->stop_reason : NULL,
		.run_id = r->id, .how = run_how(r),
	};

	if (!r->job)
		return;
	snprintf(row.job, sizeof row.job, "%s", r->job->name);
	snprintf(row.outcome, sizeof row.outcome, "%s", runner_outcome(r, &row.exit_code,
	         &row.exit_signal));
	ledger_record(&sg->ledger, &row);
}

int singleton_health(void *arg, struct job *j, int failing)
{
	struct singleton *sg = arg;
	const struct elect_job *ej = j->elect;
	int changed = 0, rc;

	if (!j->singleton || !ej)
		return HOOKS_LOCAL;
	if (ej->state != ELECT_HOLDER)
		return 0;               /* the holder now decides */
	/* Not while the store is down (each call would wait its timeout), nor
	 * past this turn's budget: the state stays unknown, and the job's next
	 * run end tries again. */
	if (!sg->el.store || sg->down || sg->health_left <= 0)
		return -1;
	sg->health_left--;
	store_set_timeout(sg->el.store, (int)call_bound(sg, clock_boot_ms()));
	rc = store_health(sg->el.store, sg->el.owner, j->name, ej->token, failing, &changed);
	store_set_timeout(sg->el.store, 0);
	if (rc != STORE_OK) {
		store_failed(sg, "recording the job's health (its failure hooks do not run)",
		             sg->el.store->err);
		return -1;
	}
	return changed;
}

int singleton_paused(void *arg, const struct job *j)
{
	(void)arg;
	return j->elect ? elect_paused(j->elect) : 0;
}

/* What the last renew read of the controls: a pause's start and end are
 * logged, a newer trigger runs once (sched_trigger), a newer handoff
 * request marks the job for spread's next safe point. */
static void controls(struct singleton *sg)
{
	for (size_t i = 0; i < sg->el.n; i++) {
		struct elect_job *ej = sg->el.jobs[i];
		struct job *j = ej->user;
		int paused;

		if (ej->state != ELECT_HOLDER || !j)
			continue;
		paused = elect_paused(ej);
		if (paused < 0)
			continue;       /* taken just now: the first renew reads them */
		if (paused != j->paused_logged) {
			char at[32];
			if (paused && ej->ctl.paused_until >= STORE_PAUSED_FOREVER)
				log_msg(LOG_INFO, j->name, 0, "paused (leash pause): fires are skipped");
			else if (paused)
				log_msg(LOG_INFO, j->name, 0, "paused (leash pause) until %s: fires are "
				        "skipped", clock_iso(at, sizeof at, ej->ctl.paused_until, 1));
			else
				log_msg(LOG_INFO, j->name, 0, "resumed: fires run again");
			j->paused_logged = paused;
		}
		if (ej->ctl.trigger_at != STORE_NO_TIME && ej->ctl.trigger_at > ej->trigger_seen) {
			ej->trigger_seen = ej->ctl.trigger_at;
			sched_trigger(sg->sched, j);
		}
		if (ej->ctl.handoff_at != STORE_NO_TIME && ej->ctl.handoff_at > ej->handoff_seen) {
			ej->handoff_seen = ej->ctl.handoff_at;
			ej->handoff_wanted = 1;
			sg->spread.turn_now = 1;
			log_msg(LOG_INFO, j->name, 0, "handoff requested (leash handoff): releasing the "
			        "lease at the next safe point");
		}
	}
}

int singleton_stale(void *arg, const struct job *j)
{
	struct singleton *sg = arg;
	const struct elect_job *ej = j->elect;

	return ej && (!j->singleton ||
	              ej->lease_ms != (j->lease_ms ? j->lease_ms : sg->cfg->lease_ms));
}

/* ---- the turn ---- */

static int64_t until(int64_t t)
{
	int64_t now = clock_boot_ms();

	return t == INT64_MAX ? INT64_MAX : (t > now ? t - now : 0);
}

static void open_store(struct singleton *sg, int64_t now)
{
	char err[STORE_ERR_MAX + 128];

	sg->el.store = store_open(sg->cfg->provider, &sg->opts, err, sizeof err);
	if (sg->el.store) {
		/* Without release events a leash handoff --to is found by probes. */
		sg->el.probe_ms = store_event_fd(sg->el.store) < 0 ? sg->cfg->retry_ms : 0;
		/* ... and a control by a poll of the controls' version. */
		sg->el.ctl_poll_ms = store_event_fd(sg->el.store) < 0 ? SINGLETON_CTL_POLL_MS : 0;
		log_msg(LOG_INFO, NULL, 0, "lease store: %s open, table %s", sg->cfg->provider,
		        sg->cfg->table);
		return;
	}
	sg->open_retry_at = now + sg->cfg->retry_ms;
	{
		char why[STORE_ERR_MAX + 256];
		snprintf(why, sizeof why, "cannot open %s: %s (retrying every %lldms)",
		         sg->cfg->provider, err, (long long)sg->cfg->retry_ms);
		store_down(sg, why);
	}
}

/* The first cursor of the new jobs just taken (sched_gained's seed_ms): one
 * claim_runs with no rows, so that a takeover before their first fire
 * catches that fire up instead of taking the job for new.  Best effort: a
 * failed seed leaves the cursor NULL, as before. */
static void seed_cursors(struct singleton *sg)
{
	struct store_claim c[64];
	int ok[64];
	size_t n = 0;

	for (size_t i = 0; i < sg->el.n; i++) {
		struct elect_job *ej = sg->el.jobs[i];
		struct job *j = ej->user;

		if (!j || j->seed_ms < 0)
			continue;
		if (ej->state == ELECT_HOLDER) {
			if (n == sizeof c / sizeof c[0])
				break;          /* the rest next turn */
			c[n++] = (struct store_claim){ j->name, ej->token, j->seed_ms };
		}
		j->seed_ms = -1;
	}
	if (n == 0)
		return;
	store_set_timeout(sg->el.store, (int)call_bound(sg, clock_boot_ms()));
	if (claim_runs(sg, c, n, 0, ok) != STORE_OK)
		store_failed(sg, "writing the first fire cursor of new jobs", sg->el.store->err);
	store_set_timeout(sg->el.store, 0);
}

/* Accounts of jobs that have no fire to claim soon: one claim_runs for
 * all of them (at most LEDGER_BATCH jobs a turn), moving each cursor to its
 * latest account. */
static int claim_accounts(struct singleton *sg)
{
	struct store_claim c[64];
	int ok[64];
	size_t n = 0;

	for (size_t i = 0; i < sg->el.n && n < sizeof c / sizeof c[0]; i++) {
		const struct elect_job *ej = sg->el.jobs[i];
		const struct job *j = ej->user;
		int64_t fire;

		if (ej->state != ELECT_HOLDER || !j || !sched_idle(j) ||
		    !ledger_has_accounts(&sg->ledger, j->name, &fire))
			continue;
		c[n++] = (struct store_claim){ j->name, ej->token, fire };
	}
	if (n && claim_runs(sg, c, n, 0, ok) != STORE_OK) {
		store_failed(sg, "recording missed fires", sg->el.store->err);
		return STORE_ERR;
	}
	return STORE_OK;
}

/* The ledger's writes, when no fire is near: accounts, records, upkeep.
 * Each bounded by the nearest lease deadline. */
static void ledger_turn(struct singleton *sg, int64_t due_in)
{
	int64_t now = clock_boot_ms(), bound = call_bound(sg, now);

	if (due_in < bound)
		bound = due_in > 1 ? due_in : 1;
	store_set_timeout(sg->el.store, (int)bound);
	/* At most once a second (a job that keeps skipping fires while a long
	 * run goes adds one a fire). */
	if (sg->ledger.nacct && now >= sg->ledger.retry_at && now >= sg->accounts_at) {
		sg->accounts_at = now + LEDGER_FLUSH_EVERY_MS;
		if (claim_accounts(sg) != STORE_OK)
			sg->ledger.retry_at = now + SINGLETON_LEDGER_RETRY_MS;
	}
	if (ledger_flush(&sg->ledger, sg->el.store, now) != STORE_OK)
		store_failed(sg, "writing the run ledger", sg->el.store->err);
	if (ledger_prune(&sg->ledger, sg->el.store, now) != STORE_OK)
		store_failed(sg, "pruning the run ledger", sg->el.store->err);
	store_set_timeout(sg->el.store, 0);
}

void singleton_flush(struct singleton *sg)
{
	size_t left;

	if (!sg->el.store || sg->release_failed)
		return;
	store_set_timeout(sg->el.store, 0);
	if (sg->ledger.nacct)
		claim_accounts(sg);
	while (sg->ledger.nrec) {
		sg->ledger.retry_at = sg->ledger.flush_at = 0;
		if (ledger_flush(&sg->ledger, sg->el.store, clock_boot_ms()) != STORE_OK) {
			store_failed(sg, "writing the run ledger", sg->el.store->err);
			break;
		}
	}
	left = sg->ledger.nrec;
	if (left)
		log_msg(LOG_ERROR, NULL, 0, "run ledger: %zu row%s not written at shutdown (the store "
		        "did not take them)", left, left == 1 ? "" : "s");
}

int64_t singleton_turn(struct singleton *sg, int64_t due_in)
{
	int64_t now = clock_boot_ms(), next, t0;
	uint64_t c0;

	/* A fire (or a restart) is moments away: a store call now could
	 * hold it up by a round trip or a lock wait, while the renewals have
	 * seconds to spare.  Check the deadlines only, and do the rest right
	 * after.  Never for long, so nothing can starve the election. */
	if (due_in < SINGLETON_FIRE_GUARD_MS &&
	    (!sg->deferred_since || now - sg->deferred_since < SINGLETON_FIRE_GUARD_MS)) {
		if (!sg->deferred_since)
			sg->deferred_since = now;
		return until(elect_check_deadlines(&sg->el));
	}
	sg->deferred_since = 0;
	sg->health_left = SINGLETON_HEALTH_PER_TURN;
	if (!sg->el.store && now >= sg->open_retry_at)
		open_store(sg, now);
	/* libpq may have read release events off the socket during a call, so
	 * they are drained around every step, not only when it is readable. */
	if (sg->el.store)
		store_drain_events(sg->el.store, on_release_event, sg);
	t0 = clock_mono_ms();
	c0 = sg->el.store ? sg->el.store->calls : 0;
	sg->step_failed = 0;
	spread_turn(sg);
	next = elect_step(&sg->el);
	if (sg->el.store && store_drain_events(sg->el.store, on_release_event, sg) > 0)
		next = elect_step(&sg->el);
	spread_after_step(sg);
	if (sg->el.store)
		seed_cursors(sg);
	controls(sg);
	if (sg->el.store && !sg->step_failed && !sg->down)
		ledger_turn(sg, due_in);
	if (sg->el.store && spread_due(sg) < next)
		next = spread_due(sg);          /* a follower beats too */
	/* The calls since the last drain may have read NOTIFYs off the socket,
	 * where a readable descriptor no longer shows them: take them now, and
	 * turn again at once when one came, so that none waits for the next
	 * turn (a control for a renew interval). */
	if (sg->el.store && store_drain_events(sg->el.store, on_release_event, sg) > 0)
		next = now;
	if (sg->el.store) {
		uint64_t made = sg->el.store->calls - c0;
		if (clock_mono_ms() - t0 >= 5)
			log_msg(LOG_DEBUG, NULL, 0, "lease store: %llu statements took %lldms",
			        (unsigned long long)made, (long long)(clock_mono_ms() - t0));
		if (made > 0 && !sg->step_failed)
			store_answered(sg);
		/* While the store is down the elector's retries pace the calls. */
		if (!sg->down && ledger_due(&sg->ledger) < next)
			next = ledger_due(&sg->ledger);
	} else {
		next = next < sg->open_retry_at ? next : sg->open_retry_at;
	}
	return until(next);
}

void singleton_run_info(struct singleton *sg, const struct job *j, struct run_info *info)
{
	const struct elect_job *ej = j->elect;

	(void)sg;
	if (!ej)
		return;
	info->token = ej->token;
	info->fence_stop_ms = ej->deadline;
	info->fence_slack_ms = ej->margin_ms / 2;
}

void singleton_push_fence(struct singleton *sg, struct run *r)
{
	struct elect_job *ej = r->job ? r->job->elect : NULL;

	(void)sg;
	if (ej && ej->state == ELECT_HOLDER && r->fence_ms && ej->deadline != r->fence_ms) {
		runner_push_fence(r, ej->deadline);
		r->fence_ms = ej->deadline;
	}
}

int singleton_event_fd(struct singleton *sg)
{
	return sg->el.store ? store_event_fd(sg->el.store) : -1;
}

int singleton_events(struct singleton *sg)
{
	int n = sg->el.store ? store_drain_events(sg->el.store, on_release_event, sg) : 0;

	return n > 0 ? n : 0;
}

void singleton_free(struct singleton *sg, int64_t ran_ms)
{
	if (sg->el.store)
		log_msg(LOG_INFO, NULL, 0, "lease store: %llu statements in %.1fs",
		        (unsigned long long)sg->el.store->calls, ran_ms / 1000.0);
	spread_leave(sg);
	store_close(sg->el.store);
	sg->el.store = NULL;
	spread_free(sg);
	elect_free(&sg->el);
	ledger_free(&sg->ledger);
}

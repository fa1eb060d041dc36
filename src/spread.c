/* spread.c - presence beats, preferred holders and hand-offs (spread.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "runner.h"
#include "sched.h"
#include "singleton.h"
#include "spread.h"

/* Dead replicas' rows go after this long without a heartbeat. */
#define SPREAD_PRUNE_MIN_MS 60000
/* The handover time with release events (PostgreSQL NOTIFY). */
#define SPREAD_HANDOVER_EVENT_MS 50

void spread_init(struct singleton *sg)
{
	struct spread *sp = &sg->spread;

	memset(sp, 0, sizeof *sp);
	sp->pres.me = -1;
	snprintf(sp->me.owner, sizeof sp->me.owner, "%s", sg->el.owner);
	presence_name_of(sp->me.owner, sp->me.name, sizeof sp->me.name);
	if (gethostname(sp->me.host, sizeof sp->me.host - 1) < 0 || !sp->me.host[0])
		snprintf(sp->me.host, sizeof sp->me.host, "localhost");
	snprintf(sp->me.version, sizeof sp->me.version, "%s", LEASH_VERSION);
	sp->me.pid = getpid();
	sp->jobs_dirty = 1;
	sp->carry.me = &sp->me;
	sg->el.beat = &sp->carry;
}

void spread_jobs_changed(struct singleton *sg)
{
	sg->spread.jobs_dirty = 1;
}

int spread_may_run(struct singleton *sg, const struct elect_job *ej)
{
	(void)sg;
	return !ej->handing_off;
}

/* My jobs text and hash, from the elected jobs' names and file digests. */
static void make_jobs(struct singleton *sg)
{
	struct spread *sp = &sg->spread;
	struct elector *el = &sg->el;
	const char **names = malloc((el->n ? el->n : 1) * sizeof *names);
	const char **digests = malloc((el->n ? el->n : 1) * sizeof *digests);
	char *text = NULL;

	if (names && digests) {
		for (size_t i = 0; i < el->n; i++) {
			const struct job *j = el->jobs[i]->user;
			names[i] = el->jobs[i]->name;
			digests[i] = j ? j->digest : NULL;
		}
		if (presence_jobs(names, digests, el->n, sp->me.jobs_hash, &text) == 0) {
			free(sp->me.jobs);
			sp->me.jobs = text;
			sp->njobs_seen = el->n;
			sp->jobs_dirty = 0;
		}
	}
	free(names);
	free(digests);
}

static void apply_one(struct singleton *sg, struct elect_job *ej)
{
	struct spread *sp = &sg->spread;
	struct elector *el = &sg->el;
	int settled = 0, other = 0;

	ej->next_in_line = 0;
	if (sg->cfg->spread) {
		int p = presence_prefer(&sp->pres, ej->name, &settled);
		if (p >= 0 && p != sp->pres.me) {
			other = settled ? 2 : 1;
			ej->next_in_line = sp->pres.me >= 0 &&
			                   presence_runner_up(&sp->pres, ej->name, p) == sp->pres.me;
		}
	}
	elect_prefer(el, ej, other);
}

static void apply_preferences(struct singleton *sg)
{
	for (size_t i = 0; i < sg->el.n; i++)
		apply_one(sg, sg->el.jobs[i]);
}

void spread_job_added(struct singleton *sg, struct elect_job *ej)
{
	if (sg->spread.pres.n > 0)
		apply_one(sg, ej);
}

/* What my row (as the beat read it) says of leash drain. */
static void drained(struct singleton *sg)
{
	struct spread *sp = &sg->spread;
	int on = sp->pres.me >= 0 && sp->pres.reps[sp->pres.me].row.draining;

	if (on == sp->draining)
		return;
	if (on)
		log_msg(LOG_INFO, NULL, 0, "draining (leash drain): every lease is handed off at its "
		        "next safe point, and none is taken");
	else
		log_msg(LOG_INFO, NULL, 0, "undrained (leash undrain): taking leases again");
	sp->draining = on;
	sp->turn_now = 1;
	elect_drain(&sg->el, on);
}

/* Readies me (my jobs text, when they changed) and the prune bound for a
 * beat, alone or carried. */
static int64_t beat_args(struct singleton *sg)
{
	struct spread *sp = &sg->spread;
	int64_t prune = sg->cfg->lease_ms * 10;

	if (prune < SPREAD_PRUNE_MIN_MS)
		prune = SPREAD_PRUNE_MIN_MS;
	if (prune > STORE_DURATION_MAX)
		prune = STORE_DURATION_MAX;
	if (sp->jobs_dirty || sp->njobs_seen != sg->el.n)
		make_jobs(sg);
	return prune;
}

/* A beat's answer, read at db time dbnow (boottime now): the preferences
 * and my drain follow it. */
static void beaten(struct singleton *sg, int64_t now, struct store_replica *rows, size_t n,
                   int64_t dbnow)
{
	struct spread *sp = &sg->spread;

	sp->beat_due = now + sg->cfg->renew_ms;
	sp->beat_ok = now;
	if (presence_set(&sp->pres, rows, n, dbnow, sp->me.owner, sg->cfg->lease_ms,
	                 2 * sg->cfg->retry_ms) < 0) {
		log_msg(LOG_ERROR, NULL, 0, "presence: out of memory");
		return;
	}
	apply_preferences(sg);
	drained(sg);
}

static void beat(struct singleton *sg, int64_t now)
{
	struct spread *sp = &sg->spread;
	struct elector *el = &sg->el;
	struct store_replica *rows = NULL;
	size_t n = 0;
	int64_t dbnow = 0, timeout = sg->cfg->statement_timeout_ms;
	int64_t prune = beat_args(sg);

	/* Never past a held lease's deadline, as every elector call. */
	for (size_t i = 0; i < el->n; i++)
		if (el->jobs[i]->state == ELECT_HOLDER && el->jobs[i]->deadline - now < timeout)
			timeout = el->jobs[i]->deadline - now;
	sp->beat_due = now + sg->cfg->renew_ms;
	store_set_timeout(el->store, (int)(timeout > 1 ? timeout : 1));
	if (store_beat(el->store, &sp->me, prune, &rows, &n, &dbnow) != STORE_OK) {
		if (el->on_error)
			el->on_error(el->arg, "presence", el->store->err);
		return;
	}
	beaten(sg, now, rows, n, dbnow);
}

/* Whether any lease is held: then a renew comes at least once per renew
 * interval, and the beat rides on it. */
static int holding(struct singleton *sg)
{
	for (size_t i = 0; i < sg->el.n; i++)
		if (sg->el.jobs[i]->state == ELECT_HOLDER)
			return 1;
	return 0;
}

int64_t spread_due(struct singleton *sg)
{
	if (sg->spread.turn_now)
		return clock_boot_ms();
	return sg->spread.beat_due + (holding(sg) ? sg->cfg->renew_ms / 2 : 0);
}

void spread_after_step(struct singleton *sg)
{
	struct elect_beat *b = &sg->spread.carry;

	if (!b->done)
		return;
	b->want = b->done = 0;
	beaten(sg, clock_boot_ms(), b->rows, b->n, b->now);
	b->rows = NULL;
	b->n = 0;
}

/* The replica that job now prefers, for the log. */
static const char *preferred_owner(struct singleton *sg, const char *job)
{
	int settled, p = presence_prefer(&sg->spread.pres, job, &settled);

	return p >= 0 ? sg->spread.pres.reps[p].row.owner : "?";
}

/* A lease goes only to a replica that beat within the last two renew
 * intervals, judged now (the rows' age plus the time since they were read):
 * one that just died still looks live for a lease, and a job handed to it
 * would lie unheld until then. */
static int preferred_fresh(struct singleton *sg, const char *job)
{
	struct spread *sp = &sg->spread;
	int settled, p = presence_prefer(&sp->pres, job, &settled);
	int64_t age;

	if (p < 0)
		return 0;
	age = sp->pres.now - sp->pres.reps[p].row.heartbeat + (clock_boot_ms() - sp->beat_ok);
	return age < 2 * sg->cfg->renew_ms;
}

static void hand_off(struct singleton *sg)
{
	struct elector *el = &sg->el;
	struct elect_job **js = NULL;
	int *manual = NULL;
	size_t k = 0;
	int64_t wall = clock_wall_ms(), handover;

	handover = store_event_fd(el->store) >= 0 ? SPREAD_HANDOVER_EVENT_MS
	                                          : sg->cfg->retry_ms + sg->cfg->retry_ms / 5;
	for (size_t i = 0; i < el->n; i++) {
		struct elect_job *ej = el->jobs[i];
		struct job *j = ej->user;
		int service, busy, what;
		int64_t next, after = -1;

		if (ej->state != ELECT_HOLDER || !j)
			continue;
		if (!ej->handoff_wanted && !sg->spread.draining &&
		    (ej->other_preferred != 2 || !preferred_fresh(sg, ej->name)))
			continue;
		service = j->kind == JOB_SERVICE;
		busy = j->run || j->claimed_ms || j->want_ms || j->pending_ms || j->backlog_ms;
		next = service ? -1 : j->next_fire_ms;
		if (!service && !busy && next >= 0 && next - wall <= handover)
			after = job_next_fire(sg->sched->L, j, next);
		what = presence_safe_point(service, busy, wall, next, after, handover);
		if (what == PRESENCE_STOP && !ej->handing_off) {
			ej->handing_off = 1;
			if (ej->handoff_wanted || sg->spread.draining)
				log_msg(LOG_INFO, j->name, 0, "handing off (leash %s): stopping the "
				        "service", ej->handoff_wanted ? "handoff" : "drain");
			else
				log_msg(LOG_INFO, j->name, 0, "handing off to %s (preferred): stopping the "
				        "service", preferred_owner(sg, j->name));
			runner_stop(j->run, "handed off to the preferred replica");
		} else if (what == PRESENCE_RELEASE) {
			if (!js && !(js = malloc(el->n * sizeof *js)))
				return;
			if (!manual && !(manual = malloc(el->n * sizeof *manual)))
				goto done;
			js[k++] = ej;
		}
	}
	if (k == 0)
		goto done;
	for (size_t i = 0; i < k; i++) {
		if (js[i]->handoff_wanted || sg->spread.draining)
			log_msg(LOG_INFO, ((struct job *)js[i]->user)->name, 0,
			        "handing the lease off (leash %s)",
			        js[i]->handoff_wanted ? "handoff" : "drain");
		else
			log_msg(LOG_INFO, ((struct job *)js[i]->user)->name, 0,
			        "handing the lease off to %s (preferred)", preferred_owner(sg, js[i]->name));
		manual[i] = js[i]->handoff_wanted;
	}
	elect_handoff(el, js, k);
	/* Asked for: another replica takes it, whoever is preferred (spread
	 * may bring it back later). */
	for (size_t i = 0; i < k; i++)
		if (manual[i])
			elect_hold(el, js[i], clock_boot_ms() + sg->cfg->lease_ms + sg->cfg->renew_ms +
			           2 * sg->cfg->retry_ms);
done:
	free(js);
	free(manual);
}

void spread_turn(struct singleton *sg)
{
	int64_t now = clock_boot_ms();

	struct spread *sp = &sg->spread;

	if (!sg->el.store)
		return;
	if (holding(sg) && now >= sp->beat_due - sg->cfg->renew_ms / 2 &&
	    now < sp->beat_due + sg->cfg->renew_ms / 2) {
		sp->carry.prune_ms = beat_args(sg);
		sp->carry.want = 1;     /* the next renew carries it */
	} else if (now >= sp->beat_due) {
		sp->carry.want = 0;
		beat(sg, now);
	}
	sp->turn_now = 0;
	hand_off(sg);           /* spread's hand-offs, and leash handoff's */
}

void spread_poke(struct singleton *sg)
{
	int64_t now = clock_boot_ms();

	sg->spread.beat_due = now;
	/* A holder's beat rides on its renew: that renew, now too. */
	for (size_t i = 0; i < sg->el.n; i++)
		if (sg->el.jobs[i]->state == ELECT_HOLDER)
			sg->el.jobs[i]->renew_due = now;
}

void spread_leave(struct singleton *sg)
{
	if (!sg->el.store || sg->release_failed || !sg->spread.beat_ok)
		return;
	store_set_timeout(sg->el.store, (int)sg->cfg->statement_timeout_ms);
	if (store_leave(sg->el.store, sg->el.owner) != STORE_OK)
		log_msg(LOG_WARN, NULL, 0, "presence: the row stays until pruned: %s",
		        sg->el.store->err);
}

void spread_free(struct singleton *sg)
{
	store_free_replicas(sg->spread.carry.rows, sg->spread.carry.n);
	sg->spread.carry.rows = NULL;
	sg->el.beat = NULL;
	presence_free(&sg->spread.pres);
	free(sg->spread.me.jobs);
	sg->spread.me.jobs = NULL;
}

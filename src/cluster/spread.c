/* spread.c - presence beats, preferred holders and hand-offs (spread.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/hash.h"
#include "cluster/handoff.h"
#include "core/log.h"
#include "launch/runner.h"
#include "plan/sched.h"
#include "cluster/singleton.h"
#include "cluster/spread.h"

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

/* My jobs text and hash, from the elected jobs' names, file digests and
 * weights. */
static void make_jobs(struct singleton *sg)
{
	struct spread *sp = &sg->spread;
	struct elector *el = &sg->el;
	const char **names = malloc((el->n ? el->n : 1) * sizeof *names);
	const char **digests = malloc((el->n ? el->n : 1) * sizeof *digests);
	int *weights = malloc((el->n ? el->n : 1) * sizeof *weights);
	char *text = NULL;

	if (names && digests && weights) {
		for (size_t i = 0; i < el->n; i++) {
			const struct job *j = el->jobs[i]->user;
			names[i] = el->jobs[i]->name;
			digests[i] = j ? j->digest : NULL;
			weights[i] = j ? j->weight : 1;
		}
		if (presence_jobs(names, digests, weights, el->n, sp->me.jobs_hash, &text) == 0) {
			free(sp->me.jobs);
			sp->me.jobs = text;
			sp->njobs_seen = el->n;
			sp->jobs_dirty = 0;
		}
	}
	free(names);
	free(digests);
	free(weights);
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
			if (ej->next_in_line && ej->holder &&
			    strcmp(ej->holder, sp->pres.reps[p].row.owner) == 0)
				ej->next_in_line = ELECT_BEHIND_HOLDER;
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

/* The owners of the presence rows, as one number: it changes when a
 * replica joins or leaves (a clean stop, or a dead one's row pruned), not
 * when a heartbeat runs late. */
static uint64_t members(const struct presence *p)
{
	uint64_t h = HASH_FNV_OFFSET;

	for (size_t i = 0; i < p->n; i++)
		h = hash_sep(hash_fnv(h, p->reps[i].row.owner), '\n');
	return hash_mix(h);
}

/* A beat's answer, read at db time dbnow (boottime now): the preferences
 * and my drain follow it. */
static void beaten(struct singleton *sg, int64_t now, struct store_replica *rows, size_t n,
                   int64_t dbnow)
{
	struct spread *sp = &sg->spread;

	sp->beat_due = now + sg->cfg->renew_ms;
	sp->beat_ok = now;
	if (presence_set(&sp->pres, rows, n, dbnow, sp->me.owner, sp->me.jobs, sg->cfg->lease_ms,
	                 2 * sg->cfg->retry_ms) < 0) {
		log_msg(LOG_ERROR, NULL, 0, "presence: out of memory");
		return;
	}
	sp->sig = presence_inputs(&sp->pres);
	sp->members = members(&sp->pres);
	apply_preferences(sg);
	drained(sg);
}

/* My broken job files go with every beat: a copy of the job table's text
 * (a reload frees that one while a renew may still carry the beat). */
_Static_assert(SCHED_BROKEN_MAX <= STORE_BROKEN_MAX, "a replica's broken files fit its row");
static void set_broken(struct singleton *sg)
{
	struct store_replica *me = &sg->spread.me;
	const char *now = sched_broken(sg->sched);
	char *copy;

	if (now ? me->broken && strcmp(now, me->broken) == 0 : !me->broken)
		return;
	if (now && !(copy = strdup(now)))
		return;         /* out of memory: the old text until the next beat */
	free(me->broken);
	me->broken = now ? copy : NULL;
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
	set_broken(sg);
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
	if (sg->spread.stopping)
		return INT64_MAX;       /* no beat, no hand-off: the loop only waits for the runs */
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

/* The hand-off decision's inputs for held job ej (handoff.h). */
static void decision_of(struct singleton *sg, struct elect_job *ej, int64_t now, int64_t wall,
                        int64_t handover, struct handoff_in *in)
{
	struct spread *sp = &sg->spread;
	const struct job *j = ej->user;
	int64_t lease = sg->cfg->lease_ms;

	memset(in, 0, sizeof *in);
	in->manual = ej->handoff_wanted;
	in->draining = sp->draining;
	in->other = sg->cfg->spread && ej->other_preferred == 2 && preferred_fresh(sg, ej->name) &&
	            now >= ej->keep_until;
	in->fresh = sp->beat_ok > ej->gained_at;
	in->moved = sp->sig != ej->gained_sig;
	in->joined_left = sp->members != ej->gained_members;
	in->pinned = ej->ctl_known && ej->ctl.handoff_at != STORE_NO_TIME &&
	             ej->gained_db - ej->ctl.handoff_at <= 2 * lease;
	in->held_ms = now - ej->gained_at;
	in->lease_ms = lease;
	in->handing_off = ej->handing_off;
	in->handing_ms = now - ej->handing_since;
	in->service = j->kind == JOB_SERVICE;
	in->busy = j->run || !sched_idle(j);
	in->now = wall;
	in->next_fire = in->service ? -1 : j->next_fire_ms;
	in->after_next = -1;
	in->handover_ms = handover;
	/* The fire after the next (a Lua call) only matters at a safe point:
	 * not for the held jobs that stay, every turn. */
	if (handoff_reason(in) && !in->service && !in->busy && in->next_fire >= 0 &&
	    in->next_fire - wall <= handover)
		in->after_next = job_next_fire(sg->sched->L, j, in->next_fire);
}

/* A hand-off for reason why, as the log says it: its service stopped
 * (stop) or its lease released. */
static void say_handoff(struct singleton *sg, const struct job *j, const char *why, int stop)
{
	int pref = strcmp(why, "preferred") == 0;

	log_msg(LOG_INFO, j->name, 0, "handing %s %s%s%s%s", stop ? "off" : "the lease off",
	        pref ? "to " : "(", pref ? preferred_owner(sg, j->name) : why,
	        pref ? " (preferred)" : ")", stop ? ": stopping the service" : "");
}

/* leash handoff of held job ej, at its safe point: to the replica the
 * request named when it is live (beat within two renew intervals, not
 * draining), else freed for the next in line.  Then another replica takes
 * it, whoever is preferred: this one holds back, and the taker keeps it
 * until the membership changes (pinned, handoff.h). */
static void manual_handoff(struct singleton *sg, struct elect_job *ej, int64_t now)
{
	char to[STORE_NAME_MAX + 1];

	if (elect_handoff_to(&sg->el, ej, 2 * sg->cfg->renew_ms, to) == STORE_OK && to[0])
		log_msg(LOG_INFO, ej->name, 0, "the lease passed to %s (leash handoff --to)", to);
	elect_hold(&sg->el, ej, now + sg->cfg->lease_ms + sg->cfg->renew_ms +
	           2 * sg->cfg->retry_ms);
}

static void hand_off(struct singleton *sg)
{
	struct elector *el = &sg->el;
	struct elect_job **js = NULL;
	size_t k = 0;
	int64_t now = clock_boot_ms(), wall = clock_wall_ms(), handover;

	handover = store_event_fd(el->store) >= 0 ? SPREAD_HANDOVER_EVENT_MS
	                                          : sg->cfg->retry_ms + sg->cfg->retry_ms / 5;
	for (size_t i = 0; i < el->n; i++) {
		struct elect_job *ej = el->jobs[i];
		struct job *j = ej->user;
		struct handoff_in in;
		const char *why;

		if (ej->state != ELECT_HOLDER || !j)
			continue;
		decision_of(sg, ej, now, wall, handover, &in);
		why = handoff_reason(&in);
		switch (handoff_decide(&in)) {
		case HANDOFF_KEEP:
		case HANDOFF_WAIT:
			break;
		case HANDOFF_CANCEL:
			ej->handing_off = 0;
			log_msg(LOG_INFO, j->name, 0, "hand-off called off: its reason went away (the "
			        "target is gone or no longer preferred, or the drain ended); the job "
			        "runs here again");
			break;
		case HANDOFF_ABANDON:
			ej->handing_off = 0;
			ej->handoff_wanted = 0;
			ej->keep_until = now + sg->cfg->lease_ms;
			log_msg(LOG_WARN, j->name, 0, "hand-off abandoned: not done within the lease "
			        "(%lldms); the job runs here again", (long long)sg->cfg->lease_ms);
			break;
		case HANDOFF_STOP:
			ej->handing_off = 1;
			ej->handing_since = now;
			say_handoff(sg, j, why, 1);
			runner_stop(j->run, RUN_STOP_HANDOFF, strcmp(why, "preferred") == 0
			            ? "handed off to the preferred replica" : why);
			break;
		case HANDOFF_RELEASE:
			say_handoff(sg, j, why, 0);
			if (ej->handoff_wanted) {
				manual_handoff(sg, ej, now);
				break;
			}
			if (!js && !(js = malloc(el->n * sizeof *js)))
				return;
			js[k++] = ej;
			break;
		}
	}
	if (k > 0)
		elect_handoff(el, js, k);
	free(js);
}

/* leash run is stopping (SIGTERM): the presence row goes first, so that
 * no replica hands a job to this one or trusts it as live, then no lease
 * is taken and no hand-off made; the leases go at the end
 * (singleton_release_all). */
void spread_stop(struct singleton *sg)
{
	struct spread *sp = &sg->spread;

	if (sp->stopping)
		return;
	spread_leave(sg);
	sp->stopping = 1;
	elect_drain(&sg->el, 1);
}

void spread_turn(struct singleton *sg)
{
	int64_t now = clock_boot_ms();

	struct spread *sp = &sg->spread;

	if (!sg->el.store || sp->stopping)
		return;
	if (sg->sched->stopping) {
		/* (Here, after the job table's turn took back the processes
		 * forked ahead: their fires are given back, not delayed.) */
		spread_stop(sg);
		return;
	}
	if (holding(sg) && now >= sp->beat_due - sg->cfg->renew_ms / 2 &&
	    now < sp->beat_due + sg->cfg->renew_ms / 2) {
		sp->carry.prune_ms = beat_args(sg);
		set_broken(sg);
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
	if (!sg->el.store || sg->release_failed || !sg->spread.beat_ok || sg->spread.stopping)
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
	free(sg->spread.me.broken);
	sg->spread.me.broken = NULL;
}

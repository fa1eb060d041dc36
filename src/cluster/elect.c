/* elect.c - the election state machine and the batching of store calls. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/elect.h"
#include "core/metrics.h"

#define NEVER INT64_MAX

static int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

/* xorshift64*: jitter only, never security. */
static uint64_t rnd(struct elector *el)
{
	el->rng ^= el->rng >> 12;
	el->rng ^= el->rng << 25;
	el->rng ^= el->rng >> 27;
	return el->rng * 2685821657736338717ULL;
}

void elect_init(struct elector *el, const struct elect_cfg *cfg, const char *owner,
                int64_t (*clock)(void *), void *clock_arg, uint64_t seed)
{
	memset(el, 0, sizeof *el);
	el->cfg = *cfg;
	snprintf(el->owner, sizeof el->owner, "%s", owner);
	el->clock = clock;
	el->clock_arg = clock_arg;
	el->rng = seed ? seed : 0x9e3779b97f4a7c15ULL;
	el->ctl_version = -1;
}

static int64_t now_of(struct elector *el)
{
	return el->clock(el->clock_arg);
}

struct elect_job *elect_add(struct elector *el, const char *name, int64_t lease_ms,
                            int64_t renew_ms, int64_t margin_ms, void *user)
{
	struct elect_job *j;

	if (el->n == el->cap) {
		size_t cap = el->cap ? el->cap * 2 : 16;
		struct elect_job **nj = realloc(el->jobs, cap * sizeof *nj);
		if (!nj)
			return NULL;
		el->jobs = nj;
		el->cap = cap;
	}
	j = calloc(1, sizeof *j);
	if (!j || !(j->name = strdup(name))) {
		free(j);
		return NULL;
	}
	if (lease_ms > 0) {
		j->lease_ms = lease_ms;
		j->renew_ms = renew_ms;
		j->margin_ms = margin_ms;
	} else {
		j->lease_ms = el->cfg.lease_ms;
		j->renew_ms = el->cfg.renew_ms;
		j->margin_ms = el->cfg.margin_ms;
	}
	j->state = ELECT_FOLLOWER;
	j->last_fire = STORE_NO_FIRE;
	j->ctl = (struct store_ctl){ STORE_NO_TIME, STORE_NO_TIME, STORE_NO_TIME };
	j->next_try = now_of(el);
	j->wake_at = NEVER;
	j->user = user;
	el->jobs[el->n++] = j;
	return j;
}

void elect_remove(struct elector *el, struct elect_job *j)
{
	for (size_t i = 0; i < el->n; i++)
		if (el->jobs[i] == j) {
			el->jobs[i] = el->jobs[--el->n];
			free(j->name);
			free(j->holder);
			free(j);
			return;
		}
}

static void become_holder(struct elector *el, struct elect_job *j, int64_t start,
                          int64_t token)
{
	int gained = j->state != ELECT_HOLDER;

	j->state = ELECT_HOLDER;
	j->token = token;
	j->deadline = start + j->lease_ms - j->margin_ms;
	j->renew_due = start + j->renew_ms;
	j->wake_at = NEVER;
	if (gained) {
		j->gained_at = start;
		metrics_note_lease(j->metrics, 1);
	}
	if (gained && el->on_change)
		el->on_change(el->arg, j, 1, "acquired");
	free(j->holder);
	j->holder = NULL;
}

static void become_follower(struct elector *el, struct elect_job *j, int64_t now,
                            const char *why)
{
	int lost = j->state == ELECT_HOLDER;

	j->state = ELECT_FOLLOWER;
	j->token = 0;
	j->handing_off = 0;
	j->handoff_wanted = 0;
	j->next_try = now;              /* it may be free again: look at once */
	j->wake_at = NEVER;
	if (lost)
		metrics_note_lease(j->metrics, 0);
	if (lost && el->on_change)
		el->on_change(el->arg, j, 0, why);
}

static void fail(struct elector *el, const char *what)
{
	if (el->on_error)
		el->on_error(el->arg, what, el->store ? el->store->err : "the store is not open");
}

/* Renews every holder with this lease duration in one statement. */
static void renew_group(struct elector *el, int64_t lease_ms, int64_t now)
{
	const char **names = malloc(el->n * sizeof *names);
	struct elect_job **js = malloc(el->n * sizeof *js);
	int64_t *tokens = malloc(el->n * sizeof *tokens);
	struct store_ctl *ctl = malloc(el->n * sizeof *ctl);
	int64_t timeout = el->cfg.timeout_ms, start, dbnow = 0, nearest = INT64_MAX;
	size_t k = 0;
	int rc;

	if (!names || !js || !tokens || !ctl)
		goto done;
	for (size_t i = 0; i < el->n; i++) {
		struct elect_job *j = el->jobs[i];
		if (j->state == ELECT_HOLDER && j->lease_ms == lease_ms) {
			names[k] = j->name;
			js[k++] = j;
			timeout = min64(timeout, j->deadline - now);
			nearest = min64(nearest, j->deadline);
		}
	}
	if (k == 0)
		goto done;
	start = now;
	if (!el->store || timeout <= 0) {
		rc = STORE_ERR;
	} else {
		store_set_timeout(el->store, (int)timeout);
		if (el->beat && el->beat->want && !el->beat->done) {
			struct elect_beat *b = el->beat;

			rc = store_renew_beat(el->store, el->owner, names, k, lease_ms, tokens, ctl,
			                      b->me, b->prune_ms, &b->rows, &b->n, &dbnow);
			b->now = dbnow;
			b->done = rc == STORE_OK;
		} else {
			rc = store_renew_ctl(el->store, el->owner, names, k, lease_ms, tokens, ctl,
			                     &dbnow);
		}
	}
	if (rc != STORE_OK) {
		int64_t again = now_of(el);
		fail(el, "renew");
		for (size_t i = 0; i < k; i++)
			js[i]->renew_due = min64(again + min64(js[i]->renew_ms / 2, 1000),
			                         js[i]->deadline);
		goto done;
	}
	metrics_note_renew(nearest - now_of(el));
	for (size_t i = 0; i < k; i++) {
		if (tokens[i] >= 0 && tokens[i] < STORE_TOKEN_LIMIT) {
			js[i]->ctl = ctl[i];
			js[i]->ctl_now = dbnow;
			js[i]->ctl_known = 1;
			become_holder(el, js[i], start, tokens[i]);
		} else
			become_follower(el, js[i], now_of(el),
			                "lease lost: the store says another replica holds it, it expired, or "
			                "its row is corrupt");
	}
done:
	free(names);
	free(js);
	free(tokens);
	free(ctl);
}

/* Whether a next in line behind the preferred holder tries at every retry:
 * only where no release event would wake it (PostgreSQL's NOTIFY does, at
 * no statement's cost). */
static int polls_behind(struct elector *el, const struct elect_job *j)
{
	return j->next_in_line == ELECT_BEHIND_HOLDER && !(el->store && store_event_fd(el->store) >= 0);
}

/* Spread: a follower another replica is preferred for waits for
 * not_before, unless it is next in line and the holder's lease ran out. */
static int held_back(struct elector *el, struct elect_job *j, int64_t t)
{
	if (el->draining)
		return 1;
	if (j->look)
		return 0;       /* passed to me, maybe: mine whoever is preferred */
	if (j->hold_until > t)
		return 1;
	return j->other_preferred && j->not_before > t &&
	       !(j->next_in_line && (j->wake_at <= t || polls_behind(el, j)));
}

/* The followers with this lease duration whose try is due: those whose
 * retry comes within half a period go along (one statement per period,
 * however many jobs).  Returns how many, into names and js. */
static size_t due_followers(struct elector *el, int64_t lease_ms, int64_t now,
                            const char **names, struct elect_job **js)
{
	size_t k = 0;

	for (size_t i = 0; i < el->n; i++) {
		struct elect_job *j = el->jobs[i];
		if (j->state == ELECT_FOLLOWER && j->lease_ms == lease_ms &&
		    (j->wake_at <= now || j->next_try <= now + el->cfg.retry_ms / 2) &&
		    !held_back(el, j, now + el->cfg.retry_ms / 2)) {
			names[k] = j->name;
			js[k++] = j;
		}
	}
	return k;
}

/* The store's timeout for a follower's try: nor may it hold the loop past
 * a held lease's deadline. */
static int64_t try_timeout(const struct elector *el, int64_t now)
{
	int64_t timeout = el->cfg.timeout_ms;

	for (size_t i = 0; i < el->n; i++)
		if (el->jobs[i]->state == ELECT_HOLDER)
			timeout = min64(timeout, el->jobs[i]->deadline - now);
	return timeout > 1 ? timeout : 1;
}

/* j's try took the lease (li: what the store said). */
static void acquired(struct elector *el, struct elect_job *j, const struct lease_info *li,
                     int64_t now)
{
	j->last_fire = li->last_fire;
	/* Requests made before we held it were not for us. */
	j->trigger_seen = j->handoff_seen = j->gained_db = li->now;
	j->ctl = (struct store_ctl){ STORE_NO_TIME, STORE_NO_TIME, STORE_NO_TIME };
	become_holder(el, j, now, li->token);
	/* The acquire does not read the controls: a renew at once does (a job
	 * taken over while paused must not run its catch-up before it knows). */
	j->ctl_known = 0;
	j->renew_due = now;
}

/* j's try found the lease held by li->owner: tried again at next, or when
 * that lease runs out (after: our clock at the call's end). */
static void still_follows(struct elector *el, struct elect_job *j, const struct lease_info *li,
                          int64_t after, int64_t next)
{
	j->next_try = next;
	if (!j->holder || strcmp(j->holder, li->owner) != 0) {
		free(j->holder);
		j->holder = strdup(li->owner);
		if (el->on_follow)
			el->on_follow(el->arg, j, li->owner, li->expires_at);
	}
	j->holder_expires = li->expires_at;
	/* Wake exactly when the holder's lease runs out (database time
	 * converted to our clock through the call's own end). */
	j->wake_at = li->expires_at > li->now ? after + (li->expires_at - li->now) + 1 : after;
	if (j->other_preferred)
		j->not_before = j->wake_at + j->renew_ms + el->cfg.retry_ms;
}

/* A corrupt lease row (store_lease_corrupt): not taken (the store refuses
 * it; should one be taken all the same, it runs out unrenewed), tried again
 * at the next retry, reported once per column and value.  1 when it is. */
static int corrupt_row(struct elector *el, struct elect_job *j, const struct lease_info *info,
                       int64_t next)
{
	int64_t v = 0;
	const char *bad = store_lease_corrupt(info->token, info->last_fire, &v);

	if (bad) {
		j->next_try = next;
		j->wake_at = NEVER;
		if (!j->corrupt || strcmp(j->corrupt, bad) != 0 || j->corrupt_value != v) {
			j->corrupt = bad;
			j->corrupt_value = v;
			if (el->on_corrupt)
				el->on_corrupt(el->arg, j, bad, v);
		}
		return 1;
	}
	if (j->corrupt) {
		j->corrupt = NULL;
		if (el->on_corrupt)
			el->on_corrupt(el->arg, j, NULL, 0);
	}
	return 0;
}

/* Tries, in one statement, every due follower with this lease duration. */
static void acquire_group(struct elector *el, int64_t lease_ms, int64_t now)
{
	const char **names = malloc(el->n * sizeof *names);
	struct elect_job **js = malloc(el->n * sizeof *js);
	struct lease_info *info = malloc(el->n * sizeof *info);
	int *got = malloc(el->n * sizeof *got);
	int64_t next, after;
	size_t k;
	int rc;

	if (!names || !js || !info || !got)
		goto done;
	if ((k = due_followers(el, lease_ms, now, names, js)) == 0)
		goto done;
	if (!el->store) {
		rc = STORE_ERR;
	} else {
		store_set_timeout(el->store, (int)try_timeout(el, now));
		rc = store_acquire_all(el->store, el->owner, names, k, lease_ms, info, got);
	}
	after = now_of(el);
	next = after + el->cfg.retry_ms + (int64_t)(rnd(el) % (uint64_t)(el->cfg.retry_ms / 5 + 1));
	if (rc != STORE_OK) {
		fail(el, "acquire");
		for (size_t i = 0; i < k; i++) {
			js[i]->look = 0;
			js[i]->next_try = next;
			js[i]->wake_at = NEVER;
		}
		goto done;
	}
	for (size_t i = 0; i < k; i++) {
		js[i]->look = 0;
		if (corrupt_row(el, js[i], &info[i], next))
			continue;
		if (got[i])
			acquired(el, js[i], &info[i], now);
		else
			still_follows(el, js[i], &info[i], after, next);
	}
done:
	free(names);
	free(js);
	free(info);
	free(got);
}

/* Whether follower j probes (elector.probe_ms): another replica is
 * preferred for it, or it holds back after its own hand-off, so it may
 * not try while a leash handoff --to passes its lease to it. */
static int probing(struct elector *el, const struct elect_job *j, int64_t now)
{
	return el->probe_ms > 0 && j->state == ELECT_FOLLOWER && !j->look && !el->draining &&
	       (j->other_preferred || j->hold_until > now);
}

/* Probes, in one store_held (a read), every due prober with this lease
 * duration: a token back means a leash handoff --to passed the lease to
 * me; then the follower looks at once (its acquire reads the fire cursor
 * and extends the lease). */
static void probe_group(struct elector *el, int64_t lease_ms, int64_t now)
{
	const char **names = malloc(el->n * sizeof *names);
	struct elect_job **js = malloc(el->n * sizeof *js);
	int64_t *tokens = malloc(el->n * sizeof *tokens);
	int64_t timeout = el->cfg.timeout_ms;
	size_t k = 0;

	for (size_t i = 0; i < el->n; i++) {
		struct elect_job *j = el->jobs[i];
		if (probing(el, j, now) && j->lease_ms == lease_ms &&
		    j->next_probe <= now + el->probe_ms / 2) {
			j->next_probe = now + el->probe_ms;
			if (names && js && tokens) {
				names[k] = j->name;
				js[k++] = j;
			}
		} else if (j->state == ELECT_HOLDER) {
			timeout = min64(timeout, j->deadline - now);
		}
	}
	if (k == 0 || !el->store)
		goto done;
	store_set_timeout(el->store, (int)(timeout > 1 ? timeout : 1));
	if (store_held(el->store, el->owner, names, k, lease_ms, tokens) != STORE_OK) {
		fail(el, "acquire");
		goto done;
	}
	for (size_t i = 0; i < k; i++)
		if (tokens[i] >= 0) {
			js[i]->look = 1;
			js[i]->wake_at = now;
		}
done:
	free(names);
	free(js);
	free(tokens);
}

/* Runs f once per distinct lease duration among the jobs selected by want. */
static void per_lease(struct elector *el, int64_t now,
                      int (*want)(struct elector *, struct elect_job *, int64_t),
                      void (*f)(struct elector *, int64_t, int64_t))
{
	int64_t done_leases[8];
	size_t nd = 0;

	for (size_t i = 0; i < el->n; i++) {
		struct elect_job *j = el->jobs[i];
		int seen = 0;

		if (!want(el, j, now))
			continue;
		for (size_t d = 0; d < nd; d++)
			seen |= done_leases[d] == j->lease_ms;
		if (seen)
			continue;
		if (nd < sizeof done_leases / sizeof done_leases[0])
			done_leases[nd++] = j->lease_ms;
		f(el, j->lease_ms, now);
		now = now_of(el);
	}
}

static int renew_due(struct elector *el, struct elect_job *j, int64_t now)
{
	(void)el;
	return j->state == ELECT_HOLDER && j->renew_due <= now;
}

static int try_due(struct elector *el, struct elect_job *j, int64_t now)
{
	(void)el;
	return j->state == ELECT_FOLLOWER && (j->next_try <= now || j->wake_at <= now) &&
	       !held_back(el, j, now);
}

static int probe_due(struct elector *el, struct elect_job *j, int64_t now)
{
	return probing(el, j, now) && j->next_probe <= now;
}

static void check_deadlines(struct elector *el, int64_t now)
{
	for (size_t i = 0; i < el->n; i++) {
		struct elect_job *j = el->jobs[i];
		if (j->state == ELECT_HOLDER && now >= j->deadline)
			become_follower(el, j, now,
			                "lease deadline reached: no successful renew in lease - margin");
	}
}

/* The controls' poll (elector.ctl_poll_ms): one read of the version while
 * any lease is held; a new version makes every holder renew now, so the
 * renew (which reads the controls) follows the control within a poll. */
static void poll_controls(struct elector *el, int64_t now)
{
	int64_t version, dbnow, timeout = el->cfg.timeout_ms;
	int holding = 0;

	if (el->ctl_poll_ms <= 0 || !el->store || now < el->ctl_next)
		return;
	for (size_t i = 0; i < el->n; i++)
		if (el->jobs[i]->state == ELECT_HOLDER) {
			holding = 1;
			timeout = min64(timeout, el->jobs[i]->deadline - now);
		}
	if (!holding)
		return;
	el->ctl_next = now + el->ctl_poll_ms;
	store_set_timeout(el->store, (int)(timeout > 1 ? timeout : 1));
	if (store_ctl_version(el->store, &version, &dbnow) != STORE_OK) {
		fail(el, "reading the controls' version");
		return;                 /* the renewals go on at their pace */
	}
	if (version == el->ctl_version)
		return;
	el->ctl_version = version;
	for (size_t i = 0; i < el->n; i++)
		if (el->jobs[i]->state == ELECT_HOLDER)
			el->jobs[i]->renew_due = now;
}

static int64_t next_wake(struct elector *el)
{
	int64_t next = NEVER, now = now_of(el);

	for (size_t i = 0; i < el->n; i++) {
		struct elect_job *j = el->jobs[i];
		if (j->state == ELECT_HOLDER) {
			next = min64(next, min64(j->renew_due, j->deadline));
			if (el->ctl_poll_ms > 0)
				next = min64(next, el->ctl_next);
			continue;
		}
		if (el->draining)
			continue;       /* tries nothing until elect_drain ends it */
		if (probing(el, j, now))
			next = min64(next, j->next_probe);
		if (j->look)
			next = min64(next, min64(j->next_try, j->wake_at));
		else if (j->hold_until > min64(j->next_try, j->wake_at))
			next = min64(next, j->hold_until);
		else if (j->other_preferred && j->not_before > min64(j->next_try, j->wake_at) &&
		         !polls_behind(el, j))
			next = min64(next, j->next_in_line ? min64(j->wake_at, j->not_before)
			                                   : j->not_before);
		else
			next = min64(next, min64(j->next_try, j->wake_at));
	}
	return next;
}

int64_t elect_step(struct elector *el)
{
	int64_t now = now_of(el);

	check_deadlines(el, now);
	poll_controls(el, now);
	per_lease(el, now, renew_due, renew_group);
	now = now_of(el);
	check_deadlines(el, now);       /* a slow renew may have run past one */
	per_lease(el, now, probe_due, probe_group);
	now = now_of(el);
	per_lease(el, now, try_due, acquire_group);
	return next_wake(el);
}

int64_t elect_check_deadlines(struct elector *el)
{
	check_deadlines(el, now_of(el));
	return next_wake(el);
}

void elect_wake(struct elector *el, const char *name)
{
	for (size_t i = 0; i < el->n; i++) {
		struct elect_job *j = el->jobs[i];

		if (j->state != ELECT_FOLLOWER || strcmp(j->name, name) != 0)
			continue;
		/* Spread: a release is most often a hand-off to the preferred
		 * replica, which tries at once; the next in line looks a moment
		 * later (the preferred one may have been the one that stopped),
		 * the others not at all.  When the preferred one was the holder,
		 * the release is a leash handoff or its stop: the next in line
		 * takes it at once. */
		if (!j->other_preferred || j->next_in_line == ELECT_BEHIND_HOLDER)
			j->wake_at = now_of(el);
		else if (j->next_in_line)
			j->wake_at = now_of(el) + ELECT_WAKE_DEFER_MS;
	}
}

void elect_look(struct elector *el, const char *name)
{
	for (size_t i = 0; i < el->n; i++) {
		struct elect_job *j = el->jobs[i];

		if (j->state == ELECT_FOLLOWER && strcmp(j->name, name) == 0) {
			j->look = 1;
			j->wake_at = now_of(el);
		}
	}
}

void elect_poke(struct elector *el, const char *name)
{
	for (size_t i = 0; i < el->n; i++) {
		struct elect_job *j = el->jobs[i];

		if (j->state == ELECT_HOLDER && strcmp(j->name, name) == 0)
			j->renew_due = now_of(el);
	}
}

/* A holder that released (or gave up releasing) its lease: a follower that
 * tries again after retry, with no change reported (the body has stopped). */
static void let_go(struct elect_job *j, int64_t next_try)
{
	metrics_note_lease(j->metrics, 0);
	j->state = ELECT_FOLLOWER;
	j->token = 0;
	j->next_try = next_try;
	j->wake_at = NEVER;
}

int elect_release(struct elector *el, struct elect_job *j)
{
	int rc = STORE_OK;

	if (j->state != ELECT_HOLDER)
		return STORE_OK;
	if (el->store) {
		store_set_timeout(el->store, (int)el->cfg.timeout_ms);
		rc = store_release(el->store, j->name, el->owner);
	}
	let_go(j, now_of(el) + el->cfg.retry_ms);
	if (rc != STORE_OK)
		fail(el, "release");
	return rc;
}

int elect_release_all(struct elector *el, size_t *released)
{
	const char **names = malloc((el->n ? el->n : 1) * sizeof *names);
	int64_t next;
	size_t k = 0;
	int rc = STORE_OK;

	*released = 0;
	if (!names) {
		/* No room for the batch: one at a time (each reports its own
		 * error), stopping at the first error. */
		for (size_t i = 0; i < el->n && rc == STORE_OK; i++) {
			if (el->jobs[i]->state != ELECT_HOLDER)
				continue;
			if ((rc = elect_release(el, el->jobs[i])) == STORE_OK)
				++*released;
		}
	} else {
		for (size_t i = 0; i < el->n; i++)
			if (el->jobs[i]->state == ELECT_HOLDER)
				names[k++] = el->jobs[i]->name;
		if (k > 0 && el->store) {
			store_set_timeout(el->store, (int)el->cfg.timeout_ms);
			rc = store_release_all(el->store, el->owner, names, k);
		}
		free(names);
		if (rc != STORE_OK)
			fail(el, "release");
		else
			*released = k;
	}
	/* Released or not, none is held any more: as after elect_release. */
	next = now_of(el) + el->cfg.retry_ms;
	for (size_t i = 0; i < el->n; i++)
		if (el->jobs[i]->state == ELECT_HOLDER)
			let_go(el->jobs[i], next);
	return rc;
}

void elect_free(struct elector *el)
{
	for (size_t i = 0; i < el->n; i++) {
		free(el->jobs[i]->name);
		free(el->jobs[i]->holder);
		free(el->jobs[i]);
	}
	free(el->jobs);
	el->jobs = NULL;
	el->n = el->cap = 0;
}

void elect_prefer(struct elector *el, struct elect_job *j, int other)
{
	if (j->other_preferred && !other && j->state == ELECT_FOLLOWER) {
		j->next_try = now_of(el);
		j->not_before = 0;
	}
	j->other_preferred = other;
}

void elect_hold(struct elector *el, struct elect_job *j, int64_t until)
{
	(void)el;
	j->hold_until = until;
}

void elect_drain(struct elector *el, int on)
{
	if (el->draining && !on) {
		int64_t now = now_of(el);

		for (size_t i = 0; i < el->n; i++)
			if (el->jobs[i]->state == ELECT_FOLLOWER)
				el->jobs[i]->next_try = now;
	}
	el->draining = on;
}

int elect_paused(const struct elect_job *j)
{
	if (j->state == ELECT_HOLDER && !j->ctl_known)
		return -1;
	return j->state == ELECT_HOLDER && j->ctl.paused_until != STORE_NO_TIME &&
	       j->ctl.paused_until > j->ctl_now;
}

/* A holder whose lease was handed off (or that gave up handing it off):
 * a follower held back as elect_handoff says. */
static void handed(struct elector *el, struct elect_job *j, int64_t now)
{
	let_go(j, now + el->cfg.retry_ms);
	j->handing_off = 0;
	j->handoff_wanted = 0;
	j->not_before = now + 2 * el->cfg.retry_ms + j->renew_ms;
}

int elect_handoff(struct elector *el, struct elect_job *const *js, size_t n)
{
	const char **names = malloc((n ? n : 1) * sizeof *names);
	size_t k = 0;
	int64_t now;
	int rc = STORE_OK;

	if (!names)
		return STORE_ERR;
	for (size_t i = 0; i < n; i++)
		if (js[i]->state == ELECT_HOLDER)
			names[k++] = js[i]->name;
	if (k > 0 && el->store) {
		store_set_timeout(el->store, (int)el->cfg.timeout_ms);
		rc = store_release_all(el->store, el->owner, names, k);
		if (rc != STORE_OK)
			fail(el, "release");
	}
	free(names);
	/* Released or not (then it expires by itself), none is ours now. */
	now = now_of(el);
	for (size_t i = 0; i < n; i++)
		if (js[i]->state == ELECT_HOLDER)
			handed(el, js[i], now);
	return rc;
}

int elect_handoff_to(struct elector *el, struct elect_job *j, int64_t live_ms, char *to)
{
	int rc = STORE_OK;

	to[0] = '\0';
	if (j->state != ELECT_HOLDER)
		return STORE_OK;
	if (el->store) {
		store_set_timeout(el->store, (int)el->cfg.timeout_ms);
		rc = store_handoff(el->store, j->name, el->owner, j->lease_ms, live_ms, to);
		if (rc == STORE_ERR)
			fail(el, "release");
	}
	handed(el, j, now_of(el));
	return rc;
}

/* elect.h - per-job single-executor election over the lease store.
 *
 * Each singleton job is a follower or the holder of its lease.  The elector
 * batches the replica's database work so it does not grow with the number
 * of jobs: one renew_all for every held lease (per lease duration) each
 * renew interval, one acquire_all for the followers that are due.
 *
 * Times are milliseconds on the elector's clock (CLOCK_BOOTTIME in leash
 * run; injected in the specs).  A holder's body must stop at its deadline,
 * `start of the last good acquire or renew + lease - margin`; every store
 * call's timeout is bounded by the nearest deadline it concerns.
 */
#ifndef LEASH_ELECT_H
#define LEASH_ELECT_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

struct metrics_job;

enum elect_state { ELECT_FOLLOWER, ELECT_HOLDER };

struct elect_job {
	char *name;
	int64_t lease_ms, renew_ms, margin_ms;
	enum elect_state state;
	int64_t token;                  /* holder: our fencing token */
	int64_t last_fire;              /* the fire cursor the acquire read (STORE_NO_FIRE) */
	int64_t deadline;               /* holder: the body must stop here */
	int64_t renew_due;              /* holder: next renew */
	int64_t next_try;               /* follower: next retry (shared by a batch) */
	int64_t wake_at;                /* follower: the holder's reported expiry, or INT64_MAX */
	char *holder;                   /* follower: the holder when known (malloc'd), or NULL;
	                                 * still set while on_change reports a gain (the
	                                 * holder it took over from) */
	int64_t holder_expires;         /* with holder: its lease's expiry as last seen
	                                 * (database clock) */
	void *user;
	struct metrics_job *metrics;    /* the job's /metrics record (lease held,
	                                 * gained, lost), or NULL */
	/* Spread (elect_prefer): another live replica is preferred for the job.
	 * Such a follower tries no sooner than not_before: the holder's expiry
	 * it last saw plus renew + retry, or retry x 2 + renew after it let the
	 * lease go, so the preferred replica gets there first. */
	int other_preferred;
	int next_in_line;               /* I am preferred once the preferred one is gone:
	                                 * I try at its lease's expiry, as without spread;
	                                 * ELECT_BEHIND_HOLDER: and the preferred one holds
	                                 * it, so a release is a leash handoff or a stop
	                                 * for me to take: I try at every retry (at its
	                                 * release event, where the store has them) */
	int64_t not_before;
	int handing_off;                /* holder: the lease goes to the preferred replica */
	int64_t gained_at;              /* holder: when it took the lease (elector clock) */
	int64_t gained_db;              /* ... and the database's clock then */
	/* Spread's bookkeeping of a hand-off (handoff.h): the membership the
	 * holder took the lease under, when a hand-off began, and how long the
	 * job stays after an abandoned one. */
	uint64_t gained_sig, gained_members;
	int64_t handing_since, keep_until;
	/* Controls (leash pause/trigger/handoff), as the last renew read them
	 * (store_renew_ctl), with the database's clock then (ctl_now).  A
	 * request counts when newer than *_seen: the acquire's db time at
	 * first, then the request acted on. */
	struct store_ctl ctl;
	int64_t ctl_now;
	int ctl_known;                  /* holder: a renew read them since the acquire */
	int64_t trigger_seen, handoff_seen;
	int handoff_wanted;             /* holder: leash handoff asked for a release */
	int64_t hold_until;             /* follower: after a manual hand-off, tries no
	                                 * sooner (elect_hold) */
	/* The lease row is corrupt (store.h's bounds): the column and the
	 * value last reported (on_corrupt), else NULL.  No acquire takes such
	 * a row; the follower tries it at every retry, and reports it again
	 * only when the column or the value changes. */
	const char *corrupt;
	int64_t corrupt_value;
	int look;                       /* follower: the lease may have been handed to
	                                 * me (elect_look, or a probe found it mine):
	                                 * one try at once, held back or not */
	int64_t next_probe;             /* follower: the next probe (elector.probe_ms) */
};

/* A presence beat the next renew carries (spread.c): while want is set
 * and done is not, the next renew is store_renew_beat with me and
 * prune_ms (one round trip instead of two), and its rows land here (done
 * = 1) for the caller to take over. */
#define ELECT_BEHIND_HOLDER 2

struct elect_beat {
	int want, done;
	const struct store_replica *me;
	int64_t prune_ms;
	struct store_replica *rows;
	size_t n;
	int64_t now;                    /* the database's clock the rows were read at */
};

struct elect_cfg {
	int64_t lease_ms, renew_ms, retry_ms, margin_ms;
	int64_t timeout_ms;             /* the longest any store call may take */
};

/* What happened to a job: gained (now holder, with token and the cursor
 * last_fire the acquire read) or lost (the body must stop now), and why. */
typedef void (*elect_change_fn)(void *arg, struct elect_job *, int gained, const char *why);
/* A try found the job's lease row corrupt (column, value), once per
 * column and value; column NULL: a later try found it sane again. */
typedef void (*elect_corrupt_fn)(void *arg, struct elect_job *, const char *column,
                                 int64_t value);
/* A store call failed; what = "renew" or "acquire". */
typedef void (*elect_error_fn)(void *arg, const char *what, const char *err);
/* A follower learned who holds its job (a new or another holder), with the
 * holder's expiry on the database's clock. */
typedef void (*elect_follow_fn)(void *arg, struct elect_job *, const char *holder,
                                int64_t expires_at);

struct elector {
	struct elect_cfg cfg;
	char owner[STORE_NAME_MAX + 1];
	struct store *store;            /* NULL while it cannot be opened */
	struct elect_job **jobs;
	size_t n, cap;
	uint64_t rng;
	int64_t (*clock)(void *arg);
	void *clock_arg;
	elect_change_fn on_change;
	elect_error_fn on_error;
	void *arg;
	elect_follow_fn on_follow;      /* may be NULL */
	elect_corrupt_fn on_corrupt;    /* may be NULL */
	int draining;                   /* leash drain: no follower tries (elect_drain) */
	/* A store without release events: a follower held back by preference
	 * looks every probe_ms (one store_held for all of them: a read) whether
	 * a leash handoff --to passed the lease to it, and takes it at once if
	 * so.  0: no probes (a store with events: elect_look is told instead). */
	int64_t probe_ms;
	struct elect_beat *beat;        /* NULL: no beat rides on the renewals */
	/* A store without release events: while the replica holds a lease it
	 * reads the controls' version (store_ctl_version: one statement for
	 * the replica, however many jobs) every ctl_poll_ms, and when it
	 * changed every holder renews at once, and so reads the controls.  0:
	 * no polls (a store with events: elect_poke is told instead).
	 * ctl_version: the last version read, -1 before the first (which
	 * renews at once too); ctl_next: the next read. */
	int64_t ctl_poll_ms, ctl_version, ctl_next;
};

void elect_init(struct elector *, const struct elect_cfg *, const char *owner,
                int64_t (*clock)(void *), void *clock_arg, uint64_t seed);

/* Adds a job as a follower that tries at once.  lease_ms 0 = the elector's
 * lease, renew and margin; else the job's own three, which the caller has
 * derived and checked (leash.config's timing(): renew < lease - margin). */
struct elect_job *elect_add(struct elector *, const char *name, int64_t lease_ms,
                            int64_t renew_ms, int64_t margin_ms, void *user);

/* Forgets a job (release it first if it is held). */
void elect_remove(struct elector *, struct elect_job *);

/* Does what is due: deadlines, renewals, acquisitions.  Returns the clock
 * time at which it wants to be called again. */
int64_t elect_step(struct elector *);

/* Only what needs no store call: holders past their deadline become
 * followers.  For a moment when a store call would delay something more
 * urgent (a fire about to start).  Returns as elect_step does. */
int64_t elect_check_deadlines(struct elector *);

/* Another replica released name (PostgreSQL NOTIFY): try it at once (a
 * follower next in line after the preferred replica: ELECT_WAKE_DEFER_MS
 * later, time for a live preferred one to take it first (it does within a
 * few ms); when the preferred one is what stopped, that is the handover:
 * 100 ms was the whole of a clean stop's; another not preferred: at its
 * own time). */
#define ELECT_WAKE_DEFER_MS 50
void elect_wake(struct elector *, const char *name);

/* A control of name changed (PostgreSQL NOTIFY): its holder renews at once,
 * and so reads it, instead of at its next renew. */
void elect_poke(struct elector *, const char *name);

/* Releases one held lease (the body has stopped); returns the store's answer. */
int elect_release(struct elector *, struct elect_job *);

/* Releases every held lease in one store_release_all (one statement per
 * chunk; the store falls back to single releases, stopping at the first
 * error).  Every holder is a follower afterwards, whatever the answer.
 * Returns the store's answer; *released is how many were released (0 on
 * an error). */
int elect_release_all(struct elector *, size_t *released);

/* Says whether another replica is preferred for the job (spread).  A
 * follower that becomes preferred tries at once. */
void elect_prefer(struct elector *, struct elect_job *, int other);

/* Hands n held leases off: releases them in one store_release_all and
 * leaves them followers (the bodies have stopped), each trying again no
 * sooner than retry x 2 + renew unless it becomes preferred.  Returns the
 * store's answer. */
int elect_handoff(struct elector *, struct elect_job *const *js, size_t n);

/* leash handoff: releases held job j through store_handoff, which passes
 * the lease to the replica the request named when that one is live (beat
 * within live_ms, not draining), else frees it for the next in line.  j is
 * a follower afterwards, held back as after elect_handoff.  to
 * (STORE_NAME_MAX + 1 bytes): the new holder, "" when freed (or on an
 * error: the lease then expires by itself).  Returns the store's answer. */
int elect_handoff_to(struct elector *, struct elect_job *j, int64_t live_ms, char *to);

/* A lease of name was passed to a named replica (PostgreSQL NOTIFY of
 * STORE_EVENT_HANDOFF): a follower of it looks once, at once, whoever is
 * preferred and though it holds back after its own hand-off (the one it
 * went to finds it its own; the others are refused). */
void elect_look(struct elector *, const char *name);

/* After a manual hand-off (leash handoff, drain): j tries again no sooner
 * than until, whoever is preferred, so that another replica takes it. */
void elect_hold(struct elector *, struct elect_job *, int64_t until);

/* leash drain: while on, no follower tries to take its lease (the holders
 * are handed off by the caller, at safe points); when it ends, every
 * follower tries at once. */
void elect_drain(struct elector *, int on);

/* Whether the job is paused, as its last renew read it. */
int elect_paused(const struct elect_job *);

void elect_free(struct elector *);

#endif

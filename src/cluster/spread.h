/* spread.h - singleton mode's presence and spread: the replica's heartbeat
 * row, the preferred holder of each job, and the hand-offs to it.
 *
 * Once per renew interval (and whatever it holds: a follower beats too)
 * the replica writes its presence row and reads the others' in one store
 * call (store_beat, or on the renew itself: store_renew_beat); from those rows each job's preferred replica is
 * recomputed (presence.h) and told to the elector (elect_prefer).  A held
 * job whose preferred replica is another, settled one is handed off at a
 * safe point (presence_safe_point), all the turn's hand-offs in one
 * release.  With [singleton] spread = false the row is still written (for
 * leash status) but every job is first come, first held.
 *
 * leash drain sets the row's draining (the beat reads it back): then every
 * held lease is handed off at its safe point, whoever is preferred, and
 * the elector takes none (elect_drain) until the row says otherwise. */
#ifndef LEASH_SPREAD_H
#define LEASH_SPREAD_H

#include <stdint.h>

#include "cluster/presence.h"

struct singleton;

struct spread {
	struct presence pres;
	struct store_replica me;        /* me.jobs: my jobs text (malloc'd) */
	int64_t beat_due;               /* boottime */
	int64_t beat_ok;                /* boottime of the last good beat, or 0 */
	size_t njobs_seen;              /* jobs when me.jobs was made */
	int jobs_dirty;                 /* a reload may have changed the jobs */
	int draining;                   /* my row says leash drain: every lease goes
	                                 * at its safe point and none is taken */
	struct elect_beat carry;        /* the beat on the elector's next renew */
	int turn_now;                   /* a drain or a handoff came: the hand-offs
	                                 * are looked at next turn, not next renew */
	uint64_t sig;                   /* the membership the last beat read */
	uint64_t members;               /* ... its presence rows' owners alone */
	int stopping;                   /* spread_stop: the row is gone, no more beats */
};

/* Sets up the row's fixed fields (host, pid, version). */
void spread_init(struct singleton *);

/* The beat when it is due, then the preferences and hand-offs.  A
 * replica that holds leases lets its beat ride on the elector's next renew
 * (store_renew_beat), from half a renew interval before the beat is due;
 * it beats on its own only when no renew carried it by half an interval
 * after, and a replica that holds nothing beats on its own when due. */
void spread_turn(struct singleton *);

/* After elect_step: takes over the rows of a beat a renew carried. */
void spread_after_step(struct singleton *);

/* The boottime at which spread_turn has a beat to make. */
int64_t spread_due(struct singleton *);

/* A job's definitions changed (a reload): the next beat sends them. */
void spread_jobs_changed(struct singleton *);

/* A job entered the election (a reload): it follows the preferences the
 * last beat read, rather than first come until the next beat. */
struct elect_job;
void spread_job_added(struct singleton *, struct elect_job *);

/* Whether a held job may start a run: not while it is being handed off. */
int spread_may_run(struct singleton *, const struct elect_job *);

/* A drain or undrain was written (PostgreSQL NOTIFY): beat now, on the
 * renew when holding, instead of at the next renew interval. */
void spread_poke(struct singleton *);

/* At a clean stop: deletes the row (once; nothing after spread_stop). */
void spread_leave(struct singleton *);

/* leash run is stopping (SIGTERM; spread_turn calls it once the job table
 * saw the stop): deletes the row first, so that no replica hands it a job
 * or trusts it as live, and takes no lease and makes no hand-off from then
 * on; the leases go at the end. */
void spread_stop(struct singleton *);

void spread_free(struct singleton *);

#endif

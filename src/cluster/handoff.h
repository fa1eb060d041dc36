/* handoff.h - whether a held job leaves this replica now: the hand-off
 * decision, with no clock, store or presence of its own (spread.c feeds it,
 * the specs drive it through leash.core with made-up inputs).
 *
 * The invariant it keeps: a held lease of a service means its process runs
 * (or a restart is due within its backoff), and a periodic job's held lease
 * means its fires run.  So a hand-off goes only to a target that is live as
 * a view read after the lease was taken says (a stopping replica deletes its
 * presence row before it releases its leases, so a view that still shows it
 * is not trusted for a lease taken from it); a hand-off whose reason went
 * away is called off at once and the job runs here again; one that did not
 * complete within the lease is abandoned.  A job moves at most once per
 * lease because of preference: a holder that took it while the placement
 * (the membership) was what it is now keeps it for a lease, and one that
 * took it through leash handoff (pinned) keeps it until a replica joins or
 * leaves. */
#ifndef LEASH_HANDOFF_H
#define LEASH_HANDOFF_H

#include <stdint.h>

struct handoff_in {
	int manual;             /* leash handoff asked for it */
	int draining;           /* this replica is drained (leash drain) */
	int other;              /* the placement prefers another replica, settled and
	                         * live by its last heartbeat */
	int fresh;              /* the presence view was read after the lease was taken */
	int moved;              /* the membership changed since the lease was taken */
	int pinned;             /* taken through leash handoff */
	int joined_left;        /* a replica joined or left (the set of presence rows
	                         * changed) since the lease was taken: what ends a
	                         * pin, where moved also counts a heartbeat that ran
	                         * late a moment (a replica live, not live, live) */
	int64_t held_ms;        /* how long this replica has held the lease */
	int64_t lease_ms;
	int handing_off;        /* a hand-off is under way: the run was stopped for it */
	int64_t handing_ms;     /* ... since this long */
	/* The safe point (presence_safe_point): */
	int service, busy;
	int64_t now, next_fire, after_next, handover_ms;
};

enum handoff_what {
	HANDOFF_KEEP,           /* nothing to do: the job stays and runs here */
	HANDOFF_WAIT,           /* it goes, at a safe point not reached yet */
	HANDOFF_STOP,           /* stop the run first (a service), then release */
	HANDOFF_RELEASE,        /* release the lease now */
	HANDOFF_CANCEL,         /* the reason went away: call the hand-off off, run again */
	HANDOFF_ABANDON,        /* not done within the lease: run again, keep it a lease */
};

/* The reason for a hand-off now, as a short text for the log ("leash
 * handoff", "leash drain", "preferred"), or NULL when there is none. */
const char *handoff_reason(const struct handoff_in *);

enum handoff_what handoff_decide(const struct handoff_in *);

#endif

/* hooks.h - a job's on_failure and on_recover: a child on the holder, once
 * per change of the job's health for the whole cluster.
 *
 * A run that ended "failed" or "timeout" makes the job failing; one that
 * ended "ok" (or a triggered run that succeeded) makes it ok; "lost" and
 * "killed" (the lease went, leash stopped it) change nothing.  In singleton
 * mode the store decides whether that is a change (store_health: one
 * conditional UPDATE under the lease), so the replica whose call changed it
 * runs the hook and no other, and a new holder finds the state its
 * predecessor left.  Without the election (singleton mode off, or
 * singleton = false) each process keeps the state for itself.  A hook is a
 * child of its own, not a run of the job: it takes no part in overlap, the
 * ledger or the lease, and its failure is logged and changes nothing.
 */
#ifndef LEASH_HOOKS_H
#define LEASH_HOOKS_H

#include <lua.h>

struct job;
struct run;

#define HOOKS_TIMEOUT_MS 60000          /* a hook's bound when the job sets no timeout */
#define HOOKS_LOCAL (-2)                /* record's answer: decide in this process */

struct hooks {
	lua_State *L;
	const char *replica;            /* the owner id, for ctx.replica */
	int64_t grace_ms;
	struct run **runs;              /* the loop's runs: a hook's child joins them */
	/* Records the job's new health; 1 when that changed it (the hook
	 * runs), 0 when not, -1 when it could not say (nothing runs, the
	 * state stays unknown), HOOKS_LOCAL when the process decides alone (a
	 * job outside the election).  NULL: always alone. */
	int (*record)(void *arg, struct job *, int failing);
	void *arg;
};

/* Run r of its job ended (r->job set, not a hook): the job's health, and
 * the hook of a change.  Nothing while stopping. */
void hooks_run_ended(struct hooks *, struct run *r, int stopping);

/* Hook child r ended: the job's next waiting hook starts (not while
 * stopping). */
void hooks_hook_ended(struct hooks *, struct run *r, int stopping);

#endif

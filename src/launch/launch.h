/* launch.h - the ways a run's process is started, one ops table each, as
 * [leash] prefork picks: "prefork" forks a fire's process ahead of it (the
 * spawner does, or the parent when the spawner cannot) and starts it at
 * the fire; "fork" forks each run's process when it starts.  Both run the
 * same body the same way; only when the fork happens differs.  What a run
 * is once started (stop, reap, its end) is runner.h's, the same for both. */
#ifndef LEASH_LAUNCH_H
#define LEASH_LAUNCH_H

#include <stdint.h>
#include <lua.h>

#include "launch/runner.h"
#include "plan/job.h"

struct launch_ops {
	const char *name;               /* "prefork" or "fork" */
	/* Starts a run of job now (no process was forked ahead for it, or that
	 * one died): its handle, or NULL (logged).  regular: a periodic fire
	 * on time (not a catch-up, a trigger or a service), which may start
	 * before its child is there (runner_start_soon). */
	struct run *(*start)(lua_State *L, struct job *, const struct run_info *, int regular);
	/* Forks ahead the process of a fire (runner_prepare); NULL: this way
	 * forks none ahead, and the three below are NULL too. */
	struct run *(*prepare)(lua_State *L, struct job *, const struct run_info *, int *later);
	/* A start written ahead, and taken back (runner_go_ahead, _take_back). */
	int (*go_ahead)(struct run *, const struct run_info *);
	int (*take_back)(struct run *);
	/* What forking one ahead costs where it is done (µs; 0: unknown). */
	int64_t (*prep_cost_us)(void);
};

/* The ops of [leash] prefork = true (1) or false (0). */
const struct launch_ops *launch_pick(int prefork);

#endif

/* launch.c - the two ways a run's process is started (launch.h). */
#include "launch/launch.h"
#include "launch/prefork/spawn.h"

static struct run *start_fork(lua_State *L, struct job *job, const struct run_info *info,
                              int regular)
{
	(void)regular;
	return runner_start(L, job, info);
}

/* A regular fire nothing was forked ahead for: the spawner forks it while
 * the loop goes on; catch-ups, triggers and services fork here. */
static struct run *start_prefork(lua_State *L, struct job *job, const struct run_info *info,
                                 int regular)
{
	struct run *r = regular ? runner_start_soon(L, job, info) : NULL;

	return r ? r : runner_start(L, job, info);
}

static const struct launch_ops fork_ops = {
	.name = "fork", .start = start_fork,
};

static const struct launch_ops prefork_ops = {
	.name = "prefork", .start = start_prefork, .prepare = runner_prepare,
	.go_ahead = runner_go_ahead, .take_back = runner_take_back,
	.prep_cost_us = spawn_cost_us,
};

const struct launch_ops *launch_pick(int prefork)
{
	return prefork ? &prefork_ops : &fork_ops;
}

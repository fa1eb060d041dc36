/* runs.h - the runs of `leash run` (runs.c): the job table's environment for
 * them, their deadlines, their ends. */
#ifndef LEASH_RUNS_H
#define LEASH_RUNS_H

#include <stdint.h>

struct loop;
struct sched_env;

/* The job table's environment: its clocks, its runs (with [leash] prefork
 * = false, none forked ahead) and, in singleton mode, the election. */
void runs_env(struct loop *lp, struct sched_env *env);

/* Timeouts and kills that are due; returns ms until the next one, at most
 * sleep_ms. */
int64_t runs_tick(struct loop *lp, int64_t sleep_ms);

/* Runs whose child exited and whose pipes are drained: logged, handed back
 * to the job table, freed; after a burst, the heap trimmed. */
void runs_finish(struct loop *lp);

#endif

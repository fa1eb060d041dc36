/* warm.h - the pages a run will touch, faulted in while it waits.
 *
 * A process forked ahead of its fire shares the spawner's memory copy-on-write
 * and has none of the libraries' code mapped: each page its body first writes
 * (a copy) or runs (a mapping) costs a page fault after the fire, and in a
 * second's burst of starts those faults were two fifths of the children's
 * time before their bodies.  So now and then a run writes down, at its end,
 * the pages it faulted in (its learning run), and the runs of the same job
 * after it fault those in before their fire, while they wait.
 *
 * Only the spawner's children take part: they all have its address space,
 * which does not change while it lives (see spawn.c, hugify).  Nothing here
 * changes what a run computes: a page faulted in early holds what it would
 * have held; a stale or wrong list only costs the time to fault it in. */
#ifndef LEASH_WARM_H
#define LEASH_WARM_H

#include <stdint.h>

/* The spawner, once, before its first fork: the table of learned pages,
 * shared with its children.  Without it (0 slots mapped) the rest does
 * nothing. */
void warm_init(void);

/* A child forked ahead, before it waits for its fire, ahead_ns away: the
 * pages the job's learning run faulted in, faulted in now, when the fire is
 * at least 2 ms off.  Returns 1 when this run is the job's learning run
 * instead (none learned yet, or it is time to learn again, and its fire at
 * least 20 ms off): it has noted what it has mapped so far, faults nothing
 * in, and calls warm_learn at its end. */
int warm_up(const void *job, int64_t ahead_ns);

/* At the end of a learning run (its body over, its exit yielding to the
 * runs starting): the pages it faulted in, for the job's next runs. */
void warm_learn(const void *job);

#endif

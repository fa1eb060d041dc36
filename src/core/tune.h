/* tune.h - what only makes starts faster, each switched off alone for the
 * benchmark that measures what it buys (bench/tricks_bench.lua; the figures
 * in bench/tricks_results.txt).  LEASH_TUNE_OFF lists the names below,
 * comma-separated; leash never sets it, and an unknown name is ignored.
 * docs/internals.md explains each. */
#ifndef LEASH_TUNE_H
#define LEASH_TUNE_H

enum tune {
	TUNE_WARM,      /* "warm": a child faults in the pages its job wrote last time */
	TUNE_HUGE,      /* "huge": the spawner's heap on huge pages */
	TUNE_TIDY,      /* "tidy": the spawner uses up its heap's free chunks */
	TUNE_DEFER,     /* "defer": an ended run exits at the lowest priority, after its peers */
	TUNE_N
};

/* Whether t is switched off (read from the environment once). */
int tune_off(enum tune t);

#endif

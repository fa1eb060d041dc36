/* core/events.h - what leash run waits on: descriptors, each registered with
 * the function that takes its events, and timers, each a source of work
 * that knows when it is due next (as Redis's ae.c registers file and time
 * events).  A timer does not name a time here: what is due next (a fire, a
 * renewal, a snapshot) is known to its owner, which answers how long the
 * loop may sleep as far as it is concerned. */
#ifndef LEASH_EVENTS_H
#define LEASH_EVENTS_H

#include <stdint.h>

/* A watch: embedded in its owner's struct (a run's stream, the spawner's
 * socket, the signalfd, the store's socket), found again with
 * container_of-style arithmetic or a pointer beside it.  fn takes the
 * descriptor's events; it returns 1 when what came wants the job table's
 * turn at once (a signal, the store's notices), else 0. */
struct watch {
	int (*fn)(struct watch *);
};

/* The epoll set: -1 when none. */
int events_open(void);

/* fd's readable events go to w from now on (until the fd closes or
 * events_forget).  0, or -1 with errno (EEXIST: fd is watched already). */
int events_add(int epfd, int fd, struct watch *w);
void events_forget(int epfd, int fd);

/* Waits until something comes or wait_ms have passed (to the wall clock's
 * millisecond: a wait of 1 ms from 11:59:59.9996 ends at 12:00:00.000),
 * hands each event to its watch and returns 1 when one of them asked for a
 * turn at once, 0 when none did (or nothing came), -1 when the wait failed
 * (logged). */
int events_wait(int epfd, int64_t wait_ms);

/* A timer: embedded in its owner's struct, as a watch is.  fn does what is
 * due now and answers in how many ms it wants its next turn (INT64_MAX:
 * none); wait_ms is how long the loop may sleep as far as the timers run
 * before it know, so that one may keep slow work off when that is short. */
struct timer {
	int64_t (*fn)(struct timer *, int64_t wait_ms);
	struct timer *next;
};

/* Appends t to *list: timers run in the order they were added. */
void timers_add(struct timer **list, struct timer *t);

/* Runs every timer of list in order; answers the shortest wait they asked
 * for, less the time taken since (0 at least). */
int64_t timers_run(struct timer *list);

#endif

/* core/events.h - what leash run waits on: descriptors, each registered with
 * the function that takes its events (as Redis's ae.c registers file
 * events).  There are no timers here: what is due next (a fire, a renewal,
 * a run's deadline) is known to the job table, the election and the runs,
 * and the loop gives events_wait how long it may wait. */
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

#endif

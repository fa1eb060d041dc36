/* spawn.h - the spawner: a copy of leash that forks fires' processes ahead,
 * so that the parent does not (src/launch/prefork/spawn.c says why). */
#ifndef LEASH_SPAWN_H
#define LEASH_SPAWN_H

#include <stdint.h>
#include <sys/types.h>
#include <lua.h>

#include "plan/job.h"
#include "launch/runner.h"

/* An answer: the child of tag's ask, with the parent's ends of its stdout,
 * stderr and log-record pipes in fd[0..2] and both ends of its go pipe in
 * go[0] (read: to take a start written ahead back) and go[1] (write); or
 * pid 0 (and no descriptors) when there is none, because the spawner could
 * not fork it or is gone. */
typedef void spawn_answered(void *tag, pid_t pid, const int fd[3], const int go[2]);

/* Where the spawner's socket goes: the loop's event set (core/events.h),
 * its events to what (which calls spawn_collect); -1: nowhere. */
void spawn_watch(int epfd, struct watch *what);

/* Asks the spawner to fork, ahead of its fire, the child of a run of job
 * with info (as runner_prepare's); the answer comes to answered, with tag,
 * from spawn_collect or spawn_wait, in the order asked.  The ask goes with
 * the next ones, a batch at a time, at the latest at spawn_flush.  0:
 * asked; 1: not now, the spawner has all it can take; -1: there is no
 * spawner to ask (none could be had, or it failed a moment ago; or
 * info->replica is not the string the first ask's pointed to), the caller
 * forks the child itself.  A new spawner is forked first when the job table
 * changed since the last one's (job_changes). */
int spawn_ask(lua_State *L, const struct job *job, const struct run_info *info, void *tag,
              spawn_answered *answered);

/* The asks made go to the spawner now (as far as its socket takes them;
 * the rest as answers make room). */
void spawn_flush(void);

/* Takes the answers that came (the socket was readable). */
void spawn_collect(void);

/* Until tag's answer came (or SPAWN_ANSWER_MS passed: then the spawner is
 * given up, and every answer still owed says pid 0). */
void spawn_wait(void *tag);

/* What the spawner took per child lately (µs, from one answer to the
 * next while it had asks, or the fork's own time when that was longer):
 * its pace, waits for a CPU included.  0 when unknown. */
int64_t spawn_cost_us(void);

/* For the parent's waitpid loop: 1 when pid was the spawner (its exit is
 * logged, and every answer it owes says pid 0). */
int spawn_reaped(pid_t pid, int status);

/* The spawner goes (at the loop's end; answers still owed say pid 0). */
void spawn_stop(void);

#endif

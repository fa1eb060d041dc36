/* loop.h - `leash run`: the single-threaded parent and its event loop. */
#ifndef LEASH_LOOP_H
#define LEASH_LOOP_H

#include <lua.h>

#include <stddef.h>
#include <sys/types.h>

#include "core/cfg.h"
#include "core/events.h"
#include "cluster/hooks.h"
#include "cluster/singleton.h"
#include "plan/sched.h"
#include "store/store.h"
#include "web/http.h"

struct launch_ops;

/* The parent's state, one per `leash run` (loop.c turns it; runs.c keeps
 * its runs). */
struct loop {
	lua_State *L;
	const struct cfg *cfg;
	char owner[STORE_NAME_MAX + 1];
	struct sched sched;
	struct singleton sg;            /* singleton mode only */
	struct run *runs;
	const struct launch_ops *launch; /* how runs are started ([leash] prefork) */
	struct hooks hooks;
	struct http http;               /* [http] listen: the server process */
	unsigned reloads;               /* reloads done so far, for the server */
	struct job_check *check;        /* a reload's check of jobs/ going, or NULL */
	int reload_again;               /* a SIGHUP came while it went */
	unsigned ended;                 /* runs ended since the heap was last trimmed */
	int sigfd;
	int stopping;                   /* 1: SIGTERM/SIGINT seen; 2: twice */
	int epfd;                       /* the event set (core/events.h) */
	int evfd;                       /* the store's socket in it, -1: none */
	ino_t evino;                    /* and its inode (a reconnect may reuse the number) */
	int64_t started_ms;
	/* What the event set hands the signalfd's, the store's and the
	 * spawner's events to (the runs' streams have theirs). */
	struct watch sig_w, store_w, spawner_w, check_w;
	/* Its timers, in the order they run (the election's in singleton
	 * mode only). */
	struct timer due_t, elect_t, http_t, reload_t, *timers;
};

#define LOOP_OF(w, member) ((struct loop *)((char *)(w) - offsetof(struct loop, member)))


/* Runs the scheduler until SIGTERM or SIGINT.  Returns the process exit
 * code: 0 after a clean stop. */
int loop_run(lua_State *L, const struct cfg *cfg);

#endif

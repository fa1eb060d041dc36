/* job.h - the jobs a replica knows: loaded from jobs/NAME.lua by leash.job. */
#ifndef LEASH_JOB_H
#define LEASH_JOB_H

#include <stdint.h>
#include <sys/types.h>
#include <lua.h>

enum job_kind { JOB_EVERY, JOB_CRON, JOB_SERVICE };

/* What a fire does while the previous run still goes (leash.job OVERLAP). */
enum job_overlap { JOB_SKIP, JOB_QUEUE, JOB_REPLACE };

/* Which of the fires nobody ran a new holder runs (leash.job MISSED). */
enum job_missed { JOB_MISSED_ONCE, JOB_MISSED_SKIP, JOB_MISSED_ALL };

/* How a run ended for the job table (runner_report, sched_run_ended): a
 * failure (1), a clean end (0), or stopped by leash on purpose (a hand-off,
 * a shutdown, a replacing fire), which is no failure. */
#define JOB_RUN_STOPPED (-1)

/* The failure hooks a job file defines. */
enum { JOB_ON_FAILURE = 1, JOB_ON_RECOVER = 2 };

struct run;
struct run_report;
struct metrics_job;

/* A job's next fire to start, as the job table moves it (sched.c's
 * fire_to, the one place that changes it):
 *   NONE -> DUE         its time came (or a catch-up's, or a queued fire's
 *                       turn): to claim, when the job claims, and start
 *   DUE -> DUE          a newer fire takes its place (the older one missed)
 *   DUE -> CLAIMED      claimed ahead of its time: it starts at that time
 *   DUE, CLAIMED -> NONE  started (it is the job's run now), or missed,
 *                       skipped, refused, dropped, or given back at the stop
 * Besides this one, a job may have a fire queued behind its run
 * (pending_ms) and a catch-up's backlog (backlog_ms...). */
enum fire_state { FIRE_NONE, FIRE_DUE, FIRE_CLAIMED, FIRE_STATES };

struct fire {
	enum fire_state state;
	int64_t at;                     /* wall clock: the fire's time; 0 with NONE */
	int catchup;                    /* a catch-up fire (a missed one, run late) */
	int64_t retry_at;               /* wall clock: its claim erred: the next try */
};

struct job {
	char *name, *file;
	int ref;                        /* registry ref to the normalised Lua table */
	enum job_kind kind;
	int singleton;                  /* 1 unless the file says singleton = false */
	int64_t timeout_ms;             /* 0: none */
	int64_t lease_ms;               /* 0: [singleton] lease, renew and margin */
	int64_t renew_ms, margin_ms;    /* with lease_ms: derived by leash.config.timing */
	char *describe;                 /* "every 30s", for the log */
	char *digest;                   /* of the file's text: tells an edit on reload */
	enum job_overlap overlap;       /* periodic jobs; a service ignores it */
	char *warnings;                 /* leash.job's warnings, one a line, or NULL */
	enum job_missed missed;         /* periodic jobs: catch-up on taking the lease */
	int64_t missed_within_ms;       /* older fires are never run */
	int missed_max;                 /* missed = "all": at most this many */
	unsigned hooks;                 /* JOB_ON_FAILURE | JOB_ON_RECOVER: the file has them */
	int weight;                     /* its share of a replica under spread (place.h), 1+ */

	/* Scheduling state, kept across reloads. */
	int64_t next_fire_ms;           /* wall clock; periodic jobs */
	int64_t restart_at;             /* monotonic; services */
	int64_t backoff_ms;             /* services */
	struct run *run;                /* the current run, or NULL */
	struct run *prep;               /* a process forked ahead for the fire at
	                                 * prep_ms (sched.c), or NULL */
	int64_t prep_ms;                /* the fire last forked ahead for (or tried) */
	int prep_ahead;                 /* prep has its start already (go_ahead) */
	int64_t pending_ms;             /* a fire waiting for that run to end
	                                 * (queue, replace), or 0 */
	long run_id;                    /* its id */
	/* Fires of a job that claims them (singleton mode), and of one that
	 * does not while it waits for no run. */
	struct fire fire;               /* the next to start */
	int paused_logged;              /* singleton: the pause the log last told */
	int manual_wait;                /* a trigger (leash trigger) waits for the run
	                                 * to end (overlap queue, replace) */
	int64_t backlog_ms;             /* missed = "all": the next catch-up fire, or 0 */
	int64_t backlog_until;          /* the catch-up's fires are before this */
	int backlog_left;               /* how many more (backlog_ms included) */
	int run_catchup;                /* run is a catch-up run (a missed fire) */
	int64_t seed_ms;                /* a new job's first cursor, to write on taking
	                                 * the lease (singleton.c), or -1 */
	int removed;                    /* gone from jobs/: dropped once idle */
	void *elect;                    /* election state, when singleton mode is on */
	int follow_logged;              /* "following: held by X" said since it last held */
	/* Failure hooks (src/cluster/hooks.c). */
	int health;                     /* as the store last said: 0 ok, 1 failing, -1 unknown */
	struct run *hook_run;           /* the hook's child going, or NULL */
	struct run_report *hook_wait;   /* the next hook to start once it ended, or NULL */
	struct metrics_job *metrics;    /* its /metrics record (moves to a reload's copy) */
};

/* Reads the job file at path into a fresh buffer (*src, *len; the caller
 * frees it).  Refuses, before reading anything, a path that is not a regular
 * file (a FIFO, a device, a directory, a symlink to one) or is larger than
 * max bytes; a FIFO never blocks the call.  0, or -1 with the reason (no
 * file name) in err. */
int job_read(const char *path, size_t max, char **src, size_t *len, char *err, size_t errlen);

/* How long loading one file may take by default ([leash] load_timeout). */
#define JOB_LOAD_TIMEOUT_MS 1000

/* Lists the .lua files of dir, checks each in a forked process bounded by
 * limit_ms (0: JOB_LOAD_TIMEOUT_MS) a file, waiting for it, and loads the
 * files that passed through leash.job.  For each good file calls good(arg,
 * job) with a fresh struct job (the callee owns it); for each problem calls
 * bad(arg, file, message).  Returns the number of files seen, or -1 when
 * dir cannot be read (message through bad). */
int job_load_dir(lua_State *L, const char *dir, int64_t limit_ms,
                 void (*good)(void *arg, struct job *),
                 void (*bad)(void *arg, const char *file, const char *msg), void *arg);

/* The same in steps, for a loop that goes on meanwhile: a check of dir's
 * files going in a forked process (see job.c).  Its descriptor joins epfd
 * (-1: none), its events to w, while it goes; NULL when out of memory. */
struct job_check;
struct watch;
struct job_check *job_check_start(lua_State *L, const char *dir, int64_t limit_ms, int epfd,
                                  struct watch *w);
/* Reads what the checking process said, kills it at a file's deadline (and
 * forks the next for the files after it).  Returns -1 once every file is
 * judged, else the ms until the next deadline. */
int64_t job_check_turn(struct job_check *);
/* Whether pid was its checking process (status taken: the loop's
 * waitpid(-1) may reap it first). */
int job_check_reaped(struct job_check *, pid_t pid, int status);
/* Waits for the check to end, then loads the files that passed as
 * job_load_dir does.  The caller frees c. */
int job_load_checked(lua_State *L, struct job_check *c,
                     void (*good)(void *arg, struct job *),
                     void (*bad)(void *arg, const char *file, const char *msg), void *arg);
/* Kills a checking process that still goes; frees c (NULL: nothing). */
void job_check_free(struct job_check *);

/* How many struct jobs were made or freed so far: while it stays the same,
 * every struct job (and its Lua table) the process has is one it had then
 * (src/launch/prefork/spawn.c forks from a copy taken at one count). */
uint64_t job_changes(void);

/* The next fire time strictly after after_ms, or -1 for a service or on
 * error (then logged). */
int64_t job_next_fire(lua_State *L, const struct job *, int64_t after_ms);

void job_free(lua_State *L, struct job *);

#endif

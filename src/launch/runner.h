/* runner.h - one forked child per run of a job body. */
#ifndef LEASH_RUNNER_H
#define LEASH_RUNNER_H

#include "core/events.h"
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <lua.h>

#include "plan/job.h"

#define RUN_ERROR_MAX 1024

/* A failure hook's second argument: the run that changed the job's health,
 * with its ledger fields. */
struct run_report {
	const char *hook;               /* "on_failure" or "on_recover" */
	int64_t scheduled_ms;           /* wall clock; 0 for a service */
	int64_t token;
	int64_t started_ms, ended_ms;   /* wall clock */
	char outcome[16];
	int exit_code, exit_signal;     /* -1: none */
	char error[RUN_ERROR_MAX + 1];
};

struct run_info {
	const char *replica;
	int64_t token;
	int64_t scheduled_ms;           /* wall clock; 0 for a service */
	int catchup;                    /* a missed fire, run late */
	int manual;                     /* a triggered run (leash trigger) */
	int64_t fence_stop_ms;          /* boottime: the body is stopped here; 0 = never */
	int64_t fence_slack_ms;         /* the child kills itself this long after that */
	int64_t grace_ms;               /* SIGTERM to SIGKILL */
	const struct run_report *hook;  /* a failure hook's child, not a run: NULL */
	int64_t timeout_ms;             /* 0: the job's timeout */
};

/* Why leash stops a run, which decides its outcome: a timeout and a lost
 * lease are failures ("timeout", "lost"); a hand-off (spread, leash
 * handoff, leash drain) ends it "handed-off" and a shutdown, a replacing
 * fire or a control "stopped", and neither counts as a failure anywhere. */
enum run_stop { RUN_STOP_TIMEOUT = 1, RUN_STOP_LOST, RUN_STOP_HANDOFF, RUN_STOP_STOPPED };

/* A run's three streams from its child. */
enum run_stream { RUN_STDOUT, RUN_STDERR, RUN_RECORDS, RUN_STREAMS };

/* A longer line of output is logged in pieces, each cut on a character
 * boundary; a longer record (lua/leash/run.lua keeps them shorter) is cut,
 * the cut said, the rest dropped. */
#define RUN_LINE_MAX 4096

/* The start of a line not complete yet (malloc'd while one waits: most runs
 * write whole lines, and a thousand runs going would hold 12 MB of empty
 * buffers). */
struct linebuf {
	char *b;
	size_t n;
	int skip;                       /* dropping the rest of a record cut */
};

/* One of a run's streams as the loop's event set knows it. */
struct run_stream_ref {
	struct watch w;                 /* first: the event set's pointer */
	struct run *run;
	enum run_stream stream;
};

/* A run's phase.  Every change goes through one function (run_to in
 * runner.c), which knows the legal ones and logs any other as a bug.
 *
 *   runner_start        NEW -------------------------------> GOING
 *   runner_start_soon   NEW --> SOON --(its child came)------> GOING
 *   runner_prepare      NEW --> ASKED --(no child came)------> LOST
 *                       NEW --> ARMED <-> AHEAD               (go_ahead, take_back)
 *                       (spawner) ASKED --> ARMED
 *   runner_go           ARMED or AHEAD --> WAKING --(runner_wake)--> GOING
 *
 * ASKED, ARMED, AHEAD and LOST are a process forked ahead of its fire, not
 * a run yet (runner_prepared); the others are runs, counted by
 * runner_going.  Whether the process has exited (exited, status) is a fact
 * of the process, not a phase: a child forked ahead can die in any of them. */
enum run_state {
	RUN_NEW,        /* made, no child yet */
	RUN_ASKED,      /* forked ahead: its child asked of the spawner, not come */
	RUN_ARMED,      /* forked ahead: its child waits for its start (go pipe) */
	RUN_AHEAD,      /* forked ahead: its start written already (runner_go_ahead) */
	RUN_LOST,       /* forked ahead: no child came (the spawner could not); over */
	RUN_SOON,       /* started, its child asked of the spawner (runner_start_soon) */
	RUN_WAKING,     /* started by runner_go: woken and logged at runner_wake */
	RUN_GOING,      /* started, its child told so (and "started" logged) */
	RUN_STATES
};

struct run {
	pid_t pid;
	long id;
	struct job *job;
	enum run_state state;           /* changed by run_to only */
	int fd[RUN_STREAMS];            /* -1 once closed */
	struct run_stream_ref ref[RUN_STREAMS];
	/* Forked ahead of its fire: the ends of the pipe its child waits on
	 * (go_fd writes, go_rfd takes a start back). */
	int go_fd, go_rfd;
	struct linebuf lb[RUN_STREAMS];
	/* Lines a child forked ahead wrote before the parent said it started
	 * (it began at its fire by its own timer): each a stream byte, the
	 * line and its NUL, logged after the started line. */
	char *held;
	size_t held_n;
	int64_t started_ms;             /* monotonic */
	int64_t timeout_at;             /* monotonic; 0 = none */
	int64_t kill_at;                /* monotonic; SIGKILL then; 0 = not stopping */
	int64_t grace_ms;
	int64_t fence_ms;               /* boottime: the stop deadline the child knows */
	char stop_reason[128];          /* why the parent stopped it ("": it did not) */
	enum run_stop stop_why;         /* with stop_reason: what that makes the run */
	/* For the run ledger: what the run was started as, and the body's error
	 * ("run failed: ..." from lua/leash/run.lua, its first RUN_ERROR_MAX
	 * bytes, malloc'd; NULL when none: a run of a thousand going at once
	 * keeps no 1 KB of room for one). */
	int64_t scheduled_ms;           /* wall clock; 0 for a service */
	int64_t token;                  /* 0 when not elected */
	int manual;                     /* a triggered run (leash trigger): not claimed */
	int catchup;                    /* a catch-up run: a missed fire, run late */
	int64_t started_wall;           /* wall clock */
	/* When its log-record pipe closed: the body's end (the child's exit
	 * may come later, see child_main); 0 until then. */
	int64_t ended_ms, ended_wall;   /* monotonic, wall clock */
	int hook;                       /* a failure hook's child: no run of the job */
	char *error;
	int exited, status;             /* the process was reaped, and how it ended */
	/* SOON: the info to fork its child with if the spawner gives none.
	 * go_fence_ms: the deadline the asked-for child was armed with, or the
	 * one a start written ahead carries. */
	int64_t go_fence_ms;
	struct run_info info;
	struct run *next;
};

/* Whether r is a process forked ahead of its fire, not (yet) a run. */
int runner_prepared(const struct run *);

/* The event set (core/events.h) every run's streams are added to (and
 * taken out of before they close); -1: none. */
void runner_watch(int epfd);

/* Forks a child that runs job's body with a ctx built from info.  NULL with
 * the reason logged when the fork fails. */
struct run *runner_start(lua_State *L, struct job *, const struct run_info *);

/* Starts a run of job now whose child the spawner forks (a fire nothing was
 * forked ahead for): the run goes from now (its id, clocks and stop), its
 * child gets its start when it comes (spawn_collect), and the log says
 * "started" then; forked here if the spawner cannot.  NULL when there is no
 * spawner to ask (then runner_start). */
struct run *runner_start_soon(lua_State *L, struct job *, const struct run_info *);

/* Forks, ahead of its fire, the child of a run of job: it sets itself up
 * and waits, with info's fence armed, until runner_go starts it (the run's
 * id, its token and fence deadline come then).  The spawner forks it when
 * there is one (the run is then asked for, its child comes with
 * spawn_collect); the parent when not.  NULL when the fork fails (logged),
 * or with *later set when the spawner has all it can take now.  Not a run
 * yet: no id, nothing logged. */
struct run *runner_prepare(lua_State *L, struct job *, const struct run_info *, int *later);

/* SIGKILL to the run's process group (none yet: nothing). */
void runner_kill(struct run *);

/* Starts a prepared run: 0, or -1 when its child is gone (the caller
 * discards it).  Its child goes on at the next runner_wake, which wakes all
 * those started since the last at once (the loop calls it after starting
 * what was due, and before it sleeps), then asks for the children asked
 * for this turn (spawn_flush), then logs the runs' "started" lines. */
int runner_go(struct run *, const struct run_info *);
void runner_wake(void);

/* A prepared run's start written ahead of its fire (its claim is in): the
 * child reads it at the fire's time, by itself, and goes; the parent's
 * runner_go at that time (or later) makes it a run, whether the child has
 * gone yet or not (or has ended already), and wakes nobody.  Its id is
 * given now.  0, or -1 when it cannot be (the child is not there yet, or
 * gone): runner_go then starts it as usual. */
int runner_go_ahead(struct run *, const struct run_info *);

/* Takes a start written ahead back: 0 (the child never reads it; or there
 * was none), or -1 when the child has read it already: the fire started
 * (runner_go makes it the run it is). */
int runner_take_back(struct run *);

/* A prepared run that will not start: its child goes now (SIGKILL); it is
 * freed once reaped, with nothing logged. */
void runner_discard(struct run *);

/* Reads what is ready on one stream and logs its complete lines. */
void runner_read(struct run *, enum run_stream);

/* Asks the run to stop: SIGTERM to its process group now, SIGKILL after its
 * grace (runner_tick sends it).  Stopping twice keeps the first reason; the
 * reason is copied (at most 127 bytes). */
void runner_stop(struct run *, enum run_stop why, const char *reason);

/* Sends SIGKILL or SIGTERM when a deadline has come; returns the next
 * monotonic time it needs to be called, or INT64_MAX. */
int64_t runner_tick(struct run *, int64_t now_ms);

/* Moves the child's self-fencing deadline to stop_ms (boottime). */
void runner_push_fence(struct run *, int64_t stop_ms);

/* Marks the child exited when pid is its pid. */
void runner_exited(struct run *, int status);

/* An exit the loop reaped that was no run's: maybe a child the spawner
 * forked whose answer has not come yet (it died before: self-fenced while
 * the answer waited).  Kept a while, so that the answer finds it. */
void runner_reaped_unknown(pid_t pid, int status);

/* 1 once the child has exited and its pipes are drained; then logs the
 * result and the caller frees it with runner_free. */
int runner_done(struct run *);
/* Logs how the run ended; *failed: 1 a failure, 0 it ended by itself
 * without one, JOB_RUN_STOPPED leash stopped it on purpose (a hand-off, a
 * shutdown, a replacing fire: no failure). */
void runner_report(struct run *, int *failed);
/* How long the run's body took (so far), and when it ended (wall clock;
 * now while it has not). */
int64_t runner_ran_ms(const struct run *);
int64_t runner_ended_wall(const struct run *);
/* What the ledger (and /metrics) calls the way an exited run ended: "ok",
 * "manual", "failed", "timeout", "lost", "killed" (a signal leash did not
 * send), "handed-off" or "stopped" (enum run_stop); its exit code and
 * signal in *code and *sig (STORE_NO_CODE when none). */
const char *runner_outcome(const struct run *, int *code, int *sig);
void runner_free(struct run *);

/* How many runs (and failure hooks' children) are going: started, not yet
 * freed; the children forked ahead and not started are not counted. */
unsigned runner_going(void);

#endif

/* runner.c - the parent's side of a run: fork, carry the child's output to
 * the log, stop it, reap it.  What the child does is child.c's.
 *
 * The child is the leader of its own process group, so stopping a run also
 * stops whatever its ctx.exec started.
 */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>

#include "launch/child.h"
#include "core/clock.h"
#include "core/esc.h"
#include "core/log.h"
#include "core/lx.h"
#include "core/metrics.h"
#include "launch/runner.h"
#include "launch/prefork/spawn.h"
#include "store/store.h"

static void flush_held(struct run *r);

/* Exits reaped before their answers came (runner_reaped_unknown), a ring:
 * an answer comes within SPAWN_ANSWER_MS or never, and by then the ring has
 * not gone round unless a thousand children of nobody's died meanwhile. */
#define EARLY_MAX 1024
#define EARLY_MS 5000
struct early {
	pid_t pid;
	int status;
	int64_t at;                     /* monotonic ms */
};

/* The file's state: what the parent knows of all its runs at once. */
static struct runner_state {
	long next_run_id;
	int watch_fd;                   /* the event set runs' streams join, -1: none */
	unsigned going;                 /* runs started and not yet freed */
	/* The runs runner_go started since the last runner_wake, whose
	 * "started" lines wait until their children are woken. */
	struct run **unsaid;
	size_t nunsaid, unsaid_cap;
	lua_State *soon_L;              /* runner_start_soon's, for a fork here */
	struct early early[EARLY_MAX];
	unsigned early_next;
} rs = { .watch_fd = -1 };

static const char *const state_names[RUN_STATES] = {
	"new", "asked", "armed", "ahead", "lost", "soon", "waking", "going",
};

/* The phases each phase may go to (enum run_state's picture in runner.h). */
static const unsigned legal[RUN_STATES] = {
	[RUN_NEW] = 1u << RUN_ASKED | 1u << RUN_ARMED | 1u << RUN_SOON | 1u << RUN_GOING,
	[RUN_ASKED] = 1u << RUN_ARMED | 1u << RUN_LOST,
	[RUN_ARMED] = 1u << RUN_AHEAD | 1u << RUN_WAKING,
	[RUN_AHEAD] = 1u << RUN_ARMED | 1u << RUN_WAKING,
	[RUN_SOON] = 1u << RUN_GOING,
	[RUN_WAKING] = 1u << RUN_GOING,
};

/* Every change of a run's phase.  One that is not in the table is a bug:
 * logged, and an assertion in a build with them. */
static void run_to(struct run *r, enum run_state to)
{
	if (!(legal[r->state] & 1u << to)) {
		log_msg(LOG_ERROR, r->job ? r->job->name : NULL, r->id, "internal error: a run "
		        "went from %s to %s", state_names[r->state], state_names[to]);
		assert(!"an illegal run_state transition");
	}
	r->state = to;
}

int runner_prepared(const struct run *r)
{
	return r->state == RUN_ASKED || r->state == RUN_ARMED || r->state == RUN_AHEAD ||
	       r->state == RUN_LOST;
}

/* The run's go pipe is done with (started, or never to be). */
static void close_go(struct run *r)
{
	if (r->go_fd >= 0)
		close(r->go_fd);
	if (r->go_rfd >= 0)
		close(r->go_rfd);
	r->go_fd = r->go_rfd = -1;
}

void runner_watch(int epfd)
{
	rs.watch_fd = epfd;
}

static void close_stream(struct run *r, enum run_stream i)
{
	if (i == RUN_RECORDS && !r->ended_ms && !runner_prepared(r)) {
		r->ended_ms = clock_mono_ms();
		r->ended_wall = clock_wall_ms();
	}
	if (rs.watch_fd >= 0)
		events_forget(rs.watch_fd, r->fd[i]);
	close(r->fd[i]);
	r->fd[i] = -1;
}

/* Output or an end on one of a run's streams: carried to the log. */
static int on_stream(struct watch *w)
{
	struct run_stream_ref *ref = (struct run_stream_ref *)w;

	runner_read(ref->run, ref->stream);
	return 0;
}

/* A child of r's: its pipes' parent ends (rfd) and its go pipe's ends
 * (go[0] read, go[1] write; NULL for a run started at once) join the run. */
static void take_child(struct run *r, pid_t pid, const int rfd[RUN_STREAMS], const int go[2])
{
	setpgid(pid, pid);              /* also here, so a kill right away finds the group */
	r->pid = pid;
	if (go) {
		r->go_rfd = go[0];
		r->go_fd = go[1];
		fcntl(go[0], F_SETFL, O_NONBLOCK);     /* (the child's end too: one pipe end) */
		fcntl(go[1], F_SETFL, O_NONBLOCK);
	}
	for (int i = 0; i < RUN_STREAMS; i++) {
		r->fd[i] = rfd[i];
		r->ref[i] = (struct run_stream_ref){ { on_stream }, r, i };
		fcntl(r->fd[i], F_SETFL, O_NONBLOCK);
		if (rs.watch_fd >= 0)
			events_add(rs.watch_fd, r->fd[i], &r->ref[i].w);
	}
}

/* The run's error, its first RUN_ERROR_MAX bytes; the first one stays. */
static void set_error(struct run *r, const char *s)
{
	size_t n = strnlen(s, RUN_ERROR_MAX);

	if (r->error || !(r->error = malloc(n + 1)))
		return;
	memcpy(r->error, s, n);
	r->error[n] = '\0';
}

static struct run *new_run(struct job *job, const struct run_info *info)
{
	struct run *r = calloc(1, sizeof *r);

	if (!r)
		return NULL;
	r->job = job;
	r->state = RUN_NEW;
	r->go_fd = r->go_rfd = -1;
	r->fence_ms = info->fence_stop_ms;
	for (int i = 0; i < RUN_STREAMS; i++)
		r->fd[i] = -1;
	return r;
}

/* Forks r's child (r new, or started and waiting for one); go: whether it
 * waits for runner_go.  0, or -1 with errno. */
static int fork_child(lua_State *L, struct run *r, const struct run_info *info, int go)
{
	int fds[RUN_STREAMS][2], gofds[2] = { -1, -1 };
	int rfd[RUN_STREAMS];
	pid_t pid;

	if (child_pipes(fds, go ? gofds : NULL) < 0 || (go && child_go_init() < 0))
		goto fail;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		goto fail;
	if (pid == 0)
		child_main(L, r->job, info, r->id, fds, gofds[0]);
	for (int i = 0; i < RUN_STREAMS; i++) {
		close(fds[i][1]);
		rfd[i] = fds[i][0];
	}
	take_child(r, pid, rfd, go ? gofds : NULL);
	metrics_note_fork(0);
	return 0;
fail:
	child_pipes_close(fds, gofds);
	return -1;
}

/* Forks the child of a new run; go: whether it waits for runner_go. */
static struct run *spawn(lua_State *L, struct job *job, const struct run_info *info, int go)
{
	struct run *r = new_run(job, info);

	/* A hook is no run: it takes no run number (see LOG_HOOK_*). */
	if (r && !go)
		r->id = !info->hook ? ++rs.next_run_id : strcmp(info->hook->hook, "on_failure") == 0
		        ? LOG_HOOK_ON_FAILURE : LOG_HOOK_ON_RECOVER;
	if (r && fork_child(L, r, info, go) == 0) {
		run_to(r, go ? RUN_ARMED : RUN_GOING);
		return r;
	}
	log_msg(LOG_ERROR, job->name, 0, "cannot %s a run: %s", go ? "prepare" : "start",
	        strerror(errno));
	free(r);
	return NULL;
}

/* The log says the run started (its child is there). */
static void say_started(struct run *r, const struct run_info *info, int64_t token)
{
	struct job *job = r->job;

	if (info->hook)
		log_msg(LOG_INFO, job->name, r->id, "started pid=%d", (int)r->pid);
	else if (token)
		log_msg(LOG_INFO, job->name, r->id, "started pid=%d token=%lld", (int)r->pid,
		        (long long)token);
	else
		log_msg(LOG_INFO, job->name, r->id, "started pid=%d", (int)r->pid);
	if (r->held)
		flush_held(r);
}

/* The run is under way from now: its clocks. */
static void begin_clocks(struct run *r, const struct run_info *info)
{
	struct job *job = r->job;

	rs.going++;
	r->grace_ms = info->grace_ms;
	r->fence_ms = info->fence_stop_ms;
	r->started_ms = clock_mono_ms();
	r->hook = info->hook != NULL;
	if (info->timeout_ms || job->timeout_ms)
		r->timeout_at = r->started_ms + (info->timeout_ms ? info->timeout_ms : job->timeout_ms);
}

/* The run is under way from now: its clocks, and the log says so. */
static void begin(struct run *r, const struct run_info *info)
{
	begin_clocks(r, info);
	say_started(r, info, info->token);
}

struct run *runner_start(lua_State *L, struct job *job, const struct run_info *info)
{
	struct run *r = spawn(L, job, info, 0);

	if (r)
		begin(r, info);
	return r;
}


/* A run started before its child came, and the child came (pid), or none
 * will (0: forked here, now). */
static void start_pending(struct run *r, pid_t pid)
{
	struct child_go go = { .token = r->info.token, .fence_stop_ms = r->fence_ms,
	                       .run_id = r->id };

	run_to(r, RUN_GOING);
	if (r->stop_reason[0] || r->kill_at) {
		/* Stopped before its body could start: it never does. */
		if (pid)
			runner_kill(r);
		else {
			r->exited = 1;
			r->status = SIGKILL;
		}
		return;
	}
	if (!pid) {
		if (fork_child(rs.soon_L, r, &r->info, 0) < 0) {
			const char *e = strerror(errno);
			char why[128];

			log_msg(LOG_ERROR, r->job->name, r->id, "cannot start a run: %s", e);
			snprintf(why, sizeof why, "cannot start: %s", e);
			set_error(r, why);
			r->exited = 1;
			r->status = 1 << 8;
			return;
		}
	} else if (child_go_send(r->go_fd, &go, 0) < 0) {
		runner_kill(r);         /* gone already: its exit tells */
	}
	close_go(r);
	say_started(r, &r->info, r->info.token);
}


void runner_reaped_unknown(pid_t pid, int status)
{
	rs.early[rs.early_next++ % EARLY_MAX] = (struct early){ pid, status, clock_mono_ms() };
}

/* Whether pid died before its answer came (and then forgets it). */
static int died_early(pid_t pid, int *status)
{
	int64_t now = clock_mono_ms();

	for (unsigned i = 0; i < EARLY_MAX; i++) {
		struct early *e = &rs.early[i];

		if (e->pid == pid && now - e->at <= EARLY_MS) {
			*status = e->status;
			e->pid = 0;
			return 1;
		}
	}
	return 0;
}

/* The spawner's answer to a run's ask, prepared or started soon (spawn.h). */
static void answered(void *tag, pid_t pid, const int fd[3], const int go[2])
{
	struct run *r = tag;
	int status;

	if (pid && died_early(pid, &status)) {
		/* Reaped already: no child to start or to wait for, as if the
		 * spawner had forked none (its pipes go). */
		log_msg(LOG_INFO, r->job ? r->job->name : NULL, 0, "the process forked ahead "
		        "(pid %d) died before the spawner's answer came (status %d): another "
		        "is forked", (int)pid, status);
		for (int i = 0; i < RUN_STREAMS; i++)
			close(fd[i]);
		close(go[0]);
		close(go[1]);
		pid = 0;
	}
	if (pid) {
		take_child(r, pid, fd, go);
		metrics_note_fork(1);
		/* A push of the lease's deadline while it was asked for. */
		if (r->fence_ms && r->fence_ms != r->go_fence_ms)
			runner_push_fence(r, r->fence_ms);
	}
	if (r->state == RUN_SOON) {
		start_pending(r, pid);
		return;
	}
	if (!pid) {
		/* No child (the spawner's fork failed, or it went): the run is
		 * over before it was one, quietly, and the fire forks its own. */
		r->exited = 1;
		run_to(r, RUN_LOST);
		return;
	}
	run_to(r, RUN_ARMED);
	if (!r->job)
		runner_discard(r);      /* discarded while it was asked for */
}

/* Asks the spawner for r's child (spawn_ask's answer); to: what r is
 * while it is asked for (ASKED or SOON). */
static int ask(lua_State *L, struct run *r, const struct run_info *info, enum run_state to)
{
	int rc = spawn_ask(L, r->job, info, r, answered);

	if (rc == 0) {
		run_to(r, to);
		r->go_fence_ms = info->fence_stop_ms;
	}
	return rc;
}

struct run *runner_start_soon(lua_State *L, struct job *job, const struct run_info *info)
{
	struct run *r = new_run(job, info);

	if (!r || ask(L, r, info, RUN_SOON) != 0) {
		free(r);
		return NULL;
	}
	rs.soon_L = L;
	r->info = *info;
	r->id = ++rs.next_run_id;
	begin_clocks(r, info);
	return r;
}

struct run *runner_prepare(lua_State *L, struct job *job, const struct run_info *info,
                           int *later)
{
	struct run *r = new_run(job, info);

	*later = 0;
	if (!r) {
		log_msg(LOG_ERROR, job->name, 0, "cannot prepare a run: %s", strerror(errno));
		return NULL;
	}
	switch (ask(L, r, info, RUN_ASKED)) {
	case 0:
		return r;
	case 1:
		*later = 1;
		free(r);
		return NULL;
	}
	free(r);
	return spawn(L, job, info, 1);
}

int runner_go_ahead(struct run *r, const struct run_info *info)
{
	struct child_go go = { .token = info->token, .fence_stop_ms = info->fence_stop_ms };

	if (r->state != RUN_ARMED || r->exited || r->go_rfd < 0)
		return -1;
	go.run_id = rs.next_run_id + 1;
	if (child_go_send(r->go_fd, &go, info->scheduled_ms) < 0)
		return -1;
	r->id = ++rs.next_run_id;
	run_to(r, RUN_AHEAD);
	r->go_fence_ms = info->fence_stop_ms;
	return 0;
}

int runner_take_back(struct run *r)
{
	if (r->state != RUN_AHEAD)
		return 0;
	if (child_go_take_back(r->go_rfd) < 0)
		return -1;
	run_to(r, RUN_ARMED);
	return 0;
}

int runner_go(struct run *r, const struct run_info *info)
{
	struct child_go go = { .token = info->token, .fence_stop_ms = info->fence_stop_ms };
	int ahead = r->state == RUN_AHEAD;

	/* AHEAD: its start is with it already: it went at the fire by itself
	 * (gone since, maybe: its exit is the run's end). */
	if (!ahead) {
		if (r->state == RUN_ASKED)
			spawn_wait(r);
		if (r->state != RUN_ARMED || r->exited)
			return -1;
		go.run_id = rs.next_run_id + 1;
		if (child_go_send(r->go_fd, &go, 0) < 0)
			return -1;
		r->id = ++rs.next_run_id;
	}
	close_go(r);
	run_to(r, RUN_WAKING);
	begin_clocks(r, info);
	/* A renewal since the start went ahead: the child's deadline too. */
	if (ahead && r->fence_ms != r->go_fence_ms)
		runner_push_fence(r, r->fence_ms);
	/* Logged after the wake: a burst's children do not wait for the
	 * parent to write a line for each of them. */
	if (rs.nunsaid == rs.unsaid_cap) {
		size_t cap = rs.unsaid_cap ? 2 * rs.unsaid_cap : 64;
		struct run **p = realloc(rs.unsaid, cap * sizeof *p);

		if (!p) {
			run_to(r, RUN_GOING);
			say_started(r, info, info->token);
			return 0;
		}
		rs.unsaid = p;
		rs.unsaid_cap = cap;
	}
	rs.unsaid[rs.nunsaid++] = r;
	return 0;
}

/* The "started" line of a run runner_go started. */
static void say_now(struct run *r)
{
	struct run_info info = { .token = r->token };

	run_to(r, RUN_GOING);
	say_started(r, &info, r->token);
}

void runner_wake(void)
{
	child_go_wake();
	spawn_flush();
	for (size_t i = 0; i < rs.nunsaid; i++)
		if (rs.unsaid[i])
			say_now(rs.unsaid[i]);
	rs.nunsaid = 0;
}

void runner_discard(struct run *r)
{
	r->job = NULL;
	if (r->state == RUN_ASKED)
		return;         /* its child goes when the answer comes */
	close_go(r);
	if (!r->exited && r->pid > 0)
		kill(r->pid, SIGKILL);
}

/* A ctx.log record: level, message, then key/value pairs, tab-separated
 * with \\, \t, \n and NUL (\0) escaped (lua/leash/run.lua writes them).
 * A NUL comes back as a byte that is no UTF-8, so that it shows as U+FFFD
 * (esc.h) rather than end the text there. */
static void unescape(char *s)
{
	char *w = s;

	for (char *p = s; *p; p++) {
		if (*p == '\\' && p[1]) {
			p++;
			*w++ = *p == 't' ? '\t' : *p == 'n' ? '\n' : *p == '0' ? (char)0xff : *p;
		} else {
			*w++ = *p;
		}
	}
	*w = '\0';
}

static void log_record(struct run *r, char *line)
{
	const char *parts[66];
	size_t n = 0;
	int lv;
	char *save = NULL;

	for (char *tok = strtok_r(line, "\t", &save); tok && n < 65;
	     tok = strtok_r(NULL, "\t", &save)) {
		unescape(tok);
		parts[n++] = tok;
	}
	if (n < 2 || (lv = log_level_parse(parts[0])) < 0) {
		log_msg(LOG_WARN, r->job->name, r->id, "%s", n ? parts[0] : "");
		return;
	}
	if (lv == LOG_ERROR && strncmp(parts[1], "run failed: ", 12) == 0)
		set_error(r, parts[1] + 12);
	log_rec(lv, r->job->name, r->id, parts[1], parts + 2, (n - 2) / 2);
}

/* A run whose "started" line waits (runner_go) says it now, out of turn:
 * before its first output or its end. */
static void say_unsaid(struct run *r)
{
	if (r->state != RUN_WAKING)
		return;
	say_now(r);
	for (size_t i = 0; i < rs.nunsaid; i++)
		if (rs.unsaid[i] == r)
			rs.unsaid[i] = NULL;
}

/* Keeps line for flush_held; 0 when there is no room (RUN_HELD_MAX), and
 * the line is logged at once. */
#define RUN_HELD_MAX (64 * 1024)
static int hold(struct run *r, enum run_stream i, const char *line)
{
	size_t len = strlen(line) + 2;
	char *p;

	if (r->held_n + len > RUN_HELD_MAX || !(p = realloc(r->held, r->held_n + len)))
		return 0;
	p[r->held_n] = (char)i;
	memcpy(p + r->held_n + 1, line, len - 1);
	r->held = p;
	r->held_n += len;
	return 1;
}

static void emit(struct run *r, enum run_stream i, char *line)
{
	static const char *const out[] = { "stream", "stdout" };
	static const char *const err[] = { "stream", "stderr" };

	say_unsaid(r);
	if ((r->state == RUN_AHEAD || r->state == RUN_ARMED) && hold(r, i, line))
		return;
	if (i == RUN_RECORDS)
		log_record(r, line);
	else
		log_rec(i == RUN_STDOUT ? LOG_INFO : LOG_WARN, r->job->name, r->id, line,
		        i == RUN_STDOUT ? out : err, 1);
}

/* The lines held for r (emit), to the log after its started line. */
static void flush_held(struct run *r)
{
	char *held = r->held;
	size_t n = r->held_n;

	r->held = NULL;
	r->held_n = 0;
	for (size_t at = 0, len; at < n; at += len + 2) {
		len = strlen(held + at + 1);     /* before emit cuts the line up */
		emit(r, (enum run_stream)held[at], held + at + 1);
	}
	free(held);
}

/* After a read: the partial line left in buf waits in lb (in a buffer of
 * its own, taken only while one waits), or lb's buffer goes. */
static void keep(struct run *r, enum run_stream i, char *buf)
{
	struct linebuf *lb = &r->lb[i];

	if (lb->n && buf != lb->b) {
		if (!(lb->b = malloc(RUN_LINE_MAX))) {
			buf[lb->n] = '\0';     /* no room to wait: logged as it is */
			emit(r, i, buf);
			lb->n = 0;
			return;
		}
		memcpy(lb->b, buf, lb->n);
	} else if (!lb->n && lb->b) {
		free(lb->b);
		lb->b = NULL;
	}
}

/* The line of n bytes at s (s[n] is there to write) to the log.  A NUL in
 * it would end the line there: it goes as a byte that is no UTF-8, and so
 * shows as U+FFFD (esc.h). */
static void emit_n(struct run *r, enum run_stream i, char *s, size_t n)
{
	for (size_t k = 0; k < n; k++)
		if (!s[k])
			s[k] = (char)0xff;
	s[n] = '\0';
	emit(r, i, s);
}

/* A line that filled the buffer (n bytes, n = RUN_LINE_MAX - 1) and goes
 * on: output is logged up to its last whole character and the rest waits;
 * a record is cut there, said so, and its rest dropped.  Returns the bytes
 * left waiting. */
static size_t emit_long(struct run *r, enum run_stream i, char *buf, size_t n)
{
	static const char cut[] = "... [record cut: longer than 4095 bytes]";
	size_t k;

	if (i != RUN_RECORDS) {
		char keep = buf[k = esc_whole(buf, n)];

		emit_n(r, i, buf, k);   /* (ends the line at buf[k]) */
		buf[k] = keep;
		return k;
	}
	k = esc_cut(buf, n, n - (sizeof cut - 1));
	memcpy(buf + k, cut, sizeof cut - 1);
	emit_n(r, i, buf, k + sizeof cut - 1);
	r->lb[i].skip = 1;
	return n;
}

void runner_read(struct run *r, enum run_stream i)
{
	static char scratch[RUN_LINE_MAX];      /* the parent has one thread */
	struct linebuf *lb = &r->lb[i];

	for (;;) {
		char *buf = lb->b ? lb->b : scratch;
		ssize_t got = read(r->fd[i], buf + lb->n, RUN_LINE_MAX - 1 - lb->n);
		char *start, *nl;

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			if (got == 0 || errno != EAGAIN) {
				if (lb->n && !lb->skip)    /* a last line without newline */
					emit_n(r, i, buf, lb->n);
				lb->n = 0;
				keep(r, i, buf);
				close_stream(r, i);
			}
			return;
		}
		lb->n += (size_t)got;
		buf[lb->n] = '\0';
		start = buf;
		while ((nl = memchr(start, '\n', lb->n - (size_t)(start - buf)))) {
			if (lb->skip)
				lb->skip = 0;   /* the end of a record cut */
			else
				emit_n(r, i, start, (size_t)(nl - start));
			start = nl + 1;
		}
		lb->n -= (size_t)(start - buf);
		memmove(buf, start, lb->n);
		if (lb->n == RUN_LINE_MAX - 1) {    /* a line too long */
			size_t done = lb->skip ? lb->n : emit_long(r, i, buf, lb->n);

			lb->n -= done;
			memmove(buf, buf + done, lb->n);
		}
		keep(r, i, buf);
	}
}

void runner_stop(struct run *r, enum run_stop why, const char *reason)
{
	/* ended_ms: its records ended, so the body is over and its exit code
	 * set (child_main closes that pipe then); the process is only going. */
	if (r->exited || r->kill_at || r->ended_ms)
		return;
	/* Copied: a reason may be built on the caller's stack ("replaced by
	 * the fire at T"). */
	snprintf(r->stop_reason, sizeof r->stop_reason, "%s", reason);
	r->stop_why = why;
	r->kill_at = clock_mono_ms() + r->grace_ms;
	log_msg(LOG_WARN, r->job->name, r->id, "stopping (%s): SIGTERM, SIGKILL in %lldms",
	        reason, (long long)r->grace_ms);
	if (r->pid > 0)
		kill(-r->pid, SIGTERM);
}

int64_t runner_tick(struct run *r, int64_t now)
{
	if (r->exited || r->ended_ms)
		return INT64_MAX;       /* (its body is over, see runner_stop) */
	if (r->kill_at) {
		if (now >= r->kill_at) {
			runner_kill(r);
			r->kill_at = INT64_MAX;  /* sent; nothing more to do */
			return INT64_MAX;
		}
		return r->kill_at;
	}
	if (r->timeout_at) {
		if (now >= r->timeout_at) {
			runner_stop(r, RUN_STOP_TIMEOUT, "timeout");
			return r->kill_at;
		}
		return r->timeout_at;
	}
	return INT64_MAX;
}

void runner_push_fence(struct run *r, int64_t stop_ms)
{
	union sigval v;

	if (r->exited || r->pid <= 0)
		return;
	v.sival_ptr = (void *)(intptr_t)stop_ms;
	sigqueue(r->pid, CHILD_FENCE_SIGNAL, v);
}

void runner_exited(struct run *r, int status)
{
	r->exited = 1;
	r->status = status;
	/* Whatever the body started dies with it. */
	runner_kill(r);
}

void runner_kill(struct run *r)
{
	if (r->pid > 0)         /* (0: a prepared run whose child is still asked for) */
		kill(-r->pid, SIGKILL);
}

int runner_done(struct run *r)
{
	return r->exited && r->fd[0] < 0 && r->fd[1] < 0 && r->fd[2] < 0;
}

const char *runner_outcome(const struct run *r, int *code, int *sig)
{
	*code = *sig = STORE_NO_CODE;
	if (WIFEXITED(r->status))
		*code = WEXITSTATUS(r->status);
	else if (WIFSIGNALED(r->status))
		*sig = WTERMSIG(r->status);
	switch (r->stop_reason[0] ? r->stop_why : 0) {
	case RUN_STOP_TIMEOUT: return "timeout";
	case RUN_STOP_LOST: return "lost";
	case RUN_STOP_HANDOFF: return "handed-off";
	case RUN_STOP_STOPPED: return "stopped";
	}
	if (*code == 0)
		return r->manual ? "manual" : "ok";
	return *code > 0 ? "failed" : "killed";
}

int64_t runner_ran_ms(const struct run *r)
{
	return (r->ended_ms ? r->ended_ms : clock_mono_ms()) - r->started_ms;
}

int64_t runner_ended_wall(const struct run *r)
{
	return r->ended_wall ? r->ended_wall : clock_wall_ms();
}

void runner_report(struct run *r, int *failed)
{
	double secs = runner_ran_ms(r) / 1000.0;
	int st = r->status, code, sig;

	say_unsaid(r);
	if (!r->hook)           /* a failure hook is no run of its job */
		metrics_note_run(r->job->metrics, runner_outcome(r, &code, &sig), runner_ran_ms(r),
		                 runner_ended_wall(r));
	*failed = 1;
	if (r->stop_reason[0] && r->stop_why == RUN_STOP_HANDOFF) {
		*failed = JOB_RUN_STOPPED;
		log_msg(LOG_INFO, r->job->name, r->id, "stopped for a hand-off (%s) after %.3fs",
		        r->stop_reason, secs);
	} else if (r->stop_reason[0] && r->stop_why == RUN_STOP_STOPPED) {
		*failed = JOB_RUN_STOPPED;
		log_msg(LOG_INFO, r->job->name, r->id, "stopped (%s) after %.3fs", r->stop_reason,
		        secs);
	} else if (r->stop_reason[0]) {
		log_msg(LOG_WARN, r->job->name, r->id, "stopped (%s) after %.3fs", r->stop_reason,
		        secs);
	} else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
		*failed = 0;
		log_msg(LOG_INFO, r->job->name, r->id, "finished in %.3fs", secs);
	} else if (WIFEXITED(st) && WEXITSTATUS(st) == 1) {
		log_msg(LOG_ERROR, r->job->name, r->id, "failed after %.3fs: the body raised an error",
		        secs);
	} else if (WIFEXITED(st)) {
		log_msg(LOG_ERROR, r->job->name, r->id, "failed after %.3fs: exit status %d", secs,
		        WEXITSTATUS(st));
	} else if (WIFSIGNALED(st)) {
		log_msg(LOG_ERROR, r->job->name, r->id, "failed after %.3fs: killed by signal %d (%s)",
		        secs, WTERMSIG(st), strsignal(WTERMSIG(st)));
	}
}

void runner_free(struct run *r)
{
	say_unsaid(r);
	if (r->held)
		flush_held(r);  /* a run that never went: what it wrote all the same */
	for (int i = 0; i < RUN_STREAMS; i++) {
		if (r->fd[i] >= 0)
			close_stream(r, i);
		free(r->lb[i].b);
	}
	close_go(r);
	if (!runner_prepared(r))
		rs.going--;
	free(r->error);
	free(r);
}

unsigned runner_going(void)
{
	return rs.going;
}

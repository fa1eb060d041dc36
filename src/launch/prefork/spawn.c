/* spawn.c - the spawner: a copy of leash that forks fires' processes ahead.
 *
 * At a thousand fires a second the parent's own forks were most of a
 * burst's cost, and on the one thread that also has to claim and start the
 * runs: each fork copied the page tables of a process the burst itself had
 * grown (a run's buffers, three pipes per run going), and each child then
 * closed the ~4,000 descriptors it inherited.  The spawner is a copy of the
 * parent, forked when the job table last changed (job_changes), so it has
 * every job's compiled body at the same address; it holds nothing but its
 * socket, stays the size it was forked at (its heap in huge pages, see
 * hugify), and forks while the parent goes on, on the other core.
 *
 * Its children are the parent's: clone(CLONE_PARENT) makes them so, as if
 * the parent had forked them (it reaps them, signals them, and they watch
 * getppid() for its death).  The parent asks over a SOCK_SEQPACKET pair
 * and does not wait: the spawner answers, in order, with the pid and, as
 * SCM_RIGHTS, the parent's ends of the child's four pipes, and the loop
 * takes the answers when the socket is readable (a fire whose process is
 * still asked for waits for its answer, SPAWN_ANSWER_MS at most).  Many
 * asks, and many answers, go in one message: the socket's buffer (208 KB)
 * held 167 asks sent one to a message (the kernel's share of each is 1 KB),
 * and a burst's thousand had the rest forked by the parent after all.  The
 * spawner keeps forking while its answers wait for the parent to read them
 * (it may be in a long store call): they go out, as many to a message as
 * are ready, when the socket has room.
 *
 * The spawner is only a shortcut: whenever there is none to ask (it died,
 * did not answer, or none could be forked), the parent forks the child
 * itself, as it did before there was one; a spawner that failed is not
 * forked again for SPAWN_RETRY_MS.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/tune.h"
#include "launch/child.h"
#include "core/clock.h"
#include "core/log.h"
#include "core/title.h"
#include "launch/prefork/spawn.h"
#include "store/store.h"
#include "launch/prefork/warm.h"

#define SPAWN_ANSWER_MS 2000            /* an answer later than this: it is gone */
#define SPAWN_RETRY_MS 10000            /* after a failure, the parent forks this long */
#define SPAWN_FDS 5                     /* stdout, stderr, log records; go's two ends */
#define SPAWN_ASKS_MAX 1024             /* asks not answered yet, at most */
#define SPAWN_ASK_BATCH 128             /* asks to a message: all owed fit the queue */
#define SPAWN_ANSWER_BATCH 50           /* answers to a message (SCM_MAX_FD: 253 fds) */
#define SPAWN_HUGE (2UL << 20)          /* a huge page */
#define SPAWN_TIDY_US 50000             /* use_up_free_chunks takes this long at most */
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25                /* Linux 6.1 (older ones: EINVAL, no harm) */
#endif

struct ask {
	const struct job *job;          /* valid in the spawner: see job_changes */
	struct run_info info;           /* replica: see below; no hook */
};

struct answer {
	pid_t pid;                      /* 0: none (no pipes, or no fork) */
	int64_t took_us;                /* the spawner's time for it */
};


/* The file's state: the spawner as the parent sees it, and the asks it
 * owes answers to.  (The spawner, a copy of the parent, reads its copy.) */
static struct spawner {
	char name[17];                  /* the parent's comm: its runs' too */
	int sock;                       /* -1: no spawner */
	pid_t spid;
	pid_t gone;                     /* one whose socket closed: its exit says why */
	uint64_t forked_at;             /* job_changes() when it was forked */
	int64_t retry_at;               /* monotonic: no new spawner before */
	/* The replica string every ask's run_info points to: the spawner's
	 * copy of the parent's memory has it at the same address (an ask with
	 * another one is forked by the parent). */
	const char *replica;
	void *kept;                     /* the heap's free chunks, used up (use_up_free_chunks) */
	/* Asks not answered yet, oldest first (a ring): the last `unsent` of
	 * them are still to go to the spawner. */
	void *owed[SPAWN_ASKS_MAX];
	struct ask asks[SPAWN_ASKS_MAX];
	unsigned owed_first, owed_n, unsent;
	spawn_answered *answered_cb;
	int64_t cost_us;                /* the spawner's pace per child, lately */
	int64_t sent_us[SPAWN_ASKS_MAX]; /* when each ask went to the spawner */
	int64_t answered_us;            /* when the last answers came */
	int watch_epfd;
	struct watch *watch_what;
} sp = { .sock = -1, .watch_epfd = -1 };

/* ---- the spawner ---- */

/* fork(2), but the child is the caller's parent's. */
static pid_t clone_parent(void)
{
	return (pid_t)syscall(SYS_clone, (unsigned long)(CLONE_PARENT | SIGCHLD), NULL, NULL,
	                      NULL, NULL);
}

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* The spawner's answers not sent yet, oldest first (a ring, not on its
 * heap: it writes nothing there, see hugify). */
struct answers {
	struct answer ans[SPAWN_ASKS_MAX];
	int fd[SPAWN_ASKS_MAX][SPAWN_FDS];      /* the parent's ends, if forked */
	size_t first, n;
};

/* Forks a's child; its answer joins out. */
static void fork_one(lua_State *L, int s, struct ask *a, struct answers *out)
{
	size_t k = (out->first + out->n++) % SPAWN_ASKS_MAX;
	int fds[RUN_STREAMS][2], gofds[2];
	struct answer *ans = &out->ans[k];
	int64_t t0 = now_us();
	pid_t pid = -1;
	int ok = child_pipes(fds, gofds) == 0;

	a->info.replica = sp.replica;
	a->info.hook = NULL;
	if (ok && (pid = clone_parent()) == 0) {
		close(s);
		prctl(PR_SET_NAME, sp.name);
		title_restore();
		child_main(L, a->job, &a->info, 0, fds, gofds[0]);
	}
	*ans = (struct answer){ .pid = pid > 0 ? pid : 0 };
	if (pid > 0) {
		/* The child's ends are the child's; the parent's wait to be sent. */
		for (int i = 0; i < RUN_STREAMS; i++) {
			close(fds[i][1]);
			out->fd[k][i] = fds[i][0];
		}
		out->fd[k][RUN_STREAMS] = gofds[0];
		out->fd[k][RUN_STREAMS + 1] = gofds[1];
	} else {
		child_pipes_close(fds, gofds);
	}
	ans->took_us = now_us() - t0;
}

/* Sends what the socket takes of out's answers (each message as many as
 * are ready, up to SPAWN_ANSWER_BATCH) and closes their descriptors. */
static void send_answers(int s, struct answers *out)
{
	while (out->n) {
		struct answer ans[SPAWN_ANSWER_BATCH];
		int fd[SPAWN_ANSWER_BATCH * SPAWN_FDS];
		union {
			char buf[CMSG_SPACE(sizeof fd)];
			struct cmsghdr align;
		} c;
		struct iovec iov = { ans, 0 };
		struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
		size_t n = out->n < SPAWN_ANSWER_BATCH ? out->n : SPAWN_ANSWER_BATCH, nfd = 0;

		for (size_t i = 0; i < n; i++) {
			size_t k = (out->first + i) % SPAWN_ASKS_MAX;

			ans[i] = out->ans[k];
			if (ans[i].pid) {
				memcpy(&fd[nfd], out->fd[k], sizeof out->fd[k]);
				nfd += SPAWN_FDS;
			}
		}
		iov.iov_len = n * sizeof *ans;
		if (nfd) {
			memset(&c, 0, sizeof c);
			m.msg_control = c.buf;
			m.msg_controllen = CMSG_SPACE(nfd * sizeof(int));
			CMSG_FIRSTHDR(&m)->cmsg_level = SOL_SOCKET;
			CMSG_FIRSTHDR(&m)->cmsg_type = SCM_RIGHTS;
			CMSG_FIRSTHDR(&m)->cmsg_len = CMSG_LEN(nfd * sizeof(int));
			memcpy(CMSG_DATA(CMSG_FIRSTHDR(&m)), fd, nfd * sizeof(int));
		}
		if (sendmsg(s, &m, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				return;
			/* The parent is gone: the children's go pipes close with
			 * ours and they exit. */
			_exit(0);
		}
		for (size_t i = 0; i < nfd; i++)
			close(fd[i]);
		out->first = (out->first + n) % SPAWN_ASKS_MAX;
		out->n -= n;
	}
}

/* Where the heap begins, and where its top chunk (its fresh end) does. */
static void heap_range(uintptr_t *start, uintptr_t *top)
{
	struct mallinfo2 mi = mallinfo2();
	uintptr_t end = (uintptr_t)sbrk(0);

	*start = end - mi.arena;
	*top = end - mi.keepcost;
}

/* Takes every free chunk of the heap, for good, so that a child's mallocs
 * come from the heap's top, fresh and contiguous, not from chunks spread
 * all over it: a child's first mallocs wrote the headers of 50-60 such
 * chunks (the tcache's, the bins'), most on a page of their own, and each
 * of those pages was copied (a 2 MB huge page split for the first of them):
 * half of a child's page faults.  Each size, largest first, is taken until
 * one comes from the top (there is no free chunk that big left), then each
 * of the tcache's sizes (up to 1,040 bytes: what taking one from a bin put
 * in the tcache).  A heap of a thousand jobs has some 7,000, kept in a
 * list through themselves (so that no checker calls them lost); no memory
 * is added, and it takes some 6 ms, never more than SPAWN_TIDY_US.  (Taking
 * 7 of each tcache size first, as before, left the tcache full again.)
 * They are kept in sp.kept. */
static int use_up(size_t sz, uintptr_t start, uintptr_t top, int64_t until)
{
	for (unsigned i = 0;; i++) {
		void *p = malloc(sz - sizeof(size_t));

		if (!p || (i % 256 == 255 && now_us() > until))
			return -1;
		if ((uintptr_t)p < start || (uintptr_t)p >= top) {
			free(p);        /* the top's, or a mapping's of its own */
			return 0;
		}
		*(void **)p = sp.kept;
		sp.kept = p;
	}
}

static void use_up_free_chunks(void)
{
	int64_t until = now_us() + SPAWN_TIDY_US;
	uintptr_t start, top;

	heap_range(&start, &top);
	for (size_t sz = (size_t)1 << 20; sz >= 32; sz /= 2)
		if (use_up(sz, start, top, until) < 0)
			return;
	for (size_t sz = 32; sz <= 1040; sz += 16)
		if (use_up(sz, start, top, until) < 0)
			return;
}

/* The heap in huge pages where it can be, so that a fork copies one entry
 * per 2 MB of it, not 512, and a child's exit frees as few: a thousand
 * jobs' heap (4 MB) forked and torn down a thousand times a second was most
 * of a burst's CPU.  The parent's heap is often several mappings (what brk
 * added after a fork does not merge with what the fork had shared), and a
 * huge page must lie inside one: so the heap is copied into one new
 * mapping that ends on a 2 MB boundary (when nothing is mapped there) and
 * put in its place, and each whole 2 MB of it is collapsed into one huge
 * page (MADV_COLLAPSE).  The program break stays where it was: a child's
 * malloc that wants more heap maps it elsewhere.  The spawner writes to
 * none of it from then on: a write would split its own huge pages.  When
 * the kernel has none to give, the pages stay small. */
static void hugify(void)
{
	static char maps[1 << 16];      /* not malloc's: it frees nothing now */
	char *line, *eol;
	uintptr_t start = 0, hi = 0, next = UINTPTR_MAX, lo, top;
	int split = 0, fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	size_t got = 0;
	sigset_t all, old;
	void *p;

	if (fd < 0)
		return;
	for (ssize_t n; got < sizeof maps - 1 && (n = read(fd, maps + got, sizeof maps - 1 - got)) > 0;)
		got += (size_t)n;
	close(fd);
	maps[got] = 0;
	for (line = maps; *line; line = eol + 1) {
		unsigned long a, b;

		if (!(eol = strchr(line, '\n')))
			break;
		*eol = 0;
		if (sscanf(line, "%lx-%lx", &a, &b) != 2)
			continue;
		if (strstr(line, "[heap]")) {
			split |= start && a != hi;      /* not one piece: left alone */
			if (!start)
				start = a;
			hi = b;
		} else if (hi && a >= hi && next == UINTPTR_MAX) {
			next = a;
		}
	}
	if (!hi || split)
		return;
	top = (hi + SPAWN_HUGE - 1) & ~(SPAWN_HUGE - 1);
	if (top > next)
		top = hi;
	lo = (start + SPAWN_HUGE - 1) & ~(SPAWN_HUGE - 1);
	if ((top & ~(SPAWN_HUGE - 1)) <= lo)
		return;         /* not one whole huge page in it */
	p = mmap(NULL, top - start, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return;
	/* No handler may write the heap between the copy and the move. */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	memcpy(p, (void *)start, hi - start);
	if (mremap(p, top - start, top - start, MREMAP_MAYMOVE | MREMAP_FIXED,
	           (void *)start) == MAP_FAILED)
		munmap(p, top - start);
	sigprocmask(SIG_SETMASK, &old, NULL);
	hi = top & ~(SPAWN_HUGE - 1);
	if (madvise((void *)lo, hi - lo, MADV_HUGEPAGE) < 0)
		return;
	for (uintptr_t a = lo; a < hi; a += SPAWN_HUGE)
		madvise((void *)a, SPAWN_HUGE, MADV_COLLAPSE);
}

static __attribute__((noreturn)) void serve(lua_State *L, int s, pid_t parent)
{
	struct ask a[SPAWN_ASK_BATCH];
	static struct answers out;      /* in .bss: the fork copied none of it */
	size_t got = 0, next = 0;
	rlim_t fds_max = 1024;
	struct rlimit rl;
	ssize_t n;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	prctl(PR_GET_NAME, sp.name);
	title_set("leash: spawner");
	/* Everything of the parent's but stdin, stdout and stderr (its
	 * children's until they set theirs) goes: the database's socket, the
	 * runs' pipes, the HTTP listener. */
	if (s > 3)
		syscall(SYS_close_range, 3U, (unsigned)s - 1, 0U);
	syscall(SYS_close_range, (unsigned)(s < 3 ? 3 : s + 1), ~0U, 0U);
	/* The store's client libraries are the parent's: libpq and what it
	 * brings (ssl, krb5, ldap, gnutls, ...) were 90 of the spawner's 160
	 * mappings, each copied into every child and torn down with it (a
	 * fork took twice as long).  No job holds them (a job's file loads
	 * no module but leash.core); a run that wants one loads it itself. */
	store_unload();
	/* The parent's free heap is not copied into every child. */
	malloc_trim(0);
	if (!tune_off(TUNE_TIDY))
		use_up_free_chunks();
	if (!tune_off(TUNE_HUGE))
		hugify();
	warm_init();
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		fds_max = rl.rlim_cur;
	for (;;) {
		struct pollfd p = { .fd = s };

		send_answers(s, &out);
		/* Room for the next one's eight descriptors, then its four
		 * until sent. */
		if (next < got && (out.n + 3) * SPAWN_FDS + 16 < fds_max && out.n < SPAWN_ASKS_MAX) {
			fork_one(L, s, &a[next++], &out);
			continue;
		}
		p.events = (next == got ? POLLIN : 0) | (out.n ? POLLOUT : 0);
		if (poll(&p, 1, -1) < 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR)) ||
		    next < got)
			continue;
		n = recv(s, a, sizeof a, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			continue;
		if (n <= 0 || n % sizeof *a)
			_exit(0);       /* closed: the parent has no more to ask */
		got = (size_t)n / sizeof *a;
		next = 0;
	}
}

/* ---- the parent's side ---- */


void spawn_watch(int epfd, struct watch *what)
{
	sp.watch_epfd = epfd;
	sp.watch_what = what;
}

/* Every answer still owed says there is no child. */
static void settle(void)
{
	while (sp.owed_n) {
		void *tag = sp.owed[sp.owed_first];

		sp.owed_first = (sp.owed_first + 1) % SPAWN_ASKS_MAX;
		sp.owed_n--;
		sp.answered_cb(tag, 0, NULL, NULL);
	}
}

static void forget(void)
{
	if (sp.sock >= 0) {
		if (sp.watch_epfd >= 0)
			events_forget(sp.watch_epfd, sp.sock);
		close(sp.sock);
	}
	sp.sock = -1;
	sp.spid = 0;
	sp.unsent = 0;
	settle();
}

/* No new spawner for SPAWN_RETRY_MS; -1 for the caller to return. */
static int hold_off(void)
{
	sp.retry_at = clock_mono_ms() + SPAWN_RETRY_MS;
	return -1;
}

static void say_gone(pid_t pid, const char *why)
{
	log_msg(LOG_WARN, NULL, 0, "the spawner (pid %d) %s: leash forks the processes of fires "
	        "itself for %d s", (int)pid, why, SPAWN_RETRY_MS / 1000);
}

/* reaped: its pid is no longer its own to kill. */
static void give_up(const char *why, int reaped)
{
	say_gone(sp.spid, why);
	if (!reaped)
		kill(sp.spid, SIGKILL);
	forget();
	hold_off();
}

static int start(lua_State *L, const char *replica_of_all)
{
	pid_t parent = getpid(), pid;
	int sv[2];

	if (clock_mono_ms() < sp.retry_at || child_go_init() < 0)
		return -1;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sv) < 0) {
		log_msg(LOG_WARN, NULL, 0, "cannot start the spawner: %s", strerror(errno));
		return hold_off();
	}
	fflush(NULL);
	sp.replica = replica_of_all;
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		fcntl(sv[1], F_SETFL, 0);       /* the spawner's side blocks */
		serve(L, sv[1], parent);
	}
	close(sv[1]);
	if (pid < 0) {
		log_msg(LOG_WARN, NULL, 0, "cannot start the spawner: %s", strerror(errno));
		close(sv[0]);
		return hold_off();
	}
	sp.sock = sv[0];
	sp.spid = pid;
	sp.forked_at = job_changes();
	if (sp.watch_epfd >= 0)
		events_add(sp.watch_epfd, sp.sock, sp.watch_what);
	log_msg(LOG_DEBUG, NULL, 0, "spawner started pid=%d", (int)pid);
	return 0;
}

/* Sends the asks not sent yet, SPAWN_ASK_BATCH to a message, as far as the
 * socket takes them (the rest go once answers made room: flush is called
 * again as they are taken).  -1 when the spawner was given up. */
static int flush(void)
{
	while (sp.sock >= 0 && sp.unsent) {
		unsigned first = (sp.owed_first + sp.owed_n - sp.unsent) % SPAWN_ASKS_MAX;
		unsigned n = sp.unsent < SPAWN_ASK_BATCH ? sp.unsent : SPAWN_ASK_BATCH;
		unsigned upto = SPAWN_ASKS_MAX - first < n ? SPAWN_ASKS_MAX - first : n;
		struct iovec iov[2] = { { &sp.asks[first], upto * sizeof *sp.asks },
		                        { sp.asks, (n - upto) * sizeof *sp.asks } };
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = n > upto ? 2 : 1 };
		ssize_t sent = sendmsg(sp.sock, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
		int64_t at;

		if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (sent != (ssize_t)(n * sizeof *sp.asks)) {
			give_up(sent < 0 ? strerror(errno) : "took a part of an ask", 0);
			return -1;
		}
		at = now_us();
		for (unsigned i = 0; i < n; i++)
			sp.sent_us[(first + i) % SPAWN_ASKS_MAX] = at;
		sp.unsent -= n;
	}
	return sp.sock >= 0 ? 0 : -1;
}

int spawn_ask(lua_State *L, const struct job *job, const struct run_info *info, void *tag,
              spawn_answered *answered)
{
	unsigned k;

	sp.answered_cb = answered;
	if (info->hook || !info->replica)
		return -1;
	if (sp.sock >= 0 && sp.forked_at != job_changes())
		forget();       /* its copy of the jobs is not theirs: it exits */
	if (sp.sock < 0 && start(L, info->replica) < 0)
		return -1;
	if (info->replica != sp.replica)
		return -1;
	/* A whole batch goes before this ask joins the next one. */
	if (sp.unsent >= SPAWN_ASK_BATCH && flush() < 0)
		return -1;
	if (sp.owed_n == SPAWN_ASKS_MAX)
		return 1;
	k = (sp.owed_first + sp.owed_n) % SPAWN_ASKS_MAX;
	sp.asks[k] = (struct ask){ .job = job, .info = *info };
	sp.asks[k].info.replica = NULL;
	sp.owed[k] = tag;
	sp.owed_n++;
	sp.unsent++;
	return 0;
}

void spawn_flush(void)
{
	flush();
}

/* The descriptors of one message's answers, n of them expected, into out;
 * -1 when they are not all there (those that came are closed). */
static int take_fds(struct msghdr *m, int *out, size_t n)
{
	size_t got = 0;

	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
			if (got < n)
				out[got++] = fd;
			else
				close(fd);
		}
	}
	if (got == n && !(m->msg_flags & MSG_CTRUNC))
		return 0;
	while (got > 0)
		close(out[--got]);
	return -1;
}

/* The answer to the oldest ask. */
static void pay(pid_t pid, const int *fd)
{
	void *tag = sp.owed[sp.owed_first];

	sp.owed_first = (sp.owed_first + 1) % SPAWN_ASKS_MAX;
	sp.owed_n--;
	if (pid)
		sp.answered_cb(tag, pid, fd, &fd[RUN_STREAMS]);
	else
		sp.answered_cb(tag, 0, NULL, NULL);
}

/* The pace of k answers to the oldest asks (k >= 1): from the later of
 * the last answers and the oldest ask's sending to now, per answer.
 * Unlike took_us (the fork's own time) it counts the spawner's waits for a
 * CPU: on a busy machine a thousand forks take far longer than a thousand
 * forks' CPU. */
static void note_pace(const struct answer *ans, size_t k)
{
	int64_t now = now_us(), from = sp.sent_us[sp.owed_first];
	int64_t per = (now - (from > sp.answered_us ? from : sp.answered_us)) / (int64_t)k;

	sp.answered_us = now;
	for (size_t i = 0; i < k; i++) {
		int64_t took = ans[i].took_us > per ? ans[i].took_us : per;

		sp.cost_us = sp.cost_us ? (sp.cost_us * 7 + took) / 8 : took;
	}
}

/* One message of answers, when one came: 1, or 0 (none yet, or the
 * spawner went). */
static int take_one(void)
{
	struct answer ans[SPAWN_ANSWER_BATCH];
	union {
		char buf[CMSG_SPACE(SPAWN_ANSWER_BATCH * SPAWN_FDS * sizeof(int))];
		struct cmsghdr align;
	} c;
	struct iovec iov = { ans, sizeof ans };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf,
	                    .msg_controllen = sizeof c.buf };
	int got[SPAWN_ANSWER_BATCH * SPAWN_FDS];
	size_t k, forked = 0;
	ssize_t n;

	if (sp.sock < 0)
		return 0;
	n = recvmsg(sp.sock, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	if (n == 0) {
		/* It died (or exited): the log says how once it is reaped. */
		sp.gone = sp.spid;
		forget();
		hold_off();
		return 0;
	}
	k = n > 0 ? (size_t)n / sizeof *ans : 0;
	if (n < 0 || n % sizeof *ans || k > sp.owed_n - sp.unsent) {
		give_up(n < 0 ? strerror(errno) : "answered wrong", 0);
		return 0;
	}
	note_pace(ans, k);
	for (size_t i = 0; i < k; i++)
		forked += ans[i].pid != 0;
	if (take_fds(&m, got, forked * SPAWN_FDS) < 0) {
		for (size_t i = 0; i < k; i++) {
			if (ans[i].pid)
				kill(ans[i].pid, SIGKILL);
			pay(0, NULL);
		}
		give_up("sent no pipes", 0);
		return 0;
	}
	forked = 0;
	for (size_t i = 0; i < k; i++) {
		pay(ans[i].pid, ans[i].pid ? &got[SPAWN_FDS * forked] : NULL);
		forked += ans[i].pid != 0;
	}
	return 1;
}

void spawn_collect(void)
{
	while (take_one())
		;
	flush();                /* room was made */
}

static int is_owed(void *tag)
{
	for (unsigned i = 0; i < sp.owed_n; i++)
		if (sp.owed[(sp.owed_first + i) % SPAWN_ASKS_MAX] == tag)
			return 1;
	return 0;
}

void spawn_wait(void *tag)
{
	int64_t until = clock_mono_ms() + SPAWN_ANSWER_MS;

	flush();
	while (sp.sock >= 0 && is_owed(tag)) {
		struct pollfd p = { .fd = sp.sock, .events = POLLIN };
		int64_t left = until - clock_mono_ms();

		if (left <= 0) {
			give_up("did not answer", 0);
			return;
		}
		if (poll(&p, 1, (int)left) > 0)
			spawn_collect();
	}
}

int64_t spawn_cost_us(void)
{
	return sp.cost_us;
}

int spawn_reaped(pid_t pid, int status)
{
	char why[64];

	if (!pid || (pid != sp.spid && pid != sp.gone))
		return 0;
	if (WIFSIGNALED(status))
		snprintf(why, sizeof why, "was killed by signal %d", WTERMSIG(status));
	else
		snprintf(why, sizeof why, "exited with status %d", WEXITSTATUS(status));
	if (pid == sp.spid) {
		give_up(why, 1);
	} else {                /* its socket closed before: given up then */
		say_gone(pid, why);
		sp.gone = 0;
	}
	return 1;
}

void spawn_stop(void)
{
	forget();
}

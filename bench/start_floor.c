/* bench/start_floor.c - the floor under a fire's start on this machine,
 * without leash: how late N processes, forked ahead and each woken by its own
 * timer at the same instant, reach their first line.
 *
 *   start_floor [N [SECONDS [PARENTS [BALLAST_MB]]]]   (100 10 3 4)
 *
 * PARENTS processes (as many as replicas) each own BALLAST_MB of touched
 * memory (so that a fork copies page tables as leash's does) and, every
 * second, fork their share of N children 300 ms before the second.  A child
 * sleeps to the second (absolute CLOCK_REALTIME, 1 ns timer slack) pinned to
 * one CPU (pid % n, the set back at the wake), reads the clock, appends one
 * line to a shared file (open, write, close: what bench/common.lua's
 * lateness job does in Lua) and exits at nice 19 after a yield: what leash's
 * runs forked ahead do around their start (src/launch/child.c), with no Lua and no
 * parent to report to.  START_FLOOR_PLAIN=1: without the pinning and the
 * yield (a plain fork and sleep).  Prints the lateness p50 / p90 / p99 / max
 * in ms over all starts, and each second's median, so that leash's figures
 * (make bench-ledger, the burst bench) can be read against what the kernel
 * and the cores give any process. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LEAD_NS 300000000L

static int tricks = 1;          /* START_FLOOR_PLAIN=1: without leash's */

static double wall(void)
{
	struct timespec t;

	clock_gettime(CLOCK_REALTIME, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void child(const char *out, time_t sec)
{
	struct timespec at = { .tv_sec = sec, .tv_nsec = 0 };
	cpu_set_t all, one;
	char line[64];
	int fd, n, cpus = 0;

	/* As leash's runs forked ahead: wait pinned to one CPU of the set
	 * (pid % n), the set back at the wake; the exit yields. */
	prctl(PR_SET_TIMERSLACK, 1UL);
	if (tricks && sched_getaffinity(0, sizeof all, &all) == 0 && (cpus = CPU_COUNT(&all)) > 1) {
		int k = getpid() % cpus;

		CPU_ZERO(&one);
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &all) && k-- == 0)
				CPU_SET(c, &one);
		sched_setaffinity(0, sizeof one, &one);
	}
	while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &at, NULL) == EINTR)
		;
	if (cpus > 1)
		sched_setaffinity(0, sizeof all, &all);
	n = snprintf(line, sizeof line, "%lld %.6f\n", (long long)sec, wall() - (double)sec);
	fd = open(out, O_WRONLY | O_APPEND | O_CREAT, 0644);
	if (fd >= 0) {
		if (write(fd, line, (size_t)n) < 0)
			_exit(1);
		close(fd);
	}
	if (tricks) {
		setpriority(PRIO_PROCESS, 0, 19);
		sched_yield();
	}
	_exit(0);
}

static void parent(const char *out, int share, int seconds, size_t ballast)
{
	char *b = malloc(ballast);
	time_t first = time(NULL) + 2;

	if (b)
		memset(b, 1, ballast);
	for (int s = 0; s < seconds; s++) {
		struct timespec at = { .tv_sec = first + s - 1, .tv_nsec = 1000000000L - LEAD_NS };

		while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &at, NULL) == EINTR)
			;
		for (int i = 0; i < share; i++) {
			pid_t p = fork();

			if (p == 0)
				child(out, first + s);
		}
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
	while (wait(NULL) > 0)
		;
	_exit(0);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double pct(const double *v, int n, double p)
{
	int i = (int)(p * n);

	return n ? v[i < n ? i : n - 1] : 0;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 100, seconds = argc > 2 ? atoi(argv[2]) : 10;
	int parents = argc > 3 ? atoi(argv[3]) : 3, mb = argc > 4 ? atoi(argv[4]) : 4;
	char out[] = "/tmp/start_floor.XXXXXX";
	double *late, *med, *cur;
	int fd = mkstemp(out), nl = 0, nm = 0, nc = 0;
	long long sec, last = -1;
	double v;
	FILE *f;

	tricks = !getenv("START_FLOOR_PLAIN");
	if (fd < 0 || n < 1 || seconds < 1 || parents < 1 || mb < 0) {
		fprintf(stderr, "usage: start_floor [N [SECONDS [PARENTS [BALLAST_MB]]]]\n");
		return 2;
	}
	close(fd);
	for (int p = 0; p < parents; p++)
		if (fork() == 0)
			parent(out, n / parents + (p < n % parents), seconds, (size_t)mb << 20);
	while (wait(NULL) > 0)
		;
	late = calloc((size_t)n * (size_t)seconds, sizeof *late);
	med = calloc((size_t)seconds, sizeof *med);
	cur = calloc((size_t)n, sizeof *cur);
	if (!late || !med || !cur || !(f = fopen(out, "r")))
		return 1;
	/* The lines come a second at a time (each second's children end long
	 * before the next second's wake). */
	while (fscanf(f, "%lld %lf", &sec, &v) == 2) {
		if (sec != last && nc) {
			qsort(cur, (size_t)nc, sizeof *cur, cmp);
			med[nm++] = pct(cur, nc, 0.5);
			nc = 0;
		}
		last = sec;
		if (nl < n * seconds)
			late[nl++] = v * 1000;
		if (nc < n)
			cur[nc++] = v * 1000;
	}
	if (nc) {
		qsort(cur, (size_t)nc, sizeof *cur, cmp);
		med[nm++] = pct(cur, nc, 0.5);
	}
	fclose(f);
	unlink(out);
	qsort(late, (size_t)nl, sizeof *late, cmp);
	qsort(med, (size_t)nm, sizeof *med, cmp);
	printf("start floor%s: %d processes a second from %d parents of %d MB, %d s: %d starts\n",
	       tricks ? "" : " (plain)", n, parents, mb, seconds, nl);
	printf("  lateness p50 / p90 / p99 / max ms: %.2f / %.2f / %.2f / %.2f\n", pct(late, nl, 0.5),
	       pct(late, nl, 0.9), pct(late, nl, 0.99), pct(late, nl, 1));
	printf("  each second's median, p50 / max ms: %.2f / %.2f\n", pct(med, nm, 0.5), pct(med, nm, 1));
	return nl == n * seconds ? 0 : 1;
}

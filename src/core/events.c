/* core/events.c - the epoll set of leash run, its waits and its timers (events.h). */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <time.h>
#include <sys/epoll.h>

#include "core/clock.h"
#include "core/events.h"
#include "core/log.h"

int events_open(void)
{
	return epoll_create1(EPOLL_CLOEXEC);
}

int events_add(int epfd, int fd, struct watch *w)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = w };

	return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

void events_forget(int epfd, int fd)
{
	epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
}

/* epoll_wait until wait_ms from now, to the wall clock's ms: the job table
 * counts in whole ms read at some point of the current one, so "1 ms" from
 * 11:59:59.999.6 is a fire at 12:00:00.000, which epoll_wait's ms would
 * make 0.6 ms late (on average every fire half a millisecond).  Never
 * earlier than the ms the caller read plus wait_ms; at most 1 ms earlier
 * than wait_ms from now. */
static int wait_precise(int epfd, struct epoll_event *ev, int n, int64_t wait_ms)
{
	static int plain;               /* epoll_pwait2 is missing (before Linux 5.11) */
	struct timespec now, left;
	int64_t ns;
	int rc;

	if (wait_ms <= 0 || wait_ms > 60000 || plain || clock_gettime(CLOCK_REALTIME, &now) < 0)
		return epoll_wait(epfd, ev, n, wait_ms > INT_MAX ? INT_MAX : wait_ms < 0 ? 0
		                  : (int)wait_ms);
	ns = wait_ms * 1000000 - now.tv_nsec % 1000000;
	left.tv_sec = ns / 1000000000;
	left.tv_nsec = ns % 1000000000;
	rc = epoll_pwait2(epfd, ev, n, &left, NULL);
	if (rc < 0 && errno == ENOSYS) {
		plain = 1;
		return wait_precise(epfd, ev, n, wait_ms);
	}
	return rc;
}

int events_wait(int epfd, int64_t wait_ms)
{
	struct epoll_event ev[64];
	int n = wait_precise(epfd, ev, sizeof ev / sizeof *ev, wait_ms);
	int urgent = 0;

	if (n < 0 && errno != EINTR) {
		log_msg(LOG_ERROR, NULL, 0, "epoll_wait: %s", strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		struct watch *w = ev[i].data.ptr;

		urgent |= w->fn(w);
	}
	return urgent || n < 0;
}

void timers_add(struct timer **list, struct timer *t)
{
	while (*list)
		list = &(*list)->next;
	t->next = NULL;
	*list = t;
}

int64_t timers_run(struct timer *t)
{
	int64_t wait_ms = INT64_MAX, t0 = clock_mono_ms();

	for (; t; t = t->next) {
		int64_t in = t->fn(t, wait_ms), now = clock_mono_ms();

		if (wait_ms != INT64_MAX)
			wait_ms -= now - t0;
		t0 = now;
		if (in < wait_ms)
			wait_ms = in;
	}
	return wait_ms < 0 ? 0 : wait_ms;
}

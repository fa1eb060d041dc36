/* http.c - the parent's side of the HTTP server: the socket, the server
 * process, the snapshots (see http.h for why a process). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "web/http.h"
#include "core/log.h"
#include "core/metrics.h"
#include "cluster/singleton.h"

/* [http] listen as leash.config let it through: IPv4:PORT, [IPv6]:PORT or
 * localhost:PORT. */
static int parse_listen(const char *s, struct sockaddr_storage *ss, socklen_t *sslen)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	size_t n = colon ? (size_t)(colon - s) : 0;
	int port = colon ? atoi(colon + 1) : 0;

	if (!colon || n >= sizeof host || port < 1 || port > 65535)
		return -1;
	memcpy(host, s, n);
	host[n] = '\0';
	memset(ss, 0, sizeof *ss);
	if (host[0] == '[' && n > 2 && host[n - 1] == ']') {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		host[n - 1] = '\0';
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		*sslen = sizeof *a;
		return inet_pton(AF_INET6, host + 1, &a->sin6_addr) == 1 ? 0 : -1;
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;

		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		*sslen = sizeof *a;
		if (strcmp(host, "localhost") == 0)
			snprintf(host, sizeof host, "127.0.0.1");
		return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
	}
}

int http_open(struct http *h, const struct cfg *c, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t sslen;
	const char *why;
	int one = 1, fd;

	memset(h, 0, sizeof *h);
	h->cfg = c;
	h->listen_fd = h->snap_fd = -1;
	h->backoff_ms = HTTP_BACKOFF_MIN_MS;
	if (!c->http_listen[0])
		return 0;
	if (c->http_token_env[0]) {
		const char *tok = getenv(c->http_token_env);

		if (!tok || !*tok) {
			snprintf(err, errlen, "%s: [http] token_env: the environment variable %s is %s",
			         c->file, c->http_token_env, tok ? "empty" : "not set");
			return -1;
		}
	}
	if (parse_listen(c->http_listen, &ss, &sslen) < 0) {
		snprintf(err, errlen, "%s: [http] listen: \"%s\" is not HOST:PORT", c->file,
		         c->http_listen);
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(err, errlen, "%s: [http] listen: %s: cannot make a socket: %s", c->file,
		         c->http_listen, strerror(errno));
		return -1;
	}
	/* A restart finds its port free while the last one's connections
	 * linger in TIME_WAIT; Linux still refuses a second listener. */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (ss.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
	if (bind(fd, (struct sockaddr *)&ss, sslen) < 0 || listen(fd, 128) < 0) {
		int e = errno;

		why = e == EADDRINUSE ? "the port is in use"
		      : e == EADDRNOTAVAIL ? "the address is not one of this host's"
		      : e == EACCES ? "not allowed (a port below 1024 needs privileges)"
		      : "cannot listen";
		snprintf(err, errlen, "%s: [http] listen: %s: %s (%s)", c->file, c->http_listen, why,
		         strerror(e));
		close(fd);
		return -1;
	}
	h->listen_fd = fd;
	snprintf(h->url, sizeof h->url, "%s://%s/", c->http_cert[0] ? "https" : "http",
	         c->http_listen);
	return 0;
}

/* Forks and execs `leash _http -c FILE [-o OPTION]...` (the options
 * leash was given) with the socket on HTTP_LISTEN_FD and the pipe's read
 * end on HTTP_SNAP_FD. */
static void spawn(struct http *h, int64_t now)
{
	const char *const *opts;
	int nopts = cfg_options(&opts), argc = 0;
	char *argv[4 + 2 * CFG_OPTIONS_MAX + 1];
	pid_t parent = getpid(), pid;
	int p[2];

	if (pipe2(p, O_CLOEXEC) < 0) {
		log_msg(LOG_ERROR, NULL, 0, "http: cannot make the server's pipe: %s",
		        strerror(errno));
		h->restart_at = now + h->backoff_ms;
		return;
	}
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	argv[argc++] = "leash";
	argv[argc++] = "_http";
	argv[argc++] = "-c";
	argv[argc++] = h->cfg->file;
	for (int i = 0; i < nopts; i++) {
		argv[argc++] = "-o";
		argv[argc++] = (char *)opts[i];
	}
	argv[argc] = NULL;
	pid = fork();
	if (pid < 0) {
		log_msg(LOG_ERROR, NULL, 0, "http: cannot start the server: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		h->restart_at = now + h->backoff_ms;
		return;
	}
	if (pid == 0) {
		sigset_t none;
		int a, b, m = metrics_fd();

		/* A group of its own: a Ctrl-C at the terminal is the
		 * parent's to handle (it stops the runs first), not a signal
		 * that kills the server mid-shutdown. */
		setpgid(0, 0);
		/* Dies with the parent, even before the pipe tells it. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(1);
		/* Above the fixed numbers first, so neither dup2 clobbers the
		 * other's source. */
		a = fcntl(h->listen_fd, F_DUPFD, 10);
		b = fcntl(p[0], F_DUPFD, 10);
		m = m >= 0 ? fcntl(m, F_DUPFD, 10) : -1;
		if (a < 0 || b < 0 || dup2(a, HTTP_LISTEN_FD) < 0 || dup2(b, HTTP_SNAP_FD) < 0)
			_exit(126);
		if (m >= 0 && dup2(m, HTTP_METRICS_FD) < 0)
			_exit(126);
		/* The store's socket, the runs' pipes: not the server's. */
		syscall(SYS_close_range, (unsigned)HTTP_METRICS_FD + (m >= 0), ~0U, 0U);
		/* The parent blocks the signals it reads through its signalfd;
		 * the server takes SIGTERM's default action. */
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* Below the scheduler: a busy server takes the CPU the loop and
		 * the runs leave over.  Lowering one's own priority cannot fail
		 * for want of rights; the kernel caps it at 19. */
		setpriority(PRIO_PROCESS, 0, getpriority(PRIO_PROCESS, 0) + HTTP_NICE);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(p[0]);
	h->snap_fd = p[1];
	h->pid = pid;
	h->started_at = now;
	h->push_at = now;
	log_msg(LOG_INFO, NULL, 0, "http: serving %s (server pid %d)", h->url, (int)pid);
}

/* Writes what is left of the pending snapshot; never waits. */
static void flush(struct http *h)
{
	while (h->pending && h->poff < h->plen) {
		ssize_t n = write(h->snap_fd, h->pending + h->poff, h->plen - h->poff);

		if (n > 0) {
			h->poff += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;         /* the server reads it later: the rest waits */
		/* EPIPE: the server is gone; its reaping restarts it. */
		break;
	}
	free(h->pending);
	h->pending = NULL;
	h->plen = h->poff = 0;
}

static void push(struct http *h, const struct http_live *lv, int64_t now)
{
	struct http_snap head = {
		.magic = HTTP_SNAP_MAGIC, .turn_at = now, .answered_at = lv->answered_at,
		.lease_ms = lv->lease_ms, .singleton = (uint32_t)lv->singleton,
		.reloads = lv->reloads,
	};
	char *buf = malloc(sizeof head);

	if (!buf)
		return;
	memcpy(buf, &head, sizeof head);
	h->pending = buf;
	h->plen = sizeof head;
	h->poff = 0;
	flush(h);
}

int64_t http_turn(struct http *h, const struct http_live *lv, int64_t due_in)
{
	int64_t now;

	if (h->listen_fd < 0)
		return INT64_MAX;
	now = clock_boot_ms();
	if (!h->pid && now >= h->restart_at)
		spawn(h, now);
	if (!h->pid)
		return h->restart_at - now;
	/* A fire is moments away: the snapshot waits until it started. */
	if (due_in < SINGLETON_FIRE_GUARD_MS)
		return HTTP_PUSH_MS;
	if (h->pending)
		flush(h);
	if (!h->pending && now >= h->push_at) {
		h->push_at = now + HTTP_PUSH_MS;
		push(h, lv, now);
	}
	if (h->pending)
		return 100;
	return h->push_at - now;
}

int http_reaped(struct http *h, pid_t pid, int status)
{
	int64_t now = clock_boot_ms();

	if (!h->pid || pid != h->pid)
		return 0;
	if (WIFSIGNALED(status))
		log_msg(LOG_WARN, NULL, 0, "http: the server (pid %d) was killed by %s",
		        (int)pid, strsignal(WTERMSIG(status)));
	else
		log_msg(LOG_WARN, NULL, 0, "http: the server (pid %d) exited with code %d",
		        (int)pid, WEXITSTATUS(status));
	h->pid = 0;
	if (h->snap_fd >= 0)
		close(h->snap_fd);
	h->snap_fd = -1;
	free(h->pending);
	h->pending = NULL;
	h->plen = h->poff = 0;
	if (now - h->started_at >= HTTP_BACKOFF_MAX_MS)
		h->backoff_ms = HTTP_BACKOFF_MIN_MS;
	h->restart_at = now + h->backoff_ms;
	log_msg(LOG_INFO, NULL, 0, "http: starting the server again in %llds",
	        (long long)(h->backoff_ms / 1000));
	h->backoff_ms = h->backoff_ms * 2 > HTTP_BACKOFF_MAX_MS ? HTTP_BACKOFF_MAX_MS
	                : h->backoff_ms * 2;
	return 1;
}

void http_close(struct http *h)
{
	if (h->pid) {
		struct timespec ts = { 0, 10 * 1000000 };
		int status;

		kill(h->pid, SIGTERM);
		for (int i = 0; i < 200 && waitpid(h->pid, &status, WNOHANG) == 0; i++) {
			if (i == 199) {
				kill(h->pid, SIGKILL);
				waitpid(h->pid, &status, 0);
			}
			nanosleep(&ts, NULL);
		}
		h->pid = 0;
	}
	if (h->snap_fd >= 0)
		close(h->snap_fd);
	if (h->listen_fd >= 0)
		close(h->listen_fd);
	h->snap_fd = h->listen_fd = -1;
	free(h->pending);
	h->pending = NULL;
}

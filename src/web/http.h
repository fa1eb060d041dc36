/* http.h - [http] listen: the parent's side of the HTTP server.
 *
 * The server is a process of its own, `leash _http` (httpd.c), started by
 * `leash run` with fork and exec of /proc/self/exe.  Why not a thread of the
 * parent: the parent is single-threaded and forks a child per run, and a
 * fork of a threaded process copies a lock held by a thread that does not
 * come along (malloc's, libmicrohttpd's); a child of its own carries no
 * copy of the parent's Lua state, its memory is not the parent's RSS, it
 * loads libmicrohttpd (and gnutls behind it) that the parent never maps, and
 * nothing a client does (a slow reader, a flood, a store read that hangs)
 * can take the parent's CPU time or hold its loop.
 *
 * The parent binds the socket itself before the scheduler starts (so a bad
 * address or a port in use fails `leash run` at once, exit 2) and hands it
 * to the server, which only accepts on it; a restarted server takes over
 * the same socket, and the descriptor of the metrics' shared mapping
 * (metrics.h), which it renders /metrics from itself: a scrape costs the
 * loop nothing.  About once a second the parent writes a snapshot (the
 * loop's liveness) to a non-blocking pipe; what does not fit waits for the
 * next turns, and no new snapshot is made until it went, so the loop never
 * blocks on the server.  The server reads the
 * store itself, through its own connection, for /api/status and
 * /api/history.  It dies with the parent (PR_SET_PDEATHSIG and the pipe's
 * end of file), and is started again, with backoff, when it dies alone.
 */
#ifndef LEASH_HTTP_H
#define LEASH_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <lua.h>

#include "core/cfg.h"

/* How often the parent sends a snapshot, and the descriptors the server
 * finds its socket and the snapshot pipe on. */
#define HTTP_PUSH_MS 1000
#define HTTP_LISTEN_FD 3
#define HTTP_SNAP_FD 4
#define HTTP_METRICS_FD 5
/* The server's restarts back off from 1s to 60s; a server that lived a
 * minute starts over at 1s. */
#define HTTP_BACKOFF_MIN_MS 1000
#define HTTP_BACKOFF_MAX_MS 60000
/* The server's niceness above the parent's. */
#define HTTP_NICE 10

/* One snapshot on the pipe: this head, then len bytes (none today: the
 * server renders the metrics from the mapping).
 * Both ends are the same binary.  Times are CLOCK_BOOTTIME ms, which the
 * parent and the server read alike. */
#define HTTP_SNAP_MAGIC 0x6c736e70u
struct http_snap {
	uint32_t magic;
	uint32_t len;                   /* of what follows: 0 */
	int64_t turn_at;                /* the loop's last turn */
	int64_t answered_at;            /* the store's last answer, or -1 */
	int64_t lease_ms;               /* [singleton] lease */
	uint32_t singleton;             /* 0: no store to answer */
	uint32_t reloads;               /* SIGHUPs so far: the server reloads jobs/ */
};

struct http {
	const struct cfg *cfg;
	int listen_fd;                  /* -1: [http] listen is empty */
	int snap_fd;                    /* the pipe's write end, -1 without a server */
	pid_t pid;                      /* the server, 0 when none runs */
	int64_t started_at, restart_at, backoff_ms, push_at;   /* boottime ms */
	char *pending;                  /* a snapshot not yet written whole */
	size_t plen, poff;
	char url[96];
};

/* What the loop tells the server each snapshot. */
struct http_live {
	int64_t answered_at;
	int64_t lease_ms;
	int singleton;
	unsigned reloads;
};

/* Binds and listens on [http] listen (nothing when it is empty) and checks
 * [http] token_env.  Returns 0, or -1 with the reason, naming the key, in
 * err. */
int http_open(struct http *, const struct cfg *, char *err, size_t errlen);

/* Starts the server when it is due, and sends a snapshot when one is due
 * and no fire is within due_in ms of the guard.  Never blocks.  Returns ms
 * until it wants to be called again (INT64_MAX when off). */
int64_t http_turn(struct http *, const struct http_live *, int64_t due_in);

/* Whether pid was the server (reaped with status): then it is started
 * again after the backoff. */
int http_reaped(struct http *, pid_t pid, int status);

/* At shutdown: stops the server, closes the socket and the pipe. */
void http_close(struct http *);

/* `leash _http`: the server process (httpd.c), on the descriptors
 * HTTP_LISTEN_FD and HTTP_SNAP_FD that spawn() left it.  Returns when the
 * parent is gone (0), or the exit code of a failure to start. */
int httpd_serve(lua_State *L, const struct cfg *c);

#endif

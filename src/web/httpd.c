/* httpd.c - `leash _http`: the HTTP server process (see http.h for why a
 * process of its own).
 *
 * libmicrohttpd parses HTTP (there is no parser of ours) with a thread per
 * connection, so a request that waits for the store holds only its own
 * thread.  It is loaded with dlopen() here, in the server, so that the
 * parent maps neither it nor gnutls behind it.  The main thread reads the
 * parent's snapshots; /metrics and /healthz answer from the latest one and
 * never touch the store.  /api/status and /api/history read the store
 * through this process's own connection, one request at a time (the Lua
 * state and the connection are not shared between threads), each call
 * bounded by [store] statement_timeout and connect_timeout.
 *
 * What a client may hold: a request must arrive whole within
 * HTTPD_REQUEST_S of its connection (or of the last answer on it), however
 * it trickles; and connections still sending a request are capped per
 * address and in all, below libmicrohttpd's own limit, the oldest of them
 * closed for a new one: a new client always finds room (a watchdog thread
 * shuts their sockets down, see struct conn).  Requests whose Host is not
 * this server's are refused (DNS rebinding).
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* C11's threads, not pthread.h: that one includes <sched.h>, which -Isrc
 * finds as src/plan/sched.h. */
#include <threads.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "core/title.h"
#include "core/clock.h"
#include "web/http.h"
#include "core/metrics.h"
#include "core/log.h"
#include "core/lx.h"
#include "web/view.h"

/* Limits against a client that floods, hangs or sends a 10 MB line:
 * connections in all and per address, memory per connection (the request
 * line and headers must fit: a longer one is refused with 414 or 431),
 * seconds a connection may stay idle, seconds a request may take to
 * arrive whole, and the connections still sending one: in all and per
 * address, the oldest closed for a new one beyond these. */
#define HTTPD_CONN_MAX 128
#define HTTPD_PER_IP_MAX 32
#define HTTPD_CONN_MEMORY (32 * 1024)
#define HTTPD_TIMEOUT_S 10
#define HTTPD_REQUEST_S 10
#define HTTPD_WAITING_MAX 64
#define HTTPD_WAITING_PER_IP 8
#define HTTPD_STACK (512 * 1024)
/* How often the watchdog looks for requests past HTTPD_REQUEST_S. */
#define HTTPD_WATCH_MS 250
/* The page's timeline windows (leash.web's M.WINDOWS) at most. */
#define HTTPD_SHELLS_MAX 8
/* A page drawn with data is answered again for this many ms: however many
 * ask for /, the store is read for it at most once a second per window. */
#define HTTPD_PAGE_FRESH_MS 1000
/* The access log shows at most this much of a path. */
#define HTTPD_LOG_URI_MAX 256
/* /healthz: the loop sends a snapshot every HTTP_PUSH_MS; this many ms
 * without one and it is taken as stuck. */
#define HTTPD_LOOP_STALE_MS 5000

#define MHD_FUNCS(X) \
	X(MHD_start_daemon) \
	X(MHD_stop_daemon) \
	X(MHD_create_response_from_buffer) \
	X(MHD_add_response_header) \
	X(MHD_queue_response) \
	X(MHD_destroy_response) \
	X(MHD_lookup_connection_value) \
	X(MHD_get_connection_info)

static struct {
#define X(f) __typeof__(f) *f;
	MHD_FUNCS(X)
#undef X
} mhd;

/* A connection, from libmicrohttpd's notice that it started to the one
 * that it closed.  fd is our own duplicate of its socket: shutting it down
 * ends the connection (its thread sees the end and closes), and since the
 * number stays ours until the close notice, it never names another
 * connection's socket. */
struct conn {
	int used;
	int fd;
	int waiting;                    /* for a request, since `since` */
	int shut;                       /* shut down by us */
	int64_t since;                  /* boottime ms */
	char ip[INET6_ADDRSTRLEN];
};

/* One request, from its first line to the completion notice. */
struct req {
	int64_t start;                  /* boottime ms */
	unsigned status;                /* 0: none was queued */
	size_t bytes;
	char method[8];
	char uri[HTTPD_LOG_URI_MAX];
	int answered;
};

/* The request this thread is answering (a thread per connection). */
static thread_local struct req *cur_req;

static struct {
	const struct cfg *cfg;
	const char *token;              /* NULL: no [http] token_env */
	char **hosts;                   /* [http] hosts, split */
	size_t nhosts;
	/* The connections (conn_mu). */
	mtx_t conn_mu;
	struct conn conns[HTTPD_CONN_MAX];
	/* leash.web's pages without data, one per timeline window (the
	 * default's at dflt): for a request without the token, or while the
	 * store is busy. */
	struct shell {
		char window[8];
		char *html;
		size_t len;
		/* The latest page with data of this window (store_mu). */
		char *drawn;
		size_t drawn_len;
		int64_t drawn_at;       /* boottime ms */
	} shells[HTTPD_SHELLS_MAX];
	size_t nshells, dflt;
	char csp[512];                  /* the page's Content-Security-Policy */
	/* The store's side: one request at a time. */
	mtx_t store_mu;
	lua_State *L;
	struct store *store;
	struct view_jobs jobs;
	int jobs_loaded;
	unsigned jobs_reloads;
	/* The parent's latest snapshot. */
	mtx_t snap_mu;
	int have_snap;
	struct http_snap snap;
	int metrics_attached;           /* the parent's mapping on HTTP_METRICS_FD */
} S;

static int load_mhd(char *err, size_t errlen)
{
	void *h = dlopen("libmicrohttpd.so.12", RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		snprintf(err, errlen, "cannot load libmicrohttpd.so.12: %s; install libmicrohttpd12",
		         dlerror());
		return -1;
	}
#define X(f) \
	if (!(mhd.f = (__typeof__(mhd.f))dlsym(h, #f))) { \
		snprintf(err, errlen, "libmicrohttpd.so.12 has no %s(); install libmicrohttpd12", #f); \
		return -1; \
	}
	MHD_FUNCS(X)
#undef X
	return 0;
}

/* ---- responses ---- */

enum kind { TEXT, JSON, HTML, METRICS };

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, enum kind kind,
                               const char *body, size_t len)
{
	static const char *const types[] = {
		[TEXT] = "text/plain; charset=utf-8",
		[JSON] = "application/json",
		[HTML] = "text/html; charset=utf-8",
		[METRICS] = "text/plain; version=0.0.4; charset=utf-8",
	};
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = mhd.MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	mhd.MHD_add_response_header(r, "Content-Type", types[kind]);
	mhd.MHD_add_response_header(r, "Cache-Control", "no-store");
	mhd.MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	mhd.MHD_add_response_header(r, "X-Frame-Options", "DENY");
	mhd.MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
	/* The page's style and script are inline and it fetches only from
	 * here: nothing else may load, and no script but its own (by hash)
	 * may run, whatever a job's name holds. */
	if (kind == HTML)
		mhd.MHD_add_response_header(r, "Content-Security-Policy", S.csp);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		mhd.MHD_add_response_header(r, "Allow", "GET, HEAD");
	if (status == MHD_HTTP_UNAUTHORIZED)
		mhd.MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"leash\"");
	ret = mhd.MHD_queue_response(conn, status, r);
	mhd.MHD_destroy_response(r);
	if (cur_req) {
		cur_req->status = status;
		cur_req->bytes = len;
	}
	return ret;
}

static enum MHD_Result text(struct MHD_Connection *conn, unsigned status, const char *s)
{
	return respond(conn, status, TEXT, s, strlen(s));
}

/* {"error":"msg"} through leash.status's one JSON string writer; the store
 * lock is held (the Lua state is used). */
static enum MHD_Result json_error(struct MHD_Connection *conn, unsigned status, const char *msg)
{
	static const char unprintable[] = "{\"error\":\"(unprintable)\"}\n";
	int top = lua_gettop(S.L);
	enum MHD_Result ret;

	lua_pushstring(S.L, msg);
	if (lx_callmod(S.L, "leash.status", "json_string", 1, 1) == LUA_OK) {
		/* Whole, however long the escaping made it. */
		const char *js = lua_pushfstring(S.L, "{\"error\":%s}\n", lua_tostring(S.L, -1));
		ret = respond(conn, status, JSON, js, strlen(js));
	} else {
		ret = respond(conn, status, JSON, unprintable, sizeof unprintable - 1);
	}
	lua_settop(S.L, top);
	return ret;
}

/* The text on top of the Lua stack, with a newline as the commands print it. */
static enum MHD_Result json_top(struct MHD_Connection *conn)
{
	size_t n;
	const char *s = lua_tolstring(S.L, -1, &n);
	char *body = malloc(n + 1);
	enum MHD_Result ret;

	if (!body)
		return MHD_NO;
	memcpy(body, s, n);
	body[n] = '\n';
	ret = respond(conn, MHD_HTTP_OK, JSON, body, n + 1);
	free(body);
	return ret;
}

/* ---- the snapshot's endpoints ---- */

static enum MHD_Result get_metrics(struct MHD_Connection *conn)
{
	enum MHD_Result ret;
	size_t len;
	char *body;

	/* Rendered here, from the parent's live counters: nothing asked of
	 * the loop.  (Each request renders its own copy: renders may run in
	 * several threads at once, each only reading the mapping.) */
	if (!S.metrics_attached)
		return text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "the scheduler's metrics are not "
		            "shared with the server (no metrics descriptor)\n");
	if (!(body = metrics_render(&len)))
		return text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "out of memory\n");
	ret = respond(conn, MHD_HTTP_OK, METRICS, body, len);
	free(body);
	return ret;
}

/* Why /healthz is not ok, in why ("" when it is). */
static void health_why(char *why, size_t len)
{
	int64_t now = clock_boot_ms();

	why[0] = '\0';
	mtx_lock(&S.snap_mu);
	if (!S.have_snap)
		snprintf(why, len, "no word from the scheduler's loop yet");
	else if (now - S.snap.turn_at > HTTPD_LOOP_STALE_MS)
		snprintf(why, len, "the scheduler's loop has not turned for %.1fs",
		         (now - S.snap.turn_at) / 1000.0);
	else if (S.snap.singleton && S.snap.answered_at < 0)
		snprintf(why, len, "the lease store has not answered yet");
	else if (S.snap.singleton && now - S.snap.answered_at > S.snap.lease_ms)
		snprintf(why, len, "the lease store has not answered for %.1fs (the lease is "
		         "%.1fs)", (now - S.snap.answered_at) / 1000.0, S.snap.lease_ms / 1000.0);
	mtx_unlock(&S.snap_mu);
}

static enum MHD_Result get_healthz(struct MHD_Connection *conn)
{
	char why[256];

	health_why(why, sizeof why);
	if (why[0]) {
		strcat(why, "\n");
		return text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, why);
	}
	return text(conn, MHD_HTTP_OK, "ok\n");
}

/* ---- the store's endpoints ---- */

/* Takes the store lock, waiting at most as long as one request could hold
 * it; 0, or -1 (busy). */
static int store_lock(void)
{
	struct timespec ts;
	int64_t wait_ms = S.cfg->connect_timeout_ms + 2 * S.cfg->statement_timeout_ms + 1000;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(wait_ms / 1000);
	ts.tv_nsec += (long)(wait_ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	return mtx_timedlock(&S.store_mu, &ts) == 0 ? 0 : -1;
}

/* The store connection and the jobs, fresh enough; the lock is held.
 * Returns 0, or -1 with the reason in err. */
static int store_ready(char *err, size_t errlen)
{
	unsigned reloads;
	char oerr[STORE_ERR_MAX + 64];

	mtx_lock(&S.snap_mu);
	reloads = S.snap.reloads;
	mtx_unlock(&S.snap_mu);
	/* The parent reloads jobs/ on SIGHUP, and so does the server. */
	if (!S.jobs_loaded || reloads != S.jobs_reloads) {
		view_jobs_free(&S.jobs);
		view_jobs_load(&S.jobs, S.L, S.cfg->jobs, S.cfg->load_timeout_ms);
		S.jobs_loaded = 1;
		S.jobs_reloads = reloads;
	}
	if (!S.store) {
		struct store_opts o;

		if (store_opts_from(S.cfg, &o, err, errlen) < 0)
			return -1;
		o.mode = STORE_READ;    /* the page reads; leash run makes the tables */
		S.store = store_open(S.cfg->provider, &o, oerr, sizeof oerr);
		if (!S.store) {
			snprintf(err, errlen, "cannot open the %s store: %s", S.cfg->provider, oerr);
			return -1;
		}
	}
	return 0;
}

/* After a failed read the connection is dropped: the next request opens
 * a new one. */
static void store_failed(void)
{
	if (S.store)
		store_close(S.store);
	S.store = NULL;
}

/* A whole number from 0 to max in s, or -1. */
static long long arg_number(const char *s, long long max)
{
	long long v = 0;

	if (!s || !*s || strlen(s) > 18 || strspn(s, "0123456789") != strlen(s))
		return -1;
	v = strtoll(s, NULL, 10);
	return v <= max ? v : -1;
}

/* /api/status's offset and limit into S.jobs; 0, or -1 with the reason
 * (the store lock is held). */
static int page_args(struct MHD_Connection *conn, char *err, size_t errlen)
{
	const char *off = mhd.MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "offset");
	const char *lim = mhd.MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "limit");
	long long o = off ? arg_number(off, 100000000) : 0;
	long long l = lim ? arg_number(lim, VIEW_PAGE_MAX) : VIEW_PAGE_DEFAULT;

	if (o < 0) {
		snprintf(err, errlen, "offset: expected a whole number from 0");
		return -1;
	}
	if (l < 1) {
		snprintf(err, errlen, "limit: expected a whole number from 1 to %d", VIEW_PAGE_MAX);
		return -1;
	}
	S.jobs.offset = (size_t)o;
	S.jobs.limit = (size_t)l;
	return 0;
}

static enum MHD_Result get_api(struct MHD_Connection *conn, int history)
{
	char err[STORE_ERR_MAX + 512];
	enum MHD_Result ret;
	int top;

	static const char no_store[] = VIEW_NO_STORE_JSON "\n";
	static const char no_ledger[] =
		"{\"error\":\"singleton mode is off: there is no store and so no run ledger\"}\n";

	if (!S.cfg->singleton && history)
		return respond(conn, MHD_HTTP_NOT_FOUND, JSON, no_ledger, sizeof no_ledger - 1);
	if (!S.cfg->singleton)
		return respond(conn, MHD_HTTP_OK, JSON, no_store, sizeof no_store - 1);
	if (store_lock() < 0)
		return text(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "busy: another request is reading the store\n");
	top = lua_gettop(S.L);
	if (store_ready(err, sizeof err) < 0) {
		ret = json_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, err);
	} else if (!history) {
		if (page_args(conn, err, sizeof err) < 0) {
			ret = json_error(conn, MHD_HTTP_BAD_REQUEST, err);
		} else if (view_jobs(S.L, S.cfg, S.store, &S.jobs, VIEW_JSON, 1, err, sizeof err) < 0) {
			store_failed();
			ret = json_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, err);
		} else {
			ret = json_top(conn);
		}
	} else {
		const char *job = mhd.MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "job");
		const char *since = mhd.MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "since");
		const char *limit = mhd.MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "limit");
		int64_t since_at;
		size_t lim;
		int rc;

		rc = view_history_args(S.L, job && *job ? job : NULL, since && *since ? since : NULL,
		                       limit && *limit ? limit : NULL, &since_at, &lim, err, sizeof err);
		if (rc != 0)
			ret = json_error(conn, rc > 0 ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_INTERNAL_SERVER_ERROR,
			                 err);
		else if (view_history(S.L, S.cfg, S.store, job && *job ? job : NULL, since_at, lim,
		                      VIEW_JSON, err, sizeof err) < 0) {
			store_failed();
			ret = json_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, err);
		} else {
			ret = json_top(conn);
		}
	}
	lua_settop(S.L, top);
	/* What the answer took goes back before the next one. */
	lua_gc(S.L, LUA_GCCOLLECT, 0);
	malloc_trim(0);
	mtx_unlock(&S.store_mu);
	return ret;
}

/* The page's first paint, rendered here (leash.web's render) from what
 * /api/status reads (its first page): one snapshot of the store per
 * request, under the store lock as the API's.  A request without the token
 * gets the page without data, and so does one that finds the store busy:
 * its script fills it. */
/* The page's shell for a window ("5m", "1h", ...), or NULL. */
static struct shell *shell_of(const char *window)
{
	for (size_t i = 0; i < S.nshells; i++)
		if (strcmp(S.shells[i].window, window) == 0)
			return &S.shells[i];
	return NULL;
}

static enum MHD_Result get_page(struct MHD_Connection *conn, int authed)
{
	const char *w = mhd.MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "window");
	struct shell *sh = w && *w ? shell_of(w) : &S.shells[S.dflt];
	char err[STORE_ERR_MAX + 512], why[256];
	enum MHD_Result ret;
	int top, have = 0;

	if (!sh) {
		char msg[256] = "window: expected";

		for (size_t i = 0; i < S.nshells; i++)
			snprintf(msg + strlen(msg), sizeof msg - strlen(msg), "%s %s",
			         i ? (i + 1 == S.nshells ? " or" : ",") : "", S.shells[i].window);
		strcat(msg, "\n");
		return text(conn, MHD_HTTP_BAD_REQUEST, msg);
	}
	if (!authed || store_lock() < 0)
		return respond(conn, MHD_HTTP_OK, HTML, sh->html, sh->len);
	if (sh->drawn && clock_boot_ms() - sh->drawn_at < HTTPD_PAGE_FRESH_MS) {
		ret = respond(conn, MHD_HTTP_OK, HTML, sh->drawn, sh->drawn_len);
		mtx_unlock(&S.store_mu);
		return ret;
	}
	top = lua_gettop(S.L);
	err[0] = '\0';
	health_why(why, sizeof why);
	if (S.cfg->singleton && store_ready(err, sizeof err) == 0) {
		S.jobs.offset = 0;
		S.jobs.limit = VIEW_PAGE_DEFAULT;
		if (view_jobs_input(S.L, S.cfg, S.store, &S.jobs, err, sizeof err) < 0)
			store_failed();
		else
			have = 1;
	}
	if (!have)
		lua_pushnil(S.L);
	lua_createtable(S.L, 0, 4);
	lua_pushstring(S.L, sh->window);
	lua_setfield(S.L, -2, "window");
	if (!S.cfg->singleton) {
		lua_pushboolean(S.L, 0);
		lua_setfield(S.L, -2, "singleton");
	}
	if (err[0]) {
		lua_pushstring(S.L, err);
		lua_setfield(S.L, -2, "error");
	}
	if (why[0]) {
		lua_pushstring(S.L, why);
		lua_setfield(S.L, -2, "health");
	}
	if (lx_callmod(S.L, "leash.web", "render", 2, 1) == LUA_OK && lua_isstring(S.L, -1)) {
		size_t n;
		const char *html = lua_tolstring(S.L, -1, &n);
		char *copy = malloc(n);

		ret = respond(conn, MHD_HTTP_OK, HTML, html, n);
		if (copy) {
			memcpy(copy, html, n);
			free(sh->drawn);
			sh->drawn = copy;
			sh->drawn_len = n;
			sh->drawn_at = clock_boot_ms();
		}
	} else {
		/* A bug of the renderer's: the page without data still works. */
		log_msg(LOG_ERROR, NULL, 0, "http: the page: %s", lx_report(S.L, err, sizeof err));
		ret = respond(conn, MHD_HTTP_OK, HTML, sh->html, sh->len);
	}
	lua_settop(S.L, top);
	lua_gc(S.L, LUA_GCCOLLECT, 0);
	malloc_trim(0);
	mtx_unlock(&S.store_mu);
	return ret;
}

/* ---- requests ---- */

/* Whether the request brings the token: "Bearer" in any case, then the
 * token, compared in time that depends only on the expected token's
 * length. */
static int authorized(struct MHD_Connection *conn)
{
	const char *h, *tok;
	size_t n, want;
	volatile unsigned char diff;

	if (!S.token)
		return 1;
	h = mhd.MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	if (!h || strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t'))
		return 0;
	tok = h + 6;
	tok += strspn(tok, " \t");
	n = strlen(tok);
	want = strlen(S.token);
	diff = n != want;
	for (size_t i = 0; i < want; i++)
		diff |= (unsigned char)(tok[i < n ? i : 0] ^ S.token[i]);
	return diff == 0;
}

/* Whether the Host header names this server: an IP address (a name a
 * browser resolved is never one, so no rebinding), localhost, or one of
 * [http] hosts.  A request without one (HTTP/1.0) is let through: no
 * browser sends such. */
/* Whether name is one of [http] hosts. */
static int host_listed(const char *name)
{
	for (size_t i = 0; i < S.nhosts; i++)
		if (strcmp(name, S.hosts[i]) == 0)
			return 1;
	return 0;
}

/* Whether a request's Host names this server: localhost, a loopback
 * address, or one of [http] hosts (an address other hosts reach, too, is
 * served only when listed). */
static int host_allowed(const char *host)
{
	char name[256];
	struct in6_addr a6;
	struct in_addr a4;
	const char *end;
	size_t n;

	if (!host)
		return 1;
	if (host[0] == '[') {
		end = strchr(host, ']');
		n = end ? (size_t)(end - host - 1) : 0;
		if (!end || n >= sizeof name || (end[1] && end[1] != ':'))
			return 0;
		memcpy(name, host + 1, n);
		name[n] = '\0';
		for (size_t i = 0; i < n; i++)
			name[i] = (char)((name[i] >= 'A' && name[i] <= 'F') ? name[i] - 'A' + 'a' : name[i]);
		return inet_pton(AF_INET6, name, &a6) == 1 && (IN6_IS_ADDR_LOOPBACK(&a6) ||
		                                              host_listed(name));
	}
	end = strrchr(host, ':');
	n = end ? (size_t)(end - host) : strlen(host);
	if (n == 0 || n >= sizeof name)
		return 0;
	if (end && (!end[1] || strspn(end + 1, "0123456789") != strlen(end + 1)))
		return 0;
	for (size_t i = 0; i < n; i++)
		name[i] = (char)((host[i] >= 'A' && host[i] <= 'Z') ? host[i] - 'A' + 'a' : host[i]);
	if (n > 1 && name[n - 1] == '.')
		n--;
	name[n] = '\0';
	if (strcmp(name, "localhost") == 0 ||
	    (inet_pton(AF_INET, name, &a4) == 1 && (ntohl(a4.s_addr) >> 24) == 127))
		return 1;
	return host_listed(name);
}

static struct conn *conn_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *ci =
		mhd.MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return ci ? ci->socket_context : NULL;
}

/* Its request arrived whole: the connection is no longer waiting. */
static void conn_answering(struct MHD_Connection *conn)
{
	struct conn *c = conn_of(conn);

	mtx_lock(&S.conn_mu);
	if (c && c->used)
		c->waiting = 0;
	mtx_unlock(&S.conn_mu);
}

static enum MHD_Result route(struct MHD_Connection *conn, const char *url, const char *method)
{
	const char *host;

	host = mhd.MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
	if (!host_allowed(host))
		return text(conn, MHD_HTTP_MISDIRECTED_REQUEST,
		            "misdirected: the Host header is not this server's (localhost, a "
		            "loopback address or one of [http] hosts)\n");
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
		            "method not allowed: this server is read-only (GET and HEAD)\n");
	/* A browser opens the page without a header: then it holds no data
	 * (its script fetches the API with the token from #token=). */
	if (strcmp(url, "/") == 0)
		return get_page(conn, authorized(conn));
	if (!authorized(conn))
		return text(conn, MHD_HTTP_UNAUTHORIZED,
		            "unauthorized: send Authorization: Bearer <the token of [http] token_env>\n");
	if (strcmp(url, "/metrics") == 0)
		return get_metrics(conn);
	if (strcmp(url, "/healthz") == 0)
		return get_healthz(conn);
	if (strcmp(url, "/api/status") == 0)
		return get_api(conn, 0);
	if (strcmp(url, "/api/history") == 0)
		return get_api(conn, 1);
	return text(conn, MHD_HTTP_NOT_FOUND,
	            "not found (/, /metrics, /healthz, /api/status, /api/history)\n");
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_len, void **state)
{
	struct req *r = *state;
	enum MHD_Result ret;

	(void)cls;
	(void)version;
	(void)upload;
	/* Answered on the first call; a body that follows is not read. */
	if (!r || r->answered) {
		*upload_len = 0;
		return r ? MHD_YES : MHD_NO;
	}
	r->answered = 1;
	snprintf(r->method, sizeof r->method, "%s", method);
	conn_answering(conn);
	cur_req = r;
	ret = route(conn, url, method);
	cur_req = NULL;
	return ret;
}

/* The request's record, before its headers are parsed (the whole URI,
 * query included). */
static void *req_begin(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct req *r = calloc(1, sizeof *r);

	(void)cls;
	(void)conn;
	if (!r)
		return NULL;
	r->start = clock_boot_ms();
	/* Bytes outside printable ASCII are shown as %XX. */
	for (size_t i = 0, o = 0; uri && uri[i] && o + 4 < sizeof r->uri; i++) {
		unsigned char ch = (unsigned char)uri[i];

		if (ch > 0x20 && ch < 0x7f && ch != '%')
			r->uri[o++] = (char)ch;
		else
			o += (size_t)snprintf(r->uri + o, sizeof r->uri - o, "%%%02X", ch);
	}
	return r;
}

/* A request is done (answered, or its connection gone): the access log's
 * line, and the connection waits for the next request from now. */
static void req_end(void *cls, struct MHD_Connection *conn, void **state,
                    enum MHD_RequestTerminationCode why)
{
	struct req *r = *state;
	struct conn *c = conn_of(conn);

	(void)cls;
	mtx_lock(&S.conn_mu);
	if (c && c->used) {
		c->waiting = 1;
		c->since = clock_boot_ms();
	}
	mtx_unlock(&S.conn_mu);
	if (r && S.cfg->http_access_log) {
		char status[16], bytes[32], ms[32];
		const char *fields[] = {
			"client", c && c->used ? c->ip : "-", "method", r->method[0] ? r->method : "-",
			"path", r->uri[0] ? r->uri : "-", "status", status, "bytes", bytes, "ms", ms,
		};

		snprintf(status, sizeof status, "%u", r->status);
		snprintf(bytes, sizeof bytes, "%zu", r->bytes);
		snprintf(ms, sizeof ms, "%lld", (long long)(clock_boot_ms() - r->start));
		if (why != MHD_REQUEST_TERMINATED_COMPLETED_OK && !r->status)
			snprintf(status, sizeof status, "-");
		log_rec(LOG_INFO, NULL, 0, "http: request", fields, sizeof fields / sizeof fields[0] / 2);
	}
	free(r);
	*state = NULL;
}

/* Shuts c down (conn_mu held). */
static void conn_shut(struct conn *c)
{
	shutdown(c->fd, SHUT_RDWR);
	c->shut = 1;
}

/* The oldest connection still waiting for its request, of ip (or of all
 * with NULL), and how many there are (conn_mu held). */
static struct conn *oldest_waiting(const char *ip, size_t *count)
{
	struct conn *old = NULL;

	*count = 0;
	for (size_t i = 0; i < HTTPD_CONN_MAX; i++) {
		struct conn *c = &S.conns[i];

		if (!c->used || !c->waiting || c->shut || (ip && strcmp(c->ip, ip) != 0))
			continue;
		(*count)++;
		if (!old || c->since < old->since)
			old = c;
	}
	return old;
}

static void conn_notice(void *cls, struct MHD_Connection *conn, void **ctx,
                        enum MHD_ConnectionNotificationCode what)
{
	struct conn *c = *ctx;

	(void)cls;
	mtx_lock(&S.conn_mu);
	if (what == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (c && c->used) {
			close(c->fd);
			c->used = 0;
		}
		*ctx = NULL;
	} else if (what == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *fi =
			mhd.MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		const union MHD_ConnectionInfo *ai =
			mhd.MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		struct conn *old;
		size_t n;

		for (size_t i = 0; !c && i < HTTPD_CONN_MAX; i++)
			if (!S.conns[i].used)
				c = &S.conns[i];
		if (!c || !fi || (c->fd = fcntl(fi->connect_fd, F_DUPFD_CLOEXEC, 0)) < 0)
			goto done;      /* not watched: libmicrohttpd's idle timeout still is */
		c->used = 1;
		c->waiting = 1;
		c->shut = 0;
		c->since = clock_boot_ms();
		snprintf(c->ip, sizeof c->ip, "-");
		if (ai && ai->client_addr && ai->client_addr->sa_family == AF_INET)
			inet_ntop(AF_INET, &((struct sockaddr_in *)ai->client_addr)->sin_addr, c->ip,
			          sizeof c->ip);
		else if (ai && ai->client_addr && ai->client_addr->sa_family == AF_INET6)
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ai->client_addr)->sin6_addr, c->ip,
			          sizeof c->ip);
		*ctx = c;
		/* Room for the newcomer: the oldest still waiting go first. */
		while ((old = oldest_waiting(c->ip, &n)) && n > HTTPD_WAITING_PER_IP)
			conn_shut(old);
		while ((old = oldest_waiting(NULL, &n)) && n > HTTPD_WAITING_MAX)
			conn_shut(old);
	}
done:
	mtx_unlock(&S.conn_mu);
}

/* Closes the connections whose request is late, until the process ends. */
static int watchdog(void *arg)
{
	struct timespec ts = { 0, HTTPD_WATCH_MS * 1000000L };

	(void)arg;
	for (;;) {
		int64_t now = clock_boot_ms();

		mtx_lock(&S.conn_mu);
		for (size_t i = 0; i < HTTPD_CONN_MAX; i++) {
			struct conn *c = &S.conns[i];

			if (c->used && c->waiting && !c->shut && now - c->since > HTTPD_REQUEST_S * 1000)
				conn_shut(c);
		}
		mtx_unlock(&S.conn_mu);
		nanosleep(&ts, NULL);
	}
	return 0;
}

/* ---- the parent's snapshots ---- */

/* Reads exactly len bytes; 1, or 0 at end of file or on an error. */
static int read_full(int fd, void *buf, size_t len)
{
	char *p = buf;

	while (len > 0) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
		p += n;
		len -= (size_t)n;
	}
	return 1;
}

/* Until the parent is gone: each snapshot replaces the last. */
static void read_snapshots(void)
{
	struct http_snap head;

	while (read_full(HTTP_SNAP_FD, &head, sizeof head)) {
		char *rest;

		if (head.magic != HTTP_SNAP_MAGIC) {
			log_msg(LOG_ERROR, NULL, 0, "http: a snapshot from the scheduler is garbled");
			return;
		}
		/* Whatever follows the head (nothing today) is read past. */
		rest = malloc((size_t)head.len + 1);
		if (!rest || !read_full(HTTP_SNAP_FD, rest, head.len)) {
			free(rest);
			return;
		}
		free(rest);
		mtx_lock(&S.snap_mu);
		S.snap = head;
		S.have_snap = 1;
		mtx_unlock(&S.snap_mu);
	}
}

/* [http] hosts into S.hosts; 0, or -1 out of memory. */
static int split_hosts(const char *list)
{
	char *copy = strdup(list), *save = NULL;

	if (!copy)
		return -1;
	for (char *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		char **nh = realloc(S.hosts, (S.nhosts + 1) * sizeof *nh);

		if (!nh)
			return -1;
		S.hosts = nh;
		S.hosts[S.nhosts++] = w;
	}
	return 0;
}

/* The whole of file, NUL-terminated (libmicrohttpd takes PEM as a string);
 * NULL with the reason in err. */
static char *slurp(const char *file, char *err, size_t errlen)
{
	FILE *f = fopen(file, "rb");
	char *buf = NULL;
	size_t n = 0, cap = 0;

	if (!f) {
		snprintf(err, errlen, "cannot read %s: %s", file, strerror(errno));
		return NULL;
	}
	for (;;) {
		if (cap - n < 4096) {
			char *nb = cap > (1u << 20) ? NULL : realloc(buf, cap = cap * 2 + 8192);

			if (!nb) {
				snprintf(err, errlen, "%s: too large for a PEM file, or out of memory", file);
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		size_t got = fread(buf + n, 1, cap - n - 1, f);

		n += got;
		if (got == 0)
			break;
	}
	fclose(f);
	buf[n] = '\0';
	return buf;
}

/* leash.web's pages without data into S.shells; 0, or -1 with the reason. */
static int load_shells(lua_State *L, char *err, size_t errlen)
{
	size_t n;

	if (lx_callmod(L, "leash.web", "shells", 0, 1) != LUA_OK) {
		lx_report(L, err, errlen);
		return -1;
	}
	n = lua_rawlen(L, -1);
	if (n < 1 || n > HTTPD_SHELLS_MAX) {
		snprintf(err, errlen, "leash.web.shells: %zu windows (1 to %d)", n, HTTPD_SHELLS_MAX);
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct shell *sh = &S.shells[i];
		const char *s;
		size_t len;

		lua_rawgeti(L, -1, (lua_Integer)i + 1);
		lua_getfield(L, -1, "window");
		lua_getfield(L, -2, "html");
		s = lua_tolstring(L, -1, &len);
		if (!s || !lua_isstring(L, -2) || snprintf(sh->window, sizeof sh->window, "%s",
		                                           lua_tostring(L, -2)) >= (int)sizeof sh->window ||
		    !(sh->html = malloc(len))) {
			snprintf(err, errlen, "leash.web.shells: entry %zu is not a window and its page", i + 1);
			return -1;
		}
		memcpy(sh->html, s, len);
		sh->len = len;
		lua_getfield(L, -3, "default");
		if (lua_toboolean(L, -1))
			S.dflt = i;
		lua_pop(L, 4);
	}
	S.nshells = n;
	lua_pop(L, 1);
	return 0;
}

/* What the page needs before the first request: leash.web's script hash
 * for the Content-Security-Policy, the page's shells, libmicrohttpd.  0, or
 * -1 with the reason logged. */
static int load_page(lua_State *L)
{
	char err[1024];

	if (lx_require(L, "leash.web") != LUA_OK) {
		log_msg(LOG_ERROR, NULL, 0, "http: %s", lx_report(L, err, sizeof err));
		return -1;
	}
	lua_getfield(L, -1, "SCRIPT_SOURCE");
	if (!lua_isstring(L, -1) || snprintf(S.csp, sizeof S.csp, "default-src 'none'; script-src %s; "
	                                     "style-src 'unsafe-inline'; connect-src 'self'; "
	                                     "img-src data:; frame-ancestors 'none'; base-uri 'none'; "
	                                     "form-action 'none'", lua_tostring(L, -1)) >= (int)sizeof S.csp) {
		log_msg(LOG_ERROR, NULL, 0, "http: leash.web.SCRIPT_SOURCE is not a short string");
		return -1;
	}
	lua_pop(L, 1);
	if (load_shells(L, err, sizeof err) < 0) {
		log_msg(LOG_ERROR, NULL, 0, "http: the page: %s", err);
		return -1;
	}
	lua_settop(L, 0);
	if (load_mhd(err, sizeof err) < 0) {
		log_msg(LOG_ERROR, NULL, 0, "http: %s", err);
		return -1;
	}
	return 0;
}

int httpd_serve(lua_State *L, const struct cfg *c)
{
	struct MHD_Daemon *d;
	char err[1024];
	char *cert = NULL, *key = NULL;
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
	                 MHD_USE_POLL;
	thrd_t watch;

	if (fcntl(HTTP_LISTEN_FD, F_GETFD) < 0 || fcntl(HTTP_SNAP_FD, F_GETFD) < 0) {
		fprintf(stderr, "leash _http: only `leash run` starts the HTTP server\n");
		return 2;
	}
	title_set("leash: http");
	/* A thread per connection: without a bound, glibc gives threads
	 * arenas of their own, and what a large answer took stays mapped. */
	mallopt(M_ARENA_MAX, 2);
	S.cfg = c;
	S.L = L;
	S.metrics_attached = fcntl(HTTP_METRICS_FD, F_GETFD) >= 0 &&
	                     metrics_attach(HTTP_METRICS_FD) == 0;
	if (!S.metrics_attached)
		log_msg(LOG_WARN, NULL, 0, "http: no metrics descriptor from the scheduler: /metrics "
		        "answers 503");
	if (mtx_init(&S.store_mu, mtx_timed) != thrd_success ||
	    mtx_init(&S.snap_mu, mtx_plain) != thrd_success ||
	    mtx_init(&S.conn_mu, mtx_plain) != thrd_success || split_hosts(c->http_hosts) < 0)
		return 1;
	if (c->http_token_env[0]) {
		S.token = getenv(c->http_token_env);
		if (!S.token || !*S.token) {
			log_msg(LOG_ERROR, NULL, 0, "http: [http] token_env: %s is not set",
			        c->http_token_env);
			return 2;
		}
	}
	if (c->http_cert[0]) {
		if (!(cert = slurp(c->http_cert, err, sizeof err)) ||
		    !(key = slurp(c->http_key, err, sizeof err))) {
			log_msg(LOG_ERROR, NULL, 0, "http: [http] cert and key: %s", err);
			return 1;
		}
		flags |= MHD_USE_TLS;
	}
	if (load_page(L) < 0)
		return 1;
	if (thrd_create(&watch, watchdog, NULL) != thrd_success)
		return 1;
	thrd_detach(watch);
	/* Several threads accept on it: none may block there. */
	fcntl(HTTP_LISTEN_FD, F_SETFL, fcntl(HTTP_LISTEN_FD, F_GETFL) | O_NONBLOCK);
	d = mhd.MHD_start_daemon(flags, 0, NULL, NULL, handle, NULL,
	                         MHD_OPTION_LISTEN_SOCKET, (MHD_socket)HTTP_LISTEN_FD,
	                         MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTPD_CONN_MAX,
	                         MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTPD_PER_IP_MAX,
	                         MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)HTTPD_CONN_MEMORY,
	                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTPD_TIMEOUT_S,
	                         MHD_OPTION_THREAD_STACK_SIZE, (size_t)HTTPD_STACK,
	                         MHD_OPTION_NOTIFY_CONNECTION, conn_notice, NULL,
	                         MHD_OPTION_URI_LOG_CALLBACK, req_begin, NULL,
	                         MHD_OPTION_NOTIFY_COMPLETED, req_end, NULL,
	                         cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, cert,
	                         MHD_OPTION_HTTPS_MEM_KEY, key,
	                         MHD_OPTION_END);
	if (!d) {
		log_msg(LOG_ERROR, NULL, 0, "http: libmicrohttpd would not start on %s%s", c->http_listen,
		        cert ? " (with [http] cert and key: are they PEM, and the key the certificate's?)"
		        : "");
		return 1;
	}
	read_snapshots();
	/* The parent is gone: so is the server, without waiting for its
	 * clients. */
	_exit(0);
}

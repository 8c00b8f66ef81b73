/*
 * sinks/redis/conn.h — one Redis connection that an event loop can drive: URL
 * parsing, a non-blocking connect with AUTH and SELECT, a pipelined output
 * buffer and hiredis' reply parser.  Used by the Redis pipeline under both
 * Redis sinks (sinks/redis/pipeline.h, on the host's event loop) and by
 * `pgoutbox consume` (its round trips turn the consumer's loop).
 *
 * The socket is our own: commands are formatted by hiredis
 * (redisFormatCommandArgv) and replies parsed by its redisReader, while
 * connect, send and recv happen here.  That keeps every call non-blocking,
 * sends with MSG_NOSIGNAL (a closed peer never raises SIGPIPE in the host
 * process) and works the same with hiredis 0.14 and 1.x.
 */
#ifndef PGO_REDIS_H
#define PGO_REDIS_H

#include <netdb.h>

#include <hiredis/hiredis.h>

#include "base/buf.h"
#include "pgoutbox.h"

/* A parsed redis:// URL. */
typedef struct pgo_redis_url {
	char host[256];	    /* name or address; IPv6 without brackets */
	int port;	    /* 6379 when not given */
	char user[128];	    /* ACL user ("" = default user) */
	char password[256]; /* "" = no AUTH */
	int db;		    /* SELECT this database when not 0 */
	bool tls;	    /* rediss:// (refused by this build) */
} pgo_redis_url_t;

/* Parses redis://[[user]:password@]host[:port][/db].  User and password
 * may be percent-encoded.  rediss:// parses (tls set) so that the caller
 * can refuse it with a clear message.  PGO_ERR_CONFIG names the problem. */
int pgo_redis_url_parse(const char *url, pgo_redis_url_t *u, pgo_error_t *err);

/* PGO_OK, or PGO_ERR_CONFIG when the URL needs what this build lacks
 * (TLS). */
int pgo_redis_url_supported(const pgo_redis_url_t *u, pgo_error_t *err);

/* host:port/db for log lines: never the password. */
void pgo_redis_url_describe(const pgo_redis_url_t *u, char *buf, size_t size);

/* Appends url to b with its password as "***" (`config show`, reload log
 * lines), also when the URL does not parse: the user info ends at the
 * last '@', so a password holding '/', '?' or '@' is hidden whole.  False
 * when url is not a redis:// or rediss:// URL. */
bool pgo_redis_url_mask(const char *url, pgo_buf_t *b);

typedef enum pgo_redis_state {
	PGO_REDIS_DOWN = 0,   /* no socket */
	PGO_REDIS_CONNECTING, /* TCP connect in progress */
	PGO_REDIS_HANDSHAKE,  /* connected; AUTH/SELECT replies awaited */
	PGO_REDIS_UP	      /* ready: commands flow */
} pgo_redis_state_t;

typedef struct pgo_redis {
	pgo_redis_url_t url;
	pgo_redis_state_t state;
	int fd;			  /* the socket; -1 when DOWN */
	struct addrinfo *addrs;	  /* CONNECTING: every address of the host */
	struct addrinfo *trying;  /* CONNECTING: the address tried now */
	int64_t connect_deadline; /* CONNECTING/HANDSHAKE: monotonic ms */
	redisReader *reader;	  /* hiredis' parser of the replies */
	redisReplyObjectFunctions fn; /* hiredis' builders, arrays bounded */
	void *(*make_array)(const redisReadTask *, int); /* hiredis' own */
	int refused_elements; /* an array header over the bound, or 0 */
	pgo_buf_t out;	      /* formatted commands not yet written */
	size_t out_off;	      /* bytes of out already written */
	size_t hs_end;	      /* HANDSHAKE: out holds AUTH/SELECT up to
			       * here; commands after it wait for UP */
	int hs_replies;	      /* HANDSHAKE: replies still expected */
	char err[256];	      /* why the last call failed */
} pgo_redis_t;

/* A connection in state DOWN for url (copied). */
void pgo_redis_init(pgo_redis_t *r, const pgo_redis_url_t *url);

/* DOWN -> CONNECTING: resolves the host (synchronously, like hiredis'
 * redisConnectNonBlock), starts a non-blocking connect and queues AUTH and
 * SELECT.  The whole handshake must finish within timeout_ms.  Returns
 * PGO_OK, or PGO_ERR_IO with r->err set and the connection DOWN. */
int pgo_redis_connect(pgo_redis_t *r, int64_t timeout_ms);

/* Queues one command (state CONNECTING, HANDSHAKE or UP).  Commands queued
 * before UP are held until AUTH and SELECT succeeded, so none can run in
 * the wrong database.  PGO_ERR_NOMEM or PGO_ERR_INVALID (DOWN). */
int pgo_redis_append(pgo_redis_t *r, int argc, const char **argv,
		     const size_t *lens);

/* Makes whatever progress the socket allows without blocking: finishes
 * the connect, writes, reads and parses.  Returns PGO_OK, or PGO_ERR_IO
 * when the connection failed: r->err says why and the state is DOWN. */
int pgo_redis_io(pgo_redis_t *r);

/* The next reply to a queued command, or *reply = NULL when none is
 * complete yet.  AUTH and SELECT replies are consumed here.  Returns
 * PGO_ERR_IO when the stream is corrupt or the handshake was refused (the
 * connection is then DOWN).  The caller frees the reply with
 * freeReplyObject(). */
int pgo_redis_next_reply(pgo_redis_t *r, redisReply **reply);

/* poll() events to wait for: 0 when DOWN. */
short pgo_redis_events(const pgo_redis_t *r);

/* Whether queued commands are still unwritten. */
bool pgo_redis_pending_output(const pgo_redis_t *r);

/* Closes the socket and forgets queued commands and partial replies: back
 * to DOWN.  Safe in any state. */
void pgo_redis_close(pgo_redis_t *r);

/* Whether an error reply means Redis cannot serve now (LOADING, BUSY,
 * MASTERDOWN, TRYAGAIN, ...) rather than that this command failed. */
bool pgo_redis_reply_unavailable(const redisReply *reply);

/* Whether an error reply is Redis refusing a write for memory ("OOM ...":
 * maxmemory reached with the noeviction policy): the connection is fine,
 * Redis cannot take anything until memory is freed or raised. */
bool pgo_redis_reply_oom(const redisReply *reply);

#endif /* PGO_REDIS_H */

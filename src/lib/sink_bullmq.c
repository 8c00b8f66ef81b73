/*
 * sink_bullmq.c — the BullMQ sink: every event becomes a BullMQ job, added
 * by BullMQ's own Lua script (addStandardJob) with the KEYS and ARGV that
 * BullMQ's Queue.add builds, so that a real BullMQ Worker processes it.
 *
 *   EVALSHA <sha of addStandardJob> 9
 *           <p>:<q>:wait <p>:<q>:paused <p>:<q>:meta <p>:<q>:id
 *           <p>:<q>:completed <p>:<q>:delayed <p>:<q>:active
 *           <p>:<q>:events <p>:<q>:marker
 *           msgpack([<p>:<q>:, "ob-<id>", <type>, <now ms>, nil, nil, nil,
 *                    nil, nil(, nil in 6.x)])
 *           <payload json>
 *           msgpack({attempts, jobId, [removeOnComplete]})
 *
 * (p = sink.bullmq_prefix, q = sink.bullmq_queue expanded.)  The script is
 * not ours: `node tools/bullmq-export.js` writes the expanded script that
 * the user's installed bullmq package ships (dist/cjs/scripts/
 * addStandardJob-9.js) into a file with a one-line header naming the
 * package version; the sink loads that file at start and refuses a major
 * version it was not tested with.  Its ARGV layout follows bullmq's
 * classes/scripts.js (5.x) and classes/redis-queue-backend.js (6.x).
 *
 * The job id is "ob-<event id>": BullMQ refuses integer-looking custom
 * ids, and its add script returns the id of an existing job instead of
 * adding a second one, so a re-sent event is acknowledged without a second
 * job — as long as the first job's hash exists (removeOnComplete deletes
 * it), which is why the consumer's inbox stays the real guard.
 *
 * The connection, the pipelining and the way publishes share it are those
 * of the Redis Streams sink (sink_redis.c): one connection (redis.h), a
 * FIFO of awaited replies, every publish waiting on one epoll fd.  On each
 * new connection SCRIPT LOAD goes first, pipelined before the EVALSHAs; a
 * NOSCRIPT reply (SCRIPT FLUSH meanwhile) loads it again and the event is
 * sent again with its batch.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <msgpack.h>

#include "redis.h"

#define SUBJECT	       "sink bullmq"
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 2000
#define ADD_SCRIPT     "addStandardJob"
#define ADD_NKEYS      9
#define HEADER_TAG     "--! pgoutbox-bullmq-export"

/* The KEYS of addStandardJob, in BullMQ's order (addStandardJobArgs). */
static const char *const add_keys[ADD_NKEYS] = {
	"wait",	   "paused", "meta",   "id",	"completed",
	"delayed", "active", "events", "marker"};

struct bq_pub;

/* A command on the wire whose reply is awaited. */
struct bq_expect {
	struct bq_pub *pub; /* NULL once that publish is gone: reply dropped */
	size_t ev;	    /* index of the event in its batch */
	bool load;	    /* the SCRIPT LOAD of this connection */
};

/* One publish, kept in batch->sink_state from publish() to the resume()
 * that returns PGO_OK (or cancel()). */
struct bq_pub {
	pgo_batch_t *batch;
	struct bq_pub *prev; /* the sink's live publishes, oldest first */
	struct bq_pub *next;
	size_t left;	    /* events without a verdict */
	size_t outstanding; /* replies awaited on the current connection */
	int64_t sent_at;    /* when its jobs were queued on the current
			     * connection; 0: not on it (waiting) */
	int64_t wait_until; /* a waiting publish fails then; 0: at once */
	int64_t started;    /* for the debug line */
	bool woken;	    /* resumed (or published) since the last kick */
};

/* sink.bullmq_remove_on_complete: BullMQ's removeOnComplete job option. */
typedef enum bq_roc {
	BQ_ROC_UNSET = 0, /* not sent: BullMQ keeps completed jobs */
	BQ_ROC_BOOL = 1,  /* true: remove at once; false: keep */
	BQ_ROC_COUNT = 2  /* keep the last N completed jobs */
} bq_roc_t;

struct bq_sink {
	/* configuration, copied at configure */
	pgo_redis_url_t url;
	char where[300];   /* host:port/db, for messages */
	char *queue_tmpl;  /* sink.bullmq_queue */
	char *relay_queue; /* relay.queue, for {queue} */
	char *prefix;	   /* sink.bullmq_prefix */
	char *script;	   /* the add script, without the header line */
	size_t script_len;
	char sha[41];	  /* SHA-1 of script, hex: what EVALSHA names */
	char version[32]; /* bullmq version the script came from */
	int nargs;	  /* elements of the packed args array */
	int attempts;	  /* sink.bullmq_attempts */
	bq_roc_t roc;	  /* sink.bullmq_remove_on_complete */
	bool roc_bool;
	int64_t roc_count;
	int64_t timeout_ms; /* replies of a publish */
	int64_t connect_timeout_ms;
	int64_t wait_ms; /* sink.redis_wait */

	pgo_redis_t redis;
	bool script_sent;    /* SCRIPT LOAD queued on this connection */
	int epfd;	     /* what every publish waits on */
	int kickfd;	     /* eventfd inside epfd */
	int watched_fd;	     /* socket registered in epfd; -1: none */
	uint32_t watched_ev; /* its registered events */

	struct bq_expect *q; /* ring of awaited replies, in wire order */
	size_t q_head, q_len, q_cap;

	struct bq_pub *head, *tail; /* live publishes, oldest first */
	size_t unwoken; /* live publishes not resumed since the kick */
	bool kicked;	/* the eventfd is signalled */

	int64_t retry_at;     /* DOWN: the next connect may start then */
	int64_t backoff;      /* the current reconnect backoff */
	bool up_logged;	      /* "connected" was logged for this connection */
	char last_err[256];   /* the last connection error (logged once) */
	pgo_buf_t qname;      /* scratch: one expanded queue name */
	pgo_buf_t keys;	      /* scratch: the KEYS of one job */
	msgpack_sbuffer args; /* scratch: packed args of one job */
	msgpack_sbuffer opts; /* scratch: packed opts of one job */
};

static struct bq_sink *bq(pgo_sink_t *sink)
{
	return sink->priv;
}

/* --- SHA-1 (FIPS 180-1), for the EVALSHA of a script we hold --- */

static uint32_t rol32(uint32_t x, int n)
{
	return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const unsigned char *p)
{
	uint32_t w[80], a, b, c, d, e, f, k, t;

	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
		       (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol32(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
	for (int i = 0; i < 80; i++) {
		if (i < 20)
			f = (b & c) | (~b & d), k = 0x5A827999;
		else if (i < 40)
			f = b ^ c ^ d, k = 0x6ED9EBA1;
		else if (i < 60)
			f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDC;
		else
			f = b ^ c ^ d, k = 0xCA62C1D6;
		t = rol32(a, 5) + f + e + k + w[i];
		e = d, d = c, c = rol32(b, 30), b = a, a = t;
	}
	h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
}

void pgo_sha1_hex(const char *data, size_t len, char hex[41])
{
	uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476,
			 0xC3D2E1F0};
	const unsigned char *p = (const unsigned char *)data;
	unsigned char tail[128];
	size_t full = len / 64 * 64, rest = len - full, tlen;
	uint64_t bits = (uint64_t)len * 8;

	for (size_t off = 0; off < full; off += 64)
		sha1_block(h, p + off);
	memset(tail, 0, sizeof(tail));
	memcpy(tail, p + full, rest);
	tail[rest] = 0x80;
	tlen = rest + 1 + 8 <= 64 ? 64 : 128;
	for (int i = 0; i < 8; i++)
		tail[tlen - 1 - i] = (unsigned char)(bits >> (8 * i));
	for (size_t off = 0; off < tlen; off += 64)
		sha1_block(h, tail + off);
	for (int i = 0; i < 5; i++)
		snprintf(hex + 8 * i, 9, "%08" PRIx32, h[i]);
}

/* --- the FIFO of awaited replies --- */

static bool expect_push(struct bq_sink *s, struct bq_pub *pub, size_t ev,
			bool load)
{
	if (s->q_len == s->q_cap) {
		size_t cap = s->q_cap ? s->q_cap * 2 : 256;
		struct bq_expect *q = malloc(cap * sizeof(*q));

		if (!q)
			return false;
		for (size_t i = 0; i < s->q_len; i++)
			q[i] = s->q[(s->q_head + i) % s->q_cap];
		free(s->q);
		s->q = q;
		s->q_cap = cap;
		s->q_head = 0;
	}
	s->q[(s->q_head + s->q_len) % s->q_cap] =
		(struct bq_expect){.pub = pub, .ev = ev, .load = load};
	s->q_len++;
	return true;
}

static bool expect_pop(struct bq_sink *s, struct bq_expect *e)
{
	if (s->q_len == 0)
		return false;
	*e = s->q[s->q_head];
	s->q_head = (s->q_head + 1) % s->q_cap;
	s->q_len--;
	return true;
}

/* Replies for pub will be dropped when they come. */
static void expect_forget(struct bq_sink *s, const struct bq_pub *pub)
{
	for (size_t i = 0; i < s->q_len; i++) {
		struct bq_expect *e = &s->q[(s->q_head + i) % s->q_cap];

		if (e->pub == pub)
			e->pub = NULL;
	}
}

/* --- waking the publishes --- */

static void kick(struct bq_sink *s)
{
	uint64_t one = 1;

	s->unwoken = 0;
	for (struct bq_pub *p = s->head; p; p = p->next) {
		p->woken = false;
		s->unwoken++;
	}
	if (s->unwoken && !s->kicked &&
	    write(s->kickfd, &one, sizeof(one)) == (ssize_t)sizeof(one))
		s->kicked = true;
}

/* pub has seen the current state; the last one to do so clears the kick. */
static void mark_woken(struct bq_sink *s, struct bq_pub *pub)
{
	uint64_t n;

	if (!pub->woken) {
		pub->woken = true;
		s->unwoken--;
	}
	if (s->unwoken == 0 && s->kicked) {
		if (read(s->kickfd, &n, sizeof(n)) < 0) {
			/* EAGAIN: nothing to drain */
		}
		s->kicked = false;
	}
}

static void unlink_pub(struct bq_sink *s, struct bq_pub *pub)
{
	mark_woken(s, pub);
	if (pub->prev)
		pub->prev->next = pub->next;
	else
		s->head = pub->next;
	if (pub->next)
		pub->next->prev = pub->prev;
	else
		s->tail = pub->prev;
	pub->prev = pub->next = NULL;
}

/* Registers the socket in the epoll set with the events it waits for. */
static void watch(struct bq_sink *s)
{
	short want = pgo_redis_events(&s->redis);
	uint32_t ev = (want & POLLIN ? EPOLLIN : 0u) |
		      (want & POLLOUT ? EPOLLOUT : 0u);
	int fd = s->redis.fd;
	struct epoll_event e;

	memset(&e, 0, sizeof(e));
	e.events = ev;
	if (fd != s->watched_fd) {
		if (s->watched_fd >= 0)
			epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->watched_fd, NULL);
		s->watched_fd = -1;
		if (fd >= 0 && ev &&
		    epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &e) == 0) {
			s->watched_fd = fd;
			s->watched_ev = ev;
		}
	} else if (fd >= 0 && ev != s->watched_ev) {
		if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, fd, &e) == 0)
			s->watched_ev = ev;
	}
}

/* --- verdicts --- */

static void verdict(struct bq_pub *pub, size_t i, pgo_ack_t ack,
		    const char *msg)
{
	pgo_batch_t *b = pub->batch;

	if (b->acks[i] != PGO_ACK_NONE)
		return;
	if (ack == PGO_ACK_OK)
		b->acks[i] = PGO_ACK_OK;
	else
		pgo_batch_fail(b, i, ack, msg);
	pub->left--;
}

/* Redis is unreachable: the events are not at fault, so they spend no
 * attempt; the relay rolls the batch back and pauses. */
static void fail_rest(struct bq_pub *pub, const char *msg)
{
	for (size_t i = 0; i < pub->batch->n && pub->left > 0; i++)
		verdict(pub, i, PGO_ACK_UNAVAILABLE, msg);
}

/* --- the connection --- */

/* The connection failed or was lost: every job add in flight is in doubt.
 * Publishes still allowed to wait will send their unacked events again on
 * the next connection (Redis may hold some of them already: duplicates,
 * which the consumer's inbox drops); the others fail now. */
static void lost(struct bq_sink *s, const char *why, int64_t now)
{
	bool idle = s->q_len == 0 && s->up_logged;
	char msg[600];

	if (s->watched_fd >= 0)
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, s->watched_fd, NULL);
	s->watched_fd = -1;
	pgo_redis_close(&s->redis);
	s->script_sent = false; /* a new connection loads it again */
	s->q_len = 0;
	s->q_head = 0;
	if (s->up_logged) {
		pgo_log(PGO_LOG_WARN, SUBJECT, "lost %s: %s", s->where, why);
	} else if (strcmp(s->last_err, why) != 0) {
		pgo_log(PGO_LOG_WARN, SUBJECT,
			"cannot reach %s: %s (retrying with backoff)", s->where,
			why);
	} else {
		pgo_log(PGO_LOG_DEBUG, SUBJECT, "still cannot reach %s: %s",
			s->where, why);
	}
	snprintf(s->last_err, sizeof(s->last_err), "%s", why);
	s->up_logged = false;
	if (idle) {
		/* A server restart noticed on an idle connection: reconnect
		 * at once rather than fail the batch at hand. */
		s->retry_at = now;
	} else {
		s->retry_at = now + s->backoff;
		s->backoff = s->backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
							     : s->backoff * 2;
	}
	snprintf(msg, sizeof(msg), "bullmq %s: %s", s->where, why);
	for (struct bq_pub *p = s->head; p; p = p->next) {
		p->outstanding = 0;
		p->sent_at = 0;
		if (p->left > 0 && !(p->wait_until && now < p->wait_until))
			fail_rest(p, msg);
	}
	kick(s);
}

/* The queue of one event: the template with {topic} and {queue}. */
static const char *queue_of(struct bq_sink *s, const pgo_event_t *ev)
{
	const char *t = s->queue_tmpl;

	pgo_buf_reset(&s->qname);
	pgo_buf_puts(&s->qname, "");
	while (*t) {
		if (strncmp(t, "{topic}", 7) == 0) {
			pgo_buf_puts(&s->qname, ev->topic);
			t += 7;
		} else if (strncmp(t, "{queue}", 7) == 0) {
			pgo_buf_puts(&s->qname, s->relay_queue);
			t += 7;
		} else {
			pgo_buf_append(&s->qname, t++, 1);
		}
	}
	return s->qname.oom ? NULL : s->qname.data;
}

static int pack_str(msgpack_packer *pk, const char *str)
{
	size_t n = strlen(str);

	return msgpack_pack_str(pk, n) | msgpack_pack_str_body(pk, str, n);
}

/* Packs the ARGV[1] and ARGV[3] of one job as BullMQ's Queue.add(name,
 * data, {jobId, attempts[, removeOnComplete]}) does: the args array of
 * addJob (5.x) / addJobToTransaction (6.x), and Job.optsAsJSON of the
 * job's opts ({attempts: ...} first, as the Job constructor puts it).
 * BullMQ's msgpackr writes the timestamp as a float64 and maps as map16;
 * the values are the same once the script unpacks them. */
static bool pack_job(struct bq_sink *s, const char *base, const char *job_id,
		     const char *name)
{
	msgpack_packer pk;
	int rc = 0;

	msgpack_sbuffer_clear(&s->args);
	msgpack_packer_init(&pk, &s->args, msgpack_sbuffer_write);
	rc |= msgpack_pack_array(&pk, (size_t)s->nargs);
	rc |= pack_str(&pk, base);   /* [1] key prefix: queueKeys[''] */
	rc |= pack_str(&pk, job_id); /* [2] custom id */
	rc |= pack_str(&pk, name);   /* [3] name */
	/* [4] timestamp: Date.now() */
	rc |= msgpack_pack_double(&pk, (double)(pgo_wall_us() / 1000));
	/* [5] parentKey, [6] parent dependencies key, [7] parent, [8] repeat
	 * job key, [9] deduplication key, [10] (6.x) defer parent release */
	for (int i = 4; i < s->nargs; i++)
		rc |= msgpack_pack_nil(&pk);

	msgpack_sbuffer_clear(&s->opts);
	msgpack_packer_init(&pk, &s->opts, msgpack_sbuffer_write);
	rc |= msgpack_pack_map(&pk, s->roc == BQ_ROC_UNSET ? 2 : 3);
	rc |= pack_str(&pk, "attempts");
	rc |= msgpack_pack_int(&pk, s->attempts);
	rc |= pack_str(&pk, "jobId");
	rc |= pack_str(&pk, job_id);
	if (s->roc != BQ_ROC_UNSET) {
		rc |= pack_str(&pk, "removeOnComplete");
		if (s->roc == BQ_ROC_BOOL)
			rc |= s->roc_bool ? msgpack_pack_true(&pk)
					  : msgpack_pack_false(&pk);
		else
			rc |= msgpack_pack_int64(&pk, s->roc_count);
	}
	return rc == 0;
}

/* Queues SCRIPT LOAD when this connection has not had it yet. */
static bool load_script(struct bq_sink *s)
{
	const char *argv[3] = {"SCRIPT", "LOAD", s->script};
	size_t lens[3] = {6, 4, s->script_len};

	if (s->script_sent)
		return true;
	if (pgo_redis_append(&s->redis, 3, argv, lens) != PGO_OK ||
	    !expect_push(s, NULL, 0, true))
		return false;
	s->script_sent = true;
	return true;
}

/* Queues the add of one event.  Returns false when the wire can no longer
 * be trusted (out of memory after a partial queueing). */
static bool send_event(struct bq_sink *s, struct bq_pub *pub, size_t i,
		       int64_t now)
{
	const pgo_event_t *ev = &pub->batch->events[i];
	const char *argv[3 + ADD_NKEYS + 3];
	size_t lens[3 + ADD_NKEYS + 3];
	size_t offs[ADD_NKEYS];
	const char *qname = queue_of(s, ev);
	char job_id[32], nkeys[8], msg[300];
	int argc = 0;

	if (!qname) {
		verdict(pub, i, PGO_ACK_RETRY, "bullmq: out of memory");
		return true;
	}
	if (!*qname || strchr(qname, ':')) {
		/* BullMQ's Queue refuses such a name: no Worker could ever
		 * take the job. */
		snprintf(msg, sizeof(msg),
			 "bullmq: queue name \"%.200s\" is empty or contains "
			 "':' (BullMQ refuses it)",
			 qname);
		verdict(pub, i, PGO_ACK_DEAD, msg);
		return true;
	}
	snprintf(job_id, sizeof(job_id), "ob-%" PRId64, ev->id);
	snprintf(nkeys, sizeof(nkeys), "%d", ADD_NKEYS);
	/* queueKeys['']: "<prefix>:<queue>:", then each key after it. */
	pgo_buf_reset(&s->keys);
	pgo_buf_printf(&s->keys, "%s:%s:", s->prefix, qname);
	pgo_buf_append(&s->keys, "", 1);
	for (int k = 0; k < ADD_NKEYS; k++) {
		offs[k] = s->keys.len;
		pgo_buf_printf(&s->keys, "%s:%s:%s", s->prefix, qname,
			       add_keys[k]);
		pgo_buf_append(&s->keys, "", 1);
	}
	if (s->keys.oom || !pack_job(s, s->keys.data, job_id, ev->type)) {
		verdict(pub, i, PGO_ACK_RETRY, "bullmq: out of memory");
		return true;
	}
	argv[argc++] = "EVALSHA";
	argv[argc++] = s->sha;
	argv[argc++] = nkeys;
	for (int k = 0; k < ADD_NKEYS; k++)
		argv[argc++] = s->keys.data + offs[k];
	for (int k = 0; k < argc; k++)
		lens[k] = strlen(argv[k]);
	argv[argc] = s->args.data;
	lens[argc++] = s->args.size;
	argv[argc] = ev->payload;
	lens[argc] = strlen(ev->payload);
	argc++;
	argv[argc] = s->opts.data;
	lens[argc++] = s->opts.size;
	if (!load_script(s) ||
	    pgo_redis_append(&s->redis, argc, argv, lens) != PGO_OK ||
	    !expect_push(s, pub, i, false)) {
		verdict(pub, i, PGO_ACK_RETRY, "bullmq: out of memory");
		lost(s, "out of memory", now);
		return false;
	}
	pub->outstanding++;
	return true;
}

/* Queues the adds of pub's events that have no verdict yet. */
static void send_pub(struct bq_sink *s, struct bq_pub *pub, int64_t now)
{
	pgo_batch_t *b = pub->batch;

	pub->sent_at = now;
	for (size_t i = 0; i < b->n; i++) {
		if (b->acks[i] != PGO_ACK_NONE)
			continue;
		if (!send_event(s, pub, i, now))
			return;
	}
}

static bool reply_is(const redisReply *reply, const char *prefix)
{
	size_t n = strlen(prefix);

	return reply->type == REDIS_REPLY_ERROR && reply->len >= n &&
	       strncmp(reply->str, prefix, n) == 0;
}

/* The reply to SCRIPT LOAD: the SHA-1 we computed, or the connection is
 * of no use (false, with last_err set). */
static bool on_load_reply(struct bq_sink *s, const redisReply *reply)
{
	if (reply->type == REDIS_REPLY_STRING && reply->len == 40 &&
	    strncasecmp(reply->str, s->sha, 40) == 0)
		return true;
	if (reply->type == REDIS_REPLY_ERROR)
		snprintf(s->last_err, sizeof(s->last_err), "SCRIPT LOAD: %.*s",
			 (int)(reply->len < 200 ? reply->len : 200),
			 reply->str);
	else
		snprintf(s->last_err, sizeof(s->last_err),
			 "SCRIPT LOAD: unexpected reply (SHA-1 %s expected)",
			 s->sha);
	return false;
}

/* Applies one reply.  Returns false when it says Redis cannot serve now:
 * the caller drops the connection. */
static bool on_reply(struct bq_sink *s, redisReply *reply)
{
	struct bq_expect e;
	char msg[300];
	bool ok = true;

	if (!expect_pop(s, &e)) {
		freeReplyObject(reply);
		return false; /* a reply nobody asked for: out of step */
	}
	if (pgo_redis_reply_unavailable(reply)) {
		snprintf(s->last_err, sizeof(s->last_err), "%.*s",
			 (int)(reply->len < 200 ? reply->len : 200),
			 reply->str);
		freeReplyObject(reply);
		return false;
	}
	if (e.load) {
		ok = on_load_reply(s, reply);
	} else if (e.pub) {
		e.pub->outstanding--;
		if (reply->type == REDIS_REPLY_STRING ||
		    reply->type == REDIS_REPLY_STATUS) {
			/* The job id: a new job, or the one that exists. */
			verdict(e.pub, e.ev, PGO_ACK_OK, NULL);
		} else if (reply_is(reply, "NOSCRIPT")) {
			/* The script cache was flushed: load it again.  Not
			 * the event's fault, so it spends no attempt. */
			s->script_sent = false;
			verdict(e.pub, e.ev, PGO_ACK_UNAVAILABLE,
				"bullmq: NOSCRIPT (script cache flushed); "
				"loading the add script again");
		} else if (reply->type == REDIS_REPLY_ERROR) {
			snprintf(msg, sizeof(msg), "bullmq: %s: %.*s",
				 ADD_SCRIPT,
				 (int)(reply->len < 250 ? reply->len : 250),
				 reply->str);
			verdict(e.pub, e.ev, PGO_ACK_RETRY, msg);
		} else if (reply->type == REDIS_REPLY_INTEGER) {
			/* BullMQ's error codes (-5: missing parent key). */
			snprintf(msg, sizeof(msg), "bullmq: %s returned %lld",
				 ADD_SCRIPT, (long long)reply->integer);
			verdict(e.pub, e.ev, PGO_ACK_RETRY, msg);
		} else {
			verdict(e.pub, e.ev, PGO_ACK_RETRY,
				"bullmq: unexpected reply type");
		}
	}
	freeReplyObject(reply);
	return ok;
}

/* Starts a connection when publishes wait for one and the backoff allows. */
static void maybe_connect(struct bq_sink *s, int64_t now)
{
	bool waiting = false;

	for (struct bq_pub *p = s->head; p && !waiting; p = p->next)
		waiting = p->left > 0 && !p->sent_at;
	if (!waiting || s->redis.state != PGO_REDIS_DOWN || now < s->retry_at)
		return;
	if (pgo_redis_connect(&s->redis, s->connect_timeout_ms) != PGO_OK) {
		char why[sizeof(s->redis.err)];

		memcpy(why, s->redis.err, sizeof(why));
		lost(s, why, now);
	}
}

/* Socket I/O and the replies it completed. */
static void pump(struct bq_sink *s, int64_t now)
{
	redisReply *reply;
	int rc;

	if (s->redis.state == PGO_REDIS_DOWN)
		return;
	rc = pgo_redis_io(&s->redis);
	while (rc == PGO_OK) {
		rc = pgo_redis_next_reply(&s->redis, &reply);
		if (rc != PGO_OK || !reply)
			break;
		if (!on_reply(s, reply)) {
			char why[sizeof(s->last_err)];

			/* A copy: lost() rewrites last_err. */
			snprintf(why, sizeof(why), "%s",
				 s->last_err[0] ? s->last_err
						: "reply out of step");
			lost(s, why, now);
			return;
		}
	}
	if (rc != PGO_OK) {
		char why[sizeof(s->redis.err)];

		memcpy(why, s->redis.err, sizeof(why));
		lost(s, why, now);
	}
}

/* Everything the sink can do now, for every live publish. */
static void step(struct bq_sink *s)
{
	int64_t now = pgo_now_ms();
	bool any_done = false;

	pump(s, now);
	if (s->redis.state == PGO_REDIS_UP && !s->up_logged) {
		pgo_log(PGO_LOG_INFO, SUBJECT, "connected to %s", s->where);
		s->up_logged = true;
		s->backoff = BACKOFF_MIN_MS;
		s->last_err[0] = '\0';
	}
	/* A publish whose replies are late: the connection is in doubt. */
	for (struct bq_pub *p = s->head; p; p = p->next) {
		if (p->outstanding && now >= p->sent_at + s->timeout_ms) {
			char why[96];

			snprintf(why, sizeof(why),
				 "no reply within %" PRId64 " ms",
				 s->timeout_ms);
			lost(s, why, now);
			break;
		}
	}
	maybe_connect(s, now);
	for (struct bq_pub *p = s->head; p; p = p->next) {
		if (p->left == 0 || p->sent_at)
			continue;
		if (s->redis.state != PGO_REDIS_DOWN) {
			send_pub(s, p, now);
		} else if (!p->wait_until || now >= p->wait_until) {
			char msg[600];

			snprintf(msg, sizeof(msg), "bullmq %s: %s", s->where,
				 s->last_err[0] ? s->last_err : "unreachable");
			fail_rest(p, msg);
		}
	}
	/* Write what was just queued without waiting for a poll round (and
	 * take the replies that came meanwhile: once read, the socket will
	 * not signal them again). */
	if (pgo_redis_pending_output(&s->redis))
		pump(s, now);
	watch(s);
	for (struct bq_pub *p = s->head; p; p = p->next)
		any_done |= p->left == 0;
	if (any_done)
		kick(s);
}

/* When pub must be looked at again without any I/O happening. */
static int64_t deadline_of(const struct bq_sink *s, const struct bq_pub *pub)
{
	int64_t d;

	if (pub->sent_at) {
		d = pub->sent_at + s->timeout_ms;
		if (s->redis.state == PGO_REDIS_CONNECTING ||
		    s->redis.state == PGO_REDIS_HANDSHAKE)
			d = s->redis.connect_deadline < d
				    ? s->redis.connect_deadline
				    : d;
		return d;
	}
	d = pub->wait_until;
	if (s->redis.state == PGO_REDIS_DOWN && (!d || s->retry_at < d))
		d = s->retry_at;
	return d;
}

/* Ends a publish that has every verdict. */
static int finish(struct bq_sink *s, pgo_batch_t *b, struct bq_pub *pub)
{
	pgo_log(PGO_LOG_DEBUG, SUBJECT, "batch of %zu done in %" PRId64 " ms",
		b->n, pgo_now_ms() - pub->started);
	unlink_pub(s, pub);
	free(pub);
	b->sink_state = NULL;
	return PGO_OK;
}

static int wait_result(struct bq_sink *s, struct bq_pub *pub, int *fd,
		       short *events, int64_t *deadline_ms)
{
	*fd = s->epfd;
	*events = POLLIN;
	*deadline_ms = deadline_of(s, pub);
	return PGO_ERR_AGAIN;
}

/* --- ops --- */

static int bullmq_publish(pgo_sink_t *sink, pgo_batch_t *b, int *fd,
			  short *events, int64_t *deadline_ms)
{
	struct bq_sink *s = bq(sink);
	struct bq_pub *pub;
	int64_t now = pgo_now_ms();

	*fd = -1;
	*events = 0;
	*deadline_ms = 0;
	if (b->n == 0)
		return PGO_OK;
	pub = calloc(1, sizeof(*pub));
	if (!pub) {
		pgo_sink_set_error(sink, "bullmq: out of memory");
		return PGO_ERR_NOMEM;
	}
	pub->batch = b;
	pub->left = b->n;
	pub->started = now;
	pub->wait_until = s->wait_ms ? now + s->wait_ms : 0;
	pub->woken = true;
	pub->prev = s->tail;
	if (s->tail)
		s->tail->next = pub;
	else
		s->head = pub;
	s->tail = pub;
	b->sink_state = pub;
	step(s);
	mark_woken(s, pub);
	if (pub->left == 0)
		return finish(s, b, pub);
	return wait_result(s, pub, fd, events, deadline_ms);
}

static int bullmq_resume(pgo_sink_t *sink, pgo_batch_t *b, short revents,
			 int *fd, short *events, int64_t *deadline_ms)
{
	struct bq_sink *s = bq(sink);
	struct bq_pub *pub = b->sink_state;

	(void)revents; /* the epoll set knows better what is ready */
	*fd = -1;
	*events = 0;
	*deadline_ms = 0;
	if (!pub) {
		pgo_sink_set_error(
			sink, "bullmq: resume without a publish in progress");
		return PGO_ERR_INVALID;
	}
	step(s);
	mark_woken(s, pub);
	if (pub->left == 0)
		return finish(s, b, pub);
	return wait_result(s, pub, fd, events, deadline_ms);
}

static void bullmq_cancel(pgo_sink_t *sink, pgo_batch_t *b)
{
	struct bq_sink *s = bq(sink);
	struct bq_pub *pub = b->sink_state;

	if (!pub)
		return;
	expect_forget(s, pub);
	unlink_pub(s, pub);
	free(pub);
	b->sink_state = NULL;
}

static void bullmq_close(pgo_sink_t *sink)
{
	struct bq_sink *s = bq(sink);

	if (!s)
		return;
	while (s->head) {
		struct bq_pub *p = s->head;

		unlink_pub(s, p);
		p->batch->sink_state = NULL;
		free(p);
	}
	pgo_redis_close(&s->redis);
	if (s->epfd >= 0)
		close(s->epfd);
	if (s->kickfd >= 0)
		close(s->kickfd);
	free(s->q);
	free(s->queue_tmpl);
	free(s->relay_queue);
	free(s->prefix);
	free(s->script);
	pgo_buf_free(&s->qname);
	pgo_buf_free(&s->keys);
	msgpack_sbuffer_destroy(&s->args);
	msgpack_sbuffer_destroy(&s->opts);
	free(s);
	sink->priv = NULL;
}

/* --- configuration --- */

/* Checks a queue template: only {topic} and {queue} are placeholders. */
static int check_template(const char *t, pgo_error_t *err)
{
	if (!*t)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.bullmq_queue is empty");
	for (const char *p = strchr(t, '{'); p; p = strchr(p + 1, '{')) {
		if (strncmp(p, "{topic}", 7) != 0 &&
		    strncmp(p, "{queue}", 7) != 0)
			return pgo_error_set(
				err, PGO_ERR_CONFIG, 0,
				"sink.bullmq_queue \"%s\": unknown "
				"placeholder at \"%.12s\" (use "
				"{topic} and {queue})",
				t, p);
	}
	if (strchr(t, ':'))
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.bullmq_queue \"%s\" contains ':' "
				     "(BullMQ refuses such queue names)",
				     t);
	return PGO_OK;
}

/* sink.bullmq_remove_on_complete: "" (not sent), a boolean, or a count. */
static int parse_roc(struct bq_sink *s, const char *v, pgo_error_t *err)
{
	static const char *const yes[] = {"true", "on", "yes"};
	static const char *const no[] = {"false", "off", "no"};
	char *end;
	long long n;

	s->roc = BQ_ROC_UNSET;
	if (!*v)
		return PGO_OK;
	for (size_t i = 0; i < 3; i++) {
		if (strcasecmp(v, yes[i]) == 0 || strcasecmp(v, no[i]) == 0) {
			s->roc = BQ_ROC_BOOL;
			s->roc_bool = strcasecmp(v, yes[i]) == 0;
			return PGO_OK;
		}
	}
	errno = 0;
	n = strtoll(v, &end, 10);
	if (errno || *end || end == v || n < 0)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.bullmq_remove_on_complete = \"%s\": "
				     "use true, false or a count of completed "
				     "jobs to keep",
				     v);
	s->roc = BQ_ROC_COUNT;
	s->roc_count = n;
	return PGO_OK;
}

/* Reads the file `node tools/bullmq-export.js` wrote: a header line
 *   --! pgoutbox-bullmq-export bullmq=6.7.0 script=addStandardJob keys=9
 * then BullMQ's script, byte for byte. */
static int load_export(struct bq_sink *s, const char *path, pgo_error_t *err)
{
	char script[64] = "", *nl, *tok, *save = NULL, *data = NULL;
	FILE *f;
	long size;
	int keys = -1, major;

	if (!*path)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.bullmq_script is not set: export "
				     "your bullmq package's add script with "
				     "`node tools/bullmq-export.js --out "
				     "FILE` and point sink.bullmq_script at "
				     "FILE");
	f = fopen(path, "rb");
	if (!f)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.bullmq_script %s: %s", path,
				     strerror(errno));
	if (fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) >= 0 &&
	    size < 16 * 1024 * 1024 && fseek(f, 0, SEEK_SET) == 0 &&
	    (data = malloc((size_t)size + 1)) &&
	    fread(data, 1, (size_t)size, f) == (size_t)size) {
		data[size] = '\0';
	} else {
		free(data);
		fclose(f);
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.bullmq_script %s: cannot read it",
				     path);
	}
	fclose(f);
	nl = strchr(data, '\n');
	if (strncmp(data, HEADER_TAG " ", strlen(HEADER_TAG) + 1) != 0 || !nl) {
		free(data);
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.bullmq_script %s: not written by "
				     "tools/bullmq-export.js (no \"%s\" "
				     "header line)",
				     path, HEADER_TAG);
	}
	*nl = '\0';
	for (tok = strtok_r(data + strlen(HEADER_TAG), " \t\r", &save); tok;
	     tok = strtok_r(NULL, " \t\r", &save)) {
		if (strncmp(tok, "bullmq=", 7) == 0)
			snprintf(s->version, sizeof(s->version), "%s", tok + 7);
		else if (strncmp(tok, "script=", 7) == 0)
			snprintf(script, sizeof(script), "%s", tok + 7);
		else if (strncmp(tok, "keys=", 5) == 0)
			keys = atoi(tok + 5);
	}
	s->script_len = (size_t)size - (size_t)(nl + 1 - data);
	s->script = malloc(s->script_len + 1);
	if (!s->script) {
		free(data);
		return pgo_error_set(err, PGO_ERR_NOMEM, 0, "out of memory");
	}
	memcpy(s->script, nl + 1, s->script_len + 1);
	free(data);
	if (!isdigit((unsigned char)s->version[0]))
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.bullmq_script %s: no bullmq version "
				     "in its header",
				     path);
	major = atoi(s->version);
	if (major != 5 && major != 6)
		return pgo_error_set(
			err, PGO_ERR_CONFIG, 0,
			"sink.bullmq_script %s: bullmq %s is an untested major "
			"version; this build adds jobs for bullmq 5.x and 6.x "
			"only (the add script's arguments change between "
			"majors)",
			path, s->version);
	if (strcmp(script, ADD_SCRIPT) != 0 || keys != ADD_NKEYS)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.bullmq_script %s: script %s with "
				     "%d keys; expected %s with %d keys",
				     path, script[0] ? script : "(none)", keys,
				     ADD_SCRIPT, ADD_NKEYS);
	if (s->script_len == 0)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.bullmq_script %s: the script is "
				     "empty",
				     path);
	/* 5.x: 9 args (addJob in classes/scripts.js); 6.x adds [10] defer
	 * parent release (addJobToTransaction). */
	s->nargs = major == 5 ? 9 : 10;
	pgo_sha1_hex(s->script, s->script_len, s->sha);
	return PGO_OK;
}

int pgo_sink_bullmq_configure(pgo_sink_t *sink, const pgo_conf_t *conf)
{
	const struct pgo_conf_values *v = pgo_conf_values(conf);
	const char *url = pgo_conf_get_str(conf, "sink.redis_url");
	const char *queue = pgo_conf_get_str(conf, "sink.bullmq_queue");
	const char *prefix = pgo_conf_get_str(conf, "sink.bullmq_prefix");
	int64_t timeout_ms = pgo_conf_get_duration(conf, "sink.redis_timeout");
	int64_t connect_timeout_ms =
		pgo_conf_get_duration(conf, "sink.redis_connect_timeout");
	int64_t wait_ms = pgo_conf_get_duration(conf, "sink.redis_wait");
	struct bq_sink *s;
	pgo_error_t err;
	struct epoll_event e;

	if (pgo_redis_url_parse(url, &(pgo_redis_url_t){0}, &err) !=
		    PGO_OK ||
	    check_template(queue, &err) != PGO_OK) {
		pgo_sink_set_error(sink, "%s", err.msg);
		return PGO_ERR_CONFIG;
	}
	if (!prefix[0]) {
		pgo_sink_set_error(sink, "sink.bullmq_prefix is empty");
		return PGO_ERR_CONFIG;
	}
	if (v->idle_tx_timeout > 0 &&
	    wait_ms + timeout_ms >= v->idle_tx_timeout) {
		pgo_sink_set_error(sink,
				   "sink.redis_wait + sink.redis_timeout "
				   "(%" PRId64 " ms) must be less than "
				   "database.idle_tx_timeout (%" PRId64
				   " ms): a batch waits for Redis inside its "
				   "claim transaction",
				   wait_ms + timeout_ms,
				   v->idle_tx_timeout);
		return PGO_ERR_CONFIG;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		pgo_sink_set_error(sink, "bullmq: out of memory");
		return PGO_ERR_NOMEM;
	}
	s->epfd = s->kickfd = s->watched_fd = -1;
	pgo_buf_init(&s->qname);
	pgo_buf_init(&s->keys);
	msgpack_sbuffer_init(&s->args);
	msgpack_sbuffer_init(&s->opts);
	pgo_redis_url_parse(url, &s->url, NULL);
	pgo_redis_init(&s->redis, &s->url);
	bullmq_close(sink); /* a reconfigure replaces the old state */
	sink->priv = s;
	if (pgo_redis_url_supported(&s->url, &err) != PGO_OK ||
	    parse_roc(s, pgo_conf_get_str(conf, "sink.bullmq_remove_on_complete"), &err) != PGO_OK ||
	    load_export(s, pgo_conf_get_str(conf, "sink.bullmq_script"), &err) != PGO_OK) {
		pgo_sink_set_error(sink, "%s", err.msg);
		return err.code == PGO_ERR_NOMEM ? PGO_ERR_NOMEM
						 : PGO_ERR_CONFIG;
	}
	pgo_redis_url_describe(&s->url, s->where, sizeof(s->where));
	s->queue_tmpl = strdup(queue);
	s->relay_queue = strdup(v->queue);
	s->prefix = strdup(prefix);
	s->attempts = pgo_conf_get_int(conf, "sink.bullmq_attempts");
	s->timeout_ms = timeout_ms;
	s->connect_timeout_ms = connect_timeout_ms;
	s->wait_ms = wait_ms;
	s->backoff = BACKOFF_MIN_MS;
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	s->kickfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	memset(&e, 0, sizeof(e));
	e.events = EPOLLIN;
	if (!s->queue_tmpl || !s->relay_queue || !s->prefix || s->epfd < 0 ||
	    s->kickfd < 0 ||
	    epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->kickfd, &e) < 0) {
		pgo_sink_set_error(sink, "bullmq: %s",
				   errno ? strerror(errno) : "out of memory");
		return PGO_ERR_NOMEM;
	}
	return PGO_OK;
}

static int bullmq_open(pgo_sink_t *sink)
{
	struct bq_sink *s = bq(sink);

	if (!s) {
		pgo_sink_set_error(sink, "bullmq sink: not configured");
		return PGO_ERR_CONFIG;
	}
	/* No connection yet: an unreachable Redis at start is an outage
	 * like any other, handled by the first publish. */
	pgo_log(PGO_LOG_INFO, SUBJECT,
		"adding jobs to %s, queue %s:%s, with the %s script of bullmq "
		"%s (sha %.12s)",
		s->where, s->prefix, s->queue_tmpl, ADD_SCRIPT, s->version,
		s->sha);
	return PGO_OK;
}

const pgo_sink_ops_t pgo_sink_bullmq_ops = {
	.name = "bullmq",
	.open = bullmq_open,
	.publish = bullmq_publish,
	.resume = bullmq_resume,
	.cancel = bullmq_cancel,
	.close = bullmq_close,
};

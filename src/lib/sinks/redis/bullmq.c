/*
 * sinks/redis/bullmq.c — the BullMQ sink: every event becomes a BullMQ job,
 * added by BullMQ's own Lua script (addStandardJob) with the KEYS and ARGV that
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
 * The connection, its pipelining, timeouts, reconnects and outages are
 * the Redis pipeline's (sinks/redis/pipeline.h), shared with the Redis Streams
 * sink. On each new connection SCRIPT LOAD goes first, pipelined before the
 * EVALSHAs; a NOSCRIPT reply (SCRIPT FLUSH meanwhile) loads it again and
 * fails the event as UNAVAILABLE, so its batch goes back untouched and is
 * sent again after the relay's pause.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <msgpack.h>
#include <openssl/evp.h>

#include "sinks/redis/pipeline.h"
#include "sinks/redis/redis.h"
#include "base/buf.h"
#include "base/error.h"
#include "base/log.h"
#include "base/time.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/sink_int.h"

#define SUBJECT	   "sink bullmq"
#define ADD_SCRIPT "addStandardJob"
#define ADD_NKEYS  9
#define HEADER_TAG "--! pgoutbox-bullmq-export"

/* The KEYS of addStandardJob, in BullMQ's order (addStandardJobArgs). */
static const char *const add_keys[ADD_NKEYS] = {
	"wait",	   "paused", "meta",   "id",	"completed",
	"delayed", "active", "events", "marker"};

/* What a command on the pipeline is, for its reply. */
enum bq_tag {
	BQ_TAG_ADD = 0, /* EVALSHA of one event's job */
	BQ_TAG_LOAD = 1 /* SCRIPT LOAD of this connection */
};

/* sink.bullmq_remove_on_complete: BullMQ's removeOnComplete job option. */
typedef enum bq_roc {
	BQ_ROC_UNSET = 0, /* not sent: BullMQ keeps completed jobs */
	BQ_ROC_BOOL = 1,  /* true: remove at once; false: keep */
	BQ_ROC_COUNT = 2  /* keep the last N completed jobs */
} bq_roc_t;

struct bq_sink {
	pgo_redis_pipe_t *pipe; /* first: the pipeline's sink ops find it */
	/* configuration, copied at configure */
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

	/* The connection (pgo_redis_pipe_generation()) SCRIPT LOAD was
	 * queued on; 0: none, or the script cache was flushed. */
	uint64_t script_gen;
	pgo_buf_t qname;      /* scratch: one expanded queue name */
	pgo_buf_t keys;	      /* scratch: the KEYS of one job */
	msgpack_sbuffer args; /* scratch: packed args of one job */
	msgpack_sbuffer opts; /* scratch: packed opts of one job */
};

static struct bq_sink *bq(pgo_sink_t *sink)
{
	return sink->priv;
}

/* --- SHA-1, for the EVALSHA of a script we hold --- */

/* libcrypto's, through the EVP API: vetted code for a boring, hard thing.
 * libpq links libcrypto already. */
int pgo_sha1_hex(const char *data, size_t len, char hex[41])
{
	static const char digits[] = "0123456789abcdef";
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	hex[0] = '\0';
	if (!EVP_Digest(data, len, md, &n, EVP_sha1(), NULL) || n != 20)
		return PGO_ERR_NOMEM;
	for (unsigned int i = 0; i < n; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 0xf];
	}
	hex[2 * n] = '\0';
	return PGO_OK;
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
static void load_script(struct bq_sink *s, pgo_redis_pipe_t *p)
{
	const char *argv[3] = {"SCRIPT", "LOAD", s->script};
	size_t lens[3] = {6, 4, s->script_len};

	if (s->script_gen == pgo_redis_pipe_generation(p))
		return;
	pgo_redis_pipe_command(p, NULL, 0, BQ_TAG_LOAD, 3, argv, lens);
	s->script_gen = pgo_redis_pipe_generation(p);
}

/* The pipeline's send(): the add of event i's job. */
static void bq_send(void *arg, pgo_redis_pipe_t *p, pgo_batch_t *b, size_t i)
{
	struct bq_sink *s = arg;
	const pgo_event_t *ev = &b->events[i];
	const char *argv[3 + ADD_NKEYS + 3];
	size_t lens[3 + ADD_NKEYS + 3];
	size_t offs[ADD_NKEYS];
	const char *qname = pgo_sink_template_expand(&s->qname, s->queue_tmpl,
						     ev->topic, s->relay_queue);
	char job_id[32], nkeys[8], msg[300];
	int argc = 0;

	if (!qname) {
		pgo_redis_pipe_verdict(b, i, PGO_ACK_RETRY,
				       "bullmq: out of memory");
		return;
	}
	if (!*qname || strchr(qname, ':')) {
		/* BullMQ's Queue refuses such a name: no Worker could ever
		 * take the job. */
		snprintf(msg, sizeof(msg),
			 "bullmq: queue name \"%.200s\" is empty or contains "
			 "':' (BullMQ refuses it)",
			 qname);
		pgo_redis_pipe_verdict(b, i, PGO_ACK_DEAD, msg);
		return;
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
		pgo_redis_pipe_verdict(b, i, PGO_ACK_RETRY,
				       "bullmq: out of memory");
		return;
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
	load_script(s, p);
	pgo_redis_pipe_command(p, b, i, BQ_TAG_ADD, argc, argv, lens);
}

static bool reply_is(const redisReply *reply, const char *prefix)
{
	size_t n = strlen(prefix);

	return reply->type == REDIS_REPLY_ERROR && reply->len >= n &&
	       strncmp(reply->str, prefix, n) == 0;
}

/* The reply to SCRIPT LOAD: the SHA-1 we computed, or the connection is
 * of no use (false, with why set). */
static bool on_load_reply(struct bq_sink *s, const redisReply *reply, char *why,
			  size_t whylen)
{
	if (reply->type == REDIS_REPLY_STRING && reply->len == 40 &&
	    strncasecmp(reply->str, s->sha, 40) == 0)
		return true;
	if (reply->type == REDIS_REPLY_ERROR)
		snprintf(why, whylen, "SCRIPT LOAD: %.*s",
			 (int)(reply->len < 200 ? reply->len : 200),
			 reply->str);
	else
		snprintf(why, whylen,
			 "SCRIPT LOAD: unexpected reply (SHA-1 %s expected)",
			 s->sha);
	return false;
}

/* The pipeline's reply(): the job id acknowledges the event. */
static bool bq_reply(void *arg, pgo_redis_pipe_t *p, pgo_batch_t *b, size_t i,
		     int tag, const redisReply *reply, char *why, size_t whylen)
{
	struct bq_sink *s = arg;
	char msg[300];

	(void)p;
	if (!b)
		return tag != BQ_TAG_LOAD ||
		       on_load_reply(s, reply, why, whylen);
	if (reply->type == REDIS_REPLY_STRING ||
	    reply->type == REDIS_REPLY_STATUS) {
		/* The job id: a new job, or the one that exists. */
		pgo_redis_pipe_verdict(b, i, PGO_ACK_OK, NULL);
	} else if (reply_is(reply, "NOSCRIPT")) {
		/* The script cache was flushed: load it again.  Not the
		 * event's fault, so it spends no attempt. */
		s->script_gen = 0;
		pgo_redis_pipe_verdict(b, i, PGO_ACK_UNAVAILABLE,
				       "bullmq: NOSCRIPT (script cache "
				       "flushed); loading the add script "
				       "again");
	} else if (reply->type == REDIS_REPLY_ERROR) {
		snprintf(msg, sizeof(msg), "bullmq: %s: %.*s", ADD_SCRIPT,
			 (int)(reply->len < 250 ? reply->len : 250),
			 reply->str);
		pgo_redis_pipe_verdict(b, i, PGO_ACK_RETRY, msg);
	} else if (reply->type == REDIS_REPLY_INTEGER) {
		/* BullMQ's error codes (-5: missing parent key). */
		snprintf(msg, sizeof(msg), "bullmq: %s returned %lld",
			 ADD_SCRIPT, (long long)reply->integer);
		pgo_redis_pipe_verdict(b, i, PGO_ACK_RETRY, msg);
	} else {
		pgo_redis_pipe_verdict(b, i, PGO_ACK_RETRY,
				       "bullmq: unexpected reply type");
	}
	return true;
}

/* --- ops --- */

static void bullmq_close(pgo_sink_t *sink)
{
	struct bq_sink *s = bq(sink);

	if (!s)
		return;
	pgo_redis_pipe_destroy(s->pipe);
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

/* Checks a queue template: only {topic} and {queue} are placeholders,
 * and no ':' (BullMQ refuses such queue names). */
static int check_template(const char *t, pgo_error_t *err)
{
	if (pgo_sink_template_check("sink.bullmq_queue", t, err) != PGO_OK)
		return err->code;
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

/* A count in the header as tools/bullmq-export.js writes it: decimal
 * digits, no sign, no leading zero ("09" or "9x" is no count, as
 * "06.7.0" is no version; fuzz_bullmq found both).  -1 otherwise. */
static int header_count(const char *s)
{
	int n = 0;

	if (!isdigit((unsigned char)s[0]) || (s[0] == '0' && s[1]))
		return -1;
	for (; *s; s++) {
		if (!isdigit((unsigned char)*s) || n > 100000)
			return -1;
		n = n * 10 + (*s - '0');
	}
	return n;
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
	bool bad_keys = false;

	if (!*path)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.bullmq_script is not set: export "
				     "your bullmq package's add script with "
				     "`node tools/bullmq-export.js --out "
				     "FILE` and point sink.bullmq_script at "
				     "FILE (--bullmq-script FILE, "
				     "PGOUTBOX_SINK_BULLMQ_SCRIPT=FILE or "
				     "bullmq_script in [sink])");
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
			bad_keys = (keys = header_count(tok + 5)) < 0;
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
	/* The major as bullmq writes it: "06.7.0" is no bullmq version. */
	major = atoi(s->version);
	if ((major != 5 && major != 6) ||
	    (s->version[1] != '.' && s->version[1] != '\0'))
		return pgo_error_set(
			err, PGO_ERR_CONFIG, 0,
			"sink.bullmq_script %s: bullmq %s is an untested major "
			"version; this build adds jobs for bullmq 5.x and 6.x "
			"only (the add script's arguments change between "
			"majors)",
			path, s->version);
	if (bad_keys)
		return pgo_error_set(err, PGO_ERR_CONFIG, 0,
				     "sink.bullmq_script %s: its header's "
				     "keys= is not a count as "
				     "tools/bullmq-export.js writes it",
				     path);
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
	if (pgo_sha1_hex(s->script, s->script_len, s->sha) != PGO_OK)
		return pgo_error_set(err, PGO_ERR_NOMEM, 0,
				     "sink.bullmq_script %s: libcrypto could "
				     "not compute the script's SHA-1",
				     path);
	return PGO_OK;
}

int pgo_sink_bullmq_configure(pgo_sink_t *sink, const pgo_conf_t *conf)
{
	const struct pgo_conf_values *v = pgo_conf_values(conf);
	const char *queue = pgo_conf_get_str(conf, "sink.bullmq_queue");
	const char *prefix = pgo_conf_get_str(conf, "sink.bullmq_prefix");
	struct bq_sink *s;
	pgo_error_t err;

	if (check_template(queue, &err) != PGO_OK) {
		pgo_sink_set_error(sink, "%s", err.msg);
		return PGO_ERR_CONFIG;
	}
	if (!prefix[0]) {
		pgo_sink_set_error(sink, "sink.bullmq_prefix is empty");
		return PGO_ERR_CONFIG;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		pgo_sink_set_error(sink, "bullmq: out of memory");
		return PGO_ERR_NOMEM;
	}
	pgo_buf_init(&s->qname);
	pgo_buf_init(&s->keys);
	msgpack_sbuffer_init(&s->args);
	msgpack_sbuffer_init(&s->opts);
	bullmq_close(sink); /* a reconfigure replaces the old state */
	sink->priv = s;
	s->pipe =
		pgo_redis_pipe_new(sink, conf,
				   &(pgo_redis_pipe_hooks_t){.subject = SUBJECT,
							     .label = "bullmq",
							     .send = bq_send,
							     .reply = bq_reply,
							     .arg = s},
				   &err);
	if (!s->pipe ||
	    parse_roc(s,
		      pgo_conf_get_str(conf, "sink.bullmq_remove_on_complete"),
		      &err) != PGO_OK ||
	    load_export(s, pgo_conf_get_str(conf, "sink.bullmq_script"),
			&err) != PGO_OK) {
		pgo_sink_set_error(sink, "%s", err.msg);
		return err.code == PGO_ERR_NOMEM ? PGO_ERR_NOMEM
						 : PGO_ERR_CONFIG;
	}
	s->queue_tmpl = strdup(queue);
	s->relay_queue = strdup(v->queue);
	s->prefix = strdup(prefix);
	s->attempts = pgo_conf_get_int(conf, "sink.bullmq_attempts");
	if (!s->queue_tmpl || !s->relay_queue || !s->prefix) {
		pgo_sink_set_error(sink, "bullmq: out of memory");
		return PGO_ERR_NOMEM;
	}
	return PGO_OK;
}

static int bullmq_open(pgo_sink_t *sink)
{
	struct bq_sink *s = bq(sink);

	if (!s || !s->pipe) {
		pgo_sink_set_error(sink, "bullmq sink: not configured");
		return PGO_ERR_CONFIG;
	}
	pgo_log(PGO_LOG_INFO, SUBJECT,
		"adding jobs to %s, queue %s:%s, with the %s script of bullmq "
		"%s (sha %.12s)",
		pgo_redis_pipe_where(s->pipe), s->prefix, s->queue_tmpl,
		ADD_SCRIPT, s->version, s->sha);
	return PGO_OK;
}

const pgo_sink_ops_t pgo_sink_bullmq_ops = {
	.version = PGO_SINK_API_VERSION,
	.name = "bullmq",
	.open = bullmq_open,
	.start = pgo_redis_pipe_sink_start,
	.submit = pgo_redis_pipe_sink_submit,
	.cancel = pgo_redis_pipe_sink_cancel,
	.drain = pgo_redis_pipe_sink_drain,
	.stop = pgo_redis_pipe_sink_stop,
	.close = bullmq_close,
};

/*
 * sinks/nats/nats.h — what the files of the nats sink share: building the
 * NATS message of an event (sinks/nats/message.c) and the rule that turns
 * a publish's outcome into a verdict, both pure so that test_sink_nats
 * checks them without a server; the sink itself is sinks/nats/nats.c, its
 * keys sinks/nats/nats_conf.c.
 */
#ifndef PGO_SINK_NATS_H
#define PGO_SINK_NATS_H

#include <nats/nats.h>

#include "sinks/sink_int.h"
#include "base/buf.h"
#include "conf/conf.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

/* --- the sink as the registry knows it --- */

extern const pgo_sink_ops_t pgo_sink_nats_ops;
/* sinks/nats/nats_conf.c: the sink.nats_* keys. */
extern const pgo_conf_key_t pgo_sink_nats_keys[];
/* Reads the sink.nats_* keys (and relay.queue) into the sink; checks the
 * subject template, the URL and the files named. */
int pgo_sink_nats_configure(pgo_sink_t *sink, const pgo_conf_t *conf);

/* The nats row of the sink registry (sinks/registry.c). */
/* clang-format off */
#define PGO_SINK_ROW_nats                                                      \
	{.name = "nats",                                                       \
	 .ops = &pgo_sink_nats_ops,                                            \
	 .configure = pgo_sink_nats_configure,                                 \
	 .summary = "a JetStream publish per event, Nats-Msg-Id = the event "  \
		    "id",                                                      \
	 .details = "an event is acked by its PubAck; the stream drops "       \
		    "redeliveries within\nits duplicate window "               \
		    "(docs/nats.md).",                                         \
	 .keys = pgo_sink_nats_keys}
/* clang-format on */

/* --- the pure parts --- */

/* How events become messages, copied from the sink.nats_* keys. */
typedef struct pgo_nats_format {
	const char *subject; /* sink.nats_subject: {topic}, {queue} */
	const char *queue;   /* relay.queue, for {queue} */
	bool cloudevents;    /* sink.nats_format = cloudevents */
} pgo_nats_format_t;

/* The message of ev, published to the subject of f's template expanded
 * (into subj, which must outlive the message's use) with the payload as
 * data and the headers:
 *   Nats-Msg-Id          the event id (set by the publish options, see
 *                        pgo_nats_msg_id(); the server's dedup key)
 *   Pgoutbox-Type        type
 *   Pgoutbox-Key         key (absent for a NULL key)
 *   Pgoutbox-Created-At  created_at (RFC 3339, UTC)
 *   each member of the event's headers object, strings as they are and
 *   other values as JSON text (names that are no NATS header token, and
 *   Nats-* names, which steer the server, are left out)
 *   cloudevents: ce-specversion 1.0, ce-id, ce-source /<topic>, ce-type,
 *   ce-subject (the key), ce-time, content-type application/json.
 * PGO_OK with *out set (the caller destroys it), or an error code with
 * why filled: PGO_ERR_INVALID for what the event cannot ever be
 * (an empty subject, headers that are not JSON), PGO_ERR_NOMEM. */
int pgo_nats_message(const pgo_nats_format_t *f, const pgo_event_t *ev,
		     pgo_buf_t *subj, natsMsg **out, char *why, size_t whylen);

/* The event id as Nats-Msg-Id is written. */
void pgo_nats_msg_id(int64_t id, char *buf, size_t size);

/* The verdict of one publish, from the status js_PublishMsgAsync()
 * returned or the PubAck (or its error) the server sent: NATS_OK is
 * PGO_ACK_OK; a server that cannot take anything now (disconnected,
 * no PubAck in time, reconnect buffer full) is PGO_ACK_UNAVAILABLE; no
 * stream bound to the subject (no responders) and a stream that refuses
 * (full with discard new: err_code 10077) are PGO_ACK_RETRY; a message the
 * stream or server will never take (too large: 10054, max payload, a bad
 * subject) is PGO_ACK_DEAD.  msg gets one line naming the subject, with
 * the server's text (text may be NULL). */
pgo_ack_t pgo_nats_verdict(natsStatus s, int err_code, const char *text,
			   const char *subject, char *msg, size_t msglen);

/* Whether a natsStatus means the connection cannot publish now. */
bool pgo_nats_status_unavailable(natsStatus s);

/* The servers of a sink.nats_url, for log lines: the URL without user
 * information. */
void pgo_nats_url_describe(const char *url, char *buf, size_t size);

/* The public key (U...) of a user NKey seed (SU...), in pub (57 bytes
 * with the NUL).  PGO_OK, or PGO_ERR_CONFIG with err filled. */
int pgo_nats_nkey_public(const char *seed, char *pub, size_t size,
			 pgo_error_t *err);

#endif /* PGO_SINK_NATS_H */

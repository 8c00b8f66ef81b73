/*
 * sinks/nats/nats_int.h — what the files of the nats sink share: its
 * state (the sink, its batches, the table of awaited PubAcks, the queue
 * cnats' threads fill) and the steps one file calls in another.  Loop
 * thread only, but for the queue (q_head, q_tail, stopping, closing),
 * which cnats' threads share under mu.
 */
#ifndef PGO_SINK_NATS_INT_H
#define PGO_SINK_NATS_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "sinks/nats/nats.h"
#include "base/buf.h"
#include "pgoutbox/sink.h"

#define SUBJECT		  "sink nats"
#define BACKOFF_MIN_MS	  100
#define BACKOFF_MAX_MS	  2000
#define GRACE_MS	  1000 /* past cnats' own PubAck timeout */
#define WRITE_DEADLINE_MS 1000

/* What cnats' threads tell the loop. */
enum nq_kind {
	NQ_ACK,		   /* a PubAck, its error or cnats' timeout */
	NQ_CONNECTED,	   /* the connector made the connection */
	NQ_CONNECT_FAILED, /* one connect attempt failed (it goes on) */
	NQ_DISCONNECTED,   /* cnats lost the connection (reconnecting) */
	NQ_RECONNECTED,	   /* cnats reconnected */
	NQ_CLOSED,	   /* the connection is closed for good */
	NQ_ERROR	   /* an asynchronous error (permissions, ...) */
};

struct nq_item {
	struct nq_item *next;
	enum nq_kind kind;
	natsMsg *msg;	    /* NQ_ACK: the published message, ours now */
	natsConnection *nc; /* the connection it is about */
	natsStatus status;  /* NQ_ACK, NQ_CONNECT_FAILED, NQ_ERROR */
	int err_code;	    /* NQ_ACK: the stream's error code */
	char text[256];	    /* the error text */
};

/* One batch taken by submit(), in batch->sink_state until it is done or
 * cancelled. */
struct nb_batch {
	pgo_batch_t *batch;
	struct nb_batch *prev, *next; /* the sink's batches, oldest first */
	size_t left;		      /* events without a verdict */
	size_t outstanding;	      /* publishes whose PubAck is awaited */
	bool sent;		      /* published (else waiting to connect) */
	int64_t deadline;	      /* it fails as unavailable then */
	int64_t started;	      /* for the debug line */
};

/* A publish whose PubAck is awaited: a slot of the table keyed by the
 * message, which cnats hands back with the PubAck.  pb NULL: its batch is
 * gone (done or cancelled); the PubAck is dropped. */
struct nb_pub {
	natsMsg *msg; /* NULL: free slot */
	struct nb_batch *pb;
	size_t ev;
};

enum ns_state { NS_IDLE, NS_CONNECTING, NS_UP, NS_DOWN };

struct nats_sink {
	pgo_sink_t *sink;
	/* configuration, copied at configure */
	char *url;	   /* sink.nats_url, comma separated */
	char where[256];   /* the servers without user information */
	char *subject;	   /* sink.nats_subject */
	char *queue;	   /* relay.queue */
	char *creds;	   /* sink.nats_creds or NULL */
	char *nkey;	   /* sink.nats_nkey or NULL */
	char nkey_pub[64]; /* its public key */
	char *tls_ca, *tls_cert, *tls_key; /* or NULL */
	bool secure;			   /* TLS asked for */
	int64_t timeout_ms;		   /* sink.nats_timeout */
	int64_t connect_timeout_ms;	   /* sink.nats_connect_timeout */
	pgo_nats_format_t fmt;

	/* start to stop */
	natsOptions *opts;
	natsConnection *nc; /* NULL until connected */
	jsCtx *js;
	natsConnection **graves; /* closed connections, destroyed at stop */
	size_t n_graves;
	int efd;		 /* the bridge's eventfd */
	pgo_sink_io_t *io;	 /* its watcher */
	pgo_sink_timer_t *timer; /* the nearest batch deadline */

	/* the bridge: cnats' threads push, the loop takes (under mu) */
	pthread_mutex_t mu;
	pthread_cond_t cond; /* wakes the connector's backoff */
	struct nq_item *q_head, *q_tail;
	bool stopping;	      /* the connector gives up */
	bool closing;	      /* the sink stops: nothing is queued any more */
	pthread_t connector;  /* makes the first connection */
	bool connector_alive; /* to be joined */

	enum ns_state state;
	bool told_down;	     /* the host was told the server is down */
	int64_t drain_until; /* the host stops: no wait past this */
	char last_err[256];  /* the last connection error (logged once) */

	struct nb_batch *head, *tail;
	struct nb_pub *pubs; /* open addressing, power-of-two size */
	size_t pubs_cap, pubs_len;
	pgo_buf_t subj; /* scratch: one expanded subject */
};

/* --- publish.c: batches, verdicts, the table of awaited PubAcks --- */

/* The slot awaiting m's PubAck, or NULL. */
struct nb_pub *pgo_ns_pub_find(struct nats_sink *s, const natsMsg *m);
/* Removes a slot, shifting back the ones its probe sequence covers. */
void pgo_ns_pub_del(struct nats_sink *s, struct nb_pub *slot);
/* The PubAcks still awaited for pb will be dropped when they come. */
void pgo_ns_pub_orphan(struct nats_sink *s, const struct nb_batch *pb);
/* Empties the table without freeing a message: each is cnats' until its
 * PubAck handler runs, and jsCtx_Destroy() frees the ones still awaited.
 * A message handed over after this is found nowhere and freed. */
void pgo_ns_pub_forget(struct nats_sink *s);
/* Gives event i of pb its verdict (the first one set counts). */
void pgo_ns_verdict(struct nb_batch *pb, size_t i, pgo_ack_t ack,
		    const char *msg);
/* The server cannot take anything now: not the events' fault. */
void pgo_ns_fail_rest(struct nb_batch *pb, const char *msg);
/* Every batch in flight fails as unavailable. */
void pgo_ns_fail_all(struct nats_sink *s, const char *msg);
/* Takes pb out of the sink's list and its batch's sink_state. */
void pgo_ns_unlink_batch(struct nats_sink *s, struct nb_batch *pb);
/* Hands the batches that have every verdict back to the host.  done()
 * may submit or cancel: the list is searched again after each call. */
void pgo_ns_finish_done(struct nats_sink *s);
/* Sets the timer to the nearest deadline of a batch not done. */
void pgo_ns_arm(struct nats_sink *s);
/* at, but no later than the host's drain deadline. */
int64_t pgo_ns_clamp_deadline(const struct nats_sink *s, int64_t at);
/* Publishes the events of pb that have no verdict yet. */
void pgo_ns_send_batch(struct nats_sink *s, struct nb_batch *pb);

/* --- connect.c: cnats' threads, their queue to the loop, the options --- */

/* Queues it for the loop and writes the eventfd (any thread); it is
 * freed instead once the sink is closing. */
void pgo_ns_push(struct nats_sink *s, struct nq_item *it);
/* The PubAck handler.  Out of memory, the message stays in the table and
 * its batch's deadline ends the wait. */
void pgo_ns_on_puback(jsCtx *js, natsMsg *msg, jsPubAck *pa, jsPubAckErr *pae,
		      void *closure);
/* The calling thread's last cnats error without its source location
 * ("(conn.c:1905): Authorization Violation"), or the status' text. */
const char *pgo_ns_last_error(natsStatus st);
/* Starts the connector thread (it makes the first connection);
 * joined by pgo_ns_connector_join(). */
int pgo_ns_connector_start(struct nats_sink *s);
void pgo_ns_connector_join(struct nats_sink *s);
/* cnats' options for the sink: servers, timeouts, reconnects, the
 * callbacks, credentials and TLS. */
natsStatus pgo_ns_make_options(struct nats_sink *s, natsOptions **out);

#endif /* PGO_SINK_NATS_INT_H */

/*
 * sinks/rabbitmq/rabbitmq_int.h — what the files of the rabbitmq sink
 * share: its state (the sink, its batches, the ring of awaited confirms,
 * the connect thread's hand-over) and the steps one file calls in
 * another.  Loop thread only, but for struct am_connect, which the connect
 * thread shares under its mutex.
 */
#ifndef PGO_SINK_RABBITMQ_INT_H
#define PGO_SINK_RABBITMQ_INT_H

#include <pthread.h>

#include <amqp.h>

#include "sinks/rabbitmq/rabbitmq.h"
#include "base/buf.h"
#include "pgoutbox/sink.h"

#define SUBJECT	       "sink rabbitmq"
#define CHANNEL	       1
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000

/* The connection's states. */
enum am_state {
	AM_DOWN,       /* no connection; the next try at retry_at */
	AM_CONNECTING, /* the connect thread runs */
	AM_UP	       /* logged in, channel in confirm mode */
};

struct am_batch;

/* A published message whose confirm is awaited; delivery tags are
 * consecutive, so the ring's head has tag base_tag. */
struct am_pend {
	struct am_batch *ab; /* NULL: decided already, or batch cancelled */
	size_t ev;	     /* index of the event in its batch */
	int64_t id;	     /* the event id (matches a basic.return) */
	bool confirmed;	     /* its ack or nack came */
};

/* One batch taken by submit(), in batch->sink_state until done or
 * cancelled. */
struct am_batch {
	pgo_batch_t *batch;
	struct am_batch *prev, *next; /* the sink's batches, oldest first */
	size_t left;		      /* events without a verdict */
	int64_t deadline;	      /* confirms due; 0: not published yet */
	int64_t started;
};

/* What the connect thread gets and gives back. */
struct am_connect {
	pthread_t thread;
	int pipe[2];		      /* the thread writes one byte when done */
	pthread_mutex_t mu;	      /* guards fd and abort */
	int fd;			      /* the thread's socket while it logs in */
	bool abort;		      /* stopping: the thread gives up */
	amqp_connection_state_t conn; /* ready when ok */
	bool ok;
	/* The login failed because the broker has no such vhost
	 * (connection.close 530 NOT_ALLOWED, "vhost ... not found"). */
	bool no_vhost;
	char err[300];
};

struct am_sink {
	/* configuration, copied at configure */
	char *url_buf;			 /* amqp_parse_url's fields point in */
	struct amqp_connection_info url; /* host, port, vhost, user, ssl */
	char where[300];		 /* host:port/vhost, for messages */
	char *exchange;
	char *rkey_tmpl;
	char *queue; /* relay.queue, for {queue} */
	bool cloudevents;
	int64_t timeout_ms;
	int64_t connect_timeout_ms;
	int heartbeat_s;
	int frame_max;
	char *ca, *cert, *key;
	bool verify;

	pgo_sink_t *sink;
	pgo_sink_io_t *io;	 /* the socket's or the pipe's watcher */
	pgo_sink_timer_t *timer; /* the nearest deadline */
	enum am_state state;
	amqp_connection_state_t conn;  /* AM_UP */
	struct am_connect *connecting; /* AM_CONNECTING */
	bool blocked;		       /* connection.blocked came */
	bool down;		       /* the host was told it is down */
	bool up_logged;
	int64_t retry_at; /* AM_DOWN: the next connect then */
	int64_t backoff;
	int64_t tick_at; /* next heartbeat service */
	int64_t drain_until;
	char last_err[300];

	struct am_pend *q; /* ring of awaited confirms */
	size_t q_head, q_len, q_cap;
	uint64_t base_tag; /* delivery tag of q[q_head] */

	/* a basic.return being read: its header, then its body frames */
	int ret_stage; /* 0 none, 1 header awaited, 2 body */
	uint64_t ret_body_left;
	char ret_why[400];

	struct am_batch *head, *tail;
	pgo_buf_t rkey; /* scratch: one expanded routing key */
};

/* --- rabbitmq.c: batches, verdicts, the ring of awaited confirms --- */

/* Gives event i of ab its verdict (the first one set counts). */
void pgo_am_verdict(struct am_batch *ab, size_t i, pgo_ack_t ack,
		    const char *msg);
/* Every event in doubt (published, or waiting to be) gets ack. */
void pgo_am_fail_all(struct am_sink *s, pgo_ack_t ack, const char *msg);
/* Appends the message just published (event ev of ab, id) to the ring;
 * false on OOM. */
bool pgo_am_pend_push(struct am_sink *s, struct am_batch *ab, size_t ev,
		      int64_t id);
/* Empties the ring: a new channel numbers its delivery tags from 1. */
void pgo_am_pend_clear(struct am_sink *s);

/* --- connect.c: the connection --- */

/* Tells the host the broker is down (once) or up again. */
void pgo_am_report_down(struct am_sink *s, const char *msg);
void pgo_am_report_up(struct am_sink *s);
/* Drops the connection and what it was doing: AM_DOWN. */
void pgo_am_close_conn(struct am_sink *s);
/* The connection failed or was lost: what is in flight fails
 * (UNAVAILABLE for an outage, with the backoff; RETRY otherwise, to
 * reconnect at once). */
void pgo_am_lost(struct am_sink *s, const char *reason, bool outage);
/* Starts the connect thread: AM_CONNECTING, the watcher on its pipe. */
void pgo_am_connect_start(struct am_sink *s);
/* The connect thread wrote its pipe: AM_UP, or lost(). */
void pgo_am_connect_finished(struct am_sink *s);
/* Waits for the connect thread and frees what it kept. */
void pgo_am_connect_join(struct am_sink *s);
/* Stopping: ends a login in progress now (its socket shut down). */
void pgo_am_connect_abort(struct am_sink *s);
/* Waits up to ms for the connect thread to end, without taking its
 * result (the loop's watcher still sees the pipe readable).  true when it
 * ended; false at the timeout or when a signal came (a SIGTERM during the
 * wait must not hold the host for the rest of it). */
bool pgo_am_connect_wait(struct am_sink *s, int64_t ms);

/* --- publish.c: events as messages --- */

/* Publishes every batch not on the wire yet; stops at a lost connection
 * (every batch then has its verdicts). */
void pgo_am_publish_waiting(struct am_sink *s);

#endif /* PGO_SINK_RABBITMQ_INT_H */

/*
 * sinks/nats/publish.c — the nats sink's publishing: the events of a batch
 * as JetStream publishes (js_PublishMsgAsync(), on the loop's thread), the
 * table that finds a publish again by the message cnats hands back with
 * its PubAck, and the batches' verdicts, deadlines and hand-back.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "loop/loop.h"
#include "sinks/nats/nats_int.h"
#include "base/log.h"
#include "base/time.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"
#include "sinks/nats/nats.h"

/* --- the table of awaited PubAcks --- */

static size_t pub_hash(const natsMsg *m, size_t cap)
{
	uint64_t x = (uint64_t)(uintptr_t)m;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return (size_t)x & (cap - 1);
}

struct nb_pub *pgo_ns_pub_find(struct nats_sink *s, const natsMsg *m)
{
	if (!s->pubs_cap)
		return NULL;
	for (size_t i = pub_hash(m, s->pubs_cap);;
	     i = (i + 1) & (s->pubs_cap - 1)) {
		if (!s->pubs[i].msg)
			return NULL;
		if (s->pubs[i].msg == m)
			return &s->pubs[i];
	}
}

static bool pub_insert(struct nb_pub *tab, size_t cap, const struct nb_pub *p)
{
	size_t i = pub_hash(p->msg, cap);

	while (tab[i].msg)
		i = (i + 1) & (cap - 1);
	tab[i] = *p;
	return true;
}

static bool pub_put(struct nats_sink *s, natsMsg *m, struct nb_batch *pb,
		    size_t ev)
{
	if ((s->pubs_len + 1) * 2 > s->pubs_cap) {
		size_t cap = s->pubs_cap ? s->pubs_cap * 2 : 1024;
		struct nb_pub *tab = calloc(cap, sizeof(*tab));

		if (!tab)
			return false;
		for (size_t i = 0; i < s->pubs_cap; i++)
			if (s->pubs[i].msg)
				pub_insert(tab, cap, &s->pubs[i]);
		free(s->pubs);
		s->pubs = tab;
		s->pubs_cap = cap;
	}
	pub_insert(s->pubs, s->pubs_cap,
		   &(struct nb_pub){.msg = m, .pb = pb, .ev = ev});
	s->pubs_len++;
	return true;
}

/* Removes a slot, shifting back the ones its probe sequence covers. */
void pgo_ns_pub_del(struct nats_sink *s, struct nb_pub *slot)
{
	size_t mask = s->pubs_cap - 1;
	size_t i = (size_t)(slot - s->pubs);

	s->pubs[i].msg = NULL;
	s->pubs_len--;
	for (size_t j = (i + 1) & mask; s->pubs[j].msg; j = (j + 1) & mask) {
		size_t h = pub_hash(s->pubs[j].msg, s->pubs_cap);

		/* j may move to i if h is not cyclically in (i, j]. */
		if (((j - h) & mask) >= ((j - i) & mask)) {
			s->pubs[i] = s->pubs[j];
			s->pubs[j].msg = NULL;
			i = j;
		}
	}
}

/* The PubAcks still awaited for pb will be dropped when they come. */
void pgo_ns_pub_orphan(struct nats_sink *s, const struct nb_batch *pb)
{
	if (!pb->outstanding)
		return;
	for (size_t i = 0; i < s->pubs_cap; i++)
		if (s->pubs[i].msg && s->pubs[i].pb == pb)
			s->pubs[i].pb = NULL;
}

/* Empties the table without freeing a message: each is cnats' until its
 * PubAck handler runs, and jsCtx_Destroy() frees the ones still awaited.
 * A message handed over after this is found nowhere and freed. */
void pgo_ns_pub_forget(struct nats_sink *s)
{
	if (s->pubs_cap)
		memset(s->pubs, 0, s->pubs_cap * sizeof(*s->pubs));
	s->pubs_len = 0;
	for (struct nb_batch *pb = s->head; pb; pb = pb->next)
		pb->outstanding = 0;
}

/* --- batches and verdicts --- */

void pgo_ns_verdict(struct nb_batch *pb, size_t i, pgo_ack_t ack,
		    const char *msg)
{
	if (pgo_batch_set(pb->batch, i, ack, msg))
		pb->left--;
}

/* The server cannot take anything now: not the events' fault. */
void pgo_ns_fail_rest(struct nb_batch *pb, const char *msg)
{
	if (!pb->left)
		return;
	pgo_batch_fail_rest(pb->batch, PGO_ACK_UNAVAILABLE, msg);
	pb->left = 0;
}

void pgo_ns_fail_all(struct nats_sink *s, const char *msg)
{
	for (struct nb_batch *pb = s->head; pb; pb = pb->next)
		pgo_ns_fail_rest(pb, msg);
}

void pgo_ns_unlink_batch(struct nats_sink *s, struct nb_batch *pb)
{
	if (pb->prev)
		pb->prev->next = pb->next;
	else
		s->head = pb->next;
	if (pb->next)
		pb->next->prev = pb->prev;
	else
		s->tail = pb->prev;
	pb->prev = pb->next = NULL;
	pb->batch->sink_state = NULL;
}

/* Hands the batches that have every pgo_ns_verdict back to the host.  done()
 * may submit or cancel: the list is searched again after each call. */
void pgo_ns_finish_done(struct nats_sink *s)
{
	for (;;) {
		struct nb_batch *pb = s->head;
		pgo_batch_t *b;

		while (pb && pb->left > 0)
			pb = pb->next;
		if (!pb)
			return;
		b = pb->batch;
		pgo_log(PGO_LOG_DEBUG, SUBJECT,
			"batch of %zu done in %" PRId64 " ms", b->n,
			pgo_now_ms() - pb->started);
		pgo_ns_pub_orphan(s, pb);
		pgo_ns_unlink_batch(s, pb);
		free(pb);
		pgo_sink_done(s->sink, b);
	}
}

static int64_t next_deadline(const struct nats_sink *s)
{
	int64_t at = 0;

	for (const struct nb_batch *pb = s->head; pb; pb = pb->next)
		if (pb->left)
			at = pgo_deadline_min(at, pb->deadline);
	return at;
}

void pgo_ns_arm(struct nats_sink *s)
{
	if (s->timer)
		pgo_sink_timer_set(s->timer, next_deadline(s));
}

int64_t pgo_ns_clamp_deadline(const struct nats_sink *s, int64_t at)
{
	return s->drain_until && at > s->drain_until ? s->drain_until : at;
}

/* Publishes the events of pb that have no pgo_ns_verdict yet. */
void pgo_ns_send_batch(struct nats_sink *s, struct nb_batch *pb)
{
	pgo_batch_t *b = pb->batch;
	char why[512], id[24];

	pb->sent = true;
	pb->deadline = pgo_ns_clamp_deadline(s, pgo_now_ms() + s->timeout_ms +
							GRACE_MS);
	for (size_t i = 0; i < b->n && pb->left > 0; i++) {
		natsMsg *m = NULL;
		jsPubOptions po;
		natsStatus st;
		pgo_ack_t ack;
		int rc;

		if (b->acks[i] != PGO_ACK_NONE)
			continue;
		rc = pgo_nats_message(&s->fmt, &b->events[i], &s->subj, &m, why,
				      sizeof(why));
		if (rc != PGO_OK) {
			pgo_ns_verdict(pb, i,
				       rc == PGO_ERR_NOMEM ? PGO_ACK_RETRY
							   : PGO_ACK_DEAD,
				       why);
			continue;
		}
		if (!pub_put(s, m, pb, i)) {
			natsMsg_Destroy(m);
			pgo_ns_verdict(pb, i, PGO_ACK_RETRY,
				       "nats: out of memory");
			continue;
		}
		pgo_nats_msg_id(b->events[i].id, id, sizeof(id));
		jsPubOptions_Init(&po);
		po.MsgId = id;
		po.MaxWait = s->timeout_ms;
		pb->outstanding++;
		/* The PubAck may be handled (on cnats' thread) before this
		 * returns: it only queues an item the loop takes later. */
		st = js_PublishMsgAsync(s->js, &m, &po);
		if (st == NATS_OK)
			continue;
		/* Not published: the message is still ours. */
		pgo_ns_pub_del(s, pgo_ns_pub_find(s, m));
		pb->outstanding--;
		ack = pgo_nats_verdict(st, 0, pgo_ns_last_error(st),
				       natsMsg_GetSubject(m), why, sizeof(why));
		natsMsg_Destroy(m);
		pgo_ns_verdict(pb, i, ack, why);
		if (ack == PGO_ACK_UNAVAILABLE) {
			pgo_ns_fail_rest(pb, why);
			break;
		}
	}
}

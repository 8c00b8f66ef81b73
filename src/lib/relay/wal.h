/*
 * wal.h — the relay of a queue captured through the WAL (wal.c,
 * wal_stream.c, wal_envelope.c; docs/wal.md): a replication connection
 * streams the slot pgoutbox_<queue> with pgoutput, each committed
 * transaction's logical messages with the prefix pgoutbox:<queue> go to
 * the sink as a batch, and the slot is confirmed only past transactions
 * the sink acked.
 *
 * relay.c asks pgo_wal_load() at start whether the queue is captured
 * this way (a fleet's relay asks in its start thread, start.c); if so
 * pgo_relay_run() hands over to pgo_wal_run() and the sink's done() goes to
 * pgo_wal_sink_done().  A fleet's relay (fleet.c) runs the same in halves,
 * through pgo_relay_begin() and pgo_relay_turn_*().  The envelope parser is
 * pure, for the unit tests.
 */
#ifndef PGO_RELAY_WAL_H
#define PGO_RELAY_WAL_H

#include <stdint.h>

#include "relay/relay_int.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

/* Reads the queue's capture (blocking, before the loop runs): r->wal
 * set for a WAL queue, left NULL for a table queue or when the database
 * cannot be reached (the table path then reports it). */
int pgo_wal_load(pgo_relay_t *r, pgo_error_t *err);
/* Makes r a WAL queue's relay (its stream not begun), as a fleet's
 * relay does when its start thread (start.c) read the capture. */
int pgo_wal_attach(pgo_relay_t *r, pgo_error_t *err);
void pgo_wal_free(pgo_relay_t *r);
/* Runs the streaming relay until stopped; PGO_OK, or an error when the
 * slot is missing or lost (errmsg set). */
int pgo_wal_run(pgo_relay_t *r);
/* The run in halves, for a fleet's loop (fleet.c, through relay.c's
 * pgo_relay_begin() and pgo_relay_turn_*()): begin (PGO_OK or the
 * error), the first half (timers, stop, the connection; the loop's
 * deadline, or *over), the second after the loop's wait, the end (PGO_OK
 * or the error that ended it). */
int pgo_wal_begin(pgo_relay_t *r);
int64_t pgo_wal_turn_prepare(pgo_relay_t *r, int64_t now, bool *over);
void pgo_wal_turn_step(pgo_relay_t *r);
int pgo_wal_end(pgo_relay_t *r);
/* The sink host's done() for a WAL queue. */
void pgo_wal_sink_done(void *ctx, pgo_batch_t *batch);
/* The batch the relay hands the sink (its one). */
const pgo_batch_t *pgo_wal_batch(const pgo_relay_t *r);

/* Streaming or standing by (for READY=1). */
bool pgo_wal_connected(const pgo_relay_t *r);
/* Why it is not streaming: the last error ("" when none). */
const char *pgo_wal_why(const pgo_relay_t *r);
/* Age of the oldest commit read and not yet acked, in seconds (0:
 * none), for the metric pgoutbox_slot_lag_seconds. */
double pgo_wal_lag_seconds(const pgo_relay_t *r);

/* Parses the envelope JSON a WAL queue's producers write (send_to(),
 * wal_envelope() in sql/schema/functions) into ev; the strings point into
 * mem, a malloc'd block the caller frees.  An envelope without created_at
 * (what send_to() writes) gets commit_us, its transaction's commit time
 * (Unix microseconds), in RFC 3339 UTC as the table path gives it.
 * Returns false when it is not one. */
bool pgo_wal_envelope(const char *json, size_t len, int64_t commit_us,
		      pgo_event_t *ev, char **mem);

/* pgoutput's Relation message m[0..len) ('R', protocol 1): its oid in
 * *relid, its column names in *cols (malloc'd, each malloc'd; free with
 * pgo_wal_cols_free()) and their count in *ncols.  -1 when it cannot be
 * read (nothing allocated).  Pure, for the unit tests. */
int pgo_wal_relation(const char *m, size_t len, uint32_t *relid, char ***cols,
		     size_t *ncols);
void pgo_wal_cols_free(char **cols, size_t ncols);
/* pgoutput's Insert message m[0..len) ('I') of a relation whose columns
 * are cols[0..ncols): its new row appended to out as a JSON object of
 * column name -> text (null for NULL), its oid in *relid.  Columns past
 * ncols are skipped; *unchanged is the first column sent as unchanged
 * ('u', which inserts do not have; taken as null), else ncols.  -1 when
 * it cannot be read (out then holds a part).  Pure. */
struct pgo_buf;
int pgo_wal_insert_row(const char *m, size_t len, char *const *cols,
		       size_t ncols, uint32_t *relid, struct pgo_buf *out,
		       size_t *unchanged);

#endif

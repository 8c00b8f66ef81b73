/*
 * wal.h — the relay of a queue captured through the WAL (wal.c,
 * wal_stream.c, wal_envelope.c; docs/wal.md): a replication connection
 * streams the slot pgoutbox_<queue> with pgoutput, each committed
 * transaction's logical messages with the prefix pgoutbox:<queue> go to
 * the sink as a batch, and the slot is confirmed only past transactions
 * the sink acked.
 *
 * relay.c asks pgo_wal_load() at start whether the queue is captured
 * this way; if so pgo_relay_run() hands over to pgo_wal_run() and the
 * sink's done() goes to pgo_wal_sink_done().  The envelope parser is
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
void pgo_wal_free(pgo_relay_t *r);
/* Runs the streaming relay until stopped; PGO_OK, or an error when the
 * slot is missing or lost (errmsg set). */
int pgo_wal_run(pgo_relay_t *r);
/* The sink host's done() for a WAL queue. */
void pgo_wal_sink_done(void *ctx, pgo_batch_t *batch);

/* Streaming or standing by (for READY=1). */
bool pgo_wal_connected(const pgo_relay_t *r);
/* Age of the oldest commit read and not yet acked, in seconds (0:
 * none), for the metric pgoutbox_slot_lag_seconds. */
double pgo_wal_lag_seconds(const pgo_relay_t *r);

/* Parses the envelope JSON a WAL queue's producers write (wal_envelope()
 * in sql/schema/functions) into ev; the strings point into mem, a
 * malloc'd block the caller frees.  Returns false when it is not one. */
bool pgo_wal_envelope(const char *json, size_t len, pgo_event_t *ev,
		      char **mem);

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

/*
 * console.h — the web console (docs/console.md): a few pages for the
 * operator, served over HTTP by libmicrohttpd, their files compiled into
 * the binary, their facts read on a PostgreSQL connection of the
 * console's own.
 *
 *   console.c  the handle: its connection, the token and the sessions
 *   http.c     the HTTP side: routes, files, headers, bodies, the checks
 *              every request passes (method, CSRF, input)
 *   api.c      what each page asks (JSON) and the actions, each in one
 *              transaction and logged with who did it
 *   sample.c   throughput over the last 15 minutes, sampled in memory
 *
 * `pgoutbox console` runs it in a process of its own: libmicrohttpd's
 * thread answers, the command's main thread samples; both take the
 * connections (one per database of a fleet) under one lock, and blocking libpq
 * on that connection blocks only the console.
 */
#ifndef PGO_CONSOLE_H
#define PGO_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>

#include "pgoutbox.h"

typedef struct pgo_console pgo_console_t;

/* Listens on `listen` ("host:port"; the port may be 0) and serves from a
 * thread of its own; the database is conf's database.url, or each of
 * its fleet's when it names two or more (pgo_conf_databases_named: one
 * connection each, the pages naming them), the token console.token
 * ("" = read-only).  NULL with err filled when the address
 * is wrong or taken (PGO_ERR_INVALID) or without memory.  PostgreSQL
 * being down is no error: the pages say so until it is back. */
pgo_console_t *pgo_console_new(const pgo_conf_t *conf, const char *listen,
			       pgo_error_t *err);
/* listen NULL: no listener of its own, for a metrics endpoint to serve
 * the pages (pgo_console_mhd); a worker thread of the console answers
 * the requests that need the database and takes the samples. */

/* Whether the console serves this URL ("/", its files, "/api/..."). */
bool pgo_console_path(const char *url);
/* libmicrohttpd's access handler for a console URL, on an endpoint
 * started with MHD_ALLOW_SUSPEND_RESUME: never waits for PostgreSQL (a
 * request that needs it is suspended until the worker has answered).
 * Returns an enum MHD_Result.  req_cls is the console's: give it to
 * pgo_console_mhd_done() when the request ends. */
struct MHD_Connection;
int pgo_console_mhd(pgo_console_t *c, struct MHD_Connection *mc,
		    const char *url, const char *method, const char *upload,
		    size_t *upload_size, void **req_cls);
void pgo_console_mhd_done(void **req_cls);
/* Readable when a suspended request has its answer: the endpoint's loop
 * watches it, calls pgo_console_woken() and runs libmicrohttpd.  -1 for
 * a console with a listener of its own. */
int pgo_console_wake_fd(const pgo_console_t *c);
void pgo_console_woken(pgo_console_t *c);

/* A reload (SIGHUP): the databases of conf from now on, as
 * pgo_console_new() reads them.  Those kept (same name and URL) keep
 * their connection and samples; the change is taken by the next request
 * or sample, so this never waits for one that runs.  PGO_OK, or err
 * filled (the databases kept as they were). */
int pgo_console_reload(pgo_console_t *c, const pgo_conf_t *conf,
		       pgo_error_t *err);

/* The port it listens on. */
int pgo_console_port(const pgo_console_t *c);
/* Records one throughput sample of every queue (call every few seconds;
 * sample.c keeps 15 minutes of them). */
void pgo_console_sample(pgo_console_t *c);
/* Stops serving, closes the connection, frees (NULL is a no-op). */
void pgo_console_destroy(pgo_console_t *c);

#endif /* PGO_CONSOLE_H */

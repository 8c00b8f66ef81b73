/*
 * pgo_int.h — internals shared by the modules of libpgoutbox (like libpq's
 * libpq-int.h).  Nothing here is part of the public API.
 */
#ifndef PGO_INT_H
#define PGO_INT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "pgoutbox.h"

/* --- log --- */
#include "base/log.h"

/* --- errors --- */
#include "base/error.h"

/* --- time --- */
#include "base/time.h"

/* --- arena --- */
#include "base/arena.h"

/* --- growable text buffer --- */
#include "base/buf.h"

/* --- config --- */

#include "conf/conf.h"

/* --- status --- */
#include "outbox/status.h"

/* --- consume --- */
#include "inbox/consume.h"

/* --- retry --- */
#include "queue/queue.h"

/* --- sinks: the registry, the host, name templates (sinks/sink_int.h) --- */

#include "sinks/sink_int.h"

/* --- schema --- */

#include "db/schema.h"

/* --- queue --- */
#include "queue/queue.h"

/* --- ABI --- */
#include "base/abi.h"

#endif /* PGO_INT_H */

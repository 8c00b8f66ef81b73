/*
 * abi.c — what a program built against one pgoutbox.h needs checked when
 * it runs with another libpgoutbox: the library's version (compiled from
 * the generated pgoutbox/version.h, so it is the library's, not the
 * caller's), and the sizes of the structs callers fill.
 *
 * Such a struct begins with `size_t size`, the sizeof() the caller was
 * compiled with.  A release only appends fields, so an older caller's
 * struct is a prefix of this build's: the library copies `size` bytes over
 * a full struct holding the defaults, and the fields the caller's struct
 * lacks keep them.  A size the library never shipped (a newer pgoutbox.h,
 * or a size never set) is refused with PGO_ERR_INVALID.
 */
#include <stddef.h>
#include <string.h>

#include "base/abi.h"
#include "base/error.h"
#include "pgoutbox.h"

int pgo_version(void)
{
	return PGO_VERSION_NUM;
}

const char *pgo_version_str(void)
{
	return PGO_VERSION;
}

/* pgo_job_opts_t of 0.1.0 and 0.2.0, before group_key and depends_on. */
struct pgo_job_opts_v0 {
	size_t size;
	const char *run_at;
	int priority;
	const char *unique_key;
	const char *topic;
	const char *key;
};

/* Every struct callers fill, with each released size, oldest first; the
 * last is this build's.  When a release appends fields to one, keep its
 * old layout as a frozen copy here (struct pgo_msg_v0 { ... }) and put
 * sizeof that copy before the new sizeof (a struct with fewer sizes ends
 * in zeros).  PGOUTBOX_0 is the first layout of all of them. */
static const struct {
	const char *name; /* in messages: the type */
	const char *how;  /* how a caller sets the size */
	size_t sizes[2];  /* every released size, growing; 0 ends */
} abi_structs[] = {
	[PGO_ABI_MSG] = {"pgo_msg_t",
			 "set .size = sizeof(pgo_msg_t)",
			 {sizeof(pgo_msg_t)}},
	[PGO_ABI_JOB_OPTS] = {"pgo_job_opts_t",
			      "set .size = sizeof(pgo_job_opts_t)",
			      {sizeof(struct pgo_job_opts_v0),
			       sizeof(pgo_job_opts_t)}},
	[PGO_ABI_CRON_SCHEDULE] = {"pgo_cron_schedule_t",
				   "set .size = sizeof(pgo_cron_schedule_t)",
				   {sizeof(pgo_cron_schedule_t)}},
	[PGO_ABI_CONSUMER_OPTS] = {"pgo_consumer_opts_t",
				   "start from pgo_consumer_opts_init(&opts, "
				   "sizeof(opts))",
				   {sizeof(pgo_consumer_opts_t)}},
	[PGO_ABI_WORKER_OPTS] = {"pgo_worker_opts_t",
				 "start from pgo_worker_opts_init(&opts, "
				 "sizeof(opts))",
				 {sizeof(pgo_worker_opts_t)}},
	[PGO_ABI_SCHEDULER_OPTS] = {"pgo_scheduler_opts_t",
				    "start from pgo_scheduler_opts_init(&opts, "
				    "sizeof(opts))",
				    {sizeof(pgo_scheduler_opts_t)}},
};

/* The size field leads each of them. */
_Static_assert(offsetof(pgo_msg_t, size) == 0, "pgo_msg_t.size");
_Static_assert(offsetof(pgo_job_opts_t, size) == 0, "pgo_job_opts_t.size");
_Static_assert(offsetof(pgo_cron_schedule_t, size) == 0,
	       "pgo_cron_schedule_t.size");
_Static_assert(offsetof(pgo_consumer_opts_t, size) == 0,
	       "pgo_consumer_opts_t.size");
_Static_assert(offsetof(pgo_worker_opts_t, size) == 0,
	       "pgo_worker_opts_t.size");
_Static_assert(offsetof(pgo_scheduler_opts_t, size) == 0,
	       "pgo_scheduler_opts_t.size");

#define NSIZES(s) (sizeof((s).sizes) / sizeof((s).sizes[0]))

size_t pgo_abi_size(pgo_abi_struct_t s)
{
	size_t n = NSIZES(abi_structs[s]);

	while (n > 1 && abi_structs[s].sizes[n - 1] == 0)
		n--;
	return abi_structs[s].sizes[n - 1];
}

int pgo_abi_check(pgo_abi_struct_t s, size_t size, pgo_error_t *err)
{
	size_t newest = pgo_abi_size(s);

	for (size_t i = 0; i < NSIZES(abi_structs[s]); i++)
		if (size != 0 && size == abi_structs[s].sizes[i])
			return PGO_OK;
	if (size == 0)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "%s.size is 0: %s", abi_structs[s].name,
				     abi_structs[s].how);
	if (size > newest)
		return pgo_error_set(err, PGO_ERR_INVALID, 0,
				     "%s.size is %zu but this libpgoutbox "
				     "(%s) knows sizes up to %zu: the program "
				     "was built against a newer pgoutbox.h; "
				     "upgrade libpgoutbox",
				     abi_structs[s].name, size, PGO_VERSION,
				     newest);
	return pgo_error_set(err, PGO_ERR_INVALID, 0,
			     "%s.size is %zu, not the size of any release "
			     "of it (this one's is %zu): %s",
			     abi_structs[s].name, size, newest,
			     abi_structs[s].how);
}

int pgo_abi_copy(pgo_abi_struct_t s, void *dst, const void *src,
		 pgo_error_t *err)
{
	size_t size, newest = pgo_abi_size(s);
	int rc;

	if (!src)
		return pgo_error_set(err, PGO_ERR_INVALID, 0, "no %s given",
				     abi_structs[s].name);
	memcpy(&size, src, sizeof(size));
	rc = pgo_abi_check(s, size, err);
	if (rc != PGO_OK)
		return rc;
	memcpy(dst, src, size);
	memcpy(dst, &newest, sizeof(newest));
	return PGO_OK;
}

int pgo_abi_init(pgo_abi_struct_t s, void *dst, size_t size,
		 const void *defaults)
{
	if (!dst)
		return PGO_ERR_INVALID;
	if (pgo_abi_check(s, size, NULL) != PGO_OK) {
		/* Only the size field, so that _new() refuses it clearly. */
		if (size >= sizeof(size))
			memcpy(dst, &size, sizeof(size));
		return PGO_ERR_INVALID;
	}
	memcpy(dst, defaults, size);
	memcpy(dst, &size, sizeof(size));
	return PGO_OK;
}

/*
 * fuzz_exec_verdict.c — the exec sink's reading of what its command
 * printed (sinks/exec/exec.c): the verdict lines "ok ID", "retry ID reason",
 * "dead ID reason" on stdout, the exit status, the last line of stderr.
 *
 * Input: a byte of flags (bits 0-1: exited 0, exited 1, killed by a
 * signal, status lost; bit 2: stdout was capped), a byte giving the
 * batch's size (1-16) and a byte its first id, then stdout, a NUL and
 * stderr.  Oracles: every event ends with a verdict; each failure's
 * message is one line of valid UTF-8 without control bytes, at most 1000
 * bytes of reason; an exit 0 with no verdict lines acks the whole batch.
 */
#include "fuzz.h"
#include "loop/proc.h"
#include "sinks/exec/exec.h"
#include "base/arena.h"
#include "pgoutbox.h"
#include "pgoutbox/sink.h"

static bool valid_text(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		size_t len = *p < 0x80	  ? 1
			     : *p >= 0xf0 ? 4
			     : *p >= 0xe0 ? 3
					  : 2;

		if (*p < 0x20 || *p == 0x7f || (*p >= 0x80 && *p < 0xc2) ||
		    *p > 0xf4)
			return false;
		for (size_t k = 1; k < len; k++)
			if ((p[k] & 0xc0) != 0x80)
				return false;
		p += len;
	}
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const pgo_proc_end_t ends[] = {PGO_PROC_EXITED, PGO_PROC_EXITED,
					      PGO_PROC_SIGNALED, PGO_PROC_LOST};
	pgo_event_t ev[16];
	pgo_ack_t acks[16] = {0};
	const char *errors[16] = {0};
	pgo_batch_t b = {.events = ev, .acks = acks, .errors = errors};
	pgo_proc_result_t res = {0};
	fuzz_fields_t ff;
	uint8_t flags, n, first;

	pgo_log_set(NULL, NULL, PGO_LOG_ERROR);
	if (size < 3)
		return 0;
	flags = data[0];
	n = (uint8_t)(data[1] % 16 + 1);
	first = data[2];
	fuzz_fields(&ff, data + 3, size - 3, '\0', 2);
	b.n = n;
	b.arena = pgo_arena_new(4096);
	if (!b.arena)
		abort();
	for (size_t i = 0; i < n; i++)
		ev[i] = (pgo_event_t){.id = first +
					    (int64_t)i * (1 + (flags >> 4)),
				      .topic = "t",
				      .payload = "{}"};
	res.end = ends[flags & 3];
	res.status = (flags & 3) == 1 ? 1 : (flags & 3) == 2 ? 9 : 0;
	res.out = ff.f[0];
	res.out_len = ff.len[0];
	res.out_capped = flags & 4;
	res.err = ff.f[1];
	res.err_len = ff.len[1];

	pgo_sink_exec_decide(&b, &res, 0);
	for (size_t i = 0; i < n; i++) {
		FUZZ_CHECK(acks[i] != PGO_ACK_NONE, "event %zu undecided", i);
		if (acks[i] == PGO_ACK_OK)
			continue;
		FUZZ_CHECK(acks[i] == PGO_ACK_RETRY || acks[i] == PGO_ACK_DEAD,
			   "event %zu: verdict %d", i, acks[i]);
		FUZZ_CHECK(errors[i] && errors[i][0] && valid_text(errors[i]) &&
				   strlen(errors[i]) <= 1000 + 320,
			   "event %zu: message \"%s\"", i,
			   errors[i] ? errors[i] : "(null)");
	}
	if ((flags & 3) == 0 && !memchr(ff.f[0], ' ', ff.len[0]) &&
	    !memchr(ff.f[0], '\t', ff.len[0]))
		for (size_t i = 0; i < n; i++)
			FUZZ_CHECK(
				acks[i] == PGO_ACK_OK,
				"exit 0, no verdict line, event %zu not acked",
				i);
	pgo_arena_destroy(b.arena);
	fuzz_fields_free(&ff);
	return 0;
}

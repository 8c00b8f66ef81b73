/*
 * fuzz_wal_pgoutput.c — pgoutput's Relation and Insert messages of a
 * table adopted with capture wal (pgo_wal_relation() and
 * pgo_wal_insert_row() in relay/wal_adopted.c), read by hand from the
 * replication stream.
 *
 * Input: two bytes, big-endian, the Relation message's length (cut to
 * what follows), the Relation message, then the Insert message.  The
 * Insert is read against the Relation's columns when the Relation was
 * read, else against none.  Oracles: the sanitizers (every read within
 * the message); a Relation read has its count of columns, each a string;
 * an Insert read gives an object with a key per column at most, reports
 * an unchanged column within the columns, and when the input is ASCII
 * its output is a JSON object (jansson reads it).
 */
#include <jansson.h>

#include "base/buf.h"
#include "fuzz.h"
#include "relay/wal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool ascii(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] >= 0x80)
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t rlen, ncols = 0, unchanged;
	char **cols = NULL;
	uint32_t relid;
	pgo_buf_t out;
	char *rel, *ins;

	if (size < 2)
		return 0;
	rlen = (size_t)data[0] << 8 | data[1];
	if (rlen > size - 2)
		rlen = size - 2;
	/* Copies of their exact size, so that ASan sees a read past either. */
	rel = malloc(rlen ? rlen : 1);
	ins = malloc(size - 2 - rlen ? size - 2 - rlen : 1);
	if (!rel || !ins)
		abort();
	memcpy(rel, data + 2, rlen);
	memcpy(ins, data + 2 + rlen, size - 2 - rlen);

	if (pgo_wal_relation(rel, rlen, &relid, &cols, &ncols) == 0) {
		FUZZ_CHECK(cols != NULL, "a Relation read without its columns");
		for (size_t i = 0; i < ncols; i++)
			FUZZ_CHECK(cols[i] != NULL, "column %zu without a name", i);
	} else {
		FUZZ_CHECK(cols == NULL && ncols == 0,
			   "a Relation not read left columns");
	}

	pgo_buf_init(&out);
	if (pgo_wal_insert_row(ins, size - 2 - rlen, cols, ncols, &relid, &out,
			       &unchanged) == 0) {
		FUZZ_CHECK(unchanged <= ncols, "unchanged column %zu of %zu",
			   unchanged, ncols);
		FUZZ_CHECK(!out.oom && out.len >= 2 && out.data[0] == '{' &&
				   out.data[out.len - 1] == '}',
			   "an Insert read into [%.*s]", (int)out.len,
			   out.data ? out.data : "");
		if (ascii(data, size)) {
			json_t *j = json_loadb(out.data, out.len, 0, NULL);

			FUZZ_CHECK(json_is_object(j),
				   "the row is not a JSON object: [%.*s]",
				   (int)out.len, out.data);
			FUZZ_CHECK(json_object_size(j) <= ncols,
				   "%zu keys for %zu columns",
				   json_object_size(j), ncols);
			json_decref(j);
		}
	}
	pgo_buf_free(&out);
	pgo_wal_cols_free(cols, ncols);
	free(rel);
	free(ins);
	return 0;
}

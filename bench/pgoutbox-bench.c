/*
 * pgoutbox-bench.c — the benchmark driver behind `make bench`.
 *
 * Each subcommand measures one thing against a live PostgreSQL and prints
 * human-readable lines; with --json FILE it also appends one JSON line per
 * metric, which bench/run.sh gathers into bench/results/.
 *
 *   fill        pre-fills the outbox with pgo_send_bulk() (COPY)
 *   enqueue     producer throughput: pgoutbox.send() with and without its
 *               wake-up NOTIFY, the bulk path, and a plain INSERT/COPY into
 *               a scratch table (the floor PostgreSQL sets)
 *   latency     commit-to-sink latency through a relay child process, at
 *               a fixed (open-loop) rate of send() transactions
 *   drain       how fast R relays empty a backlog of N events
 *   notify-rtt  the LISTEN/NOTIFY round trip (the wake-up floor)
 *   work        how fast `pgoutbox worker` processes empty a work queue of
 *               N jobs, plain or spread over groups with a group limit
 *
 * Threads only drive several connections at once: each thread owns its
 * connection (and producer), as the library is single-threaded.  Every
 * time stamp is CLOCK_MONOTONIC taken in this one process, so commit
 * stamps (producer threads) and arrival stamps (the thread reading the
 * relay's stdout) compare directly.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "pgoutbox.h"

#define NSEC	      1000000000LL
#define FILL_BATCH    1000 /* events per pgo_send_bulk() when pre-filling */
#define BULK_BATCH    100  /* events per transaction: bulk and insert100 */
#define NKEYS	      100  /* distinct aggregate keys k0..k99 */
#define MAX_CLIENTS   256
#define MAX_RELAYS    64
#define MAX_SHARDS    64
#define MAX_PER_TX    1000 /* latency: events per producer transaction */
#define DRAIN_POLL_NS (NSEC / 200) /* drain: how often to look */
#define TOPIC	      "bench.orders"
#define TYPE	      "order.created"
#define SEND_SQL      "SELECT pgoutbox.send($1, $2, $3, $4::jsonb)"
#define SEND_N_SQL    SEND_SQL " FROM generate_series(1, $5::int)"
/* latency --insert: n events in one plain INSERT, keys spread. */
#define INSERT_N_SQL                                                           \
	"INSERT INTO pgoutbox.outbox (topic, key, type, payload) "             \
	"SELECT $1, $2::text || '.' || (g % 100), $3, $4::jsonb "              \
	"FROM generate_series(1, $5::int) g RETURNING id"

static const char *prog = "pgoutbox-bench";

/* --- options --- */

/* The command line of every subcommand; each reads the subset it needs. */
typedef struct opts {
	const char *cmd;       /* the subcommand */
	const char *db;	       /* conninfo string or URL, passed to libpq */
	const char *mode;      /* enqueue: send, bulk, insert, insert100 */
	const char *relay_cmd; /* shell command that runs one relay */
	const char *relay_log; /* file the relays' stderr is appended to */
	const char *json;      /* JSON lines are appended here; NULL: none */
	const char *run_id;    /* tags every JSON line of one run.sh run */
	const char *label;     /* names the variant in the human lines */
	const char *samples;   /* latency: the CDF of latencies goes here */
	const char *queue;     /* send_to() this outbox queue (--queue) */
	char send_sql[160];    /* send(), or send_to() of --queue */
	char send_n_sql[200];  /* the same, n times in one statement */
	long history;	       /* history: events passed through first */
	bool rss;	       /* drain: also measure the relay's memory */
	bool warm;	       /* drain: time relays started before the fill */
	bool hold_xmin;	       /* latency: hold a snapshot while measuring */
	bool insert;	       /* latency: plain multi-row INSERT, not send() */
	double window;	       /* latency: seconds per reported window */
	double after;	       /* latency: seconds measured after the hold */
	long events;	       /* fill, drain: events to pre-fill */
	long payload_bytes;    /* length of each event's JSON payload */
	long clients;	       /* enqueue: threads, one connection each */
	long producers;	       /* latency: producer threads sharing the rate */
	long relays;	       /* drain: relay processes */
	long count;	       /* notify-rtt: measured round trips */
	long groups;	       /* work: group keys the jobs are spread over */
	long group_cap;	       /* work --groups: group_concurrency, 0: fair */
	long per_tx;	       /* latency: events per producer transaction */
	long repeat;	       /* drain: runs; the median is reported */
	double seconds;	       /* measured duration */
	double warmup;	       /* run before measuring, then discarded */
	double rate;	       /* latency: events per second, open loop */
	double grace;	       /* latency: how long to wait for stragglers */
	double timeout;	       /* drain: give up after this many seconds */
	/* drain: the databases of a relay fleet (docs/fleet.md), filled
	 * with --events / shards each instead of --db's */
	const char *shard_db[MAX_SHARDS];
	long shards;
} opts_t;

static void usage(FILE *out)
{
	fprintf(out,
		"usage: %s COMMAND --db URL [options] [--json FILE]\n"
		"  fill       --events N [--payload-bytes 200]\n"
		"  enqueue    --mode "
		"send|send-quiet|bulk|insert|insert100|batch|"
		"insert-outbox|copy-outbox|insert-outbox1\n"
		"             --clients C [--relay-cmd CMD: a relay runs "
		"meanwhile]\n"
		"             --seconds S [--warmup 1]\n"
		"  latency    --rate R --seconds S --relay-cmd CMD "
		"[--producers 1]\n"
		"             [--per-tx 1] [--warmup 1] [--grace 5] "
		"[--relay-log FILE]\n"
		"  drain      --events N --relay-cmd CMD --relays R "
		"[--repeat 1]\n"
		"             [--timeout 300] [--relay-log FILE] [--rss] "
		"[--shard-db URL...] "
		"[--warm]\n"
		"  history    --history N --events N --relay-cmd CMD "
		"[--repeat 1]\n"
		"  notify-rtt --count N\n"
		"  work       --events N --relay-cmd CMD (a worker) "
		"[--relays 1] [--repeat 1]\n"
		"             [--queue benchjobs] [--groups G "
		"[--group-concurrency N]] [--timeout 300]\n"
		"latency also takes --window S (figures per window of S "
		"seconds: the steady\nworkload), --hold-xmin [--after S] "
		"(a REPEATABLE READ snapshot held for\n--seconds, then S more "
		"seconds measured without it) and --samples FILE\n(the "
		"latency CDF, for the charts); --insert sends --per-tx "
		"events as one plain\nINSERT (faster than send() calls).  "
		"drain --rss measures the "
		"relay's VmRSS\nidle, then during the drain; --warm (implied "
		"by "
		"--rss) starts the relays\nbefore the fill and times the drain "
		"from relays already connected to\ntheir sink.\n"
		"work fills the work queue --queue (benchjobs, created if "
		"missing) with --events\njobs in one INSERT, then times "
		"--relays worker processes (--relay-cmd, e.g.\n`pgoutbox "
		"worker --queue benchjobs --sql pgoutbox_bench_job`: a no-op "
		"handler\ncreated here) until it is empty.  --groups G "
		"spreads the jobs over G group\nkeys and sets the queue's "
		"group_concurrency to --group-concurrency N (0, the\n"
		"default: fair => true); without --groups the queue must have "
		"no controls.\n"
		"drain --shard-db URL (repeated) fills each of those databases "
		"with --events\n/ shards instead (a relay fleet drains them, "
		"its --relay-cmd names them).\n"
		"Common: --payload-bytes N, --json FILE (append JSON lines), "
		"--run-id ID,\n--label TEXT (names the variant).\n"
		"enqueue and drain --hold-xmin: a REPEATABLE READ snapshot "
		"(and an xid)\nheld through the run (drain: from before the "
		"fill).\n"
		"--queue NAME (enqueue --mode send|bulk, latency, drain): "
		"send_to() that\nqueue instead of send() into the outbox; "
		"a drain of a WAL queue ends when\nits slot confirmed the "
		"WAL's end after the fill.\n"
		"send-quiet skips the NOTIFY trigger (needs a superuser): "
		"send() without the\nwake-up.  "
		"The relay command runs under /bin/sh with DATABASE_URL set "
		"to --db;\nits stdout is read (latency) or discarded (drain), "
		"its stderr goes to\n--relay-log (default /dev/null).\n",
		prog);
}

/* Parses a positive number; prints what is wrong otherwise. */
static bool parse_num(const char *flag, const char *s, double min, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < min) {
		fprintf(stderr,
			"%s: --%s: expected a number >= %g, got \"%s\"\n", prog,
			flag, min, s);
		return false;
	}
	*out = v;
	return true;
}

/* The producers' statements: send() into the outbox, or with --queue
 * send_to() into that queue (a WAL queue's events are logical messages:
 * docs/wal.md).  The name is checked, so it can be a literal. */
static bool queue_sql(opts_t *o)
{
	const char *q = o->queue;

	if (!q) {
		snprintf(o->send_sql, sizeof(o->send_sql), "%s", SEND_SQL);
		snprintf(o->send_n_sql, sizeof(o->send_n_sql), "%s",
			 SEND_N_SQL);
		return true;
	}
	if (!*q || strlen(q) > 48 ||
	    strspn(q, "abcdefghijklmnopqrstuvwxyz"
		      "0123456789_") != strlen(q)) {
		fprintf(stderr,
			"%s: --queue: expected a queue name (a-z, 0-9, _), "
			"got \"%s\"\n",
			prog, q);
		return false;
	}
	snprintf(o->send_sql, sizeof(o->send_sql),
		 "SELECT pgoutbox.send_to('%s', $1, $2, $3, $4::jsonb)", q);
	snprintf(o->send_n_sql, sizeof(o->send_n_sql),
		 "%s FROM generate_series(1, $5::int)", o->send_sql);
	return true;
}

static bool parse_opts(opts_t *o, int argc, char **argv)
{
	static const struct option longopts[] = {
		{"db", required_argument, NULL, 'd'},
		{"events", required_argument, NULL, 'n'},
		{"payload-bytes", required_argument, NULL, 'b'},
		{"mode", required_argument, NULL, 'm'},
		{"clients", required_argument, NULL, 'c'},
		{"seconds", required_argument, NULL, 's'},
		{"warmup", required_argument, NULL, 'w'},
		{"rate", required_argument, NULL, 'r'},
		{"producers", required_argument, NULL, 'p'},
		{"grace", required_argument, NULL, 'g'},
		{"relay-cmd", required_argument, NULL, 'x'},
		{"relay-log", required_argument, NULL, 'l'},
		{"relays", required_argument, NULL, 'R'},
		{"timeout", required_argument, NULL, 't'},
		{"count", required_argument, NULL, 'N'},
		{"json", required_argument, NULL, 'j'},
		{"run-id", required_argument, NULL, 'i'},
		{"label", required_argument, NULL, 'L'},
		{"per-tx", required_argument, NULL, 'K'},
		{"repeat", required_argument, NULL, 'P'},
		{"samples", required_argument, NULL, 'S'},
		{"history", required_argument, NULL, 'H'},
		{"rss", no_argument, NULL, 'M'},
		{"warm", no_argument, NULL, 'Q'},
		{"hold-xmin", no_argument, NULL, 'X'},
		{"insert", no_argument, NULL, 'I'},
		{"window", required_argument, NULL, 'W'},
		{"after", required_argument, NULL, 'A'},
		{"queue", required_argument, NULL, 'q'},
		{"shard-db", required_argument, NULL, 'D'},
		{"groups", required_argument, NULL, 'G'},
		{"group-concurrency", required_argument, NULL, 'C'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}};
	double v;
	int c, idx = 0;

	*o = (opts_t){.payload_bytes = 200,
		      .clients = 1,
		      .producers = 1,
		      .per_tx = 1,
		      .repeat = 1,
		      .relays = 1,
		      .warmup = 1.0,
		      .grace = 5.0,
		      .timeout = 300.0,
		      .db = getenv("DATABASE_URL")};
	o->cmd = argv[1];
	optind = 2;
	while ((c = getopt_long(argc, argv, "", longopts, &idx)) != -1) {
		const char *flag = longopts[idx].name;

		switch (c) {
		case 'd': o->db = optarg; break;
		case 'D':
			if (o->shards >= MAX_SHARDS) {
				fprintf(stderr, "%s: at most %d --shard-db\n",
					prog, MAX_SHARDS);
				return false;
			}
			o->shard_db[o->shards++] = optarg;
			break;
		case 'm': o->mode = optarg; break;
		case 'x': o->relay_cmd = optarg; break;
		case 'l': o->relay_log = optarg; break;
		case 'j': o->json = optarg; break;
		case 'i': o->run_id = optarg; break;
		case 'L': o->label = optarg; break;
		case 'S': o->samples = optarg; break;
		case 'M': o->rss = true; break;
		case 'Q': o->warm = true; break;
		case 'X': o->hold_xmin = true; break;
		case 'I': o->insert = true; break;
		case 'q': o->queue = optarg; break;
		case 'W':
			if (!parse_num("window", optarg, 0.1, &o->window))
				return false;
			break;
		case 'A':
			if (!parse_num("after", optarg, 0, &o->after))
				return false;
			break;
		case 'C':
			if (!parse_num("group-concurrency", optarg, 0, &v))
				return false;
			if (v != floor(v) || v > 1e9) {
				fprintf(stderr,
					"%s: --group-concurrency: expected an "
					"integer, got \"%s\"\n",
					prog, optarg);
				return false;
			}
			o->group_cap = (long)v;
			break;
		case 'h': usage(stdout); exit(0);
		case 's':
			if (!parse_num("seconds", optarg, 0.01, &o->seconds))
				return false;
			break;
		case 'w':
			if (!parse_num("warmup", optarg, 0, &o->warmup))
				return false;
			break;
		case 'r':
			if (!parse_num("rate", optarg, 0.1, &o->rate))
				return false;
			break;
		case 'g':
			if (!parse_num("grace", optarg, 0, &o->grace))
				return false;
			break;
		case 't':
			if (!parse_num("timeout", optarg, 0.1, &o->timeout))
				return false;
			break;
		case 'n':
		case 'b':
		case 'c':
		case 'p':
		case 'R':
		case 'N':
		case 'K':
		case 'P':
		case 'H':
		case 'G':
			if (!parse_num(flag, optarg, 1, &v))
				return false;
			if (v != floor(v) || v > 1e9) {
				fprintf(stderr,
					"%s: --%s: expected an integer, "
					"got \"%s\"\n",
					prog, flag, optarg);
				return false;
			}
			if (c == 'n')
				o->events = (long)v;
			else if (c == 'b')
				o->payload_bytes = (long)v;
			else if (c == 'c')
				o->clients = (long)v;
			else if (c == 'p')
				o->producers = (long)v;
			else if (c == 'R')
				o->relays = (long)v;
			else if (c == 'K')
				o->per_tx = (long)v;
			else if (c == 'P')
				o->repeat = (long)v;
			else if (c == 'H')
				o->history = (long)v;
			else if (c == 'G')
				o->groups = (long)v;
			else
				o->count = (long)v;
			break;
		default: return false;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument \"%s\"\n", prog,
			argv[optind]);
		return false;
	}
	if (!o->db || !*o->db) {
		fprintf(stderr, "%s: --db URL is required\n", prog);
		return false;
	}
	return queue_sql(o);
}

/* --- time --- */

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NSEC + ts.tv_nsec;
}

static void sleep_until(int64_t t)
{
	struct timespec ts = {.tv_sec = t / NSEC, .tv_nsec = t % NSEC};

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) ==
	       EINTR) {
	}
}

static double ms_of(int64_t ns)
{
	return (double)ns / 1e6;
}

/* --- results --- */

/* Where the figures of one workload go: stdout for people, and one JSON
 * line per metric for bench/run.sh. */
typedef struct report {
	const opts_t *o;
	const char *workload; /* "enqueue", "latency", ... */
	char label[96];	      /* prefix of the human lines */
	char params[512];     /* members of the JSON "params" object */
	char machine[256];    /* "2 cores, 23.5 GiB, <cpu model>" */
	char date[32];	      /* when the workload started, ISO 8601 UTC */
	FILE *json;	      /* the --json file; NULL without one */
} report_t;

/* "N cores, X GiB, cpu model" from /proc, for comparing runs. */
static void describe_machine(char *buf, size_t size)
{
	char line[256], model[160] = "";
	double mem_gib = 0;
	FILE *f;

	f = fopen("/proc/meminfo", "r");
	while (f && fgets(line, sizeof(line), f)) {
		long kb;

		if (sscanf(line, "MemTotal: %ld kB", &kb) == 1) {
			mem_gib = (double)kb / (1024.0 * 1024.0);
			break;
		}
	}
	if (f)
		fclose(f);
	f = fopen("/proc/cpuinfo", "r");
	while (f && fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (strncmp(line, "model name", 10) == 0 && colon) {
			snprintf(model, sizeof(model), "%s", colon + 2);
			model[strcspn(model, "\n")] = '\0';
			break;
		}
	}
	if (f)
		fclose(f);
	if (!*model) {
		struct utsname u;

		if (uname(&u) == 0)
			snprintf(model, sizeof(model), "%s", u.machine);
	}
	snprintf(buf, size, "%ld cores, %.1f GiB, %s",
		 sysconf(_SC_NPROCESSORS_ONLN), mem_gib, model);
}

/* Writes s as a JSON string literal. */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			fprintf(f, "\\%c", ch);
		else if (ch < 0x20)
			fprintf(f, "\\u%04x", ch);
		else
			fputc(ch, f);
	}
	fputc('"', f);
}

static void param_raw(report_t *r, const char *key, const char *json_value)
{
	size_t n = strlen(r->params);

	snprintf(r->params + n, sizeof(r->params) - n, "%s\"%s\":%s",
		 n ? "," : "", key, json_value);
}

static void param_long(report_t *r, const char *key, long v)
{
	char num[32];

	snprintf(num, sizeof(num), "%ld", v);
	param_raw(r, key, num);
}

static void param_num(report_t *r, const char *key, double v)
{
	char num[32];

	snprintf(num, sizeof(num), "%g", v);
	param_raw(r, key, num);
}

/* Parameter values are flags and simple words: no escaping needed beyond
 * refusing quotes and backslashes. */
static void param_str(report_t *r, const char *key, const char *v)
{
	char text[256];

	snprintf(text, sizeof(text), "\"%.*s\"", (int)strcspn(v, "\"\\"), v);
	param_raw(r, key, text);
}

/* Starts a report; the caller then adds parameters with param_*(). */
static bool report_open(report_t *r, const opts_t *o, const char *workload,
			const char *label)
{
	time_t t = time(NULL);
	struct tm tm;

	memset(r, 0, sizeof(*r));
	r->o = o;
	r->workload = workload;
	snprintf(r->label, sizeof(r->label), "%s", o->label ? o->label : label);
	describe_machine(r->machine, sizeof(r->machine));
	if (o->label)
		param_str(r, "variant", o->label);
	gmtime_r(&t, &tm);
	strftime(r->date, sizeof(r->date), "%Y-%m-%dT%H:%M:%SZ", &tm);
	if (o->json) {
		r->json = fopen(o->json, "a");
		if (!r->json) {
			fprintf(stderr, "%s: %s: %s\n", prog, o->json,
				strerror(errno));
			return false;
		}
	}
	return true;
}

static void report_close(report_t *r)
{
	if (r->json)
		fclose(r->json);
	r->json = NULL;
}

/* A relay's (or worker's) command as a parameter, without the directory of its
 * program, so that runs from different build trees compare. */
static void param_cmd(report_t *r, const char *key, const char *cmd)
{
	size_t word = strcspn(cmd, " \t"), n = 0;
	const char *base = cmd;
	char flags[256];

	for (const char *c = cmd; c < cmd + word; c++)
		if (*c == '/')
			base = c + 1;
	/* A fleet's databases (--db 'URL' ...) are counted by "shards". */
	for (const char *c = base; *c && n < sizeof(flags) - 1; c++) {
		const char *end;

		if (strncmp(c, " --db '", 7) == 0 &&
		    (end = strchr(c + 7, '\''))) {
			c = end;
			continue;
		}
		flags[n++] = *c;
	}
	flags[n] = '\0';
	param_str(r, key, flags);
}

static void param_relay(report_t *r, const char *cmd)
{
	param_cmd(r, "relay", cmd);
}

/* Prints one figure and appends it as a JSON line. */
static void metric(report_t *r, const char *name, double value,
		   const char *unit, int decimals)
{
	printf("  %-30s %-14s %14.*f %s\n", r->label, name, decimals, value,
	       unit);
	fflush(stdout);
	if (!r->json)
		return;
	fputs("{\"system\":\"pgoutbox\",\"version\":", r->json);
	json_str(r->json, PGO_VERSION);
	if (r->o->run_id) {
		fputs(",\"run\":", r->json);
		json_str(r->json, r->o->run_id);
	}
	fputs(",\"workload\":", r->json);
	json_str(r->json, r->workload);
	fprintf(r->json, ",\"params\":{%s},\"metric\":", r->params);
	json_str(r->json, name);
	if (isfinite(value))
		fprintf(r->json, ",\"value\":%.*f", decimals, value);
	else
		fputs(",\"value\":null", r->json);
	fputs(",\"unit\":", r->json);
	json_str(r->json, unit);
	fputs(",\"date\":", r->json);
	json_str(r->json, r->date);
	fputs(",\"machine\":", r->json);
	json_str(r->json, r->machine);
	fputs("}\n", r->json);
	fflush(r->json);
}

/* Sorts ascending. */
static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array (n > 0). */
static double percentile(const double *sorted, size_t n, double p)
{
	size_t rank = (size_t)ceil(p / 100.0 * (double)n);

	return sorted[rank > 0 ? rank - 1 : 0];
}

/* --- PostgreSQL --- */

static PGconn *db_connect(const char *url)
{
	PGconn *c = PQconnectdb(url);

	if (PQstatus(c) != CONNECTION_OK) {
		fprintf(stderr, "%s: connecting: %s", prog, PQerrorMessage(c));
		PQfinish(c);
		return NULL;
	}
	return c;
}

/* Runs SQL that returns no rows we need; prints the error. */
static bool db_exec(PGconn *c, const char *sql)
{
	PGresult *res = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(res);
	bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;

	if (!ok)
		fprintf(stderr, "%s: %s: %s", prog, sql, PQerrorMessage(c));
	PQclear(res);
	return ok;
}

static bool db_prepare(PGconn *c, const char *name, const char *sql)
{
	PGresult *res = PQprepare(c, name, sql, 0, NULL);
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK;

	if (!ok)
		fprintf(stderr, "%s: preparing %s: %s", prog, sql,
			PQerrorMessage(c));
	PQclear(res);
	return ok;
}

/* enqueue, drain --hold-xmin: a session that holds a REPEATABLE READ
 * snapshot and an xid, as latency --hold-xmin does, until
 * snapshot_release().  NULL (printed) on failure. */
static PGconn *snapshot_hold(const char *url)
{
	PGconn *c = db_connect(url);

	if (c && !(db_exec(c, "BEGIN ISOLATION LEVEL REPEATABLE READ") &&
		   db_exec(c, "SELECT txid_current()") &&
		   db_exec(c, "SELECT 1 FROM pgoutbox.outbox LIMIT 1"))) {
		PQfinish(c);
		c = NULL;
	}
	return c;
}

static void snapshot_release(PGconn *c)
{
	if (c)
		db_exec(c, "ROLLBACK");
	PQfinish(c);
}

/* --- the events --- */

/* What every event carries: the same ~200-byte order everywhere, and a
 * ready batch of messages for pgo_send_bulk().  Read-only once built, so
 * threads share it. */
typedef struct corpus {
	char *payload;		    /* JSON text, exactly payload_bytes long */
	char keys[NKEYS][8];	    /* aggregate ids "k0".."k99" */
	pgo_msg_t msgs[FILL_BATCH]; /* event i has key keys[i % NKEYS] */
} corpus_t;

static corpus_t *corpus_new(long bytes)
{
	static const char head[] =
		"{\"order_id\":123456,\"customer\":\"customer-00042\","
		"\"items\":[{\"sku\":\"SKU-1001\",\"qty\":2,\"price\":19.99},"
		"{\"sku\":\"SKU-2002\",\"qty\":1,\"price\":5.49}],\"note\":\"";
	static const char tail[] = "\"}";
	size_t hl = strlen(head), tl = strlen(tail);
	size_t n = (size_t)bytes > hl + tl ? (size_t)bytes : hl + tl;
	corpus_t *cp = calloc(1, sizeof(*cp));

	if (!cp || !(cp->payload = malloc(n + 1))) {
		free(cp);
		fprintf(stderr, "%s: out of memory\n", prog);
		return NULL;
	}
	memcpy(cp->payload, head, hl);
	memset(cp->payload + hl, 'x', n - hl - tl);
	memcpy(cp->payload + n - tl, tail, tl + 1);
	for (int i = 0; i < NKEYS; i++)
		snprintf(cp->keys[i], sizeof(cp->keys[i]), "k%d", i);
	for (int i = 0; i < FILL_BATCH; i++)
		cp->msgs[i] = (pgo_msg_t){.size = sizeof(pgo_msg_t),
					  .topic = TOPIC,
					  .key = cp->keys[i % NKEYS],
					  .type = TYPE,
					  .payload = cp->payload};
	return cp;
}

static void corpus_destroy(corpus_t *cp)
{
	if (!cp)
		return;
	free(cp->payload);
	free(cp);
}

/* Writes n events into the outbox (or queue), FILL_BATCH per COPY (each
 * its own transaction; a WAL queue's: one send_batch_to() call each). */
static bool fill_outbox(PGconn *c, const char *queue, const corpus_t *cp,
			long n)
{
	pgo_error_t err;
	pgo_producer_t *p = pgo_producer_new(c, queue, &err);
	bool ok = true;

	if (!p) {
		fprintf(stderr, "%s: producer: %s\n", prog, err.msg);
		return false;
	}
	for (long done = 0; done < n && ok;) {
		size_t k =
			n - done < FILL_BATCH ? (size_t)(n - done) : FILL_BATCH;

		if (pgo_send_bulk(p, cp->msgs, k) != PGO_OK) {
			fprintf(stderr, "%s: fill: %s\n", prog,
				pgo_producer_errmsg(p));
			ok = false;
		}
		done += (long)k;
	}
	pgo_producer_destroy(p);
	return ok;
}

static int cmd_fill(const opts_t *o)
{
	corpus_t *cp = NULL;
	PGconn *c = NULL;
	report_t rep;
	int64_t t0, t1;
	int rc = 1;

	if (o->events <= 0) {
		fprintf(stderr, "%s: fill needs --events N\n", prog);
		return 2;
	}
	if (!report_open(&rep, o, "fill", "fill"))
		return 1;
	param_long(&rep, "events", o->events);
	param_long(&rep, "payload_bytes", o->payload_bytes);
	cp = corpus_new(o->payload_bytes);
	c = cp ? db_connect(o->db) : NULL;
	if (c) {
		t0 = now_ns();
		if (fill_outbox(c, o->queue, cp, o->events)) {
			t1 = now_ns();
			metric(&rep, "events_per_s",
			       (double)o->events * NSEC / (double)(t1 - t0),
			       "events/s", 0);
			rc = 0;
		}
	}
	PQfinish(c);
	corpus_destroy(cp);
	report_close(&rep);
	return rc;
}

/* --- relay child processes --- */

/* Hands --db to the relays through DATABASE_URL, which `pgoutbox relay`
 * reads, so the relay command need not repeat it.  Called before any
 * thread or child starts. */
static void relay_env(const opts_t *o)
{
	setenv("DATABASE_URL", o->db, 1);
}

/* A relay started by the bench. */
typedef struct child {
	pid_t pid;	    /* 0: none */
	bool gone;	    /* reaped */
	int status;	    /* wait status once gone */
	int64_t started_ns; /* when it was forked */
} child_t;

/* A relay installs its SIGTERM handler while it starts; one stopped
 * sooner dies of the signal.  Short drains wait for this age first. */
#define CHILD_MIN_AGE_NS (NSEC / 2)

/* Starts `sh -c "exec CMD"` with stdout on out_fd and stderr appended to
 * log (NULL: /dev/null).  False (printed) on failure. */
static bool child_start(child_t *ch, const char *cmd, int out_fd,
			const char *log)
{
	size_t n = strlen(cmd) + 8;
	char *line = malloc(n);
	int err_fd;
	pid_t parent;

	memset(ch, 0, sizeof(*ch));
	if (!line)
		return false;
	snprintf(line, n, "exec %s", cmd);
	err_fd = open(log ? log : "/dev/null",
		      O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (err_fd < 0) {
		fprintf(stderr, "%s: %s: %s\n", prog, log, strerror(errno));
		free(line);
		return false;
	}
	ch->started_ns = now_ns();
	parent = getpid();
	ch->pid = fork();
	if (ch->pid == 0) {
		/* A bench killed outright (SIGTERM, SIGKILL) stops its
		 * relay too, rather than leave it polling a server that its
		 * run's cleanup stops. */
		if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 ||
		    getppid() != parent)
			_exit(125);
		signal(SIGPIPE, SIG_DFL);
		if (dup2(out_fd, STDOUT_FILENO) < 0 ||
		    dup2(err_fd, STDERR_FILENO) < 0)
			_exit(126);
		execl("/bin/sh", "sh", "-c", line, (char *)NULL);
		_exit(127);
	}
	close(err_fd);
	free(line);
	if (ch->pid < 0) {
		fprintf(stderr, "%s: fork: %s\n", prog, strerror(errno));
		ch->pid = 0;
		return false;
	}
	return true;
}

/* True while the child runs; reaps it once it has exited. */
static bool child_alive(child_t *ch)
{
	if (!ch->pid || ch->gone)
		return false;
	if (waitpid(ch->pid, &ch->status, WNOHANG) == ch->pid)
		ch->gone = true;
	return !ch->gone;
}

/* While a drain or a work run waits for its queue to empty: false (and
 * why, on stderr) when a child exited or the deadline passed. */
static bool wait_ok(child_t *chs, long n, const char *who, const char *what,
		    int64_t t1, int64_t deadline, double timeout)
{
	for (long i = 0; i < n; i++)
		if (!child_alive(&chs[i])) {
			fprintf(stderr,
				"%s: %s %d exited during the run "
				"(see --relay-log)\n",
				prog, who, (int)chs[i].pid);
			return false;
		}
	if (t1 > deadline) {
		fprintf(stderr, "%s: the %s was not empty after %g s\n", prog,
			what, timeout);
		return false;
	}
	return true;
}

static void child_describe_exit(const child_t *ch, char *buf, size_t size)
{
	if (WIFEXITED(ch->status))
		snprintf(buf, size, "exit %d", WEXITSTATUS(ch->status));
	else if (WIFSIGNALED(ch->status))
		snprintf(buf, size, "killed by signal %d",
			 WTERMSIG(ch->status));
	else
		snprintf(buf, size, "status %d", ch->status);
}

/* SIGTERMs every live child, waits up to 15 s, then SIGKILLs the rest.
 * True when each one exited 0 (a relay's promise on SIGTERM). */
static bool children_stop(child_t *chs, long n)
{
	int64_t deadline = now_ns() + 15 * NSEC;
	bool clean = true;
	char how[64];

	for (long i = 0; i < n; i++)
		if (chs[i].pid &&
		    now_ns() < chs[i].started_ns + CHILD_MIN_AGE_NS)
			sleep_until(chs[i].started_ns + CHILD_MIN_AGE_NS);
	for (long i = 0; i < n; i++)
		if (child_alive(&chs[i]))
			kill(chs[i].pid, SIGTERM);
	for (long i = 0; i < n; i++) {
		while (child_alive(&chs[i]) && now_ns() < deadline)
			sleep_until(now_ns() + NSEC / 100);
		if (child_alive(&chs[i])) {
			fprintf(stderr,
				"%s: relay %d ignored SIGTERM for 15 "
				"s: killing it\n",
				prog, (int)chs[i].pid);
			kill(chs[i].pid, SIGKILL);
			waitpid(chs[i].pid, &chs[i].status, 0);
			chs[i].gone = true;
			clean = false;
			continue;
		}
		if (chs[i].pid && !(WIFEXITED(chs[i].status) &&
				    !WEXITSTATUS(chs[i].status))) {
			child_describe_exit(&chs[i], how, sizeof(how));
			fprintf(stderr,
				"%s: relay %d ended with %s (0 expected)\n",
				prog, (int)chs[i].pid, how);
			clean = false;
		}
	}
	return clean;
}

/* --- enqueue --- */

typedef enum enq_mode {
	ENQ_SEND,	/* SELECT pgoutbox.send(...), one per transaction */
	ENQ_BULK,	/* pgo_send_bulk() of BULK_BATCH per transaction */
	ENQ_INSERT,	/* plain INSERT of one row into bench_plain */
	ENQ_INSERT100,	/* COPY of BULK_BATCH rows into bench_plain */
	ENQ_SEND_QUIET, /* send() with its NOTIFY trigger skipped */
	ENQ_BATCH,	/* pgoutbox.send_batch() of BULK_BATCH events */
	ENQ_INSERT_OB,	/* the same rows as one multi-row INSERT */
	ENQ_COPY_OB,	/* the same rows as one bare COPY (no library) */
	ENQ_INSERT_OB1	/* one-row INSERT straight into the outbox */
} enq_mode_t;

/* What the enqueue clients share. */
typedef struct enqueue {
	enq_mode_t mode;
	corpus_t *corpus; /* read-only once built */
	char *copy_rows;  /* insert100, copy-outbox: BULK_BATCH rows */
	size_t copy_len;  /* its length */
	char *batch[3];	  /* batch: keys, types, payloads (array literals) */
	char *insert_sql; /* insert-outbox: the multi-row INSERT */
	const char **insert_params; /* ... and its 4 x BULK_BATCH values */
	atomic_bool stop;	    /* set by the main thread at the end */
} enqueue_t;

/* One enqueue client: a thread with its own connection. */
typedef struct client {
	pthread_t thread;
	PGconn *conn;
	pgo_producer_t *producer;    /* bulk mode only */
	enqueue_t *run;		     /* shared settings */
	atomic_uint_fast64_t events; /* events committed so far */
	atomic_bool failed;	     /* stopped on an error (printed) */
} client_t;

/* A COPY of BULK_BATCH rows into bench_plain; returns the rows or -1. */
static int copy_plain(client_t *cl, const char *sql)
{
	PGresult *res = PQexec(cl->conn, sql);
	int n = BULK_BATCH;

	if (PQresultStatus(res) != PGRES_COPY_IN) {
		PQclear(res);
		return -1;
	}
	PQclear(res);
	if (PQputCopyData(cl->conn, cl->run->copy_rows,
			  (int)cl->run->copy_len) != 1 ||
	    PQputCopyEnd(cl->conn, NULL) != 1)
		n = -1;
	while ((res = PQgetResult(cl->conn)) != NULL) {
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
			n = -1;
		PQclear(res);
	}
	return n;
}

/* One transaction of the client's mode; returns its events or -1. */
static int client_step(client_t *cl)
{
	const corpus_t *cp = cl->run->corpus;
	const char *params[4] = {TOPIC, cp->keys[0], TYPE, cp->payload};
	PGresult *res;
	int n = 1;

	switch (cl->run->mode) {
	case ENQ_SEND:
	case ENQ_SEND_QUIET:
		res = PQexecPrepared(cl->conn, "bench_send", 4, params, NULL,
				     NULL, 0);
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			n = -1;
		PQclear(res);
		return n;
	case ENQ_INSERT_OB1: /* the event's 4 values, into the outbox */
	case ENQ_INSERT: /* its payload alone, into bench_plain */ {
		bool ob = cl->run->mode == ENQ_INSERT_OB1;

		res = PQexecPrepared(cl->conn, "bench_insert", ob ? 4 : 1,
				     ob ? params : params + 3, NULL, NULL, 0);
		if (PQresultStatus(res) != PGRES_COMMAND_OK)
			n = -1;
		PQclear(res);
		return n;
	}
	case ENQ_BULK:
		/* COPY in autocommit: one transaction. */
		if (pgo_send_bulk(cl->producer, cp->msgs, BULK_BATCH) != PGO_OK)
			return -1;
		return BULK_BATCH;
	case ENQ_INSERT100:
		return copy_plain(cl, "COPY bench_plain (payload) FROM STDIN");
	case ENQ_COPY_OB:
		return copy_plain(cl, "COPY pgoutbox.outbox (topic, key, type, "
				      "payload) FROM STDIN");
	case ENQ_BATCH: {
		const char *bp[4] = {TOPIC, cl->run->batch[0],
				     cl->run->batch[1], cl->run->batch[2]};

		res = PQexecPrepared(cl->conn, "bench_batch", 4, bp, NULL, NULL,
				     0);
		n = PQresultStatus(res) == PGRES_TUPLES_OK ? BULK_BATCH : -1;
		PQclear(res);
		return n;
	}
	case ENQ_INSERT_OB:
		res = PQexecPrepared(cl->conn, "bench_insert_ob",
				     4 * BULK_BATCH, cl->run->insert_params,
				     NULL, NULL, 0);
		n = PQresultStatus(res) == PGRES_COMMAND_OK ? BULK_BATCH : -1;
		PQclear(res);
		return n;
	}
	return -1;
}

static void *client_main(void *arg)
{
	client_t *cl = arg;

	while (!atomic_load(&cl->run->stop)) {
		int n = client_step(cl);

		if (n < 0) {
			fprintf(stderr, "%s: enqueue: %s%s", prog,
				PQerrorMessage(cl->conn),
				cl->producer ? pgo_producer_errmsg(cl->producer)
					     : "");
			atomic_store(&cl->failed, true);
			break;
		}
		atomic_fetch_add(&cl->events, (uint_fast64_t)n);
	}
	return NULL;
}

/* Connects a client and prepares what its mode runs. */
static bool client_setup(client_t *cl, const opts_t *o)
{
	pgo_error_t err;

	cl->conn = db_connect(o->db);
	if (!cl->conn)
		return false;
	switch (cl->run->mode) {
	case ENQ_SEND: return db_prepare(cl->conn, "bench_send", o->send_sql);
	case ENQ_SEND_QUIET:
		/* The replica role skips ordinary triggers: what send() costs
		 * without the wake-up NOTIFY and its commit-time lock.  Needs
		 * a superuser; only a benchmark does this. */
		return db_exec(cl->conn,
			       "SET session_replication_role = replica") &&
		       db_prepare(cl->conn, "bench_send", o->send_sql);
	case ENQ_INSERT:
		return db_prepare(cl->conn, "bench_insert",
				  "INSERT INTO bench_plain (payload) "
				  "VALUES ($1::jsonb)");
	case ENQ_INSERT_OB1:
		return db_prepare(
			cl->conn, "bench_insert",
			"INSERT INTO pgoutbox.outbox (topic, key, "
			"type, payload) VALUES ($1, $2, $3, $4::jsonb)");
	case ENQ_BULK:
		cl->producer = pgo_producer_new(cl->conn, o->queue, &err);
		if (!cl->producer)
			fprintf(stderr, "%s: producer: %s\n", prog, err.msg);
		return cl->producer != NULL;
	case ENQ_INSERT100:
	case ENQ_COPY_OB: return true;
	case ENQ_BATCH:
		return db_prepare(cl->conn, "bench_batch",
				  "SELECT pgoutbox.send_batch($1::text, "
				  "$2::text[], $3::text[], $4::jsonb[])");
	case ENQ_INSERT_OB:
		return db_prepare(cl->conn, "bench_insert_ob",
				  cl->run->insert_sql);
	}
	return false;
}

/* batch, insert-outbox, copy-outbox: the same BULK_BATCH events (keys
 * k0..k99, the corpus payload) in the form each mode sends.  The payload
 * holds no tab, newline or backslash. */
static bool batch_forms(enqueue_t *run)
{
	const corpus_t *cp = run->corpus;
	size_t pl = strlen(cp->payload), kl = 8, i;
	char *k, *t, *p, *sql, *c;

	k = run->batch[0] = malloc(BULK_BATCH * (kl + 1) + 3);
	t = run->batch[1] = malloc(BULK_BATCH * (sizeof(TYPE) + 1) + 3);
	p = run->batch[2] = malloc(BULK_BATCH * (2 * pl + 3) + 3);
	sql = run->insert_sql = malloc(BULK_BATCH * 48 + 128);
	run->insert_params = malloc(4 * BULK_BATCH * sizeof(char *));
	c = run->copy_rows = malloc(
		BULK_BATCH * (sizeof(TOPIC) + kl + sizeof(TYPE) + pl + 4));
	if (!k || !t || !p || !sql || !run->insert_params || !c)
		return false;
	*k++ = '{', *t++ = '{', *p++ = '{';
	sql += sprintf(sql, "INSERT INTO pgoutbox.outbox (topic, key, type, "
			    "payload) VALUES ");
	for (i = 0; i < BULK_BATCH; i++) {
		const char *key = cp->keys[i % NKEYS];

		k += sprintf(k, "%s%s", i ? "," : "", key);
		t += sprintf(t, "%s%s", i ? "," : "", TYPE);
		/* An array element in double quotes: its quotes escaped. */
		if (i)
			*p++ = ',';
		*p++ = '"';
		for (const char *q = cp->payload; *q; q++) {
			if (*q == '"')
				*p++ = '\\';
			*p++ = *q;
		}
		*p++ = '"';
		sql += sprintf(sql, "%s($%zu,$%zu,$%zu,$%zu::jsonb)",
			       i ? "," : "", 4 * i + 1, 4 * i + 2, 4 * i + 3,
			       4 * i + 4);
		run->insert_params[4 * i] = TOPIC;
		run->insert_params[4 * i + 1] = key;
		run->insert_params[4 * i + 2] = TYPE;
		run->insert_params[4 * i + 3] = cp->payload;
		c += sprintf(c, "%s\t%s\t%s\t%s\n", TOPIC, key, TYPE,
			     cp->payload);
	}
	strcpy(k, "}"), strcpy(t, "}"), strcpy(p, "}");
	run->copy_len = (size_t)(c - run->copy_rows);
	return true;
}

/* The events committed by all clients so far. */
static uint64_t clients_total(client_t *cls, long n, bool *failed)
{
	uint64_t sum = 0;

	for (long i = 0; i < n; i++) {
		sum += atomic_load(&cls[i].events);
		if (atomic_load(&cls[i].failed))
			*failed = true;
	}
	return sum;
}

/* Sleeps until t unless a client fails first; false on a failure.
 * Prints the events so far every 5 s (the progress of a long run). */
static bool clients_wait(client_t *cls, long n, int64_t t, const char *label)
{
	int64_t t0 = now_ns(), next = t0 + 5 * NSEC;
	bool failed = false;

	while (now_ns() < t) {
		int64_t step = now_ns() + NSEC / 20;
		uint64_t sum;

		sleep_until(step < t ? step : t);
		sum = clients_total(cls, n, &failed);
		if (failed)
			return false;
		if (now_ns() >= next && now_ns() < t) {
			printf("  %-30s %6.1f s: %llu events\n", label,
			       (double)(now_ns() - t0) / NSEC,
			       (unsigned long long)sum);
			fflush(stdout);
			next += 5 * NSEC;
		}
	}
	return true;
}

static bool parse_mode(const char *s, enq_mode_t *m)
{
	static const char *const names[] = {
		"send",		 "bulk",	"insert",
		"insert100",	 "send-quiet",	"batch",
		"insert-outbox", "copy-outbox", "insert-outbox1"};

	for (int i = 0; s && i < 9; i++)
		if (strcmp(s, names[i]) == 0) {
			*m = (enq_mode_t)i;
			return true;
		}
	fprintf(stderr,
		"%s: --mode must be send, send-quiet, bulk, insert, "
		"insert100, batch, insert-outbox, copy-outbox or "
		"insert-outbox1\n",
		prog);
	return false;
}

/* Creates and empties the scratch table of the insert modes. */
static bool plain_table_reset(const char *url)
{
	PGconn *c = db_connect(url);
	bool ok = c && db_exec(c, "SET client_min_messages = warning") &&
		  db_exec(c, "CREATE TABLE IF NOT EXISTS bench_plain ("
			     "id bigserial PRIMARY KEY, payload jsonb)") &&
		  db_exec(c, "TRUNCATE bench_plain");

	PQfinish(c);
	return ok;
}

static int cmd_enqueue(const opts_t *o)
{
	enqueue_t run = {0};
	child_t relay = {0};
	client_t *cls = NULL;
	PGconn *holder = NULL; /* --hold-xmin */
	report_t rep;
	char label[96];
	long started = 0;
	uint64_t n0 = 0, n1 = 0;
	int64_t t0 = 0, t1 = 0;
	bool ok = true, failed = false;

	if (!parse_mode(o->mode, &run.mode))
		return 2;
	if (o->queue && run.mode != ENQ_SEND && run.mode != ENQ_BULK) {
		fprintf(stderr, "%s: --queue goes with --mode send or bulk\n",
			prog);
		return 2;
	}
	if (o->seconds <= 0 || o->clients > MAX_CLIENTS) {
		fprintf(stderr,
			"%s: enqueue needs --seconds S and at most %d "
			"--clients\n",
			prog, MAX_CLIENTS);
		return 2;
	}
	snprintf(label, sizeof(label), "enqueue %s x%ld", o->mode, o->clients);
	if (!report_open(&rep, o, "enqueue", label))
		return 1;
	param_str(&rep, "mode", o->mode);
	if (o->queue)
		param_str(&rep, "queue", o->queue);
	if (o->hold_xmin)
		param_str(&rep, "hold_xmin", "yes");
	param_long(&rep, "clients", o->clients);
	param_num(&rep, "seconds", o->seconds);
	param_long(&rep, "payload_bytes", o->payload_bytes);
	run.corpus = corpus_new(o->payload_bytes);
	cls = calloc((size_t)o->clients, sizeof(*cls));
	ok = run.corpus && cls;
	if (ok && (run.mode == ENQ_INSERT || run.mode == ENQ_INSERT100))
		ok = plain_table_reset(o->db);
	if (ok && run.mode == ENQ_INSERT100) {
		size_t row = strlen(run.corpus->payload) + 1;

		run.copy_len = row * BULK_BATCH;
		run.copy_rows = malloc(run.copy_len);
		ok = run.copy_rows != NULL;
		/* The payload holds no tab, newline or backslash. */
		for (size_t i = 0; ok && i < BULK_BATCH; i++) {
			memcpy(run.copy_rows + i * row, run.corpus->payload,
			       row - 1);
			run.copy_rows[i * row + row - 1] = '\n';
		}
	}
	if (ok && (run.mode == ENQ_BATCH || run.mode == ENQ_INSERT_OB ||
		   run.mode == ENQ_COPY_OB))
		ok = batch_forms(&run);
	for (long i = 0; ok && i < o->clients; i++) {
		cls[i].run = &run;
		ok = client_setup(&cls[i], o);
	}
	/* --hold-xmin: a snapshot held through the whole run. */
	if (ok && o->hold_xmin)
		ok = (holder = snapshot_hold(o->db)) != NULL;
	/* --relay-cmd: a relay listens (and drains) meanwhile. */
	if (ok && o->relay_cmd) {
		int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

		relay_env(o);
		ok = null_fd >= 0 &&
		     child_start(&relay, o->relay_cmd, null_fd, o->relay_log);
		if (null_fd >= 0)
			close(null_fd);
		param_relay(&rep, o->relay_cmd);
	}
	for (long i = 0; ok && i < o->clients; i++) {
		if (pthread_create(&cls[i].thread, NULL, client_main,
				   &cls[i]) != 0) {
			fprintf(stderr, "%s: pthread_create failed\n", prog);
			ok = false;
			break;
		}
		started++;
	}
	if (ok) {
		int64_t start = now_ns();

		ok = clients_wait(cls, o->clients,
				  start + (int64_t)(o->warmup * NSEC),
				  rep.label);
		t0 = now_ns();
		n0 = clients_total(cls, o->clients, &failed);
		ok = ok &&
		     clients_wait(cls, o->clients,
				  t0 + (int64_t)(o->seconds * NSEC), rep.label);
		t1 = now_ns();
		n1 = clients_total(cls, o->clients, &failed);
	}
	atomic_store(&run.stop, true);
	for (long i = 0; i < started; i++)
		pthread_join(cls[i].thread, NULL);
	snapshot_release(holder);
	if (relay.pid && !child_alive(&relay)) {
		fprintf(stderr, "%s: the relay exited (see --relay-log)\n",
			prog);
		ok = false;
	}
	if (relay.pid && !children_stop(&relay, 1))
		ok = false;
	if (ok && !failed) {
		double rate = (double)(n1 - n0) * NSEC / (double)(t1 - t0);
		int per_tx = run.mode == ENQ_SEND || run.mode == ENQ_INSERT ||
					     run.mode == ENQ_SEND_QUIET
				     ? 1
				     : BULK_BATCH;

		metric(&rep, "events_per_s", rate, "events/s", 0);
		printf("  %-30s %-14s %14.0f tx/s\n", rep.label, "transactions",
		       rate / per_tx);
	}
	for (long i = 0; cls && i < o->clients; i++) {
		pgo_producer_destroy(cls[i].producer);
		PQfinish(cls[i].conn);
	}
	free(cls);
	free(run.copy_rows);
	for (int i = 0; i < 3; i++)
		free(run.batch[i]);
	free(run.insert_sql);
	free(run.insert_params);
	corpus_destroy(run.corpus);
	report_close(&rep);
	return ok && !failed ? 0 : 1;
}

/* --- latency --- */

/* One event as its producer saw it. */
typedef struct sent {
	int64_t id;	   /* RETURNING id of pgoutbox.send() */
	int64_t commit_ns; /* right after the autocommit returned */
	bool warmup;	   /* committed before the measured start (by
			      time: producers that lag take longer than
			      the scheduled warm-up): not measured */
} sent_t;

/* One NDJSON line as the reader saw it. */
typedef struct arrival {
	int64_t id; /* parsed from the line's {"id":N, */
	int64_t ns; /* when the line was read */
} arrival_t;

/* What the latency threads share. */
typedef struct latency {
	int64_t start_ns;      /* event k is due at start_ns + k * period_ns */
	double period_ns;      /* 1e9 / rate */
	int64_t measure_ns;    /* when the first measured event is due */
	int64_t end_ns;	       /* producers that lag stop here */
	long per_tx;	       /* events per transaction */
	long ntx;	       /* transactions scheduled, warm-up included */
	long warm;	       /* events scheduled in the warm-up */
	long producers;	       /* producer p sends transactions p, p + P, ... */
	corpus_t *corpus;      /* read-only once built */
	int pipe_fd;	       /* read end of the relay's stdout */
	arrival_t *arr;	       /* the reader's lines; reader-owned until join */
	size_t narr, carr;     /* count and capacity of arr */
	long bad_lines;	       /* lines not starting with {"id":N */
	atomic_long arrived;   /* lines with an id read so far */
	atomic_long committed; /* events the producers committed so far */
	atomic_long done;      /* producers that finished their share */
	atomic_bool read_oom;  /* the reader ran out of memory */
} latency_t;

/* One producer thread of the latency workload. */
typedef struct producer_thr {
	pthread_t thread;
	PGconn *conn;
	latency_t *run;
	long index;	    /* its first transaction; then every P-th */
	sent_t *sent;	    /* its events, in send order */
	size_t nsent;	    /* how many it sent */
	int64_t max_lag_ns; /* how far behind the schedule it fell */
	bool failed;	    /* stopped on an error (printed) */
} producer_thr_t;

/* Sends one transaction of n events (n > 1: n send() calls in one
 * statement) and stores their ids; returns false (printed) on error. */
static bool send_tx(PGconn *c, const corpus_t *cp, long k, long n, int64_t *ids)
{
	char count[24];
	const char *params[5] = {TOPIC, cp->keys[k % NKEYS], TYPE, cp->payload,
				 count};
	PGresult *res;
	bool ok;

	snprintf(count, sizeof(count), "%ld", n);
	res = PQexecPrepared(c, n == 1 ? "bench_send" : "bench_send_n",
			     n == 1 ? 4 : 5, params, NULL, NULL, 0);
	ok = PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == n;
	for (long i = 0; ok && i < n; i++)
		ids[i] = strtoll(PQgetvalue(res, (int)i, 0), NULL, 10);
	if (!ok)
		fprintf(stderr, "%s: send: %s", prog, PQerrorMessage(c));
	PQclear(res);
	return ok;
}

/* Sends this producer's share of the schedule, open loop: each
 * transaction at its due time however long the previous one took. */
static void *producer_main(void *arg)
{
	producer_thr_t *p = arg;
	latency_t *run = p->run;
	int64_t ids[MAX_PER_TX];

	for (long t = p->index; t < run->ntx; t += run->producers) {
		long k = t * run->per_tx; /* its first event */
		int64_t due =
			run->start_ns + (int64_t)((double)k * run->period_ns);
		int64_t now = now_ns(), done;

		if (now >= run->end_ns)
			break; /* lagging: the run is bounded in time */
		if (now < due)
			sleep_until(due);
		else if (now - due > p->max_lag_ns)
			p->max_lag_ns = now - due;
		if (!send_tx(p->conn, run->corpus, k, run->per_tx, ids)) {
			p->failed = true;
			break;
		}
		done = now_ns();
		for (long i = 0; i < run->per_tx; i++)
			p->sent[p->nsent++] =
				(sent_t){.id = ids[i],
					 .commit_ns = done,
					 .warmup = done < run->measure_ns};
		atomic_fetch_add(&run->committed, run->per_tx);
	}
	atomic_fetch_add(&run->done, 1);
	return NULL;
}

/* Records one line of the relay's output. */
static void reader_line(latency_t *run, const char *line, size_t len,
			int64_t ns)
{
	static const char prefix[] = "{\"id\":";
	size_t pl = sizeof(prefix) - 1;
	char *end;
	int64_t id;

	if (len <= pl || memcmp(line, prefix, pl) != 0) {
		run->bad_lines++;
		return;
	}
	id = strtoll(line + pl, &end, 10);
	if (end == line + pl) {
		run->bad_lines++;
		return;
	}
	if (run->narr == run->carr) {
		size_t cap = run->carr ? run->carr * 2 : 65536;
		arrival_t *a = realloc(run->arr, cap * sizeof(*a));

		if (!a) {
			atomic_store(&run->read_oom, true);
			return;
		}
		run->arr = a;
		run->carr = cap;
	}
	run->arr[run->narr++] = (arrival_t){.id = id, .ns = ns};
	atomic_fetch_add(&run->arrived, 1);
}

/* Reads the relay's stdout until EOF, stamping each line on arrival. */
static void *reader_main(void *arg)
{
	latency_t *run = arg;
	size_t size = 256 * 1024, len = 0;
	char *buf = malloc(size);
	bool skipping = false; /* inside a line too long for buf */

	if (!buf) {
		atomic_store(&run->read_oom, true);
		return NULL;
	}
	for (;;) {
		ssize_t n = read(run->pipe_fd, buf + len, size - len);
		int64_t ns = now_ns();
		size_t start = 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += (size_t)n;
		for (size_t i = 0; i < len; i++) {
			if (buf[i] != '\n')
				continue;
			if (!skipping)
				reader_line(run, buf + start, i - start, ns);
			skipping = false;
			start = i + 1;
		}
		if (start == 0 && len == size) {
			skipping = true;
			run->bad_lines++;
			start = len;
		}
		memmove(buf, buf + start, len - start);
		len -= start;
	}
	free(buf);
	return NULL;
}

static int cmp_sent(const void *a, const void *b)
{
	int64_t x = ((const sent_t *)a)->id, y = ((const sent_t *)b)->id;

	return (x > y) - (x < y);
}

static int cmp_arrival(const void *a, const void *b)
{
	int64_t x = ((const arrival_t *)a)->id, y = ((const arrival_t *)b)->id;

	return (x > y) - (x < y);
}

/* Waits until n lines arrived or the deadline passed; false if the relay
 * died meanwhile. */
static bool wait_arrivals(latency_t *run, child_t *relay, long n,
			  int64_t deadline)
{
	while (atomic_load(&run->arrived) < n && now_ns() < deadline) {
		if (!child_alive(relay))
			return false;
		sleep_until(now_ns() + NSEC / 1000);
	}
	return true;
}

/* What the main thread saw at the end of one progress step. */
typedef struct sample {
	int64_t ns;	/* when */
	long committed; /* events the producers had committed */
	long arrived;	/* events the sink had received */
	long dead;	/* n_dead_tup of the outbox; -1: unknown */
	bool held;	/* the snapshot was held meanwhile */
	double wall;	/* when, as Unix time */
} sample_t;

/* The main thread's view of a latency run: progress, the held snapshot
 * and the samples the windows are reported from. */
typedef struct monitor {
	PGconn *stats;	  /* reads pg_stat_user_tables */
	PGconn *holder;	  /* holds the snapshot (--hold-xmin); or NULL */
	int64_t step_ns;  /* between samples: --window, or 5 s */
	int64_t hold_end; /* when the held snapshot is released */
	sample_t *s;	  /* the samples, in time order */
	size_t n, cap;	  /* their count and capacity */
	size_t nwin;	  /* the first nwin samples end windows; the
			     last one may be the final look */
	bool holding;	  /* the snapshot is held now */
	bool released;	  /* it was held and released */
} monitor_t;

/* The dead tuples the statistics count in the outbox; -1 if unknown. */
static long outbox_dead_tuples(PGconn *c)
{
	PGresult *res = PQexec(c, "SELECT n_dead_tup FROM pg_stat_user_tables "
				  "WHERE schemaname = 'pgoutbox' AND relname "
				  "= 'outbox'");
	long n = -1;

	if (PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		n = strtol(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return n;
}

/* Records a sample and prints it as the progress line. */
static bool monitor_sample(monitor_t *m, latency_t *run, const char *label)
{
	sample_t *x;

	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		sample_t *a = realloc(m->s, cap * sizeof(*a));

		if (!a)
			return false;
		m->s = a;
		m->cap = cap;
	}
	x = &m->s[m->n++];
	x->ns = now_ns();
	{
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		x->wall = (double)ts.tv_sec + (double)ts.tv_nsec / NSEC;
	}
	x->committed = atomic_load(&run->committed);
	x->arrived = atomic_load(&run->arrived) - 1; /* minus the probe */
	x->dead = outbox_dead_tuples(m->stats);
	x->held = m->holding;
	printf("  %-30s %6.1f s: committed %ld, delivered %ld, backlog %ld, "
	       "dead tuples %ld%s\n",
	       label, (double)(x->ns - run->measure_ns) / NSEC, x->committed,
	       x->arrived, x->committed - x->arrived, x->dead,
	       m->holding ? " (snapshot held)" : "");
	fflush(stdout);
	return true;
}

/* Runs while the producers send: takes a sample every step, and holds
 * the snapshot from the measured start for --seconds.  False (printed)
 * when the relay died or the holder failed. */
static bool monitor_run(monitor_t *m, const opts_t *o, latency_t *run,
			child_t *relay, const char *label)
{
	int64_t next = run->measure_ns + m->step_ns;
	bool ok = true;

	while (ok && atomic_load(&run->done) < run->producers) {
		int64_t now = now_ns();

		if (m->holder && !m->holding && !m->released &&
		    now >= run->measure_ns) {
			ok = db_exec(m->holder,
				     "BEGIN ISOLATION LEVEL REPEATABLE READ") &&
			     db_exec(m->holder, "SELECT txid_current()") &&
			     db_exec(m->holder, "SELECT 1 FROM pgoutbox.outbox "
						"LIMIT 1");
			m->holding = ok;
			printf("  %-30s snapshot taken: xmin held for %g s\n",
			       label, o->seconds);
		}
		if (ok && now >= next) {
			ok = monitor_sample(m, run, label);
			next += m->step_ns;
		}
		if (ok && m->holding && now >= m->hold_end) {
			ok = db_exec(m->holder, "COMMIT");
			m->holding = false;
			m->released = true;
			printf("  %-30s snapshot released\n", label);
		}
		if (ok && !child_alive(relay)) {
			fprintf(stderr,
				"%s: the relay died during the run "
				"(see --relay-log)\n",
				prog);
			ok = false;
		}
		sleep_until(now_ns() + NSEC / 100);
	}
	if (m->holding) {
		db_exec(m->holder, "COMMIT");
		m->holding = false;
		m->released = true;
	}
	return ok;
}

/* Writes the latency CDF, at most about 2,000 points: "ms fraction". */
static void write_cdf(const char *path, const double *sorted, size_t n)
{
	FILE *f = fopen(path, "w");
	size_t step = n / 2000 + 1;

	if (!f) {
		fprintf(stderr, "%s: %s: %s\n", prog, path, strerror(errno));
		return;
	}
	fprintf(f, "# latency_ms fraction_at_or_below (%zu events)\n", n);
	for (size_t i = 0; i < n; i += step)
		fprintf(f, "%.4f %.6f\n", sorted[i],
			(double)(i + 1) / (double)n);
	if (n)
		fprintf(f, "%.4f 1\n", sorted[n - 1]);
	fclose(f);
}

/* One JSON line of a window: workload "<workload>-window", the params of
 * the workload plus t (seconds from the measured start to the window's
 * end), at (that end as Unix time, to line it up with the relay's log)
 * and held. */
static void window_metric(report_t *r, double t, double at, bool held,
			  const char *name, double value, const char *unit,
			  int decimals)
{
	if (!r->json)
		return;
	fputs("{\"system\":\"pgoutbox\",\"version\":", r->json);
	json_str(r->json, PGO_VERSION);
	if (r->o->run_id) {
		fputs(",\"run\":", r->json);
		json_str(r->json, r->o->run_id);
	}
	fprintf(r->json,
		",\"workload\":\"%s-window\",\"params\":{%s,\"t\":%.1f,"
		"\"at\":%.3f,\"held\":%s},\"metric\":",
		r->workload, r->params, t, at, held ? "true" : "false");
	json_str(r->json, name);
	if (isfinite(value))
		fprintf(r->json, ",\"value\":%.*f", decimals, value);
	else
		fputs(",\"value\":null", r->json);
	fputs(",\"unit\":", r->json);
	json_str(r->json, unit);
	fputs(",\"date\":", r->json);
	json_str(r->json, r->date);
	fputs(",\"machine\":", r->json);
	json_str(r->json, r->machine);
	fputs("}\n", r->json);
	fflush(r->json);
}

/* Events the sink received in [from, to). */
static long arrivals_between(const latency_t *run, int64_t from, int64_t to)
{
	long n = 0;

	for (size_t i = 0; i < run->narr; i++)
		n += run->arr[i].ns >= from && run->arr[i].ns < to;
	return n;
}

/* Percentiles of the latencies lat[i] whose commit fell in [from, to):
 * fills p50 and p99 (NAN when none) and returns how many. */
static size_t latency_between(const double *lat, const int64_t *at, size_t n,
			      int64_t from, int64_t to, double *p50,
			      double *p99)
{
	double *v = malloc((n ? n : 1) * sizeof(*v));
	size_t k = 0;

	*p50 = *p99 = NAN;
	if (!v)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (at[i] >= from && at[i] < to)
			v[k++] = lat[i];
	if (k) {
		qsort(v, k, sizeof(*v), cmp_double);
		*p50 = percentile(v, k, 50);
		*p99 = percentile(v, k, 99);
	}
	free(v);
	return k;
}

/* The figures over time (--window) and, with --hold-xmin, during and
 * after the held snapshot. */
static void latency_over_time(report_t *rep, const opts_t *o,
			      const latency_t *run, const monitor_t *m,
			      const double *lat, const int64_t *at, size_t n)
{
	int64_t t0 = run->measure_ns, prev = t0;
	long backlog_max = 0, dead_max = -1;
	double backlog_sum = 0, p99_max = 0, p50, p99;
	size_t nw = 0;

	for (size_t i = 0; i < m->nwin; i++) {
		const sample_t *x = &m->s[i];
		long backlog = x->committed - x->arrived;
		double t = (double)(x->ns - t0) / NSEC;
		double secs = (double)(x->ns - prev) / NSEC;
		long got = arrivals_between(run, prev, x->ns);
		size_t k = latency_between(lat, at, n, prev, x->ns, &p50, &p99);

		window_metric(rep, t, x->wall, x->held, "p50_ms", p50, "ms", 3);
		window_metric(rep, t, x->wall, x->held, "p99_ms", p99, "ms", 3);
		window_metric(rep, t, x->wall, x->held, "delivered_per_s",
			      (double)got / secs, "events/s", 0);
		window_metric(rep, t, x->wall, x->held, "backlog",
			      (double)backlog, "events", 0);
		window_metric(rep, t, x->wall, x->held, "dead_tuples",
			      (double)x->dead, "tuples", 0);
		if (backlog > backlog_max)
			backlog_max = backlog;
		if (x->held && x->dead > dead_max)
			dead_max = x->dead;
		if (k && p99 > p99_max)
			p99_max = p99;
		backlog_sum += (double)backlog;
		nw++;
		prev = x->ns;
	}
	if (nw) {
		metric(rep, "backlog_max", (double)backlog_max, "events", 0);
		metric(rep, "backlog_mean", backlog_sum / (double)nw, "events",
		       0);
		metric(rep, "p99_ms_worst_window", p99_max, "ms", 3);
	}
	if (o->hold_xmin) {
		int64_t mid = t0 + (int64_t)(o->seconds * NSEC);
		int64_t end = mid + (int64_t)(o->after * NSEC);

		latency_between(lat, at, n, t0, mid, &p50, &p99);
		metric(rep, "during_p50_ms", p50, "ms", 3);
		metric(rep, "during_p99_ms", p99, "ms", 3);
		metric(rep, "during_delivered_per_s",
		       (double)arrivals_between(run, t0, mid) / o->seconds,
		       "events/s", 0);
		metric(rep, "during_dead_tuples_max", (double)dead_max,
		       "tuples", 0);
		if (m->nwin) {
			metric(rep, "during_backlog_max", (double)backlog_max,
			       "events", 0);
		}
		if (o->after > 0) {
			latency_between(lat, at, n, mid, end, &p50, &p99);
			metric(rep, "after_p50_ms", p50, "ms", 3);
			metric(rep, "after_p99_ms", p99, "ms", 3);
			metric(rep, "after_delivered_per_s",
			       (double)arrivals_between(run, mid, end) /
				       o->after,
			       "events/s", 0);
		}
		if (m->n > m->nwin)
			metric(rep, "end_dead_tuples",
			       (double)m->s[m->n - 1].dead, "tuples", 0);
	} else if (o->window > 0 && prev > t0) {
		metric(rep, "delivered_per_s",
		       (double)arrivals_between(run, t0, prev) /
			       ((double)(prev - t0) / NSEC),
		       "events/s", 0);
	}
}

/* Matches sends to arrivals and reports the percentiles.  False when an
 * event was lost. */
static bool latency_results(report_t *rep, const opts_t *o, producer_thr_t *ps,
			    long np, latency_t *run, const monitor_t *m)
{
	int64_t *at;
	size_t nsent = 0, nlat = 0, lost = 0, dups = 0, j = 0;
	sent_t *all;
	double *lat;
	double max_lag = 0;
	int64_t first = INT64_MAX, last = INT64_MIN;
	bool ok = true;

	for (long i = 0; i < np; i++) {
		nsent += ps[i].nsent;
		if (ms_of(ps[i].max_lag_ns) > max_lag)
			max_lag = ms_of(ps[i].max_lag_ns);
	}
	all = malloc((nsent ? nsent : 1) * sizeof(*all));
	lat = malloc((nsent ? nsent : 1) * sizeof(*lat));
	at = malloc((nsent ? nsent : 1) * sizeof(*at));
	if (!all || !lat || !at) {
		free(all);
		free(lat);
		free(at);
		fprintf(stderr, "%s: out of memory\n", prog);
		return false;
	}
	nsent = 0;
	for (long i = 0; i < np; i++) {
		memcpy(all + nsent, ps[i].sent, ps[i].nsent * sizeof(*all));
		nsent += ps[i].nsent;
	}
	qsort(all, nsent, sizeof(*all), cmp_sent);
	qsort(run->arr, run->narr, sizeof(*run->arr), cmp_arrival);
	for (size_t i = 0; i < nsent; i++) {
		size_t seen = 0;
		int64_t arrived_ns = 0;

		while (j < run->narr && run->arr[j].id < all[i].id)
			j++;
		while (j < run->narr && run->arr[j].id == all[i].id) {
			if (seen++ == 0)
				arrived_ns = run->arr[j].ns;
			j++;
		}
		if (!seen) {
			lost++;
			continue;
		}
		dups += seen - 1;
		if (all[i].warmup)
			continue;
		at[nlat] = all[i].commit_ns;
		lat[nlat++] = ms_of(arrived_ns - all[i].commit_ns);
		if (all[i].commit_ns < first)
			first = all[i].commit_ns;
		if (all[i].commit_ns > last)
			last = all[i].commit_ns;
	}
	if (o->window > 0 || o->hold_xmin)
		latency_over_time(rep, o, run, m, lat, at, nlat);
	qsort(lat, nlat, sizeof(*lat), cmp_double);
	if (o->samples)
		write_cdf(o->samples, lat, nlat);
	/* The rate the producers really kept: the schedule is open loop, so
	 * a lower figure means the database could not commit faster. */
	if (nlat > (size_t)run->per_tx && last > first) {
		printf("  %-30s sent %zu events (%zu measured), producer lag "
		       "max %.1f ms\n",
		       rep->label, nsent, nlat, max_lag);
		metric(rep, "rate_achieved",
		       (double)(nlat - (size_t)run->per_tx) * NSEC /
			       (double)(last - first),
		       "events/s", 0);
	}
	if (max_lag > 100)
		fprintf(stderr,
			"%s: warning: the producers fell %.0f ms "
			"behind the schedule (add --producers)\n",
			prog, max_lag);
	if (nlat > 0) {
		metric(rep, "p50_ms", percentile(lat, nlat, 50), "ms", 3);
		metric(rep, "p95_ms", percentile(lat, nlat, 95), "ms", 3);
		metric(rep, "p99_ms", percentile(lat, nlat, 99), "ms", 3);
		metric(rep, "max_ms", lat[nlat - 1], "ms", 3);
	} else {
		fprintf(stderr, "%s: no measured event arrived\n", prog);
		ok = false;
	}
	metric(rep, "lost", (double)lost, "events", 0);
	if (dups)
		metric(rep, "duplicates", (double)dups, "events", 0);
	if (lost) {
		fprintf(stderr,
			"%s: %zu of %zu committed events never reached "
			"the sink\n",
			prog, lost, nsent);
		ok = false;
	}
	free(all);
	free(lat);
	free(at);
	return ok;
}

static int cmd_latency(const opts_t *o)
{
	latency_t run = {.pipe_fd = -1};
	producer_thr_t *ps = NULL;
	child_t relay = {0};
	pthread_t reader;
	report_t rep;
	monitor_t mon = {0};
	const char *workload = o->hold_xmin    ? "held-xmin"
			       : o->window > 0 ? "steady"
					       : "latency";
	char label[96];
	long started = 0;
	bool ok, reading = false, failed = false;
	int fds[2] = {-1, -1};
	int64_t probe;

	if (o->queue && (o->insert || o->hold_xmin || o->window > 0)) {
		fprintf(stderr,
			"%s: latency --queue sends with send_to(): no "
			"--insert, --hold-xmin or --window\n",
			prog);
		return 2;
	}
	if (o->rate <= 0 || o->seconds <= 0 || !o->relay_cmd ||
	    o->per_tx > MAX_PER_TX || o->producers > MAX_CLIENTS) {
		fprintf(stderr,
			"%s: latency needs --rate R, --seconds S, --relay-cmd "
			"CMD, at most %d --per-tx and %d --producers\n",
			prog, MAX_PER_TX, MAX_CLIENTS);
		return 2;
	}
	snprintf(label, sizeof(label), "%s %g/s", workload, o->rate);
	if (!report_open(&rep, o, workload, label))
		return 1;
	param_num(&rep, "rate", o->rate);
	param_num(&rep, "seconds", o->seconds);
	if (o->hold_xmin)
		param_num(&rep, "after", o->after);
	if (o->window > 0)
		param_num(&rep, "window", o->window);
	param_long(&rep, "producers", o->producers);
	param_long(&rep, "per_tx", o->per_tx);
	if (o->queue)
		param_str(&rep, "queue", o->queue);
	if (o->insert)
		param_str(&rep, "producer", "insert");
	param_relay(&rep, o->relay_cmd);
	relay_env(o);
	run.period_ns = (double)NSEC / o->rate;
	run.warm = (long)ceil(o->warmup * o->rate);
	run.per_tx = o->per_tx;
	run.ntx = (run.warm +
		   (long)ceil((o->seconds + (o->hold_xmin ? o->after : 0)) *
			      o->rate) +
		   o->per_tx - 1) /
		  o->per_tx;
	mon.step_ns = (int64_t)((o->window > 0 ? o->window : 5.0) * NSEC);
	run.producers = o->producers;
	run.corpus = corpus_new(o->payload_bytes);
	ps = calloc((size_t)o->producers, sizeof(*ps));
	ok = run.corpus && ps;
	for (long i = 0; ok && i < o->producers; i++) {
		ps[i].run = &run;
		ps[i].index = i;
		ps[i].sent = malloc(((size_t)(run.ntx / o->producers) + 1) *
				    (size_t)o->per_tx * sizeof(*ps[i].sent));
		ps[i].conn = ps[i].sent ? db_connect(o->db) : NULL;
		ok = ps[i].conn &&
		     db_prepare(ps[i].conn, "bench_send", o->send_sql) &&
		     db_prepare(ps[i].conn, "bench_send_n",
				o->insert ? INSERT_N_SQL : o->send_n_sql);
	}
	mon.stats = ok ? db_connect(o->db) : NULL;
	ok = ok && mon.stats;
	if (ok && o->hold_xmin) {
		mon.holder = db_connect(o->db);
		ok = mon.holder != NULL;
	}
	if (ok && pipe2(fds, O_CLOEXEC) != 0) {
		fprintf(stderr, "%s: pipe: %s\n", prog, strerror(errno));
		ok = false;
	}
	ok = ok && child_start(&relay, o->relay_cmd, fds[1], o->relay_log);
	if (fds[1] >= 0)
		close(fds[1]); /* the relay holds the write end: EOF at exit */
	run.pipe_fd = fds[0];
	if (ok) {
		reading = pthread_create(&reader, NULL, reader_main, &run) == 0;
		ok = reading;
	}
	/* A probe event proves the relay is up and listening. */
	if (ok && !send_tx(ps[0].conn, run.corpus, 0, 1, &probe))
		ok = false;
	if (ok && (!wait_arrivals(&run, &relay, 1, now_ns() + 15 * NSEC) ||
		   atomic_load(&run.arrived) < 1)) {
		fprintf(stderr,
			"%s: the relay delivered nothing within 15 s "
			"(see --relay-log)\n",
			prog);
		ok = false;
	}
	run.start_ns = now_ns() + NSEC / 100;
	run.measure_ns =
		run.start_ns + (int64_t)((double)run.warm * run.period_ns);
	mon.hold_end = run.measure_ns + (int64_t)(o->seconds * NSEC);
	run.end_ns =
		mon.hold_end + (int64_t)((o->hold_xmin ? o->after : 0) * NSEC);
	for (long i = 0; ok && i < o->producers; i++) {
		if (pthread_create(&ps[i].thread, NULL, producer_main,
				   &ps[i]) != 0) {
			ok = false;
			break;
		}
		started++;
	}
	if (ok) {
		/* Progress every step until the producers are done. */
		if (!monitor_run(&mon, o, &run, &relay, rep.label))
			failed = true;
		mon.nwin = mon.n;
	}
	for (long i = 0; i < started; i++) {
		pthread_join(ps[i].thread, NULL);
		failed |= ps[i].failed;
	}
	if (ok && !failed) {
		long expect = 1;

		for (long i = 0; i < o->producers; i++)
			expect += (long)ps[i].nsent;
		if (!wait_arrivals(&run, &relay, expect,
				   now_ns() + (int64_t)(o->grace * NSEC))) {
			fprintf(stderr,
				"%s: the relay died during the run "
				"(see --relay-log)\n",
				prog);
			failed = true;
		}
		/* The final look: the backlog and dead tuples at the end. */
		if (o->window > 0 || o->hold_xmin)
			monitor_sample(&mon, &run, rep.label);
	}
	if (relay.pid && !children_stop(&relay, 1))
		failed = true;
	if (reading)
		pthread_join(reader, NULL);
	if (atomic_load(&run.read_oom)) {
		fprintf(stderr, "%s: out of memory reading the relay\n", prog);
		failed = true;
	}
	if (ok && !failed &&
	    !latency_results(&rep, o, ps, o->producers, &run, &mon))
		failed = true;
	if (run.bad_lines)
		fprintf(stderr, "%s: %ld lines of the relay had no id\n", prog,
			run.bad_lines);
	if (fds[0] >= 0)
		close(fds[0]);
	for (long i = 0; ps && i < o->producers; i++) {
		PQfinish(ps[i].conn);
		free(ps[i].sent);
	}
	free(ps);
	PQfinish(mon.stats);
	PQfinish(mon.holder);
	free(mon.s);
	free(run.arr);
	corpus_destroy(run.corpus);
	report_close(&rep);
	return ok && !failed ? 0 : 1;
}

/* --- drain --- */

/* True once the outbox holds no committed event.  The index scan stays
 * cheap while the relays leave dead rows behind. */
static int outbox_empty(PGconn *c)
{
	PGresult *res = PQexec(c, "SELECT NOT EXISTS (SELECT 1 FROM "
				  "pgoutbox.outbox ORDER BY id LIMIT 1)");
	int empty = -1;

	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		empty = PQgetvalue(res, 0, 0)[0] == 't';
	else
		fprintf(stderr, "%s: polling the outbox: %s", prog,
			PQerrorMessage(c));
	PQclear(res);
	return empty;
}

/* A WAL queue (--queue) holds no row: its backlog is drained once the
 * slot pgoutbox_<queue> confirmed the position target (the WAL's end
 * after the fill).  1 done, 0 not yet, -1 error (printed). */
static int slot_caught_up(PGconn *c, const char *queue, const char *target)
{
	const char *params[2] = {queue, target};
	PGresult *res = PQexecParams(
		c,
		"SELECT coalesce(bool_or(confirmed_flush_lsn >= $2::pg_lsn), "
		"false) FROM pg_replication_slots "
		"WHERE slot_name = 'pgoutbox_' || $1",
		2, NULL, params, NULL, NULL, 0);
	int done = -1;

	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		done = PQgetvalue(res, 0, 0)[0] == 't';
	else
		fprintf(stderr, "%s: polling the slot: %s", prog,
			PQerrorMessage(c));
	PQclear(res);
	return done;
}

/* The WAL's end now, into lsn; false (printed) on error. */
static bool wal_lsn(PGconn *c, char *lsn, size_t size)
{
	PGresult *res = PQexec(c, "SELECT pg_current_wal_lsn()");
	bool ok = PQresultStatus(res) == PGRES_TUPLES_OK;

	if (ok)
		snprintf(lsn, size, "%s", PQgetvalue(res, 0, 0));
	else
		fprintf(stderr, "%s: pg_current_wal_lsn: %s", prog,
			PQerrorMessage(c));
	PQclear(res);
	return ok;
}

/* A relay's memory from /proc/PID/status: field is "VmRSS" or "VmHWM"
 * (the peak); kB, or -1 when unreadable. */
static long proc_kb(pid_t pid, const char *field)
{
	char path[64], line[256];
	size_t fl = strlen(field);
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, field, fl) == 0 && line[fl] == ':') {
			kb = strtol(line + fl + 1, NULL, 10);
			break;
		}
	if (f)
		fclose(f);
	return kb;
}

/* CPU seconds (user + system) a process has used, -1 if unknown: fields
 * 14 and 15 of /proc/PID/stat, after the parenthesised command name. */
static double proc_cpu_s(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long ut = 0, st = 0;
	const char *p;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1,
			 " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu "
			 "%llu",
			 &ut, &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The CPU seconds of the live relays together, -1 if one is unknown. */
static double relays_cpu_s(child_t *relays, long n)
{
	double sum = 0;

	for (long i = 0; i < n; i++) {
		double s = child_alive(&relays[i]) ? proc_cpu_s(relays[i].pid)
						   : -1;

		if (s < 0)
			return -1;
		sum += s;
	}
	return sum;
}

/* The largest of a field over the live relays. */
static long relays_kb(child_t *relays, long n, const char *field)
{
	long max = -1;

	for (long i = 0; i < n; i++)
		if (child_alive(&relays[i])) {
			long kb = proc_kb(relays[i].pid, field);

			if (kb > max)
				max = kb;
		}
	return max;
}

/* What one drain measured besides its time. */
typedef struct drain_stats {
	double claim_ms;   /* median of a concurrent claim of 1,000 rows,
			      rolled back; NAN unless asked */
	long rss_idle_kb;  /* --rss: VmRSS before any event (largest relay) */
	long rss_drain_kb; /* --rss: the largest VmRSS seen while draining */
	long hwm_kb;	   /* --rss: VmHWM (peak RSS) at the end */
	long rss_after_kb; /* --rss: VmRSS idle again after the drain */
	double cpu_s;	   /* the relays' CPU seconds from the timed start to
			      the empty outbox; -1 unknown */
} drain_stats_t;

/* What a relay's claim costs with the outbox as it is: the concurrent
 * claim of 1,000 rows (DELETE ... RETURNING), rolled back; the median of
 * 11, in ms.  NAN on failure (printed). */
static double claim_probe(PGconn *c)
{
	double ms[11];
	int n = 0;

	for (int i = 0; i < 11; i++) {
		int64_t t0;
		PGresult *res;
		bool ok;

		if (!db_exec(c, "BEGIN"))
			return NAN;
		t0 = now_ns();
		res = PQexec(c,
			     "DELETE FROM pgoutbox.outbox WHERE id = ANY(ARRAY("
			     "SELECT id FROM pgoutbox.outbox WHERE run_at <= "
			     "now() ORDER BY id LIMIT 1000 FOR UPDATE SKIP "
			     "LOCKED)) RETURNING id, topic, key, type, "
			     "payload, headers, created_at, attempts");
		ok = PQresultStatus(res) == PGRES_TUPLES_OK;
		if (ok)
			ms[n++] = ms_of(now_ns() - t0);
		else
			fprintf(stderr, "%s: claim probe: %s", prog,
				PQerrorMessage(c));
		PQclear(res);
		if (!db_exec(c, "ROLLBACK") || !ok)
			return NAN;
	}
	qsort(ms, (size_t)n, sizeof(*ms), cmp_double);
	return ms[n / 2];
}

/* One drain: fills the outbox (after a VACUUM unless told not to),
 * starts the relays, and returns the seconds until the outbox is empty
 * (-1 on failure, printed).  With probe, times a claim first; with
 * o->rss or o->warm, starts the relays before the fill (reading their
 * idle memory), stops them (SIGSTOP) during the fill and times the drain
 * from SIGCONT on (o->rss: sampling their memory). */
/* drain --shard-db: a connection to each. */
static PGconn *shard_conn[MAX_SHARDS];

static double drain_once(const opts_t *o, PGconn *c, const corpus_t *cp,
			 int null_fd, bool vacuum, bool probe,
			 drain_stats_t *st)
{
	child_t relays[MAX_RELAYS] = {{0}};
	int64_t t0, t1 = 0, deadline;
	double cpu0 = 0;
	int empty = 0;
	bool ok = true;
	char target[32] = "";  /* --queue: the WAL's end after the fill */
	PGconn *holder = NULL; /* --hold-xmin: from the fill to the end */

	*st = (drain_stats_t){.claim_ms = NAN,
			      .rss_idle_kb = -1,
			      .rss_drain_kb = -1,
			      .hwm_kb = -1,
			      .rss_after_kb = -1,
			      .cpu_s = -1};
	/* Space the previous run freed is reused, as in steady state; a
	 * backlog that waited had its statistics gathered by autovacuum. */
	if (vacuum && !o->queue)
		ok = db_exec(c, "VACUUM pgoutbox.outbox");
	for (long i = 0; ok && vacuum && i < o->shards; i++)
		ok = db_exec(shard_conn[i], "VACUUM pgoutbox.outbox");
	if (ok && o->hold_xmin)
		ok = (holder = snapshot_hold(o->db)) != NULL;
	if (o->rss || o->warm) {
		for (long i = 0; ok && i < o->relays; i++)
			ok = child_start(&relays[i], o->relay_cmd, null_fd,
					 o->relay_log);
		if (ok) {
			/* Connected, listening, heartbeating: idle. */
			sleep_until(now_ns() + 2 * NSEC);
			st->rss_idle_kb = relays_kb(relays, o->relays, "VmRSS");
			for (long i = 0; i < o->relays; i++)
				kill(relays[i].pid, SIGSTOP);
		}
	}
	if (o->shards) {
		for (long i = 0; ok && i < o->shards; i++)
			ok = fill_outbox(shard_conn[i], NULL, cp,
					 o->events / o->shards) &&
			     db_exec(shard_conn[i], "ANALYZE pgoutbox.outbox");
	} else {
		ok = ok && fill_outbox(c, o->queue, cp, o->events) &&
		     (o->queue ? wal_lsn(c, target, sizeof(target))
			       : db_exec(c, "ANALYZE pgoutbox.outbox"));
	}
	if (ok && probe)
		st->claim_ms = claim_probe(c);
	t0 = now_ns();
	deadline = t0 + (int64_t)(o->timeout * NSEC);
	if (o->rss || o->warm) {
		/* What they used to connect is not the drain's. */
		cpu0 = relays_cpu_s(relays, o->relays);
		for (long i = 0; i < o->relays; i++)
			if (relays[i].pid)
				kill(relays[i].pid, SIGCONT);
	} else {
		for (long i = 0; ok && i < o->relays; i++)
			ok = child_start(&relays[i], o->relay_cmd, null_fd,
					 o->relay_log);
	}
	while (ok && !empty) {
		sleep_until(now_ns() + DRAIN_POLL_NS);
		if (o->rss) {
			long kb = relays_kb(relays, o->relays, "VmRSS");

			if (kb > st->rss_drain_kb)
				st->rss_drain_kb = kb;
		}
		empty = o->queue ? slot_caught_up(c, o->queue, target)
				 : outbox_empty(c);
		for (long i = 0; empty > 0 && i < o->shards; i++)
			empty = outbox_empty(shard_conn[i]);
		t1 = now_ns();
		if (empty < 0)
			ok = false;
		else if (!empty)
			ok = wait_ok(relays, o->relays, "relay", "outbox", t1,
				     deadline, o->timeout);
	}
	if (ok && cpu0 >= 0) {
		double cpu1 = relays_cpu_s(relays, o->relays);

		st->cpu_s = cpu1 >= 0 ? cpu1 - cpu0 : -1;
	}
	if (ok && o->rss) {
		st->hwm_kb = relays_kb(relays, o->relays, "VmHWM");
		sleep_until(now_ns() + 2 * NSEC);
		st->rss_after_kb = relays_kb(relays, o->relays, "VmRSS");
	}
	if (!children_stop(relays, o->relays))
		ok = false;
	snapshot_release(holder);
	return ok ? (double)(t1 - t0) / NSEC : -1;
}

static int cmd_drain(const opts_t *o)
{
	corpus_t *cp = NULL;
	PGconn *c = NULL;
	double *secs = NULL;
	double cpu = 0; /* the relays' CPU seconds over every run; -1 unknown */
	report_t rep;
	char label[96];
	int null_fd = -1;
	bool ok;

	if (o->events <= 0 || !o->relay_cmd || o->relays > MAX_RELAYS) {
		fprintf(stderr,
			"%s: drain needs --events N, --relay-cmd CMD and at "
			"most %d --relays\n",
			prog, MAX_RELAYS);
		return 2;
	}
	snprintf(label, sizeof(label), "drain x%ld", o->relays);
	if (!report_open(&rep, o, "drain", label))
		return 1;
	param_long(&rep, "events", o->events);
	if (o->queue)
		param_str(&rep, "queue", o->queue);
	param_long(&rep, "relays", o->relays);
	param_long(&rep, "repeat", o->repeat);
	if (o->shards)
		param_long(&rep, "shards", o->shards);
	if (o->rss)
		param_str(&rep, "rss", "yes");
	if (o->hold_xmin)
		param_str(&rep, "hold_xmin", "yes");
	if (o->warm)
		param_str(&rep, "warm", "yes");
	param_relay(&rep, o->relay_cmd);
	relay_env(o);
	cp = corpus_new(o->payload_bytes);
	secs = malloc((size_t)o->repeat * sizeof(*secs));
	c = cp && secs ? db_connect(o->db) : NULL;
	ok = c != NULL;
	for (long i = 0; ok && i < o->shards; i++)
		ok = (shard_conn[i] = db_connect(o->shard_db[i])) != NULL;
	if (ok && (null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0) {
		fprintf(stderr, "%s: /dev/null: %s\n", prog, strerror(errno));
		ok = false;
	}
	for (long i = 0; ok && i < o->repeat; i++) {
		drain_stats_t st;

		secs[i] = drain_once(o, c, cp, null_fd, true, false, &st);
		ok = secs[i] > 0;
		cpu = cpu >= 0 && st.cpu_s >= 0 ? cpu + st.cpu_s : -1;
		if (ok && o->rss && i == 0) {
			metric(&rep, "rss_idle_kb", (double)st.rss_idle_kb,
			       "kB", 0);
			metric(&rep, "rss_drain_max_kb",
			       (double)st.rss_drain_kb, "kB", 0);
			metric(&rep, "rss_peak_hwm_kb", (double)st.hwm_kb, "kB",
			       0);
			metric(&rep, "rss_idle_after_kb",
			       (double)st.rss_after_kb, "kB", 0);
		}
		if (ok && o->repeat > 1)
			printf("  %-30s run %ld: %.3f s, %.0f events/s\n",
			       rep.label, i + 1, secs[i],
			       (double)o->events / secs[i]);
	}
	if (ok) {
		double median;

		qsort(secs, (size_t)o->repeat, sizeof(*secs), cmp_double);
		median = secs[(o->repeat - 1) / 2];
		metric(&rep, "events_per_s", (double)o->events / median,
		       "events/s", 0);
		metric(&rep, "seconds", median, "s", 3);
		/* The relays' own cost, steadier than a rate on a shared
		 * host: the clock ticks (10 ms) bound its precision. */
		if (cpu >= 0)
			metric(&rep, "relay_cpu_us_per_event",
			       cpu * 1e6 /
				       ((double)o->events * (double)o->repeat),
			       "us", 1);
	}
	if (null_fd >= 0)
		close(null_fd);
	PQfinish(c);
	for (long i = 0; i < o->shards; i++)
		PQfinish(shard_conn[i]);
	free(secs);
	corpus_destroy(cp);
	report_close(&rep);
	return ok ? 0 : 1;
}

/* --- work --- */

/* A work queue's jobs: --events jobs of the driver's payload, spread over
 * --groups group keys (g0, g1, ...) when given, drained by --relays
 * `pgoutbox worker` processes (--relay-cmd).  The queue is the one named
 * by --queue (default benchjobs), created when missing; the handler the
 * worker command names is expected to be pgoutbox_bench_job(jsonb), the
 * no-op created here, so that what is timed is the queue's own cost. */
#define WORK_QUEUE "benchjobs"

/* The queue's name, checked by queue_sql(), so it can be a literal. */
static const char *work_queue(const opts_t *o)
{
	return o->queue ? o->queue : WORK_QUEUE;
}

/* Creates the queue and the no-op handler; with --groups, sets the
 * queue's group limit (--group-concurrency N, 0: fair claims without a
 * limit).  Without --groups the queue must have no controls at all: the
 * plain claim path is the one measured (and a schema older than the
 * controls has none to look at). */
static bool work_setup(const opts_t *o, PGconn *c)
{
	const char *q = work_queue(o);
	char sql[512];
	PGresult *res;
	bool ok;

	snprintf(sql, sizeof(sql),
		 "SELECT pgoutbox.create_queue('%s') WHERE NOT EXISTS "
		 "(SELECT 1 FROM pgoutbox.queues WHERE name = '%s')",
		 q, q);
	if (!db_exec(c, sql) ||
	    !db_exec(c, "CREATE OR REPLACE FUNCTION "
			"public.pgoutbox_bench_job(p jsonb) RETURNS void "
			"LANGUAGE sql AS 'SELECT NULL::void'"))
		return false;
	if (o->groups) {
		if (o->group_cap > 0)
			snprintf(sql, sizeof(sql),
				 "SELECT pgoutbox.set_queue('%s', "
				 "group_concurrency => %ld)",
				 q, o->group_cap);
		else
			snprintf(sql, sizeof(sql),
				 "SELECT pgoutbox.set_queue('%s', "
				 "group_concurrency => 0, fair => true)",
				 q);
		return db_exec(c, sql);
	}
	snprintf(sql, sizeof(sql),
		 "SELECT EXISTS (SELECT 1 FROM pgoutbox.queue_controls "
		 "WHERE queue = '%s')",
		 q);
	/* A schema older than the controls has no such table. */
	res = PQexec(c, "SELECT to_regclass('pgoutbox.queue_controls') IS "
			"NOT NULL");
	ok = PQresultStatus(res) == PGRES_TUPLES_OK;
	if (!ok)
		fprintf(stderr, "%s: %s", prog, PQerrorMessage(c));
	else if (PQgetvalue(res, 0, 0)[0] == 't') {
		PQclear(res);
		res = PQexec(c, sql);
		ok = PQresultStatus(res) == PGRES_TUPLES_OK;
		if (!ok)
			fprintf(stderr, "%s: %s", prog, PQerrorMessage(c));
		else if (PQgetvalue(res, 0, 0)[0] == 't') {
			fprintf(stderr,
				"%s: queue %s has controls (pause, limits, "
				"fair): the plain workload needs a queue "
				"without\n",
				prog, q);
			ok = false;
		}
	}
	PQclear(res);
	return ok;
}

/* True once the queue holds no committed job (its primary key's first
 * entry: cheap while dead rows pile up); -1 on error (printed). */
static int work_empty(PGconn *c, const char *q)
{
	char sql[160];
	PGresult *res;
	int empty = -1;

	snprintf(sql, sizeof(sql),
		 "SELECT NOT EXISTS (SELECT 1 FROM pgoutbox.%s ORDER BY id "
		 "LIMIT 1)",
		 q);
	res = PQexec(c, sql);
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		empty = PQgetvalue(res, 0, 0)[0] == 't';
	else
		fprintf(stderr, "%s: polling the queue: %s", prog,
			PQerrorMessage(c));
	PQclear(res);
	return empty;
}

/* One run: VACUUM, fill the queue in one INSERT ... SELECT (the bulk path
 * docs/queue.md names), ANALYZE, start the workers and time them until
 * the queue is empty.  Seconds, or -1 on failure (printed); *cpu_s: the
 * workers' CPU seconds, -1 unknown. */
static double work_once(const opts_t *o, PGconn *c, const corpus_t *cp,
			int null_fd, double *cpu_s)
{
	const char *q = work_queue(o);
	child_t workers[MAX_RELAYS] = {{0}};
	const char *params[3];
	char n[32], groups[32], sql[512];
	int64_t t0, t1 = 0, deadline;
	PGresult *res;
	int empty = 0;
	bool ok;

	*cpu_s = -1;
	snprintf(n, sizeof(n), "%ld", o->events);
	snprintf(groups, sizeof(groups), "%ld", o->groups);
	params[0] = cp->payload;
	params[1] = n;
	params[2] = groups;
	snprintf(sql, sizeof(sql), "VACUUM pgoutbox.%s", q);
	ok = (empty = work_empty(c, q)) > 0 && db_exec(c, sql);
	if (!empty)
		fprintf(stderr, "%s: queue %s is not empty before the fill\n",
			prog, q);
	if (!ok)
		return -1;
	/* Without --groups the statement names no group_key: it runs on a
	 * schema older than the groups too. */
	if (o->groups)
		snprintf(sql, sizeof(sql),
			 "INSERT INTO pgoutbox.%s (payload, group_key) "
			 "SELECT $1::jsonb, 'g' || (g %% $3::int) "
			 "FROM generate_series(1, $2::int) g",
			 q);
	else
		snprintf(sql, sizeof(sql),
			 "INSERT INTO pgoutbox.%s (payload) SELECT $1::jsonb "
			 "FROM generate_series(1, $2::int) g",
			 q);
	res = PQexecParams(c, sql, o->groups ? 3 : 2, NULL, params, NULL, NULL,
			   0);
	ok = PQresultStatus(res) == PGRES_COMMAND_OK;
	if (!ok)
		fprintf(stderr, "%s: filling %s: %s", prog, q,
			PQerrorMessage(c));
	PQclear(res);
	snprintf(sql, sizeof(sql), "ANALYZE pgoutbox.%s", q);
	if (!ok || !db_exec(c, sql))
		return -1;
	t0 = now_ns();
	deadline = t0 + (int64_t)(o->timeout * NSEC);
	for (long i = 0; ok && i < o->relays; i++)
		ok = child_start(&workers[i], o->relay_cmd, null_fd,
				 o->relay_log);
	empty = 0;
	while (ok && !empty) {
		sleep_until(now_ns() + DRAIN_POLL_NS);
		empty = work_empty(c, q);
		t1 = now_ns();
		if (empty < 0)
			ok = false;
		else if (!empty)
			ok = wait_ok(workers, o->relays, "worker", "queue", t1,
				     deadline, o->timeout);
	}
	if (ok)
		*cpu_s = relays_cpu_s(workers, o->relays);
	if (!children_stop(workers, o->relays))
		ok = false;
	return ok ? (double)(t1 - t0) / NSEC : -1;
}

static int cmd_work(const opts_t *o)
{
	corpus_t *cp = NULL;
	PGconn *c = NULL;
	double *secs = NULL;
	double cpu =
		0; /* the workers' CPU seconds over every run; -1 unknown */
	report_t rep;
	char label[96];
	int null_fd = -1;
	bool ok;

	if (o->events <= 0 || !o->relay_cmd || o->relays > MAX_RELAYS) {
		fprintf(stderr,
			"%s: work needs --events N, --relay-cmd CMD (a "
			"worker) and at most %d --relays\n",
			prog, MAX_RELAYS);
		return 2;
	}
	snprintf(label, sizeof(label), "work x%ld", o->relays);
	if (!report_open(&rep, o, "work", label))
		return 1;
	param_long(&rep, "jobs", o->events);
	param_str(&rep, "work_queue", work_queue(o));
	param_long(&rep, "workers", o->relays);
	param_long(&rep, "repeat", o->repeat);
	if (o->groups) {
		param_long(&rep, "groups", o->groups);
		param_long(&rep, "group_concurrency", o->group_cap);
	}
	param_cmd(&rep, "worker", o->relay_cmd);
	relay_env(o);
	cp = corpus_new(o->payload_bytes);
	secs = malloc((size_t)o->repeat * sizeof(*secs));
	c = cp && secs ? db_connect(o->db) : NULL;
	ok = c != NULL && work_setup(o, c);
	if (ok && (null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0) {
		fprintf(stderr, "%s: /dev/null: %s\n", prog, strerror(errno));
		ok = false;
	}
	for (long i = 0; ok && i < o->repeat; i++) {
		double cpu_s;

		secs[i] = work_once(o, c, cp, null_fd, &cpu_s);
		ok = secs[i] > 0;
		cpu = cpu >= 0 && cpu_s >= 0 ? cpu + cpu_s : -1;
		if (ok && o->repeat > 1)
			printf("  %-30s run %ld: %.3f s, %.0f jobs/s\n",
			       rep.label, i + 1, secs[i],
			       (double)o->events / secs[i]);
	}
	if (ok) {
		double median;

		qsort(secs, (size_t)o->repeat, sizeof(*secs), cmp_double);
		median = secs[(o->repeat - 1) / 2];
		metric(&rep, "jobs_per_s", (double)o->events / median, "jobs/s",
		       0);
		metric(&rep, "seconds", median, "s", 3);
		/* The worker processes' own CPU (from their start: they
		 * connect after the fill); the claims and the handler run in
		 * PostgreSQL, whose backends this does not count. */
		if (cpu >= 0)
			metric(&rep, "worker_cpu_us_per_job",
			       cpu * 1e6 /
				       ((double)o->events * (double)o->repeat),
			       "us", 1);
	}
	if (null_fd >= 0)
		close(null_fd);
	PQfinish(c);
	free(secs);
	corpus_destroy(cp);
	report_close(&rep);
	return ok ? 0 : 1;
}

/* --- history --- */

/* Drains --events `repeat` times (VACUUM first, as autovacuum would have
 * done); the median rate and claim cost.  False (printed) on failure. */
static bool history_drains(const opts_t *o, PGconn *c, const corpus_t *cp,
			   int null_fd, double *rate, double *claim_ms)
{
	double secs[16], claims[16];
	long n = o->repeat < 16 ? o->repeat : 16;

	for (long i = 0; i < n; i++) {
		drain_stats_t st;

		secs[i] = drain_once(o, c, cp, null_fd, true, true, &st);
		if (secs[i] <= 0)
			return false;
		claims[i] = st.claim_ms;
	}
	qsort(secs, (size_t)n, sizeof(*secs), cmp_double);
	qsort(claims, (size_t)n, sizeof(*claims), cmp_double);
	*rate = (double)o->events / secs[(n - 1) / 2];
	*claim_ms = claims[(n - 1) / 2];
	return true;
}

/* Pushes n events through the outbox: a relay drains while COPY fills,
 * the backlog kept under 200,000; progress every 5 s.  Returns the rate
 * or -1 (printed). */
static double history_pass(const opts_t *o, PGconn *c, const corpus_t *cp,
			   int null_fd, long n, const char *label)
{
	child_t relay = {0};
	int64_t t0 = now_ns(), next = t0 + 5 * NSEC, t1;
	long done = 0;
	bool ok = child_start(&relay, o->relay_cmd, null_fd, o->relay_log);
	int empty = 0;

	while (ok && done < n) {
		long chunk = n - done < 50000 ? n - done : 50000;

		ok = fill_outbox(c, NULL, cp, chunk);
		done += chunk;
		if (!child_alive(&relay)) {
			fprintf(stderr,
				"%s: the relay exited (see --relay-log)\n",
				prog);
			ok = false;
		}
		/* Keep the backlog bounded: a history, not one huge batch. */
		while (ok) {
			PGresult *res = PQexec(c, "SELECT max(id) - min(id) "
						  "FROM pgoutbox.outbox");
			long backlog = PQresultStatus(res) == PGRES_TUPLES_OK
					       ? atol(PQgetvalue(res, 0, 0))
					       : 0;

			PQclear(res);
			if (backlog < 200000 || !child_alive(&relay))
				break;
			sleep_until(now_ns() + NSEC / 50);
		}
		if (now_ns() >= next) {
			printf("  %-30s history: %ld of %ld events in "
			       "%.0f s\n",
			       label, done, n, (double)(now_ns() - t0) / NSEC);
			fflush(stdout);
			next += 5 * NSEC;
		}
	}
	while (ok && !empty) {
		sleep_until(now_ns() + NSEC / 50);
		empty = outbox_empty(c);
		ok = empty >= 0 && child_alive(&relay);
	}
	t1 = now_ns();
	if (!children_stop(&relay, 1))
		ok = false;
	return ok ? (double)n * NSEC / (double)(t1 - t0) : -1;
}

static int cmd_history(const opts_t *o)
{
	corpus_t *cp = NULL;
	PGconn *c = NULL;
	report_t rep;
	double fresh = 0, fresh_claim = 0, pass, after = 0, after_claim = 0;
	int null_fd = -1;
	bool ok;

	if (o->events <= 0 || o->history <= 0 || !o->relay_cmd || o->queue) {
		fprintf(stderr,
			"%s: history needs --history N, --events N and "
			"--relay-cmd CMD (and no --queue)\n",
			prog);
		return 2;
	}
	if (!report_open(&rep, o, "history", "history"))
		return 1;
	param_long(&rep, "history", o->history);
	param_long(&rep, "events", o->events);
	param_long(&rep, "repeat", o->repeat);
	param_relay(&rep, o->relay_cmd);
	relay_env(o);
	cp = corpus_new(o->payload_bytes);
	c = cp ? db_connect(o->db) : NULL;
	ok = c != NULL;
	if (ok && (null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0) {
		fprintf(stderr, "%s: /dev/null: %s\n", prog, strerror(errno));
		ok = false;
	}
	ok = ok && history_drains(o, c, cp, null_fd, &fresh, &fresh_claim);
	if (ok) {
		metric(&rep, "fresh_events_per_s", fresh, "events/s", 0);
		metric(&rep, "fresh_claim_ms", fresh_claim, "ms", 3);
		pass = history_pass(o, c, cp, null_fd, o->history, rep.label);
		ok = pass > 0;
	}
	if (ok) {
		metric(&rep, "history_events_per_s", pass, "events/s", 0);
		ok = history_drains(o, c, cp, null_fd, &after, &after_claim);
	}
	if (ok) {
		metric(&rep, "after_events_per_s", after, "events/s", 0);
		metric(&rep, "after_claim_ms", after_claim, "ms", 3);
		metric(&rep, "after_vs_fresh", after / fresh, "ratio", 3);
	}
	if (null_fd >= 0)
		close(null_fd);
	PQfinish(c);
	corpus_destroy(cp);
	report_close(&rep);
	return ok ? 0 : 1;
}

/* --- notify-rtt --- */

/* Sends NOTIFY on one session and waits until the other, listening one
 * receives it; returns the round trip in ns, or -1 (printed). */
static int64_t notify_once(PGconn *sender, PGconn *listener)
{
	int64_t t0 = now_ns(), got = 0;
	bool sent_done = false;
	PGnotify *nt;

	if (!PQsendQuery(sender, "NOTIFY bench_rtt")) {
		fprintf(stderr, "%s: NOTIFY: %s", prog, PQerrorMessage(sender));
		return -1;
	}
	while (!got || !sent_done) {
		struct pollfd pfd[2] = {
			{.fd = PQsocket(listener), .events = POLLIN},
			{.fd = PQsocket(sender), .events = POLLIN}};

		if (poll(pfd, 2, 10000) <= 0) {
			fprintf(stderr, "%s: no notification within 10 s\n",
				prog);
			return -1;
		}
		if (pfd[0].revents) {
			if (!PQconsumeInput(listener))
				return -1;
			while ((nt = PQnotifies(listener)) != NULL) {
				if (!got)
					got = now_ns();
				PQfreemem(nt);
			}
		}
		if (pfd[1].revents && !sent_done) {
			PGresult *res;

			if (!PQconsumeInput(sender))
				return -1;
			while (!PQisBusy(sender) &&
			       (res = PQgetResult(sender)) != NULL) {
				if (PQresultStatus(res) != PGRES_COMMAND_OK)
					fprintf(stderr, "%s: NOTIFY: %s", prog,
						PQerrorMessage(sender));
				PQclear(res);
			}
			sent_done = !PQisBusy(sender);
		}
	}
	return got - t0;
}

static int cmd_notify_rtt(const opts_t *o)
{
	PGconn *sender = NULL, *listener = NULL;
	long warm = o->count / 10 < 10 ? 10 : o->count / 10;
	double *rtt = NULL;
	report_t rep;
	long n = 0;
	bool ok;

	if (o->count <= 0) {
		fprintf(stderr, "%s: notify-rtt needs --count N\n", prog);
		return 2;
	}
	if (!report_open(&rep, o, "notify-rtt", "notify-rtt"))
		return 1;
	param_long(&rep, "count", o->count);
	rtt = malloc((size_t)o->count * sizeof(*rtt));
	sender = rtt ? db_connect(o->db) : NULL;
	listener = sender ? db_connect(o->db) : NULL;
	ok = listener && db_exec(listener, "LISTEN bench_rtt");
	for (long i = 0; ok && i < warm + o->count; i++) {
		int64_t ns = notify_once(sender, listener);

		if (ns < 0)
			ok = false;
		else if (i >= warm)
			rtt[n++] = ms_of(ns);
	}
	if (ok) {
		qsort(rtt, (size_t)n, sizeof(*rtt), cmp_double);
		metric(&rep, "p50_ms", percentile(rtt, (size_t)n, 50), "ms", 3);
		metric(&rep, "p99_ms", percentile(rtt, (size_t)n, 99), "ms", 3);
		metric(&rep, "max_ms", rtt[n - 1], "ms", 3);
	}
	PQfinish(sender);
	PQfinish(listener);
	free(rtt);
	report_close(&rep);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*run)(const opts_t *o);
	} cmds[] = {{"fill", cmd_fill},	      {"enqueue", cmd_enqueue},
		    {"latency", cmd_latency}, {"drain", cmd_drain},
		    {"history", cmd_history}, {"notify-rtt", cmd_notify_rtt},
		    {"work", cmd_work}};
	opts_t o;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(argv[1], cmds[i].name) != 0)
			continue;
		if (!parse_opts(&o, argc, argv)) {
			usage(stderr);
			return 2;
		}
		return cmds[i].run(&o);
	}
	fprintf(stderr, "%s: unknown command \"%s\"\n", prog, argv[1]);
	usage(stderr);
	return 2;
}

/*
 * nbdkit-hdd-filter: makes the plugin under it (the file plugin, serving a
 * sparse file) as slow as a 7200 rpm hard disk. Every read, write and zero
 * waits in one queue, is served one at a time (the cheapest to reach first,
 * as a disk's command queue does), costs what hdd_model.c says (seek, rotation,
 * transfer) and completes at that absolute time on CLOCK_MONOTONIC; the
 * plugin's own I/O happens inside that time. Model, parameters and why a
 * filter: README.md.
 *
 *   nbdkit -U sock --filter=./nbdkit-hdd-filter.so file file=disk.img \
 *       [full_stroke_ms=8.5] [settle_ms=0.5] [rpm=7200] [mb_per_s=150] \
 *       [rotation=clock|average] [ncq=32] [max_wait_ms=100] [flush=ignore|pass] [stats=FILE]
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-filter.h>

#include "hdd_model.h"

static struct hdd_params params;
static int flush_pass;
static const char *stats_path;

/* One request waiting for, or holding, the disk. */
struct waiter {
	struct waiter *next;
	uint64_t offset, count;
	int64_t arrival_ns;
	int granted;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t granted_cond = PTHREAD_COND_INITIALIZER;
static struct waiter *queue; /* in arrival order */
static int busy;
static struct hdd_state disk;
static unsigned ncq = 32;
static int64_t max_wait_ns = 100000000;

static struct {
	uint64_t requests, reads, writes, sequential, backward, reordered, aged;
	int64_t seek_ns, rotation_ns, transfer_ns, late_ns, late_max_ns;
} stats;

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void hdd_load(void)
{
	hdd_params_default(&params, 0);
}

static void hdd_unload(void)
{
	FILE *f;
	double n;

	if (!stats_path)
		return;
	f = fopen(stats_path, "w");
	if (!f)
		return;
	n = stats.requests ? (double)stats.requests : 1;
	fprintf(f,
		"requests=%" PRIu64 " reads=%" PRIu64 " writes=%" PRIu64 " sequential=%" PRIu64
		" backward=%" PRIu64 " reordered=%" PRIu64 " aged=%" PRIu64  " seek_ms_mean=%.3f rotation_ms_mean=%.3f transfer_ms_mean=%.3f"
		" busy_s=%.2f late_ms_mean=%.3f late_ms_max=%.1f\n",
		stats.requests, stats.reads, stats.writes, stats.sequential, stats.backward, stats.reordered, stats.aged,
		stats.seek_ns / n / 1e6, stats.rotation_ns / n / 1e6, stats.transfer_ns / n / 1e6,
		(stats.seek_ns + stats.rotation_ns + stats.transfer_ns) / 1e9, stats.late_ns / n / 1e6,
		stats.late_max_ns / 1e6);
	fclose(f);
}

static int parse_ms(const char *key, const char *value, double *out)
{
	char *end;

	errno = 0;
	*out = strtod(value, &end);
	if (errno || end == value || *end) {
		nbdkit_error("hdd: %s=%s is not a number", key, value);
		return -1;
	}
	return 0;
}

static int hdd_config(nbdkit_next_config *next, nbdkit_backend *nxdata, const char *key, const char *value)
{
	if (strcmp(key, "full_stroke_ms") == 0)
		return parse_ms(key, value, &params.full_stroke_ms);
	if (strcmp(key, "settle_ms") == 0)
		return parse_ms(key, value, &params.settle_ms);
	if (strcmp(key, "rpm") == 0)
		return parse_ms(key, value, &params.rpm);
	if (strcmp(key, "mb_per_s") == 0)
		return parse_ms(key, value, &params.mb_per_s);
	if (strcmp(key, "rotation") == 0) {
		if (strcmp(value, "clock") == 0)
			params.rotation = HDD_ROTATION_CLOCK;
		else if (strcmp(value, "average") == 0)
			params.rotation = HDD_ROTATION_AVERAGE;
		else {
			nbdkit_error("hdd: rotation must be clock or average");
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "ncq") == 0 || strcmp(key, "max_wait_ms") == 0) {
		double d;

		if (parse_ms(key, value, &d) == -1)
			return -1;
		if (key[0] == 'n') {
			if (d < 1 || d > 256 || d != (unsigned)d) {
				nbdkit_error("hdd: ncq must be a whole number from 1 (first come first served) to 256");
				return -1;
			}
			ncq = (unsigned)d;
		} else {
			if (d < 0 || d > 100000) {
				nbdkit_error("hdd: max_wait_ms must be between 0 and 100000");
				return -1;
			}
			max_wait_ns = (int64_t)(d * 1e6);
		}
		return 0;
	}
	if (strcmp(key, "flush") == 0) {
		if (strcmp(value, "pass") == 0)
			flush_pass = 1;
		else if (strcmp(value, "ignore") == 0)
			flush_pass = 0;
		else {
			nbdkit_error("hdd: flush must be ignore or pass");
			return -1;
		}
		return 0;
	}
	if (strcmp(key, "stats") == 0) {
		stats_path = value;
		return 0;
	}
	return next(nxdata, key, value);
}

static int hdd_config_complete(nbdkit_next_config_complete *next, nbdkit_backend *nxdata)
{
	struct hdd_params p = params;
	const char *why;

	p.capacity = 1; /* known at the first connection */
	why = hdd_params_check(&p);
	if (why) {
		nbdkit_error("hdd: %s", why);
		return -1;
	}
	return next(nxdata);
}

#define hdd_config_help                                                                                     \
	"full_stroke_ms=MS   seek over the whole disk (8.5)\n"                                           \
	"settle_ms=MS        shortest seek, track to track (0.5)\n"                                      \
	"rpm=N               rotational speed (7200)\n"                                                  \
	"mb_per_s=N          media rate in 10^6 B/s (150)\n"                                             \
	"rotation=clock|average  platter angle from the clock, or half a turn per request (clock)\n"    \
	"ncq=N               pick the soonest served of the N oldest requests (32; 1: FIFO)\n"         \
	"max_wait_ms=MS      serve the oldest first once it waited this long (100)\n"                 \
	"flush=ignore|pass   pass flushes to the plugin (ignore: the model has no write cache)\n"        \
	"stats=FILE          write request counts and mean costs there at exit"

static int hdd_thread_model(void)
{
	return NBDKIT_THREAD_MODEL_PARALLEL;
}

static int64_t hdd_get_size(nbdkit_next *next, void *handle)
{
	int64_t size = next->get_size(next);

	if (size > 0) {
		pthread_mutex_lock(&lock);
		if (params.capacity == 0)
			params.capacity = (uint64_t)size;
		pthread_mutex_unlock(&lock);
	}
	return size;
}

static int hdd_is_rotational(nbdkit_next *next, void *handle)
{
	return 1;
}

/* A hard disk has no trim, and a zero is as slow as a write. */
static int hdd_can_trim(nbdkit_next *next, void *handle)
{
	return 0;
}

static int hdd_can_fast_zero(nbdkit_next *next, void *handle)
{
	return 0;
}

/*
 * Grants the disk to the next request (the lock is held): the one whose
 * seek and rotation cost least among the ncq oldest (shortest positioning
 * time first, as a disk's command queue does; ncq=1 is first come first
 * served), unless the oldest has waited max_wait_ns already.
 */
static void grant_next(void)
{
	struct waiter **best = NULL, **pp;
	int64_t best_cost = 0;
	unsigned i = 0;

	if (queue && disk.busy_until_ns - queue->arrival_ns > max_wait_ns) {
		best = &queue;
		stats.aged++;
	} else {
		for (pp = &queue, i = 0; *pp && i < ncq; pp = &(*pp)->next, i++) {
			struct waiter *w = *pp;
			int64_t start = w->arrival_ns > disk.busy_until_ns ? w->arrival_ns : disk.busy_until_ns;
			struct hdd_cost c = hdd_cost_of(&params, disk.head, w->offset, w->count, start);
			int64_t cost = start + c.seek_ns + c.rotation_ns;

			if (!best || cost < best_cost) {
				best = pp;
				best_cost = cost;
			}
		}
	}
	if (!best)
		return;
	if (best != &queue)
		stats.reordered++;
	(*best)->granted = 1;
	*best = (*best)->next;
	busy = 1;
	pthread_cond_broadcast(&granted_cond);
}

/* Waits for the disk, then returns the time the request completes. */
static int64_t disk_begin(uint64_t offset, uint32_t count, int is_write)
{
	struct waiter w = {.offset = offset, .count = count}, **pp;
	struct hdd_cost c;
	int64_t deadline;

	pthread_mutex_lock(&lock);
	w.arrival_ns = now_ns();
	for (pp = &queue; *pp; pp = &(*pp)->next)
		;
	*pp = &w;
	if (!busy)
		grant_next();
	while (!w.granted)
		pthread_cond_wait(&granted_cond, &lock);
	if (offset == disk.head)
		stats.sequential++;
	else if (offset < disk.head)
		stats.backward++;
	deadline = hdd_serve(&params, &disk, offset, count, w.arrival_ns, &c);
	stats.requests++;
	if (is_write)
		stats.writes++;
	else
		stats.reads++;
	stats.seek_ns += c.seek_ns;
	stats.rotation_ns += c.rotation_ns;
	stats.transfer_ns += c.transfer_ns;
	pthread_mutex_unlock(&lock);
	return deadline;
}

/* Sleeps to the deadline (the plugin's I/O ran meanwhile) and hands the
 * disk on. A late wake-up delays this reply, not the model's schedule: the
 * next request starts at this one's deadline if it was waiting. */
static void disk_end(int64_t deadline)
{
	struct timespec ts = {deadline / 1000000000, deadline % 1000000000};
	int64_t late;

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
	late = now_ns() - deadline;
	pthread_mutex_lock(&lock);
	stats.late_ns += late;
	if (late > stats.late_max_ns)
		stats.late_max_ns = late;
	busy = 0;
	grant_next();
	pthread_mutex_unlock(&lock);
}

static int hdd_pread(nbdkit_next *next, void *handle, void *buf, uint32_t count, uint64_t offset,
		     uint32_t flags, int *err)
{
	int64_t deadline = disk_begin(offset, count, 0);
	int r = next->pread(next, buf, count, offset, flags, err);

	disk_end(deadline);
	return r;
}

static uint32_t strip_fua(uint32_t flags)
{
	return flush_pass ? flags : flags & ~NBDKIT_FLAG_FUA;
}

static int hdd_pwrite(nbdkit_next *next, void *handle, const void *buf, uint32_t count, uint64_t offset,
		      uint32_t flags, int *err)
{
	int64_t deadline = disk_begin(offset, count, 1);
	int r = next->pwrite(next, buf, count, offset, strip_fua(flags), err);

	disk_end(deadline);
	return r;
}

static int hdd_zero(nbdkit_next *next, void *handle, uint32_t count, uint64_t offset, uint32_t flags,
		    int *err)
{
	int64_t deadline;
	int r;

	if (flags & NBDKIT_FLAG_FAST_ZERO) {
		*err = ENOTSUP;
		return -1;
	}
	deadline = disk_begin(offset, count, 1);
	r = next->zero(next, count, offset, strip_fua(flags), err);
	disk_end(deadline);
	return r;
}

/* Writes are on the platter when they complete: a flush has nothing to do. */
static int hdd_flush(nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
	return flush_pass ? next->flush(next, flags, err) : 0;
}

static struct nbdkit_filter filter = {
	.name = "hdd",
	.longname = "nbdkit hard-disk model filter (wbkit bench)",
	.load = hdd_load,
	.unload = hdd_unload,
	.config = hdd_config,
	.config_complete = hdd_config_complete,
	.config_help = hdd_config_help,
	.thread_model = hdd_thread_model,
	.get_size = hdd_get_size,
	.is_rotational = hdd_is_rotational,
	.can_trim = hdd_can_trim,
	.can_fast_zero = hdd_can_fast_zero,
	.pread = hdd_pread,
	.pwrite = hdd_pwrite,
	.zero = hdd_zero,
	.flush = hdd_flush,
};

NBDKIT_REGISTER_FILTER(filter)

/*
 * The hard-disk model of bench/hdd (README.md there): what one request costs
 * a 7200 rpm disk that serves one request at a time. Pure functions of the
 * parameters, the head position and the time, so that the unit test
 * (tests/unit/test_hdd_model.cpp) checks them without nbdkit.
 */
#ifndef WBKIT_HDD_MODEL_H
#define WBKIT_HDD_MODEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum hdd_rotation {
	/* The platter's angle follows the monotonic clock. */
	HDD_ROTATION_CLOCK,
	/* Half a revolution for every request that is not a sequential continuation. */
	HDD_ROTATION_AVERAGE,
};

struct hdd_params {
	uint64_t capacity;     /* bytes: the full stroke spans them */
	double full_stroke_ms; /* seek over the whole capacity, settle included */
	double settle_ms;      /* the shortest seek (track to track) */
	double rpm;
	double mb_per_s; /* media rate, 10^6 bytes/s; one track holds one revolution of it */
	enum hdd_rotation rotation;
};

/* The defaults: full stroke 8.5 ms, settle 0.5 ms, 7200 rpm, 150 MB/s, clock rotation. */
void hdd_params_default(struct hdd_params* p, uint64_t capacity);
/* NULL when the parameters make a disk, else what is wrong with them. */
const char* hdd_params_check(const struct hdd_params* p);

/* Bytes per track: one revolution at the media rate (1.25 MB by default). */
double hdd_track_bytes(const struct hdd_params* p);
int64_t hdd_revolution_ns(const struct hdd_params* p);

/* Seek time from the head at byte head to byte offset: 0 on the same track,
 * else settle + (full_stroke - settle) * sqrt(distance / capacity). */
int64_t hdd_seek_ns(const struct hdd_params* p, uint64_t head, uint64_t offset);

struct hdd_cost {
	int64_t seek_ns;
	int64_t rotation_ns;
	int64_t transfer_ns;
};

/*
 * What a request of count bytes at offset costs when the disk takes it at
 * start_ns (monotonic clock) with the head just after byte head - 1 (the end
 * of the previous request): a sequential continuation (offset == head) costs
 * the transfer only; any other request the seek, then the wait until its
 * first byte comes under the head, then the transfer.
 */
struct hdd_cost hdd_cost_of(const struct hdd_params* p, uint64_t head, uint64_t offset, uint64_t count,
			    int64_t start_ns);

/* The disk: where the head is and when it is free. */
struct hdd_state {
	uint64_t head;
	int64_t busy_until_ns;
};

/*
 * Serves a request that arrived at arrival_ns: it starts when both it and
 * the disk are there, costs hdd_cost, and moves the head to its end.
 * Returns the absolute time it completes (the deadline to sleep to).
 */
int64_t hdd_serve(const struct hdd_params* p, struct hdd_state* s, uint64_t offset, uint64_t count,
		  int64_t arrival_ns, struct hdd_cost* cost);

#ifdef __cplusplus
}
#endif

#endif

/* The hard-disk model: see hdd_model.h and README.md. */
#include "hdd_model.h"

#include <math.h>
#include <stddef.h>

#define NS_PER_MS 1000000.0
#define NS_PER_S 1000000000.0

void hdd_params_default(struct hdd_params *p, uint64_t capacity)
{
	p->capacity = capacity;
	p->full_stroke_ms = 8.5;
	p->settle_ms = 0.5;
	p->rpm = 7200;
	p->mb_per_s = 150;
	p->rotation = HDD_ROTATION_CLOCK;
}

const char *hdd_params_check(const struct hdd_params *p)
{
	if (p->capacity == 0)
		return "the disk has no capacity";
	if (!(p->settle_ms >= 0) || !(p->full_stroke_ms >= p->settle_ms) || p->full_stroke_ms > 1000)
		return "need 0 <= settle_ms <= full_stroke_ms <= 1000";
	if (!(p->rpm >= 60 && p->rpm <= 100000))
		return "rpm must be between 60 and 100000";
	if (!(p->mb_per_s >= 0.001 && p->mb_per_s <= 100000))
		return "mb_per_s must be between 0.001 and 100000";
	return NULL;
}

int64_t hdd_revolution_ns(const struct hdd_params *p)
{
	return (int64_t)llround(60.0 * NS_PER_S / p->rpm);
}

double hdd_track_bytes(const struct hdd_params *p)
{
	return p->mb_per_s * 1e6 * 60.0 / p->rpm;
}

static uint64_t track_of(const struct hdd_params *p, uint64_t byte)
{
	return (uint64_t)((double)byte / hdd_track_bytes(p));
}

int64_t hdd_seek_ns(const struct hdd_params *p, uint64_t head, uint64_t offset)
{
	uint64_t d = offset > head ? offset - head : head - offset;
	double frac;

	if (track_of(p, head) == track_of(p, offset))
		return 0;
	frac = (double)d / (double)p->capacity;
	if (frac > 1)
		frac = 1;
	return (int64_t)llround((p->settle_ms + (p->full_stroke_ms - p->settle_ms) * sqrt(frac)) * NS_PER_MS);
}

struct hdd_cost hdd_cost_of(const struct hdd_params *p, uint64_t head, uint64_t offset, uint64_t count,
			 int64_t start_ns)
{
	struct hdd_cost c = {0, 0, 0};
	int64_t rev = hdd_revolution_ns(p);

	c.transfer_ns = (int64_t)llround((double)count * NS_PER_S / (p->mb_per_s * 1e6));
	if (offset == head)
		return c;
	c.seek_ns = hdd_seek_ns(p, head, offset);
	if (p->rotation == HDD_ROTATION_AVERAGE) {
		c.rotation_ns = rev / 2;
	} else {
		/* Angles in ns of a revolution: where the head is when the
		 * seek ends, and where the first byte sits on its track. */
		double track = hdd_track_bytes(p);
		int64_t at = (start_ns + c.seek_ns) % rev;
		double pos = fmod((double)offset, track) / track;
		int64_t target = (int64_t)(pos * (double)rev);

		if (at < 0)
			at += rev;
		c.rotation_ns = ((target - at) % rev + rev) % rev;
	}
	return c;
}

int64_t hdd_serve(const struct hdd_params *p, struct hdd_state *s, uint64_t offset, uint64_t count,
		  int64_t arrival_ns, struct hdd_cost *cost)
{
	int64_t start = arrival_ns > s->busy_until_ns ? arrival_ns : s->busy_until_ns;
	struct hdd_cost c = hdd_cost_of(p, s->head, offset, count, start);

	if (cost)
		*cost = c;
	s->head = offset + count;
	s->busy_until_ns = start + c.seek_ns + c.rotation_ns + c.transfer_ns;
	return s->busy_until_ns;
}

// The hard-disk model of the benchmarks (bench/hdd/hdd_model.c, which the
// nbdkit filter calls): seek, rotation and transfer of one request, and the
// queue's start time, checked without nbdkit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "hdd_model.h"

namespace {

constexpr std::uint64_t GiB = 1ULL << 30;
constexpr std::int64_t ms = 1000000;

hdd_params defaults(std::uint64_t capacity = 4 * GiB)
{
	hdd_params p;
	hdd_params_default(&p, capacity);
	return p;
}

} // namespace

TEST(HddModel, DefaultsAreA7200RpmDiskAt150MBs)
{
	hdd_params p = defaults();
	EXPECT_EQ(hdd_params_check(&p), nullptr);
	EXPECT_EQ(hdd_revolution_ns(&p), 8333333);
	EXPECT_DOUBLE_EQ(hdd_track_bytes(&p), 1250000.0);
}

TEST(HddModel, RejectsParametersThatMakeNoDisk)
{
	hdd_params p = defaults();
	p.settle_ms = 9;
	EXPECT_NE(hdd_params_check(&p), nullptr);
	p = defaults();
	p.rpm = 0;
	EXPECT_NE(hdd_params_check(&p), nullptr);
	p = defaults();
	p.mb_per_s = -1;
	EXPECT_NE(hdd_params_check(&p), nullptr);
	p = defaults(0);
	EXPECT_NE(hdd_params_check(&p), nullptr);
}

TEST(HddModel, SequentialContinuationCostsTheTransferOnly)
{
	hdd_params p = defaults();
	hdd_cost c = hdd_cost_of(&p, 10 * GiB / 4, 10 * GiB / 4, 1 << 20, 123456789);
	EXPECT_EQ(c.seek_ns, 0);
	EXPECT_EQ(c.rotation_ns, 0);
	// 1 MiB at 150 * 10^6 B/s.
	EXPECT_EQ(c.transfer_ns, 6990507);
}

TEST(HddModel, SeekGrowsWithTheSquareRootOfTheDistance)
{
	hdd_params p = defaults();
	// Within one track: no seek.
	EXPECT_EQ(hdd_seek_ns(&p, 0, 1000000), 0);
	// The next track, 300 kB on: the settle time and a little more
	// (8 ms * sqrt(300000 / 4 GiB) = 0.067 ms).
	EXPECT_EQ(hdd_seek_ns(&p, 1000000, 1300000), 566861);
	// A quarter of the disk: settle + half of the rest.
	EXPECT_EQ(hdd_seek_ns(&p, 0, GiB), 4500000);
	EXPECT_EQ(hdd_seek_ns(&p, GiB, 0), 4500000);
	// The full stroke.
	EXPECT_EQ(hdd_seek_ns(&p, 0, 4 * GiB), 8500000);
	std::int64_t last = 0;
	for (std::uint64_t d = 2000000; d < 4 * GiB; d *= 2) {
		std::int64_t s = hdd_seek_ns(&p, 0, d);
		EXPECT_GT(s, last) << d;
		last = s;
	}
}

TEST(HddModel, RotationWaitsForTheFirstByteToComeUnderTheHead)
{
	hdd_params p = defaults();
	std::int64_t rev = hdd_revolution_ns(&p);
	// Head at byte 0 of track 0 at time 0 (angle 0), request at a quarter
	// of the same track: a quarter of a revolution.
	hdd_cost c = hdd_cost_of(&p, 4096, 312500, 4096, 0);
	EXPECT_EQ(c.seek_ns, 0);
	EXPECT_NEAR(c.rotation_ns, rev / 4, 2);
	// The same request a quarter revolution later: it is under the head.
	c = hdd_cost_of(&p, 4096, 312500, 4096, rev / 4 + 10 * rev);
	EXPECT_LE(c.rotation_ns, 2);
	// Just missed: nearly a full revolution.
	c = hdd_cost_of(&p, 4096, 312500, 4096, rev / 4 + 1000);
	EXPECT_NEAR(c.rotation_ns, rev - 1000, 2);
	// After a seek the angle is taken where the seek ends.
	c = hdd_cost_of(&p, 0, 2 * GiB, 4096, 0);
	EXPECT_GT(c.seek_ns, 0);
	EXPECT_GE(c.rotation_ns, 0);
	EXPECT_LT(c.rotation_ns, rev);
	// The average model: half a revolution for any non-sequential request.
	p.rotation = HDD_ROTATION_AVERAGE;
	c = hdd_cost_of(&p, 4096, 312500, 4096, 0);
	EXPECT_EQ(c.rotation_ns, rev / 2);
	c = hdd_cost_of(&p, 4096, 4096, 4096, 0);
	EXPECT_EQ(c.rotation_ns, 0);
}

TEST(HddModel, ServeStartsWhenBothRequestAndDiskAreThere)
{
	hdd_params p = defaults();
	hdd_state s = {0, 0};
	hdd_cost c;
	// An idle disk starts at the arrival.
	std::int64_t end = hdd_serve(&p, &s, 0, 1 << 20, 5 * ms, &c);
	EXPECT_EQ(end, 5 * ms + c.transfer_ns);
	EXPECT_EQ(s.head, 1u << 20);
	// A request that arrived while the disk was busy starts when it is free:
	// a sequential continuation, so the transfer only.
	std::int64_t end2 = hdd_serve(&p, &s, 1 << 20, 1 << 20, 6 * ms, &c);
	EXPECT_EQ(end2, end + c.transfer_ns);
	EXPECT_EQ(s.busy_until_ns, end2);
}

// Random 4 KiB requests over the disk at random times: about 9 ms each,
// 100-150 IOPS (README.md's figure for the defaults: 111).
TEST(HddModel, RandomRequestsCostAboutNineMilliseconds)
{
	for (auto rotation : {HDD_ROTATION_CLOCK, HDD_ROTATION_AVERAGE}) {
		hdd_params p = defaults();
		p.rotation = rotation;
		std::mt19937_64 rng(7);
		hdd_state s = {0, 0};
		const int n = 20000;
		std::int64_t t = 0;
		for (int i = 0; i < n; i++) {
			std::uint64_t off = (rng() % (p.capacity / 4096)) * 4096;
			t = hdd_serve(&p, &s, off, 4096, t + static_cast<std::int64_t>(rng() % 300000), nullptr);
		}
		double per_ms = static_cast<double>(t) / n / ms;
		EXPECT_GT(per_ms, 1000.0 / 150) << rotation;
		EXPECT_LT(per_ms, 1000.0 / 100) << rotation;
	}
}

// Short strides are cheaper than random offsets: 4 KiB writes 64 KiB apart
// (the next one on the same or the next track) against random ones.
TEST(HddModel, ShortStridesAreCheaperThanRandom)
{
	hdd_params p = defaults();
	hdd_state s = {0, 0};
	std::int64_t t = 0;
	for (int i = 0; i < 1000; i++)
		t = hdd_serve(&p, &s, static_cast<std::uint64_t>(i) * 65536, 4096, t + 200000, nullptr);
	double stride_ms = static_cast<double>(t) / 1000 / ms;
	EXPECT_LT(stride_ms, 1000.0 / 150);
	std::int64_t long_seek = hdd_seek_ns(&p, 0, p.capacity / 3);
	std::int64_t short_seek = hdd_seek_ns(&p, 0, 2 * 1250000);
	EXPECT_LT(short_seek * 3, long_seek);
}

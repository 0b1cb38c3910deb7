// Power cuts of wbreplay --mark-clean on two disks, each with a volatile write
// cache of its own (docs/FORMAT.md, "Durability across the two devices"):
// the replay writes the backing device, then marks the cache clean. A cut
// after any number of the run's operations, with each device keeping none,
// all or any subset of what it had not flushed, then the replay run again
// (the user's retry, or the kernel's replay at the next construction): the
// backing device must end as the uninterrupted replay leaves it. A clean
// mark that reaches the media while the replayed data sits in the backing
// device's cache loses that data for good: the rerun finds nothing to replay.
#include <gtest/gtest.h>

#include <random>

#include "log_writes.hpp"
#include "temp_image.hpp"
#include "volatile_device.hpp"
#include "wbkit/log_scan.hpp"
#include "wbkit/log_writer.hpp"
#include "wbkit/replay_run.hpp"

using namespace wbkit;
using namespace wbkit::testing;

namespace {

constexpr std::uint64_t MiB = 1 << 20;
constexpr std::uint64_t backing_bytes = 1 * MiB;
constexpr std::uint64_t nr_segments = 6;

// A wrapped log of partial and overlapping writes over a backing device
// that holds a pattern, some segments written back (the record names them).
struct Case {
	SparseImage cache{"cache", superblock_size + nr_segments* segment_size};
	SparseImage backing{"backing", backing_bytes};

	explicit Case(std::uint64_t seed)
	{
		backing.write_exact(0, pattern_bytes(backing_bytes, seed ^ 0xbac1));
		LogWriterOptions options;
		options.backing = &backing;
		LogWriter writer(cache, options);
		std::mt19937_64 rng(seed);
		for (unsigned op = 0; op < 900; ++op) {
			const std::uint64_t sectors = (rng() % 3 == 0) ? 1 + rng() % 7 : 8;
			const std::uint64_t sector = rng() % (backing_bytes / 512 - sectors);
			writer.write(sectors == 8 ? sector / 8 * 8 : sector, pattern_bytes(sectors * 512, rng()));
			if (rng() % 40 == 0)
				writer.flush();
		}
		writer.flush();
		writer.set_superblock_record(writer.last_writeback_id());
	}
};

std::vector<std::byte> contents(Device& device)
{
	std::vector<std::byte> all(device.size_bytes());
	device.read_exact(0, all);
	return all;
}

// The run wbreplay --mark-clean makes; a cut makes it throw.
bool replay_mark_clean(Device& cache, Device& backing)
{
	try {
		return replay_run(cache, backing, {.mark_clean = true}).complete();
	} catch (const std::exception&) {
		return false;
	}
}

struct Losses {
	CacheLoss cache, backing;
	const char* name;
};

// The loss models of a cut: the adversarial one first (the cache kept
// everything it was sent, the backing device nothing it did not flush).
constexpr Losses losses[] = {
	{CacheLoss::all_kept, CacheLoss::all_lost, "cache kept all, backing lost its unflushed writes"},
	{CacheLoss::all_lost, CacheLoss::all_kept, "cache lost its unflushed writes, backing kept all"},
	{CacheLoss::all_lost, CacheLoss::all_lost, "both lost their unflushed writes"},
	{CacheLoss::subset, CacheLoss::subset, "each kept a subset, one write torn"},
};

TEST(TwoDevicePowerCut, ReplayMarkCleanSurvivesACutAtEveryOperation)
{
	for (std::uint64_t seed : {1u, 2u, 3u}) {
		const Case c(seed);
		ASSERT_GT(scan_log(const_cast<SparseImage&>(c.cache)).dirty_blocks, 0u);

		// The uninterrupted run, through the same volatile devices.
		SparseImage cache = c.cache, backing = c.backing;
		PowerCut unlimited;
		VolatileDevice vcache(cache, unlimited, "cache"), vbacking(backing, unlimited, "backing");
		ASSERT_TRUE(replay_mark_clean(vcache, vbacking));
		EXPECT_EQ(vcache.unflushed_writes(), 0u) << "the clean mark ends durable";
		EXPECT_EQ(vbacking.unflushed_writes(), 0u) << "the replay ends durable";
		const std::vector<std::byte> expected = contents(vbacking);
		const std::uint64_t operations = unlimited.operations();
		ASSERT_GT(operations, 4u);
		EXPECT_EQ(scan_log(cache).dirty_blocks, 0u) << "marked clean";

		std::mt19937_64 rng(seed * 7919);
		for (std::uint64_t cut = 0; cut <= operations; ++cut)
			for (const Losses& loss : losses) {
				SparseImage cut_cache = c.cache, cut_backing = c.backing;
				PowerCut power(cut);
				VolatileDevice cv(cut_cache, power, "cache"), bv(cut_backing, power, "backing");
				replay_mark_clean(cv, bv);
				cv.lose_unflushed(loss.cache, rng);
				bv.lose_unflushed(loss.backing, rng);
				// After the power comes back: run it again, to the end.
				ASSERT_TRUE(replay_mark_clean(cut_cache, cut_backing))
					<< "seed " << seed << ", cut after " << cut << " of " << operations
					<< " operations (" << loss.name << "): the rerun did not complete";
				ASSERT_TRUE(contents(cut_backing) == expected)
					<< "seed " << seed << ", cut after " << cut << " of " << operations
					<< " operations (" << loss.name
					<< "): the backing device differs from the uninterrupted replay";
			}
	}
}

// The order itself, so a failure names it: the backing device is flushed
// after the replay's last write to it and before the first write of the
// clean mark to the cache.
class OrderRecorder final : public Device {
public:
	OrderRecorder(Device& inner, std::string name, std::vector<std::string>& events)
		: inner_(inner), name_(std::move(name)), events_(events)
	{
	}
	const std::string& path() const noexcept override { return name_; }
	std::uint64_t size_bytes() const noexcept override { return inner_.size_bytes(); }
	bool is_block_device() const noexcept override { return false; }
	DeviceIdentity identity() const noexcept override { return inner_.identity(); }
	int read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept override
	{
		return inner_.read_at(offset, buf);
	}
	int write_at(std::uint64_t offset, std::span<const std::byte> buf) noexcept override
	{
		events_.push_back(name_ + " write");
		return inner_.write_at(offset, buf);
	}
	int flush() noexcept override
	{
		events_.push_back(name_ + " flush");
		return inner_.flush();
	}

private:
	Device& inner_;
	std::string name_;
	std::vector<std::string>& events_;
};

TEST(TwoDevicePowerCut, BackingFlushedBetweenReplayAndCleanMark)
{
	const Case c(4);
	SparseImage cache = c.cache, backing = c.backing;
	std::vector<std::string> events;
	OrderRecorder rc(cache, "cache", events), rb(backing, "backing", events);
	ASSERT_TRUE(replay_mark_clean(rc, rb));
	const auto first_cache_write = std::find(events.begin(), events.end(), "cache write");
	ASSERT_NE(first_cache_write, events.end()) << "the clean mark writes the cache";
	const auto last_backing_write = std::find(events.rbegin(), events.rend(), "backing write");
	ASSERT_NE(last_backing_write, events.rend()) << "the replay writes the backing device";
	EXPECT_LT(last_backing_write.base() - events.begin(), first_cache_write - events.begin())
		<< "the cache is written only after the replay's last backing write";
	EXPECT_NE(std::find(last_backing_write.base(), first_cache_write, "backing flush"), first_cache_write)
		<< "no flush of the backing device between the replay's writes and the clean mark";
}

} // namespace

// Randomised workloads: the logical device the scan describes (backing
// device plus the dirty cache copies it points at) must equal a plain model
// of "newest data per sector" built from the same write list.
#include <map>
#include <random>

#include "scan_fixture.hpp"

using namespace wbkit;
using wbkit::testing::pattern_bytes;
using wbkit::testing::TempDir;

namespace {

struct Workload {
	std::uint64_t seed;
	unsigned slots;
	unsigned writes;
	unsigned partial_percent;
	unsigned clean_percent;
	bool merge;
	bool set_record;
};

class ScanModel : public ::testing::TestWithParam<Workload> {};

TEST_P(ScanModel, LogicalDeviceEqualsNewestWrites)
{
	const Workload wl = GetParam();
	TempDir dir;
	const std::uint64_t backing_bytes = 4ULL << 20;
	const std::uint64_t backing_sectors = backing_bytes / sector_size;
	auto cache = dir.open_rw(dir.make_image("cache", superblock_size + wl.slots * segment_size));
	auto backing = dir.open_rw(dir.make_image("backing", backing_bytes));
	std::vector<std::byte> initial = pattern_bytes(backing_bytes, wl.seed + 1000);
	backing->write_exact(0, initial);

	std::map<std::uint64_t, std::vector<std::byte>> model; // sector -> newest data
	std::mt19937_64 rng(wl.seed);
	{
		LogWriter writer(*cache, {.merge_partial_overwrites = wl.merge, .backing = backing.get()});
		for (unsigned i = 0; i < wl.writes; ++i) {
			std::uint64_t block = (rng() % (backing_sectors / block_sectors)) * block_sectors;
			if (rng() % 100 < wl.clean_percent) {
				// A read-cache fill: only of a block the cache never held dirty.
				bool touched = false;
				for (unsigned s = 0; s < block_sectors; ++s)
					touched |= model.count(block + s) > 0;
				if (!touched)
					writer.write_clean(block, std::span(initial).subspan(block * sector_size, block_size));
				continue;
			}
			unsigned first = 0, count = block_sectors;
			if (rng() % 100 < wl.partial_percent) {
				first = unsigned(rng() % block_sectors);
				count = 1 + unsigned(rng() % (block_sectors - first));
			}
			std::vector<std::byte> data = pattern_bytes(count * sector_size, rng());
			writer.write(block + first, data);
			for (unsigned s = 0; s < count; ++s)
				model[block + first + s].assign(data.begin() + s * sector_size,
								data.begin() + (s + 1) * sector_size);
			if (rng() % 40 == 0)
				writer.flush();
		}
		writer.flush();
		if (wl.set_record && writer.last_writeback_id() > 0)
			writer.set_superblock_record(writer.last_writeback_id());
	}

	LogScan scan = scan_log(*cache, {.backing_bytes = backing_bytes});
	ASSERT_FALSE(has_damage(scan.findings));
	std::vector<std::byte> logical(backing_bytes);
	backing->read_exact(0, logical);
	std::uint64_t dirty_sectors = 0;
	for (const SectorSource& src : scan.index) {
		for (unsigned s = 0; s < block_sectors; ++s) {
			if (!((src.dirty >> s) & 1u))
				continue;
			++dirty_sectors;
			cache->read_exact(scan.source_offset(src) + s * sector_size,
					  std::span(logical).subspan((src.block_sector + s) * sector_size, sector_size));
		}
	}
	EXPECT_EQ(dirty_sectors, scan.dirty_sectors);

	std::vector<std::byte> expected = initial;
	for (const auto& [sector, data] : model)
		std::copy(data.begin(), data.end(), expected.begin() + std::ptrdiff_t(sector * sector_size));
	for (std::uint64_t sector = 0; sector < backing_sectors; ++sector)
		ASSERT_TRUE(std::equal(expected.begin() + std::ptrdiff_t(sector * sector_size),
				       expected.begin() + std::ptrdiff_t((sector + 1) * sector_size),
				       logical.begin() + std::ptrdiff_t(sector * sector_size)))
			<< "sector " << sector << " differs";
}

INSTANTIATE_TEST_SUITE_P(
	Workloads, ScanModel,
	::testing::Values(Workload{1, 6, 300, 0, 0, true, false},      // no wrap, whole blocks
			  Workload{2, 3, 2000, 30, 0, true, false},    // wraps several times
			  Workload{3, 3, 2000, 50, 0, false, false},   // older partial copies decide sectors
			  Workload{4, 4, 1500, 30, 10, true, true},    // clean entries and a superblock record
			  Workload{5, 5, 3000, 60, 5, false, true},    // everything at once
			  Workload{6, 2, 900, 100, 0, false, false})); // only partial writes, tiny ring

} // namespace

// libFuzzer target that reaches the engines: the input describes a small
// cache (a few slots: ids, lengths, metablocks, checksums valid or not, the
// superblock record and magic) built on the in-memory device, and the harness
// runs the scan, the replay plan and its execution, and recovery with and
// without salvage, asserting the invariants:
//   - every planned write lies inside the backing device;
//   - per sector, the plan writes exactly the copy the kernel-rule model
//     (tests/support/replay_model.hpp) says is newest and dirty;
//   - executing the plan, and recovery with the kernel's policy, leave the
//     backing device as the model says;
//   - recovery never writes outside the backing device, never throws an
//     operational error on a healthy in-memory device.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "replay_model.hpp"
#include "wbkit/endian.hpp"
#include "wbkit/errors.hpp"
#include "wbkit/format.hpp"
#include "wbkit/log_scan.hpp"
#include "wbkit/recover.hpp"
#include "wbkit/replay.hpp"
#include "wbkit/report.hpp"

using namespace wbkit;

namespace {

constexpr unsigned max_slots = 4;
constexpr unsigned max_metablocks = 12;        // per slot described by the input
constexpr std::uint64_t backing_sectors = 256; // 128 KiB: sectors near it are reachable

// Reads the input front to back; past its end every value is zero.
class Input {
public:
	Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
	std::uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
	std::uint64_t u64()
	{
		std::uint64_t v = 0;
		for (int i = 0; i < 8; ++i)
			v |= std::uint64_t(u8()) << (8 * i);
		return v;
	}

private:
	const std::uint8_t* data_;
	std::size_t size_;
	std::size_t pos_ = 0;
};

[[noreturn]] void fail(const char* what, std::uint64_t a = 0, std::uint64_t b = 0)
{
	std::fprintf(stderr, "fuzz_engine: invariant broken: %s (%llu, %llu)\n", what, (unsigned long long)a,
		     (unsigned long long)b);
	std::abort();
}

// A sector value: mostly inside or just past the small backing device,
// sometimes unaligned, sometimes anywhere up to 2^64 - 1.
std::uint64_t sector_value(Input& in)
{
	const std::uint8_t kind = in.u8();
	const std::uint8_t v = in.u8();
	switch (kind % 8) {
	case 0:
		return in.u64();
	case 1:
		return ~std::uint64_t(0) - v; // the top of the range
	case 2:
	case 3:
		return v % (backing_sectors + 16); // unaligned, around the end
	default:
		return std::uint64_t(v % (backing_sectors / block_sectors + 2)) * block_sectors;
	}
}

// The image buffer is kept between runs for speed (a fresh 3 MiB per run
// costs more than the engines); what a run wrote is zeroed after it.
struct Written {
	std::uint64_t offset, length;
};

void build_image(Input& in, std::vector<std::byte>& image, std::vector<Written>& written, unsigned& nr_slots,
		 bool& force)
{
	const std::uint8_t flags = in.u8();
	nr_slots = 2 + flags % (max_slots - 1);
	force = flags & 0x80;
	image.resize(superblock_size + nr_slots * segment_size);
	written.push_back({0, sector_size});
	written.push_back({WB_SB_RECORD_OFFSET, sector_size});
	if (!(flags & 0x40))
		write_superblock_magic(std::span(image).first(sector_size));
	switch ((flags >> 3) & 3) {
	case 0:
		break;
	case 1:
		store_le<std::uint64_t>(image, WB_SB_RECORD_OFFSET, in.u8());
		break;
	default:
		store_le<std::uint64_t>(image, WB_SB_RECORD_OFFSET, in.u64());
		break;
	}
	std::uint64_t id = in.u8() % 8;
	for (unsigned slot = 0; slot < nr_slots; ++slot) {
		const std::uint8_t seg_flags = in.u8();
		if ((seg_flags & 3) == 3)
			continue; // empty slot
		// Ids mostly follow each other; sometimes jump, repeat or take any value.
		switch ((seg_flags >> 2) & 7) {
		case 0:
			id = in.u64();
			break;
		case 1:
			id += in.u8() % 4;
			break;
		default:
			id += 1;
		}
		const std::uint8_t wanted = in.u8();
		const unsigned described = wanted % (max_metablocks + 1);
		const std::uint8_t length = (seg_flags & 0x20) ? wanted : std::uint8_t(described);
		std::span<std::byte> seg = std::span(image).subspan(superblock_size + slot * segment_size, segment_size);
		written.push_back({superblock_size + slot * segment_size, block_size * (max_metablocks + 1)});
		SegmentHeader h;
		h.id = id;
		h.length = length;
		for (unsigned i = 0; i < described && i < blocks_per_segment; ++i) {
			h.metablocks[i].sector = sector_value(in);
			h.metablocks[i].dirty_bits = in.u8();
			std::memset(seg.data() + block_size * (i + 1), int(in.u8()) | 1, block_size);
		}
		write_segment_header(seg.first(block_size), h);
		const unsigned usable = h.usable_length();
		switch ((seg_flags >> 6) & 3) {
		case 0:
		case 1:
			h.checksum = segment_checksum(seg, usable);
			break;
		case 2:
			h.checksum = ~segment_checksum(seg, usable); // upstream before 2.0.2
			break;
		default:
			h.checksum = std::uint32_t(in.u64());
		}
		write_segment_header(seg.first(block_size), h);
	}
}

// vector<std::byte>'s operator== compares byte by byte, and every byte is a
// coverage callback here: memcmp is one call.
bool same_bytes(const std::vector<std::byte>& a, const std::vector<std::byte>& b)
{
	return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

// Every sector its own fill byte, so a write at the wrong place shows. Built
// once: a byte loop under coverage instrumentation cost more than the engines.
const std::vector<std::byte>& initial_backing()
{
	static const std::vector<std::byte> bytes = [] {
		std::vector<std::byte> out(backing_sectors * sector_size);
		for (std::uint64_t sector = 0; sector < backing_sectors; ++sector)
			std::memset(out.data() + sector * sector_size, int(0x80 | sector), sector_size);
		return out;
	}();
	return bytes;
}

// The backing device after the model's writes.
std::vector<std::byte> expected_backing(const wbkit::testing::KernelRuleModel& model, const std::vector<std::byte>& image)
{
	std::vector<std::byte> out = initial_backing();
	for (const auto& [sector, offset] : model.writes())
		if (sector < backing_sectors)
			std::memcpy(out.data() + sector * sector_size, image.data() + offset, sector_size);
	return out;
}

void check_plan(const ReplayPlan& plan, const wbkit::testing::KernelRuleModel& model)
{
	std::map<std::uint64_t, std::uint64_t> planned; // sector -> cache byte offset
	plan.for_each_extent([&](const ReplayExtent& e) {
		if (e.backing_sector >= backing_sectors || e.sectors > backing_sectors - e.backing_sector)
			fail("planned write outside the backing device", e.backing_sector, e.sectors);
		std::uint64_t covered = 0;
		for (const ExtentSource& s : e.sources) {
			if (s.extent_sector != covered)
				fail("extent sources leave a gap", e.backing_sector, s.extent_sector);
			for (std::uint64_t k = 0; k < s.sectors; ++k)
				if (!planned.emplace(e.backing_sector + s.extent_sector + k, s.cache_offset + k * sector_size).second)
					fail("a sector is written twice", e.backing_sector + s.extent_sector + k);
			covered += s.sectors;
		}
		if (covered != e.sectors)
			fail("extent sources do not cover the extent", e.backing_sector, covered);
	});
	std::map<std::uint64_t, std::uint64_t> wanted;
	for (const auto& [sector, offset] : model.writes())
		if (sector < backing_sectors)
			wanted.emplace(sector, offset);
	if (planned != wanted) {
		for (const auto& [sector, offset] : wanted)
			if (!planned.count(sector) || planned[sector] != offset)
				fail("plan and kernel-rule model disagree at sector", sector,
				     planned.count(sector) ? planned[sector] : ~0ULL);
		for (const auto& [sector, offset] : planned)
			if (!wanted.count(sector))
				fail("plan writes a sector the model does not", sector, offset);
	}
	if (plan.summary().dirty_sectors != wanted.size())
		fail("summary's dirty sectors differ from the model", plan.summary().dirty_sectors, wanted.size());
}

void run_recovery(MemoryDevice& cache, const std::vector<std::byte>* expected, bool salvage, bool force,
		  bool render)
{
	MemoryDevice backing("backing", initial_backing());
	try {
		RecoverOptions options{.salvage = salvage, .force = force};
		options.replay.max_extent_bytes = 64 * 1024; // the executor's buffers: small, as the devices are
		RecoveryReport report = recover(cache, backing, nullptr, options);
		// Rendering is the same code for every input; a sample of them keeps it covered.
		if (render)
			(void)recovery_json(report);
		if (report.lost_sectors() > 0)
			for (const LostRange& l : report.lost)
				if (l.reason != LossReason::beyond_backing)
					fail("a healthy in-memory device lost sectors", l.sector, l.sectors);
		if (expected && !same_bytes(backing.bytes(), *expected))
			fail("recovery (kernel policy) differs from the model");
	} catch (const RefusedError&) {
		// No magic, or blocks past the backing end without force: refusing is correct.
	} catch (const Error& e) {
		std::fprintf(stderr, "%s\n", e.what());
		fail("recovery threw an operational error on in-memory devices");
	}
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
	Input in(data, size);
	unsigned nr_slots = 0;
	bool force = false;
	static std::vector<std::byte> image;
	std::vector<Written> written;
	build_image(in, image, written, nr_slots, force);
	MemoryDevice cache("cache", std::move(image));

	const auto scan = std::make_shared<const LogScan>(scan_log(cache, {.backing_bytes = backing_sectors * sector_size}));
	const wbkit::testing::KernelRuleModel model(cache.bytes());
	if (model.last_flushed_id() != scan->last_flushed_id || model.last_writeback_id() != scan->last_writeback_id)
		fail("scan and model disagree on last_flushed_id / last_writeback_id", scan->last_flushed_id,
		     model.last_flushed_id());

	// Small extents too, so merging across segments and blocks is exercised.
	const std::uint64_t max_extent = (size % 3 == 0) ? block_size : 64 * 1024;
	const ReplayPlan plan = replay_plan(scan, {.max_extent_bytes = max_extent, .backing_sectors = backing_sectors});
	check_plan(plan, model);

	const std::vector<std::byte> expected = expected_backing(model, cache.bytes());
	if (scan->replayable()) {
		MemoryDevice backing("backing", initial_backing());
		execute_replay(plan, cache, backing);
		if (!same_bytes(backing.bytes(), expected))
			fail("executed plan differs from the model");
	}
	run_recovery(cache, scan->replayable() ? &expected : nullptr, false, force, size % 8 == 0);
	run_recovery(cache, nullptr, true, force, size % 8 == 1);

	image = std::move(cache.bytes());
	for (const Written& w : written)
		std::memset(image.data() + w.offset, 0, std::min<std::uint64_t>(w.length, image.size() - w.offset));
	return 0;
}

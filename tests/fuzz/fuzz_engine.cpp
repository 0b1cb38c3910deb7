// libFuzzer target that reaches the engines: the input describes a small
// cache (a few slots: ids, lengths, metablocks, checksums valid or not,
// appends in place cut between their two writes, the superblock record and
// magic, sometimes the trust record) built on the
// in-memory device, and the harness runs the scan, the replay plan and its
// execution, and recovery with and without salvage, asserting the invariants:
//   - the scan's last_flushed_id, last_writeback_id and refusal (whether the
//     kernel refuses the log) are the kernel-rule model's;
//   - every planned write lies inside the backing device;
//   - per sector, the plan writes exactly the copy the kernel-rule model
//     (tests/support/replay_model.hpp) says is newest and dirty;
//   - executing the plan, and recovery with the kernel's policy, leave the
//     backing device as the model says; recovery with --salvage leaves it as
//     the salvage model (SalvageRuleModel) says;
//   - recovery never writes outside the backing device, never throws an
//     operational error on a healthy in-memory device;
//   - recovery's dry run writes to no device and reports what the real run
//     does: the same sectors saved, the same ranges lost, the same refusal.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_input.hpp"
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
		// An append in place cut between its two writes (docs/FORMAT.md,
		// "Checksum"): the header commits the first half of the blocks, its
		// metablock area and the data already name the rest.
		std::optional<std::uint8_t> committed;
		switch ((seg_flags >> 6) & 3) {
		case 0:
			h.checksum = segment_checksum(seg, usable);
			break;
		case 1:
			if (h.length_valid() && described > 0) {
				committed = std::uint8_t(std::min(unsigned(h.length), described) / 2);
				SegmentHeader first = h;
				first.length = *committed;
				write_segment_header(seg.first(block_size), first);
				h.checksum = segment_checksum(seg, *committed);
			} else {
				h.checksum = segment_checksum(seg, usable);
			}
			break;
		case 2:
			h.checksum = ~segment_checksum(seg, usable); // upstream before 2.0.2
			break;
		default:
			h.checksum = std::uint32_t(in.u64());
		}
		write_segment_header(seg.first(block_size), h);
		if (committed)
			store_le<std::uint8_t>(seg, WB_SEG_LENGTH_OFFSET, *committed);
	}
	// The trust record, as dm-wbkit writes it when it formats: the torn-rewrite
	// rule is off on such a cache. Its value is read last, so that the bytes
	// before it decode as they did before the record was fuzzed.
	if (flags & 0x20) {
		written.push_back({WB_TRUST_SECTOR * sector_size, sector_size});
		write_clean_trust(std::span(image).subspan(WB_TRUST_SECTOR * sector_size, sector_size), in.u8() % 8, 0);
	}
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

// The backing device: one for every run (they use it one after the other),
// put back to initial_backing() where it was written. A fresh copy per run
// cost more than some of the engines.
class Backing final : public MemoryDevice {
public:
	Backing() : MemoryDevice("backing", initial_backing()) {}
	int write_at(std::uint64_t offset, std::span<const std::byte> buf) noexcept override
	{
		const int err = MemoryDevice::write_at(offset, buf);
		if (!err && !buf.empty())
			written_.push_back({offset, buf.size()});
		return err;
	}
	void reset()
	{
		for (const Written& w : written_)
			std::memcpy(bytes().data() + w.offset, initial_backing().data() + w.offset, w.length);
		written_.clear();
	}

private:
	std::vector<Written> written_;
};

Backing& fresh_backing()
{
	static Backing backing;
	backing.reset();
	return backing;
}

// Per backing sector, the cache byte offset of the data replay writes there
// (the model's newest dirty copy), or none. The backing device is small: an
// array, not a map.
constexpr std::uint64_t none = ~0ULL;
using SectorWrites = std::array<std::uint64_t, backing_sectors>;

template <typename Model>
SectorWrites model_writes(const Model& model)
{
	SectorWrites wanted;
	wanted.fill(none);
	for (const auto& [sector, offset] : model.writes())
		if (sector < backing_sectors)
			wanted[sector] = offset;
	return wanted;
}

// The backing device holds, per sector, the model's write or its initial bytes.
bool matches_model(MemoryDevice& backing, const SectorWrites& wanted, const std::vector<std::byte>& image)
{
	if (backing.bytes().size() != backing_sectors * sector_size)
		return false;
	for (std::uint64_t sector = 0; sector < backing_sectors; ++sector) {
		const std::byte* want = wanted[sector] == none ? initial_backing().data() + sector * sector_size
							       : image.data() + wanted[sector];
		if (std::memcmp(backing.bytes().data() + sector * sector_size, want, sector_size) != 0)
			return false;
	}
	return true;
}

void check_plan(const ReplayPlan& plan, const SectorWrites& wanted)
{
	SectorWrites planned;
	planned.fill(none);
	plan.for_each_extent([&](const ReplayExtent& e) {
		if (e.backing_sector >= backing_sectors || e.sectors > backing_sectors - e.backing_sector)
			fail("planned write outside the backing device", e.backing_sector, e.sectors);
		std::uint64_t covered = 0;
		for (const ExtentSource& s : e.sources) {
			if (s.extent_sector != covered)
				fail("extent sources leave a gap", e.backing_sector, s.extent_sector);
			if (s.sectors > e.sectors - covered)
				fail("extent sources reach past the extent", e.backing_sector, s.sectors);
			for (std::uint64_t k = 0; k < s.sectors; ++k) {
				std::uint64_t& at = planned[e.backing_sector + s.extent_sector + k];
				if (at != none)
					fail("a sector is written twice", e.backing_sector + s.extent_sector + k);
				at = s.cache_offset + k * sector_size;
			}
			covered += s.sectors;
		}
		if (covered != e.sectors)
			fail("extent sources do not cover the extent", e.backing_sector, covered);
	});
	std::uint64_t wanted_sectors = 0;
	for (std::uint64_t sector = 0; sector < backing_sectors; ++sector) {
		if (wanted[sector] != none && planned[sector] != wanted[sector])
			fail("plan and kernel-rule model disagree at sector", sector, planned[sector]);
		if (wanted[sector] == none && planned[sector] != none)
			fail("plan writes a sector the model does not", sector, planned[sector]);
		wanted_sectors += wanted[sector] != none;
	}
	if (plan.summary().dirty_sectors != wanted_sectors)
		fail("summary's dirty sectors differ from the model", plan.summary().dirty_sectors, wanted_sectors);
}

// A dry run's promise: no device it is given is written, ever.
class WriteForbidden final : public Device {
public:
	explicit WriteForbidden(Device& inner) : inner_(inner) {}
	const std::string& path() const noexcept override { return inner_.path(); }
	std::uint64_t size_bytes() const noexcept override { return inner_.size_bytes(); }
	bool is_block_device() const noexcept override { return inner_.is_block_device(); }
	DeviceIdentity identity() const noexcept override { return inner_.identity(); }
	std::size_t required_alignment() const noexcept override { return inner_.required_alignment(); }
	DataRange next_data(std::uint64_t offset) noexcept override { return inner_.next_data(offset); }
	int read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept override { return inner_.read_at(offset, buf); }
	int write_at(std::uint64_t offset, std::span<const std::byte> buf) noexcept override
	{
		fail("a dry run wrote to a device", offset, buf.size());
	}
	int flush() noexcept override { return inner_.flush(); }

private:
	Device& inner_;
};

bool same_segment_use(const SegmentUse& a, const SegmentUse& b)
{
	return a.slot == b.slot && a.id == b.id && a.state == b.state && a.in_kernel_log == b.in_kernel_log &&
	       a.used == b.used && a.reason == b.reason && a.sectors_replayed == b.sectors_replayed &&
	       a.data_left_behind == b.data_left_behind && a.metablocks == b.metablocks &&
	       a.metablocks_used == b.metablocks_used && a.unreadable_dirty_sectors == b.unreadable_dirty_sectors &&
	       a.left_behind_sectors == b.left_behind_sectors;
}

// A dry run reports what the real run does: what it saves, what it loses and why.
void check_dry_run_agrees(const RecoveryReport& dry, const RecoveryReport& real)
{
	if (!dry.dry_run || real.dry_run)
		fail("the reports do not say which run was dry");
	const bool same_lost =
		std::equal(dry.lost.begin(), dry.lost.end(), real.lost.begin(), real.lost.end(),
			   [](const LostRange& a, const LostRange& b) {
				   return a.sector == b.sector && a.sectors == b.sectors && a.reason == b.reason;
			   });
	if (!same_lost)
		fail("a dry run reports other lost ranges than the real run", dry.lost_sectors(), real.lost_sectors());
	if (dry.sectors_from_cache != real.sectors_from_cache || dry.sectors_rescued_clean != real.sectors_rescued_clean)
		fail("a dry run saves other sectors than the real run", dry.sectors_from_cache, real.sectors_from_cache);
	if (dry.bytes_written != real.bytes_written || dry.extents != real.extents)
		fail("a dry run writes other bytes than the real run", dry.bytes_written, real.bytes_written);
	if (!std::equal(dry.segments.begin(), dry.segments.end(), real.segments.begin(), real.segments.end(),
			same_segment_use))
		fail("a dry run uses the segments otherwise than the real run", dry.segments.size(), real.segments.size());
	if (dry.notes != real.notes || dry.overridden != real.overridden ||
	    dry.record_hidden_segments != real.record_hidden_segments ||
	    dry.single_point_in_time != real.single_point_in_time || dry.nothing_lost() != real.nothing_lost())
		fail("a dry run's notes differ from the real run's", dry.notes.size(), real.notes.size());
}

// expected: the model's writes, when the backing device must end as the model says.
// with_dry_run: a dry run first, to be held against the real run.
void run_recovery(MemoryDevice& cache, const SectorWrites* expected, bool salvage, bool force, bool render,
		  bool with_dry_run)
{
	MemoryDevice& backing = fresh_backing();
	RecoverOptions options{.salvage = salvage, .force = force};
	options.replay.max_extent_bytes = 64 * 1024; // the executor's buffers: small, as the devices are
	// The dry run first, on devices that fail any write: the backing device
	// is then still as it was for the real run.
	std::optional<RecoveryReport> dry;
	std::string dry_refusal;
	if (with_dry_run) {
		try {
			WriteForbidden read_only_cache(cache), read_only_backing(backing);
			RecoverOptions dry_options = options;
			dry_options.dry_run = true;
			dry = recover(read_only_cache, read_only_backing, nullptr, dry_options);
		} catch (const RefusedError& e) {
			dry_refusal = e.what();
		} catch (const Error& e) {
			std::fprintf(stderr, "%s\n", e.what());
			fail("a dry run threw an operational error on in-memory devices");
		}
	}
	try {
		RecoveryReport report = recover(cache, backing, nullptr, options);
		if (with_dry_run && !dry)
			fail("a dry run refused what the real run did");
		if (with_dry_run)
			check_dry_run_agrees(*dry, report);
		// Rendering is the same code for every input; a sample of them keeps it covered.
		if (render)
			(void)recovery_json(report);
		if (report.lost_sectors() > 0)
			for (const LostRange& l : report.lost)
				if (l.reason != LossReason::beyond_backing)
					fail("a healthy in-memory device lost sectors", l.sector, l.sectors);
		if (expected && !matches_model(backing, *expected, cache.bytes()))
			fail(salvage ? "recovery (salvage) differs from the salvage model"
				     : "recovery (kernel policy) differs from the model");
	} catch (const RefusedError& e) {
		// No magic, or blocks past the backing end without force: refusing is correct.
		if (with_dry_run && (dry || dry_refusal != e.what()))
			fail("a dry run did not refuse as the real run did");
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
	if (model.last_flushed_id() != scan->last_flushed_id)
		fail("scan and model disagree on last_flushed_id", scan->last_flushed_id, model.last_flushed_id());
	if (model.last_writeback_id() != scan->last_writeback_id)
		fail("scan and model disagree on last_writeback_id", scan->last_writeback_id, model.last_writeback_id());
	if (model.refused() != scan->refused())
		fail("scan and model disagree on whether the kernel refuses the log", scan->refused(), model.refused());

	// Small extents too, so merging across segments and blocks is exercised.
	const std::uint64_t max_extent = (size % 3 == 0) ? block_size : 64 * 1024;
	const ReplayPlan plan = replay_plan(scan, {.max_extent_bytes = max_extent, .backing_sectors = backing_sectors});
	const SectorWrites wanted = model_writes(model);
	check_plan(plan, wanted);

	if (scan->replayable()) {
		MemoryDevice& backing = fresh_backing();
		execute_replay(plan, cache, backing);
		if (!matches_model(backing, wanted, cache.bytes()))
			fail("executed plan differs from the model");
	}
	// A dry run costs as much as the real recovery: one input in four has
	// one, the two policies by turns.
	run_recovery(cache, scan->replayable() ? &wanted : nullptr, false, force, size % 16 == 0, size % 8 == 2);
	const wbkit::testing::SalvageRuleModel salvage_model(cache.bytes(), model.rewritten_id());
	const SectorWrites salvaged = model_writes(salvage_model);
	run_recovery(cache, scan->replayable() && salvage_model.defined() ? &salvaged : nullptr, true, force,
		     size % 16 == 1, size % 8 == 6);

	image = std::move(cache.bytes());
	for (const Written& w : written)
		std::memset(image.data() + w.offset, 0, std::min<std::uint64_t>(w.length, image.size() - w.offset));
	return 0;
}

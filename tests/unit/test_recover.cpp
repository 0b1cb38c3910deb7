// Recovery with injected read and write errors, compared against the
// independent model of the writes: what must come back, what must be
// reported lost, and what the report says about every segment.
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "replay_model.hpp"
#include "temp_image.hpp"
#include "wbkit/errors.hpp"
#include "wbkit/log_writer.hpp"
#include "wbkit/recover.hpp"
#include "wbkit/report.hpp"

using namespace wbkit;
using namespace wbkit::testing;

namespace {

constexpr std::uint64_t MiB = 1 << 20;

// A cache whose batches of whole-block writes are one segment each (segment
// id = batch + 1), on a ring large enough never to wrap: every segment is
// still in the cache, so a model can leave any of them out.
class BatchedCache {
public:
	BatchedCache(std::uint64_t batches, unsigned blocks_per_batch, std::uint64_t seed, std::uint64_t backing_bytes = 2 * MiB)
		: seed_(seed)
	{
		cache_path = dir.make_image("cache.img", superblock_size + (batches + 4) * segment_size);
		backing_path = dir.make_image("backing.img", backing_bytes);
		auto cache = dir.open_rw(cache_path);
		auto backing = dir.open_rw(backing_path);
		base = pattern_bytes(backing_bytes, seed ^ 0x5eed);
		backing->write_exact(0, base);
		LogWriter writer(*cache, {.backing = backing.get()});
		std::mt19937_64 rng(seed);
		const std::uint64_t blocks = backing_bytes / block_size;
		for (std::uint64_t b = 0; b < batches; ++b) {
			std::set<std::uint64_t> chosen;
			while (chosen.size() < blocks_per_batch)
				chosen.insert(rng() % blocks);
			for (std::uint64_t block : chosen) {
				Write w{b, block * block_sectors, pattern_bytes(block_size, rng())};
				writer.write(w.sector, w.data);
				writes.push_back(std::move(w));
			}
			writer.flush();
		}
		geometry = writer.geometry();
	}

	// The model without the given batches, and without single blocks of others.
	std::vector<std::byte> expected(const std::set<std::uint64_t>& skip_batches = {},
					const std::set<std::pair<std::uint64_t, std::uint64_t>>& skip_blocks = {}) const
	{
		SectorModel model;
		for (const Write& w : writes)
			if (!skip_batches.count(w.batch) && !skip_blocks.count({w.batch, w.sector}))
				model.write(w.sector, w.data);
		return model.image(base);
	}

	std::uint64_t slot_of_batch(std::uint64_t batch) const { return geometry.slot_of_id(batch + 1); }
	// Backing sector of the block behind metablock `index` of a batch (writes are in block order).
	std::uint64_t block_of(std::uint64_t batch, unsigned index) const
	{
		unsigned seen = 0;
		for (const Write& w : writes)
			if (w.batch == batch && seen++ == index)
				return w.sector;
		throw std::logic_error("no such block");
	}

	std::vector<std::byte> backing_bytes() const { return read_all(*open_device(backing_path)); }

	struct Write {
		std::uint64_t batch;
		std::uint64_t sector;
		std::vector<std::byte> data;
	};

	TempDir dir;
	std::string cache_path;
	std::string backing_path;
	std::vector<std::byte> base;
	std::vector<Write> writes;
	Geometry geometry;

private:
	std::uint64_t seed_;
};

const SegmentUse& verdict_for_slot(const RecoveryReport& r, std::uint64_t slot)
{
	for (const SegmentUse& v : r.segments)
		if (v.slot == slot)
			return v;
	throw std::logic_error("slot not in the report");
}

RecoveryReport recover_in_place(BatchedCache& c, FaultInjectingDevice& cache, bool salvage)
{
	auto backing = open_device(c.backing_path, {.writable = true});
	return recover(cache, *backing, nullptr, {.salvage = salvage});
}

} // namespace

TEST(TolerantRead, NarrowsAFailureDownToTheSector)
{
	TempDir dir;
	const auto content = pattern_bytes(MiB, 1);
	const std::string path = dir.make_image("dev.img", MiB);
	dir.open_rw(path)->write_exact(0, content);
	FaultInjectingDevice dev(open_device(path));
	dev.fail_reads(300 * 512, 1);
	dev.fail_reads(700 * 512 + 100, 600); // sectors 700 and 701
	AlignedBuffer buf(MiB);
	std::vector<std::pair<std::uint64_t, std::uint64_t>> bad;
	EXPECT_FALSE(read_tolerant(dev, 0, buf.span(), 1, [&](std::uint64_t o, std::uint64_t l) { bad.emplace_back(o, l); }));
	const std::vector<std::pair<std::uint64_t, std::uint64_t>> want = {{300 * 512, 512}, {700 * 512, 512}, {701 * 512, 512}};
	EXPECT_EQ(bad, want);
	for (std::uint64_t s = 0; s < MiB / 512; ++s) {
		const bool unreadable = s == 300 || s == 700 || s == 701;
		const std::byte* got = buf.data() + s * 512;
		if (unreadable)
			EXPECT_TRUE(std::all_of(got, got + 512, [](std::byte b) { return b == std::byte{0}; })) << s;
		else
			ASSERT_EQ(std::memcmp(got, content.data() + s * 512, 512), 0) << s;
	}
}

namespace {
// Fails the first `failures` reads, then works: a transient error.
class FlakyDevice final : public Device {
public:
	FlakyDevice(std::unique_ptr<Device> inner, unsigned failures) : inner_(std::move(inner)), failures_(failures) {}
	const std::string& path() const noexcept override { return inner_->path(); }
	std::uint64_t size_bytes() const noexcept override { return inner_->size_bytes(); }
	bool is_block_device() const noexcept override { return false; }
	DeviceIdentity identity() const noexcept override { return inner_->identity(); }
	int read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept override
	{
		++reads;
		if (failures_ > 0) {
			--failures_;
			return EIO;
		}
		return inner_->read_at(offset, buf);
	}
	int write_at(std::uint64_t offset, std::span<const std::byte> buf) noexcept override
	{
		return inner_->write_at(offset, buf);
	}
	int flush() noexcept override { return 0; }
	unsigned reads = 0;

private:
	std::unique_ptr<Device> inner_;
	unsigned failures_;
};
} // namespace

TEST(TolerantRead, RetriesATransientErrorBeforeSplitting)
{
	TempDir dir;
	const std::string path = dir.make_image("dev.img", MiB);
	dir.open_rw(path)->write_exact(0, pattern_bytes(MiB, 2));
	FlakyDevice dev(open_device(path), 2);
	AlignedBuffer buf(64 * 1024);
	bool reported = false;
	EXPECT_TRUE(read_tolerant(dev, 4096, buf.span(), 2, [&](std::uint64_t, std::uint64_t) { reported = true; }));
	EXPECT_FALSE(reported);
	EXPECT_EQ(dev.reads, 3u); // two failures, one success, no split
	EXPECT_EQ(std::memcmp(buf.data(), pattern_bytes(MiB, 2).data() + 4096, buf.size()), 0);
}

TEST(SectorRangesTest, MergesAndAnswers)
{
	SectorRanges r;
	r.add(10, 5);
	r.add(20, 5);
	r.add(15, 5); // joins both
	r.add(100, 1);
	r.add(0, 0);
	const std::vector<std::pair<std::uint64_t, std::uint64_t>> want = {{10, 15}, {100, 1}};
	EXPECT_EQ(r.list(), want);
	EXPECT_EQ(r.total_sectors(), 16u);
	EXPECT_TRUE(r.contains(24));
	EXPECT_FALSE(r.contains(25));
	EXPECT_TRUE(r.intersects(90, 11));
	EXPECT_FALSE(r.intersects(25, 75));
}

TEST(Recover, HealthyCacheRecoversEverythingAndLosesNothing)
{
	BatchedCache c(6, 20, 1);
	FaultInjectingDevice cache(open_device(c.cache_path));
	const RecoveryReport r = recover_in_place(c, cache, false);
	EXPECT_TRUE(r.nothing_lost());
	EXPECT_TRUE(r.single_point_in_time);
	std::set<std::uint64_t> blocks;
	for (const auto& w : c.writes)
		blocks.insert(w.sector);
	EXPECT_EQ(r.sectors_from_cache, blocks.size() * 8);
	EXPECT_EQ(first_difference(c.backing_bytes(), c.expected()), -1);
}

TEST(Recover, UnreadableHeaderOfAMiddleSlot)
{
	for (bool salvage : {false, true}) {
		SCOPED_TRACE(salvage ? "salvage" : "kernel policy");
		BatchedCache c(8, 12, 2);
		FaultInjectingDevice cache(open_device(c.cache_path));
		const std::uint64_t slot = c.slot_of_batch(3);
		cache.fail_reads(c.geometry.slot_offset(slot), 512);
		const RecoveryReport r = recover_in_place(c, cache, salvage);

		EXPECT_EQ(r.unreadable_header_slots, std::vector<std::uint64_t>{slot});
		EXPECT_EQ(r.stop_slot, slot);
		EXPECT_EQ(r.last_flushed_id, 3u);
		EXPECT_TRUE(r.cache.unreadable.contains(c.geometry.slot_offset(slot) / 512));
		EXPECT_EQ(segment_reason_name(verdict_for_slot(r, slot).reason), "header-unreadable");
		EXPECT_FALSE(r.nothing_lost());
		EXPECT_TRUE(r.lost.empty()) << "nothing is known about the unreadable segment's blocks";
		if (!salvage) {
			EXPECT_TRUE(r.single_point_in_time);
			EXPECT_EQ(segment_reason_name(verdict_for_slot(r, c.slot_of_batch(5)).reason), "after-stop-point");
			EXPECT_GT(verdict_for_slot(r, c.slot_of_batch(5)).left_behind_sectors, 0u);
			EXPECT_EQ(first_difference(c.backing_bytes(), c.expected({3, 4, 5, 6, 7})), -1);
		} else {
			EXPECT_FALSE(r.single_point_in_time);
			EXPECT_TRUE(verdict_for_slot(r, c.slot_of_batch(5)).used);
			EXPECT_EQ(first_difference(c.backing_bytes(), c.expected({3})), -1);
		}
	}
}

TEST(Recover, UnreadableDataBlockInTheNewestSegment)
{
	for (bool salvage : {false, true}) {
		SCOPED_TRACE(salvage ? "salvage" : "kernel policy");
		BatchedCache c(5, 10, 3);
		FaultInjectingDevice cache(open_device(c.cache_path));
		const std::uint64_t slot = c.slot_of_batch(4);
		cache.fail_reads(c.geometry.data_block_offset(slot, 2) + 3 * 512, 512);
		const RecoveryReport r = recover_in_place(c, cache, salvage);

		const std::uint64_t bad_block = c.block_of(4, 2);
		ASSERT_EQ(r.lost.size(), 1u);
		EXPECT_EQ(r.lost[0].sector, bad_block);
		EXPECT_EQ(r.lost[0].sectors, 8u);
		EXPECT_EQ(r.lost[0].reason, LossReason::cache_copy_unreadable);
		EXPECT_EQ(r.stop_slot, slot);
		EXPECT_FALSE(r.nothing_lost());
		const SegmentUse& v = verdict_for_slot(r, slot);
		EXPECT_EQ(v.unreadable_dirty_sectors, 8u);
		if (!salvage) {
			EXPECT_FALSE(v.used);
			EXPECT_EQ(v.left_behind_sectors, 9u * 8);
			EXPECT_EQ(first_difference(c.backing_bytes(), c.expected({4})), -1);
		} else {
			EXPECT_TRUE(v.used);
			EXPECT_EQ(v.metablocks_used, 9u);
			EXPECT_EQ(segment_reason_name(v.reason), "used-partially");
			EXPECT_FALSE(r.single_point_in_time);
			EXPECT_EQ(first_difference(c.backing_bytes(), c.expected({}, {{4, bad_block}})), -1);
		}
	}
}

TEST(Recover, TornNewestSegmentIsTheKernelsPrefixAndNoLoss)
{
	TempDir dir;
	const std::string cache_path = dir.make_image("cache.img", superblock_size + 8 * segment_size);
	const std::string backing_path = dir.make_image("backing.img", MiB);
	SectorModel prefix;
	{
		auto cache = dir.open_rw(cache_path);
		LogWriter writer(*cache);
		for (std::uint64_t i = 0; i < 4; ++i) {
			auto data = pattern_bytes(4 * block_size, i);
			writer.write(i * 64, data);
			writer.flush();
			if (i < 3)
				prefix.write(i * 64, data);
		}
		writer.tear_segment(4);
	}
	auto cache = open_device(cache_path);
	auto backing = open_device(backing_path, {.writable = true});
	const RecoveryReport r = recover(*cache, *backing, nullptr, {});
	EXPECT_TRUE(r.nothing_lost());
	EXPECT_EQ(r.checksum_failed_slots, std::vector<std::uint64_t>{3});
	EXPECT_EQ(segment_reason_name(verdict_for_slot(r, 3).reason), "torn-newest-segment");
	EXPECT_EQ(first_difference(read_all(*backing), prefix.image(std::vector<std::byte>(MiB))), -1);
}

TEST(Recover, CorruptMiddleSegmentWithAndWithoutSalvage)
{
	for (bool salvage : {false, true}) {
		SCOPED_TRACE(salvage ? "salvage" : "kernel policy");
		BatchedCache c(7, 15, 4);
		{
			// Flip one data byte of segment 3 (batch 2), as damaged media would.
			auto cache = open_device(c.cache_path, {.writable = true});
			std::byte b[1];
			const std::uint64_t at = c.geometry.data_block_offset(c.slot_of_batch(2), 5) + 17;
			cache->read_exact(at, b);
			b[0] ^= std::byte{0x40};
			cache->write_exact(at, b);
		}
		FaultInjectingDevice cache(open_device(c.cache_path));
		const RecoveryReport r = recover_in_place(c, cache, salvage);
		EXPECT_EQ(r.checksum_failed_slots, std::vector<std::uint64_t>{c.slot_of_batch(2)});
		EXPECT_EQ(segment_reason_name(verdict_for_slot(r, c.slot_of_batch(2)).reason), "checksum-mismatch");
		EXPECT_FALSE(verdict_for_slot(r, c.slot_of_batch(2)).used);
		EXPECT_FALSE(r.nothing_lost());
		EXPECT_EQ(r.single_point_in_time, !salvage);
		if (salvage)
			EXPECT_EQ(first_difference(c.backing_bytes(), c.expected({2})), -1);
		else
			EXPECT_EQ(first_difference(c.backing_bytes(), c.expected({2, 3, 4, 5, 6})), -1);
	}
}

namespace {

// Writes d's writes again on a fresh log, then a clean copy of a block
// nobody wrote (its data is what the backing device holds) in a segment of
// its own; returns that block's sector.
std::uint64_t relog_with_clean_copy(BatchedCache& d)
{
	std::uint64_t clean_block = 8;
	std::set<std::uint64_t> written;
	for (const auto& w : d.writes)
		written.insert(w.sector);
	while (written.count(clean_block) || written.count(clean_block + 8))
		clean_block += 8;
	auto cache = open_device(d.cache_path, {.writable = true});
	auto backing = open_device(d.backing_path, {.writable = true});
	LogWriter writer(*cache, {.backing = backing.get()});
	for (const auto& w : d.writes)
		writer.write(w.sector, w.data);
	writer.flush();
	std::vector<std::byte> block(d.base.begin() + std::ptrdiff_t(clean_block * 512),
				     d.base.begin() + std::ptrdiff_t(clean_block * 512 + block_size));
	writer.write_clean(clean_block, block);
	writer.flush();
	return clean_block;
}

} // namespace

TEST(Recover, UnreadableBackingSectorsWithAndWithoutACacheCopy)
{
	for (bool to_output : {true, false}) {
		SCOPED_TRACE(to_output ? "--output" : "in place");
		BatchedCache d(3, 10, 5);
		const std::uint64_t clean_block = relog_with_clean_copy(d);
		const std::uint64_t dirty_block = d.writes[4].sector;
		const std::uint64_t nowhere = clean_block + 8; // not in the cache at all
		ASSERT_FALSE(std::any_of(d.writes.begin(), d.writes.end(), [&](const auto& w) { return w.sector == nowhere; }));

		FaultInjectingDevice backing(open_device(d.backing_path, {.writable = !to_output}));
		backing.fail_reads(dirty_block * 512 + 512, 1024); // sectors +1, +2 of a dirty block
		backing.fail_reads(clean_block * 512, 3 * 512);    // sectors +0..+2 of the clean block
		backing.fail_reads(nowhere * 512 + 2048, 512);     // sector +4 of a block with no copy
		const auto before = read_all(*open_device(d.backing_path));

		auto cache = open_device(d.cache_path);
		std::unique_ptr<Device> output;
		const std::string out_path = (d.dir.path() / "out.img").string();
		if (to_output)
			output = open_device(out_path, {.writable = true, .create = true});
		const RecoveryReport r = recover(*cache, backing, output.get(), {});

		EXPECT_EQ(r.backing.unreadable.total_sectors(), 2u + 3u + 1u);
		EXPECT_EQ(r.sectors_rescued_clean, 3u);
		ASSERT_EQ(r.lost.size(), 1u);
		EXPECT_EQ(r.lost[0].sector, nowhere + 4);
		EXPECT_EQ(r.lost[0].sectors, 1u);
		EXPECT_EQ(r.lost[0].reason, LossReason::backing_unreadable);
		EXPECT_FALSE(r.nothing_lost());
		EXPECT_TRUE(std::none_of(r.notes.begin(), r.notes.end(),
					 [](const std::string& n) { return n.find("trust record") != std::string::npos; }));

		auto expected = d.expected();
		if (to_output) {
			// The unreadable sector without a copy reads as zeros in the copy.
			std::fill_n(expected.begin() + std::ptrdiff_t((nowhere + 4) * 512), 512, std::byte{0});
			EXPECT_EQ(first_difference(read_all(*open_device(out_path)), expected), -1);
			EXPECT_EQ(first_difference(read_all(*open_device(d.backing_path)), before), -1)
				<< "--output leaves the backing device untouched";
		} else {
			EXPECT_EQ(first_difference(read_all(*open_device(d.backing_path)), expected), -1);
		}
	}
}

TEST(Recover, AnUntrustedCleanCopyRestoresNothing)
{
	// As above, but after a write-around session (the trust record says
	// none): the clean copy may be older than the backing device's data.
	BatchedCache d(3, 10, 5);
	const std::uint64_t clean_block = relog_with_clean_copy(d);
	{
		auto cache = open_device(d.cache_path, {.writable = true});
		AlignedBuffer trust(sector_size);
		write_clean_trust(trust.span(), WB_TRUST_NONE, 0);
		cache->write_exact(WB_TRUST_SECTOR * sector_size, trust.span());
	}
	FaultInjectingDevice backing(open_device(d.backing_path, {.writable = true}));
	backing.fail_reads(clean_block * 512, 3 * 512);
	auto cache = open_device(d.cache_path);
	const RecoveryReport r = recover(*cache, backing, nullptr, {});
	EXPECT_EQ(r.sectors_rescued_clean, 0u);
	EXPECT_FALSE(r.nothing_lost());
	EXPECT_EQ(r.lost_sectors(), 3u);
	EXPECT_TRUE(std::any_of(r.notes.begin(), r.notes.end(),
				[](const std::string& n) { return n.find("trust record") != std::string::npos; }));
}

TEST(Recover, WriteFailuresOnTheOutputAreReportedLost)
{
	BatchedCache c(2, 8, 6);
	const std::uint64_t target = c.writes[3].sector;
	auto cache = open_device(c.cache_path);
	auto backing = open_device(c.backing_path);
	const std::string out_path = (c.dir.path() / "out.img").string();
	FaultInjectingDevice output(open_device(out_path, {.writable = true, .create = true}));
	output.fail_writes((target + 5) * 512, 512);
	const RecoveryReport r = recover(*cache, *backing, &output, {});
	ASSERT_FALSE(r.lost.empty());
	for (const LostRange& l : r.lost) {
		EXPECT_EQ(l.reason, LossReason::write_failed);
		EXPECT_EQ(l.sector, target + 5);
		EXPECT_EQ(l.sectors, 1u);
	}
	EXPECT_FALSE(r.nothing_lost());
}

TEST(Recover, RefusesSameDeviceUnformattedAndTinyCaches)
{
	BatchedCache c(2, 4, 7);
	auto cache = open_device(c.cache_path);
	auto same = open_device(c.cache_path, {.writable = true});
	EXPECT_THROW(recover(*cache, *same, nullptr, {}), RefusedError);
	auto backing = open_device(c.backing_path);
	EXPECT_THROW(recover(*cache, *backing, same.get(), {}), RefusedError);

	TempDir dir;
	auto blank = dir.open_rw(dir.make_image("blank.img", superblock_size + 2 * segment_size));
	auto writable_backing = open_device(c.backing_path, {.writable = true});
	EXPECT_THROW(recover(*blank, *writable_backing, nullptr, {}), RefusedError);
	const RecoveryReport forced = recover(*blank, *writable_backing, nullptr, {.force = true});
	EXPECT_EQ(forced.overridden.size(), 1u);
	auto tiny = dir.open_rw(dir.make_image("tiny.img", 8192));
	EXPECT_THROW(recover(*tiny, *writable_backing, nullptr, {.force = true}), RefusedError);
}

TEST(Recover, ReportJsonCarriesTheDocumentedKeys)
{
	BatchedCache c(3, 5, 8);
	FaultInjectingDevice cache(open_device(c.cache_path));
	cache.fail_reads(c.geometry.data_block_offset(c.slot_of_batch(1), 0), 512);
	const RecoveryReport r = recover_in_place(c, cache, false);
	const auto j = nlohmann::json::parse(recovery_json(r));
	EXPECT_EQ(j["policy"], "kernel");
	EXPECT_FALSE(j["nothing_lost"].get<bool>());
	EXPECT_FALSE(j["devices"]["cache"]["readable"].get<bool>());
	EXPECT_TRUE(j["devices"]["backing"]["readable"].get<bool>());
	EXPECT_EQ(j["log"]["stop"]["reason"], "unreadable");
	EXPECT_EQ(j["schema"], "wbrecover/1");
	EXPECT_EQ(j["lost"].size(), 1u);
	EXPECT_EQ(j["lost"][0]["reason"], "cache-copy-unreadable");
	EXPECT_EQ(j["segments"].size(), 3u);
	std::ostringstream text;
	print_recovery(text, r);
	EXPECT_NE(text.str().find("cache-copy-unreadable"), std::string::npos);
	EXPECT_NE(text.str().find("--salvage takes them"), std::string::npos);
}

namespace {

// A cache with a clean copy of a block nobody wrote, dirty blocks, and a
// newest segment of its own, plus the faults of both devices that give every
// kind of loss a dry run can know of.
struct FaultyPair {
	explicit FaultyPair(std::uint64_t seed) : d(3, 10, seed)
	{
		std::set<std::uint64_t> written;
		for (const auto& w : d.writes)
			written.insert(w.sector);
		auto unwritten = [&](std::uint64_t from) {
			while (written.count(from))
				from += 8;
			written.insert(from);
			return from;
		};
		clean_block = unwritten(8);
		nowhere = unwritten(clean_block + 8);
		for (auto& sector : newest_blocks)
			sector = unwritten(nowhere + 8);
		auto cache = open_device(d.cache_path, {.writable = true});
		auto backing = open_device(d.backing_path, {.writable = true});
		LogWriter writer(*cache, {.backing = backing.get()});
		for (const auto& w : d.writes)
			writer.write(w.sector, w.data);
		writer.flush(); // segment 1, slot 0
		std::vector<std::byte> block(d.base.begin() + std::ptrdiff_t(clean_block * 512),
					     d.base.begin() + std::ptrdiff_t(clean_block * 512 + block_size));
		writer.write_clean(clean_block, block);
		writer.flush(); // segment 2, slot 1
		for (std::uint64_t sector : newest_blocks)
			writer.write(sector, pattern_bytes(block_size, sector));
		writer.flush(); // segment 3, slot 2
		dirty_block = d.writes[4].sector;
	}

	void inject(FaultInjectingDevice& cache, FaultInjectingDevice& backing) const
	{
		cache.fail_reads(d.geometry.data_block_offset(2, 1) + 512, 512); // a dirty block of the newest segment
		backing.fail_reads(dirty_block * 512 + 512, 1024);               // replayed over
		backing.fail_reads(clean_block * 512, 3 * 512);                  // restored from the clean copy
		backing.fail_reads(nowhere * 512 + 2048, 512);                   // no copy anywhere
	}

	BatchedCache d;
	std::uint64_t clean_block = 0;
	std::uint64_t nowhere = 0;
	std::uint64_t dirty_block = 0;
	std::array<std::uint64_t, 3> newest_blocks{};
};

} // namespace

TEST(Recover, DryRunReportsWhatARealRunDoesAndWritesNothing)
{
	for (bool salvage : {false, true}) {
		for (bool to_output : {false, true}) {
			SCOPED_TRACE(std::string(salvage ? "salvage" : "kernel policy") + (to_output ? ", --output" : ", in place"));
			FaultyPair p(21);
			const std::string out_path = (p.d.dir.path() / "out.img").string();
			const auto cache_before = read_all(*open_device(p.d.cache_path));
			const auto backing_before = read_all(*open_device(p.d.backing_path));

			RecoveryReport dry;
			{
				FaultInjectingDevice cache(open_device(p.d.cache_path));
				FaultInjectingDevice backing(open_device(p.d.backing_path));
				p.inject(cache, backing);
				// Any write attempt would show here (and fail, as the devices are read-only).
				cache.fail_writes(0, cache.size_bytes());
				backing.fail_writes(0, backing.size_bytes());
				dry = recover(cache, backing, nullptr,
					      {.salvage = salvage, .dry_run = true, .output_path = to_output ? out_path : ""});
				EXPECT_EQ(cache.failed_writes(), 0u);
				EXPECT_EQ(backing.failed_writes(), 0u);
			}
			EXPECT_EQ(first_difference(read_all(*open_device(p.d.cache_path)), cache_before), -1);
			EXPECT_EQ(first_difference(read_all(*open_device(p.d.backing_path)), backing_before), -1);
			EXPECT_FALSE(std::filesystem::exists(out_path));

			RecoveryReport real;
			{
				FaultInjectingDevice cache(open_device(p.d.cache_path));
				FaultInjectingDevice backing(open_device(p.d.backing_path, {.writable = !to_output}));
				p.inject(cache, backing);
				std::unique_ptr<Device> output;
				if (to_output)
					output = open_device(out_path, {.writable = true, .create = true});
				real = recover(cache, backing, output.get(), {.salvage = salvage});
			}

			EXPECT_TRUE(dry.dry_run);
			EXPECT_FALSE(real.dry_run);
			auto dry_json = nlohmann::json::parse(recovery_json(dry));
			EXPECT_TRUE(dry_json["dry_run"].get<bool>());
			dry_json["dry_run"] = false;
			EXPECT_EQ(dry_json, nlohmann::json::parse(recovery_json(real)));
			// The comparison covers every kind of finding a dry run can know of.
			std::set<LossReason> reasons;
			for (const LostRange& l : real.lost)
				reasons.insert(l.reason);
			EXPECT_EQ(reasons, (std::set<LossReason>{LossReason::backing_unreadable, LossReason::cache_copy_unreadable}));
			EXPECT_EQ(real.sectors_rescued_clean, 3u);
			EXPECT_GT(real.sectors_from_cache, 0u);
			EXPECT_EQ(real.output.has_value(), to_output);
			EXPECT_EQ(real.backing.unreadable.total_sectors(), 6u);
		}
	}
}

TEST(Recover, DryRunRefusesWhatARealRunRefusesAndCannotKnowWriteFailures)
{
	BatchedCache c(2, 8, 6);
	auto cache = open_device(c.cache_path);
	auto same = open_device(c.cache_path);
	EXPECT_THROW(recover(*cache, *same, nullptr, {.dry_run = true}), RefusedError);
	TempDir dir;
	auto blank = dir.open_rw(dir.make_image("blank.img", superblock_size + 2 * segment_size));
	auto backing = open_device(c.backing_path);
	EXPECT_THROW(recover(*blank, *backing, nullptr, {.dry_run = true}), RefusedError);

	// The one difference: a write the destination refuses is known only by writing.
	const std::string out_path = (c.dir.path() / "out.img").string();
	const RecoveryReport dry = recover(*cache, *backing, nullptr, {.dry_run = true, .output_path = out_path});
	EXPECT_TRUE(dry.nothing_lost());
	FaultInjectingDevice output(open_device(out_path, {.writable = true, .create = true}));
	output.fail_writes((c.writes[3].sector + 5) * 512, 512);
	const RecoveryReport real = recover(*cache, *backing, &output, {});
	ASSERT_EQ(real.lost.size(), 1u);
	EXPECT_EQ(real.lost[0].reason, LossReason::write_failed);
}

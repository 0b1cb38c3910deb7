// The replay plan: extents in destination order, generated lazily from the
// scan's index, and the totals a dry run prints.
#include "wbkit/replay.hpp"

#include <algorithm>

namespace wbkit {

ReplayPlan::ReplayPlan(std::shared_ptr<const LogScan> scan, const ReplayOptions& options)
	: scan_(std::move(scan)), options_(options),
	  max_extent_sectors_(std::max<std::uint64_t>(block_sectors, options.max_extent_bytes / sector_size))
{
	summary_.segments_in_log = scan_->log.size();
	for (const LogSegment& seg : scan_->log)
		summary_.segments_written_back += seg.written_back;
	sectors_per_segment_.assign(scan_->log.size(), 0);

	// One pass over the plan gives the numbers a dry run prints; the
	// extents themselves are generated again when they are executed.
	Cursor cursor(*this);
	cursor.accounting_ = this;
	std::uint64_t last_block = ~0ULL;
	while (auto extent = cursor.next()) {
		++summary_.extents;
		summary_.dirty_sectors += extent->sectors;
		// Inclusive bounds: an extent may end at the last sector of the 64-bit space.
		const std::uint64_t first = extent->backing_sector & ~(block_sectors - 1);
		const std::uint64_t final = (extent->backing_sector + extent->sectors - 1) & ~(block_sectors - 1);
		for (std::uint64_t s = first;; s += block_sectors) {
			if (s != last_block) {
				++summary_.dirty_blocks;
				last_block = s;
			}
			if (s == final)
				break;
		}
	}
	summary_.bytes = summary_.dirty_sectors * sector_size;
	for (std::uint64_t n : sectors_per_segment_)
		summary_.segments_contributing += n > 0;
}

bool ReplayPlan::Cursor::load_block()
{
	const LogScan& scan = *plan_->scan_;
	const ReplayOptions& options = plan_->options_;
	while (position_ < scan.index.size()) {
		const std::uint64_t block = scan.index.block_sector(position_);
		mask_ = 0;
		for (; position_ < scan.index.size(); ++position_) {
			const SectorSource source = scan.index[position_];
			if (source.block_sector != block)
				break;
			for (unsigned j = 0; j < block_sectors; ++j)
				if ((source.dirty >> j) & 1u)
					owner_[j] = source;
			mask_ |= source.dirty;
		}
		{
			// Sectors past the backing device, or past 2^64 (a damaged
			// metablock near the top of the address space), cannot be written.
			const std::uint64_t end = options.backing_sectors.value_or(~0ULL);
			for (unsigned j = 0; j < block_sectors; ++j) {
				const bool wraps = block > ~0ULL - j;
				if (!((mask_ >> j) & 1u) || (!wraps && block + j < end))
					continue;
				mask_ = std::uint8_t(mask_ & ~(1u << j));
				if (accounting_) {
					++accounting_->summary_.skipped_sectors;
					if (!accounting_->summary_.first_skipped_sector)
						accounting_->summary_.first_skipped_sector = block + j;
				}
			}
		}
		if (mask_ == 0)
			continue;
		if (accounting_)
			for (unsigned j = 0; j < block_sectors; ++j)
				if ((mask_ >> j) & 1u)
					++accounting_->sectors_per_segment_[owner_[j].log_index];
		block_sector_ = block;
		next_sector_ = 0;
		have_block_ = true;
		return true;
	}
	return false;
}

std::optional<ReplayExtent> ReplayPlan::Cursor::next()
{
	const LogScan& scan = *plan_->scan_;
	ReplayExtent extent;
	for (;;) {
		if (!have_block_ && !load_block())
			break;
		for (; next_sector_ < block_sectors; ++next_sector_) {
			if (!((mask_ >> next_sector_) & 1u))
				continue;
			const std::uint64_t sector = block_sector_ + next_sector_;
			if (extent.sectors > 0 &&
			    (sector != extent.backing_sector + extent.sectors || extent.sectors >= plan_->max_extent_sectors_))
				return extent;
			if (extent.sectors == 0)
				extent.backing_sector = sector;
			const SectorSource& source = owner_[next_sector_];
			const LogSegment& segment = scan.log[source.log_index];
			const std::uint64_t cache_offset = scan.source_offset(source) + next_sector_ * sector_size;
			if (!extent.sources.empty()) {
				ExtentSource& last = extent.sources.back();
				if (last.segment_id == segment.id && last.cache_offset + last.sectors * sector_size == cache_offset) {
					++last.sectors;
					++extent.sectors;
					continue;
				}
			}
			extent.sources.push_back(ExtentSource{.cache_offset = cache_offset,
							      .extent_sector = extent.sectors,
							      .sectors = 1,
							      .segment_id = segment.id,
							      .slot = segment.slot});
			++extent.sectors;
		}
		have_block_ = false;
	}
	if (extent.sectors == 0)
		return std::nullopt;
	return extent;
}

void ReplayPlan::for_each_extent(const std::function<void(const ReplayExtent&)>& visit) const
{
	Cursor cursor = extents();
	while (auto extent = cursor.next())
		visit(*extent);
}

ReplayPlan replay_plan(std::shared_ptr<const LogScan> scan, const ReplayOptions& options)
{
	return ReplayPlan(std::move(scan), options);
}

ReplayPlan replay_plan(const LogScan& scan, const ReplayOptions& options)
{
	return ReplayPlan(std::shared_ptr<const LogScan>(&scan, [](const LogScan*) {}), options);
}

} // namespace wbkit

// Recovery from the bad cases: a dead target, unreadable sectors on the cache
// or the backing device, damaged segments. Reads tolerate errors (retry, then
// 4 KiB, then sector by sector) and every sector that could not be saved is
// reported as a range, so the user can map it to files.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "wbkit/device.hpp"
#include "wbkit/log_scan.hpp"
#include "wbkit/replay.hpp"

namespace wbkit {

// Sorted, merged ranges of sectors.
class SectorRanges {
public:
	void add(std::uint64_t first, std::uint64_t count);
	bool contains(std::uint64_t sector) const;
	bool intersects(std::uint64_t first, std::uint64_t count) const;
	bool empty() const { return ranges_.empty(); }
	std::uint64_t total_sectors() const;
	// (first sector, count), ascending.
	std::vector<std::pair<std::uint64_t, std::uint64_t>> list() const;

private:
	std::map<std::uint64_t, std::uint64_t> ranges_; // first -> end (exclusive)
};

// Called with the byte offset and length of each range that kept failing.
using BadRangeSink = std::function<void(std::uint64_t offset, std::uint64_t length)>;

// Reads buf; on error retries, then reads 4 KiB pieces, then sectors of the
// failing pieces. Unreadable sectors are zero-filled and reported. Returns
// true when everything was read.
bool read_tolerant(Device& device, std::uint64_t offset, std::span<std::byte> buf, unsigned retries,
		   const BadRangeSink& on_bad);
// The same narrowing for writes; returns true when everything was written.
bool write_tolerant(Device& device, std::uint64_t offset, std::span<const std::byte> buf, unsigned retries,
		    const BadRangeSink& on_bad);

// A read-only view of a failing device: every read is tolerant, unreadable
// sectors read as zeros (read_at still says EIO) and are remembered.
class TolerantReader final : public Device {
public:
	TolerantReader(Device& inner, unsigned retries) : inner_(inner), retries_(retries) {}

	const SectorRanges& unreadable() const { return unreadable_; }

	const std::string& path() const noexcept override { return inner_.path(); }
	std::uint64_t size_bytes() const noexcept override { return inner_.size_bytes(); }
	bool is_block_device() const noexcept override { return inner_.is_block_device(); }
	DeviceIdentity identity() const noexcept override { return inner_.identity(); }
	std::size_t required_alignment() const noexcept override { return inner_.required_alignment(); }
	int read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept override;
	int write_at(std::uint64_t, std::span<const std::byte>) noexcept override;
	int flush() noexcept override { return 0; }

private:
	Device& inner_;
	unsigned retries_;
	SectorRanges unreadable_;
};

enum class LossReason {
	backing_unreadable,    // unreadable on the backing device, and the cache has no copy
	cache_copy_unreadable, // the newest copy is dirty in the cache and could not be read
	write_failed,          // the destination refused the write
	beyond_backing,        // a dirty copy for a sector past the backing device's end
};

std::string_view loss_reason_name(LossReason reason);

struct LostRange {
	std::uint64_t sector = 0; // backing sector
	std::uint64_t sectors = 0;
	LossReason reason = LossReason::backing_unreadable;
};

struct RecoverOptions {
	// Beyond the kernel's consistent prefix: valid segments after a gap, and
	// metablocks of unverifiable segments whose metablock and data read fine.
	bool salvage = false;
	unsigned retries = 2;
	// Go on without the writeboost magic, or with blocks past the backing end.
	bool force = false;
	ReplayOptions replay{};
	// phase: "backing" (reading or copying the backing device), "replay".
	std::function<void(std::string_view phase, const ReplayProgress&)> progress{};
};

struct DeviceDiagnosis {
	std::string path;
	std::uint64_t size_bytes = 0;
	std::uint64_t bytes_checked = 0;
	SectorRanges unreadable;
};

// What recovery did with one non-empty slot.
struct SegmentVerdict {
	std::uint64_t slot = 0;
	std::uint64_t id = 0; // 0 when the header could not be read
	SlotState state = SlotState::empty;
	bool in_kernel_log = false;
	bool used = false;
	unsigned metablocks = 0; // known (readable) metablocks
	unsigned metablocks_used = 0;
	std::uint64_t sectors_replayed = 0;
	std::uint64_t unreadable_dirty_sectors = 0; // dirty sectors whose data could not be read
	std::uint64_t left_behind_sectors = 0;      // readable dirty sectors the policy did not take
	std::string reason{};                       // stable, kebab-case
};

struct RecoveryReport {
	bool salvage = false;
	bool single_point_in_time = true; // false when salvage took data past the kernel's stop point
	DeviceDiagnosis cache;
	DeviceDiagnosis backing;
	std::optional<std::string> output;
	std::vector<std::string> overridden; // safety checks --force skipped

	// The kernel's replay, as the diagnosis: the scan itself, and the figures
	// the text report uses.
	std::shared_ptr<const LogScan> kernel_log;
	std::uint64_t nr_segments = 0;
	std::uint64_t max_id = 0;
	std::uint64_t last_flushed_id = 0;
	std::uint64_t last_writeback_id = 0;
	StopReason stop_reason = StopReason::empty_log;
	std::optional<std::uint64_t> stop_slot{};
	std::vector<std::uint64_t> unreadable_header_slots;
	std::vector<std::uint64_t> checksum_failed_slots;
	std::vector<Finding> findings;

	std::vector<SegmentVerdict> segments;
	std::uint64_t extents = 0;
	std::uint64_t sectors_from_cache = 0;    // dirty sectors written from the cache
	std::uint64_t sectors_rescued_clean = 0; // unreadable backing sectors restored from clean cache copies
	std::uint64_t bytes_written = 0;
	std::vector<LostRange> lost;
	std::vector<std::string> notes; // data left behind and why, in words

	std::uint64_t lost_sectors() const;
	bool data_left_behind() const;
	bool nothing_lost() const { return lost.empty() && !data_left_behind(); }
};

// Refuses (RefusedError) before anything is written when: two of the devices
// are one; the cache is too small to be a cache; it has no magic (unless
// force); the log names blocks past the backing device (unless force); the
// output is a block device smaller than the backing device.
// Diagnoses both devices, then writes the chosen log's data to `output`
// (after copying the backing device there) or, without output, to the
// backing device. Throws only for operational failures that stop everything
// (the cache cannot be scanned at all, a flush fails).
RecoveryReport recover(Device& cache, Device& backing, Device* output, const RecoverOptions& options);

nlohmann::json recovery_json(const RecoveryReport& report);
void print_recovery(std::ostream& out, const RecoveryReport& report);

} // namespace wbkit

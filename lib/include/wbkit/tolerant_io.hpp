// Error-tolerant reads and writes on a Device: a failing request is retried,
// then narrowed down (4 KiB pieces, then sectors) so that one bad sector costs
// one sector. Replay and recovery both use them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "wbkit/device.hpp"

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

} // namespace wbkit

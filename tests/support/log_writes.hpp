// Reading a dm-log-writes log and rebuilding the logged device as of any
// entry, for crash-consistency tests.
//
// The log format is the kernel's (drivers/md/dm-log-writes.c,
// Documentation/admin-guide/device-mapper/log-writes.rst): a super block at
// byte 0, then for each entry one sector-size header followed by the written
// data (nr_sectors device sectors); a mark carries its name in the header
// sector instead. The target logs a write only once a flush made it durable
// (a write is spliced in just before the FLUSH entry that covered it) or it
// completed with FUA, so a prefix that ends at a FLUSH or FUA entry is a state
// the device could be left in by a power cut, and the plain writes between two
// such entries may have reached the media in any subset.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "wbkit/device.hpp"

namespace wbkit::testing {

inline constexpr std::uint64_t log_writes_magic = 0x6a736677736872ULL;
inline constexpr std::uint64_t log_writes_version = 1;
inline constexpr std::uint64_t log_flush_flag = 1U << 0;
inline constexpr std::uint64_t log_fua_flag = 1U << 1;
inline constexpr std::uint64_t log_discard_flag = 1U << 2;
inline constexpr std::uint64_t log_mark_flag = 1U << 3;
inline constexpr std::uint64_t log_metadata_flag = 1U << 4;

struct LogWritesEntry {
	std::uint64_t number = 0; // 0-based position in the log
	std::uint64_t sector = 0; // in device sectors (the log's sector size)
	std::uint64_t nr_sectors = 0;
	std::uint64_t flags = 0;
	std::uint64_t data_offset = 0; // byte offset of the data in the log file
	std::string mark{};            // for mark entries

	bool is_mark() const { return flags & log_mark_flag; }
	bool is_discard() const { return flags & log_discard_flag; }
	// An entry whose completion makes something durable.
	bool is_barrier() const { return flags & (log_flush_flag | log_fua_flag); }
	bool has_data() const { return !is_mark() && !is_discard() && nr_sectors > 0; }
};

// A log file, mapped read-only. Throws std::runtime_error for a file that is
// not a dm-log-writes log or whose entries run past its end.
class LogWritesLog {
public:
	explicit LogWritesLog(const std::string& path);
	~LogWritesLog();
	LogWritesLog(const LogWritesLog&) = delete;
	LogWritesLog& operator=(const LogWritesLog&) = delete;

	std::uint32_t sector_size() const { return sector_size_; }
	const std::vector<LogWritesEntry>& entries() const { return entries_; }
	std::span<const std::byte> data(const LogWritesEntry& entry) const;

private:
	std::string path_;
	const std::byte* map_ = nullptr;
	std::size_t size_ = 0;
	std::uint32_t sector_size_ = 512;
	std::vector<LogWritesEntry> entries_;
};

// A sparse in-memory device: 4 KiB pages, zero where never written. Copies
// share pages until one side writes (copy-on-write), so snapshotting a state
// costs one map copy, not the device's size.
class SparseImage : public Device {
public:
	static constexpr std::size_t page_size = 4096;

	SparseImage(std::string name, std::uint64_t size) : name_(std::move(name)), size_(size) {}
	SparseImage(const SparseImage&) = default;
	SparseImage& operator=(const SparseImage&) = default;

	const std::string& path() const noexcept override { return name_; }
	std::uint64_t size_bytes() const noexcept override { return size_; }
	bool is_block_device() const noexcept override { return false; }
	DeviceIdentity identity() const noexcept override { return {std::uint64_t(reinterpret_cast<std::uintptr_t>(this)), 1}; }
	int read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept override;
	int write_at(std::uint64_t offset, std::span<const std::byte> buf) noexcept override;
	int flush() noexcept override { return 0; }

	// Writes the image to a file of its size, sparse where no page exists.
	void save(const std::string& file) const;
	// Writes [offset, offset + size) of the image at file_offset of an open file.
	void save_range(int fd, std::uint64_t file_offset, std::uint64_t offset, std::uint64_t size) const;
	std::size_t pages() const { return pages_.size(); }

private:
	using Page = std::array<std::byte, page_size>;
	std::string name_;
	std::uint64_t size_;
	std::map<std::uint64_t, std::shared_ptr<Page>> pages_;
};

// A byte range of another device, seen as a device of its own (the cache and
// backing parts of one logged device).
class DeviceWindow : public Device {
public:
	DeviceWindow(Device& inner, std::string name, std::uint64_t offset, std::uint64_t size)
		: inner_(inner), name_(std::move(name)), offset_(offset), size_(size)
	{
	}
	const std::string& path() const noexcept override { return name_; }
	std::uint64_t size_bytes() const noexcept override { return size_; }
	bool is_block_device() const noexcept override { return false; }
	DeviceIdentity identity() const noexcept override { return {std::uint64_t(reinterpret_cast<std::uintptr_t>(this)), 2}; }
	int read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept override;
	int write_at(std::uint64_t offset, std::span<const std::byte> buf) noexcept override;
	int flush() noexcept override { return inner_.flush(); }

private:
	Device& inner_;
	std::string name_;
	std::uint64_t offset_;
	std::uint64_t size_;
};

// Applies an entry's data (all of it, or only the sectors set in `sectors`,
// a mask over the entry's device sectors) to an image of the logged device.
void apply_entry(const LogWritesLog& log, const LogWritesEntry& entry, Device& image);
void apply_entry_sectors(const LogWritesLog& log, const LogWritesEntry& entry, Device& image,
			 const std::vector<bool>& sectors);

} // namespace wbkit::testing

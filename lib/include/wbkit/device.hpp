// Access to cache and backing devices: image files and block devices.
//
// Reads and writes return an errno value instead of throwing, so recovery
// code can work around a bad range; read_exact()/write_exact() throw IoError
// for callers that cannot go on without the data.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace wbkit {

struct OpenOptions {
	bool writable = false;
	bool direct = false;    // O_DIRECT where the file system allows it
	bool exclusive = false; // O_EXCL on block devices: refuse if in use
	bool create = false;    // create a regular file (writable only)
};

// Identifies the object behind a path, to tell whether two paths are one device.
struct DeviceIdentity {
	std::uint64_t dev = 0;   // st_dev of the file, or st_rdev of a block device
	std::uint64_t inode = 0; // st_ino of a regular file, 0 for a block device
	bool operator==(const DeviceIdentity&) const = default;
};

class Device {
public:
	virtual ~Device() = default;

	virtual const std::string& path() const noexcept = 0;
	virtual std::uint64_t size_bytes() const noexcept = 0;
	virtual bool is_block_device() const noexcept = 0;
	virtual DeviceIdentity identity() const noexcept = 0;
	// Alignment that offsets, lengths and buffers need (1 unless O_DIRECT).
	virtual std::size_t required_alignment() const noexcept { return 1; }

	// 0 on success, else an errno value. A read past the end is EIO.
	// The next range at or after offset that may hold data: [begin, end). A
	// sparse file's holes before begin (and from end on) read as zeros, so a
	// reader may take them as such without reading. {size, size} when only
	// holes follow. Devices that cannot tell say everything is data.
	struct DataRange {
		std::uint64_t begin = 0;
		std::uint64_t end = 0;
	};
	virtual DataRange next_data(std::uint64_t offset) noexcept { return {offset, size_bytes()}; }

	virtual int read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept = 0;
	virtual int write_at(std::uint64_t offset, std::span<const std::byte> buf) noexcept = 0;
	virtual int flush() noexcept = 0;

	void read_exact(std::uint64_t offset, std::span<std::byte> buf);
	void write_exact(std::uint64_t offset, std::span<const std::byte> buf);
	void flush_or_throw();
};

// Opens a regular file or a block device. Throws IoError (or RefusedError for
// an exclusive open of a device that is in use).
std::unique_ptr<Device> open_device(const std::string& path, const OpenOptions& options = {});

// A device whose chosen byte ranges fail with EIO, for tests of recovery.
class FaultInjectingDevice : public Device {
public:
	explicit FaultInjectingDevice(std::unique_ptr<Device> inner);

	void fail_reads(std::uint64_t offset, std::uint64_t length);
	void fail_writes(std::uint64_t offset, std::uint64_t length);
	std::uint64_t failed_reads() const noexcept { return failed_reads_; }
	std::uint64_t failed_writes() const noexcept { return failed_writes_; }

	const std::string& path() const noexcept override { return inner_->path(); }
	std::uint64_t size_bytes() const noexcept override { return inner_->size_bytes(); }
	bool is_block_device() const noexcept override { return inner_->is_block_device(); }
	DeviceIdentity identity() const noexcept override { return inner_->identity(); }
	std::size_t required_alignment() const noexcept override { return inner_->required_alignment(); }
	int read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept override;
	int write_at(std::uint64_t offset, std::span<const std::byte> buf) noexcept override;
	int flush() noexcept override { return inner_->flush(); }

private:
	using Range = std::pair<std::uint64_t, std::uint64_t>; // [begin, end)
	static bool overlaps(const std::vector<Range>& ranges, std::uint64_t offset, std::uint64_t length);

	std::unique_ptr<Device> inner_;
	std::vector<Range> read_faults_;
	std::vector<Range> write_faults_;
	std::atomic<std::uint64_t> failed_reads_ = 0; // readers may run in several threads
	std::atomic<std::uint64_t> failed_writes_ = 0;
};

// A device in memory: fuzzing, tests, and images built on the fly.
class MemoryDevice : public Device {
public:
	MemoryDevice(std::string name, std::vector<std::byte> bytes) : name_(std::move(name)), bytes_(std::move(bytes)) {}

	std::vector<std::byte>& bytes() noexcept { return bytes_; }
	const std::string& path() const noexcept override { return name_; }
	std::uint64_t size_bytes() const noexcept override { return bytes_.size(); }
	bool is_block_device() const noexcept override { return false; }
	DeviceIdentity identity() const noexcept override { return {}; }
	int read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept override;
	int write_at(std::uint64_t offset, std::span<const std::byte> buf) noexcept override;
	int flush() noexcept override { return 0; }

private:
	std::string name_;
	std::vector<std::byte> bytes_;
};

// A buffer aligned for O_DIRECT (4 KiB), zero-initialised unless asked:
// zeroing a segment-sized buffer costs more than the reads into it of a
// small log, for callers that never read a byte they did not write first.
class AlignedBuffer {
public:
	static constexpr std::size_t alignment = 4096;
	struct Uninitialised {};
	static constexpr Uninitialised uninitialised{};
	explicit AlignedBuffer(std::size_t size = 0);
	// Contents indeterminate: only for a caller that reads no byte before writing it.
	AlignedBuffer(std::size_t size, Uninitialised);
	AlignedBuffer(AlignedBuffer&& other) noexcept;
	AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
	AlignedBuffer(const AlignedBuffer&) = delete;
	AlignedBuffer& operator=(const AlignedBuffer&) = delete;
	~AlignedBuffer();

	std::byte* data() noexcept { return data_; }
	const std::byte* data() const noexcept { return data_; }
	std::size_t size() const noexcept { return size_; }
	std::span<std::byte> span() noexcept { return {data_, size_}; }
	std::span<const std::byte> span() const noexcept { return {data_, size_}; }

private:
	std::byte* data_ = nullptr;
	std::size_t size_ = 0;
};

} // namespace wbkit

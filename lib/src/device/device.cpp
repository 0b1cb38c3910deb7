#include "wbkit/device.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "wbkit/errors.hpp"

namespace wbkit {

void Device::read_exact(std::uint64_t offset, std::span<std::byte> buf)
{
	if (int err = read_at(offset, buf))
		throw IoError("read of " + std::to_string(buf.size()) + " bytes at offset " + std::to_string(offset) +
				      " failed",
			      path(), err);
}

void Device::write_exact(std::uint64_t offset, std::span<const std::byte> buf)
{
	if (int err = write_at(offset, buf))
		throw IoError("write of " + std::to_string(buf.size()) + " bytes at offset " +
				      std::to_string(offset) + " failed",
			      path(), err);
}

void Device::flush_or_throw()
{
	if (int err = flush())
		throw IoError("flush failed", path(), err);
}

namespace {

class FileDevice final : public Device {
public:
	FileDevice(std::string path, int fd, std::uint64_t size, bool block, DeviceIdentity identity, bool direct)
		: path_(std::move(path)), fd_(fd), size_(size), block_(block), identity_(identity), direct_(direct)
	{
	}
	~FileDevice() override { ::close(fd_); }

	const std::string& path() const noexcept override { return path_; }
	std::uint64_t size_bytes() const noexcept override { return size_; }
	bool is_block_device() const noexcept override { return block_; }
	DeviceIdentity identity() const noexcept override { return identity_; }
	std::size_t required_alignment() const noexcept override { return direct_ ? AlignedBuffer::alignment : 1; }

	DataRange next_data(std::uint64_t offset) noexcept override
	{
		// Block devices have no holes; file systems without SEEK_DATA say EINVAL.
		if (block_ || offset >= size_)
			return {std::min(offset, size_), size_};
		const off_t begin = ::lseek(fd_, off_t(offset), SEEK_DATA);
		if (begin < 0)
			return errno == ENXIO ? after_last_data(offset) : DataRange{offset, size_};
		const off_t end = ::lseek(fd_, begin, SEEK_HOLE);
		if (end < 0)
			return {std::min(std::uint64_t(begin), size_), size_};
		return {std::min(std::uint64_t(begin), size_), std::min(std::uint64_t(end), size_)};
	}

	// ENXIO: no data from offset to the file's current end. Only that stretch is a
	// hole; if the file shrank since it was opened, what lies past its end is not
	// zeros but gone, and must be read (and fail) rather than skipped.
	DataRange after_last_data(std::uint64_t offset) const noexcept
	{
		struct stat st {};
		if (::fstat(fd_, &st) != 0)
			return {offset, size_};
		const std::uint64_t file_end = std::min(std::uint64_t(st.st_size), size_);
		return {std::max(offset, file_end), size_};
	}

	int read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept override
	{
		if (offset > size_ || buf.size() > size_ - offset)
			return EIO;
		std::size_t done = 0;
		while (done < buf.size()) {
			ssize_t n = ::pread(fd_, buf.data() + done, buf.size() - done, off_t(offset + done));
			if (n < 0) {
				if (errno == EINTR)
					continue;
				return errno;
			}
			if (n == 0)
				return EIO; // the file shrank under us
			done += std::size_t(n);
		}
		return 0;
	}

	int write_at(std::uint64_t offset, std::span<const std::byte> buf) noexcept override
	{
		std::size_t done = 0;
		while (done < buf.size()) {
			ssize_t n = ::pwrite(fd_, buf.data() + done, buf.size() - done, off_t(offset + done));
			if (n < 0) {
				if (errno == EINTR)
					continue;
				return errno;
			}
			if (n == 0)
				return EIO;
			done += std::size_t(n);
		}
		if (!block_ && offset + buf.size() > size_)
			size_ = offset + buf.size();
		return 0;
	}

	int flush() noexcept override { return ::fdatasync(fd_) ? errno : 0; }

private:
	std::string path_;
	int fd_;
	std::uint64_t size_;
	bool block_;
	DeviceIdentity identity_;
	bool direct_;
};

} // namespace

std::unique_ptr<Device> open_device(const std::string& path, const OpenOptions& options)
{
	struct stat st {};
	bool exists = ::stat(path.c_str(), &st) == 0;
	if (!exists && !(options.create && options.writable))
		throw IoError("cannot open", path, errno);
	if (exists && S_ISDIR(st.st_mode))
		throw IoError("cannot open", path, EISDIR);
	if (exists && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
		throw IoError("cannot open: not a regular file or block device", path, ENODEV);
	bool block = exists && S_ISBLK(st.st_mode);

	int flags = (options.writable ? O_RDWR : O_RDONLY) | O_CLOEXEC;
	if (options.create && options.writable && !exists)
		flags |= O_CREAT;
	if (options.exclusive && block)
		flags |= O_EXCL; // on a block device: fails with EBUSY if mounted or held by a target
	if (options.direct)
		flags |= O_DIRECT;

	int fd = ::open(path.c_str(), flags, 0644);
	if (fd < 0 && errno == EINVAL && options.direct) {
		// Some file systems (tmpfs) have no O_DIRECT; buffered I/O plus fdatasync is still correct.
		flags &= ~O_DIRECT;
		fd = ::open(path.c_str(), flags, 0644);
	}
	if (fd < 0) {
		int err = errno;
		if (err == EBUSY && options.exclusive)
			throw RefusedError(path + ": device is in use (mounted, or held by a device-mapper target)");
		throw IoError("cannot open", path, err);
	}
	if (::fstat(fd, &st) != 0) {
		int err = errno;
		::close(fd);
		throw IoError("cannot stat", path, err);
	}

	std::uint64_t size = 0;
	DeviceIdentity identity;
	if (block) {
		if (::ioctl(fd, BLKGETSIZE64, &size) != 0) {
			int err = errno;
			::close(fd);
			throw IoError("cannot get the block device size", path, err);
		}
		identity = {std::uint64_t(st.st_rdev), 0};
	} else {
		size = std::uint64_t(st.st_size);
		identity = {std::uint64_t(st.st_dev), std::uint64_t(st.st_ino)};
	}
	return std::make_unique<FileDevice>(path, fd, size, block, identity, (flags & O_DIRECT) != 0);
}

FaultInjectingDevice::FaultInjectingDevice(std::unique_ptr<Device> inner) : inner_(std::move(inner)) {}

void FaultInjectingDevice::fail_reads(std::uint64_t offset, std::uint64_t length)
{
	read_faults_.emplace_back(offset, offset + length);
}

void FaultInjectingDevice::fail_writes(std::uint64_t offset, std::uint64_t length)
{
	write_faults_.emplace_back(offset, offset + length);
}

bool FaultInjectingDevice::overlaps(const std::vector<Range>& ranges, std::uint64_t offset, std::uint64_t length)
{
	return std::any_of(ranges.begin(), ranges.end(),
			   [&](const Range& r) { return offset < r.second && r.first < offset + length; });
}

int FaultInjectingDevice::read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept
{
	if (overlaps(read_faults_, offset, buf.size())) {
		++failed_reads_;
		return EIO;
	}
	return inner_->read_at(offset, buf);
}

int FaultInjectingDevice::write_at(std::uint64_t offset, std::span<const std::byte> buf) noexcept
{
	if (overlaps(write_faults_, offset, buf.size())) {
		++failed_writes_;
		return EIO;
	}
	return inner_->write_at(offset, buf);
}

int MemoryDevice::read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept
{
	if (offset > bytes_.size() || buf.size() > bytes_.size() - offset)
		return EIO;
	std::memcpy(buf.data(), bytes_.data() + offset, buf.size());
	return 0;
}

int MemoryDevice::write_at(std::uint64_t offset, std::span<const std::byte> buf) noexcept
{
	if (offset > bytes_.size() || buf.size() > bytes_.size() - offset)
		return ENOSPC;
	std::memcpy(bytes_.data() + offset, buf.data(), buf.size());
	return 0;
}

AlignedBuffer::AlignedBuffer(std::size_t size) : AlignedBuffer(size, uninitialised)
{
	if (data_)
		std::memset(data_, 0, (size + alignment - 1) / alignment * alignment);
}

AlignedBuffer::AlignedBuffer(std::size_t size, Uninitialised) : size_(size)
{
	if (size == 0)
		return;
	std::size_t rounded = (size + alignment - 1) / alignment * alignment;
	data_ = static_cast<std::byte*>(std::aligned_alloc(alignment, rounded));
	if (!data_)
		throw std::bad_alloc();
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
	: data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0))
{
}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept
{
	if (this != &other) {
		std::free(data_);
		data_ = std::exchange(other.data_, nullptr);
		size_ = std::exchange(other.size_, 0);
	}
	return *this;
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

} // namespace wbkit

#include "log_writes.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <stdexcept>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace wbkit::testing {

namespace {

std::uint64_t le64_at(const std::byte* p)
{
	std::uint64_t v = 0;
	for (int i = 7; i >= 0; --i)
		v = (v << 8) | std::uint64_t(p[i]);
	return v;
}

std::uint32_t le32_at(const std::byte* p)
{
	return std::uint32_t(p[0]) | std::uint32_t(p[1]) << 8 | std::uint32_t(p[2]) << 16 | std::uint32_t(p[3]) << 24;
}

// Mirrors struct log_write_super / log_write_entry of the kernel.
constexpr std::size_t super_magic = 0, super_version = 8, super_nr_entries = 16, super_sectorsize = 24;
constexpr std::size_t entry_sector = 0, entry_nr_sectors = 8, entry_flags = 16, entry_data_len = 24,
		      entry_header_size = 32;

} // namespace

LogWritesLog::LogWritesLog(const std::string& path) : path_(path)
{
	int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		throw std::runtime_error(path + ": " + std::strerror(errno));
	struct stat st {};
	if (::fstat(fd, &st) != 0 || st.st_size < 512) {
		::close(fd);
		throw std::runtime_error(path + ": too small for a dm-log-writes log");
	}
	size_ = std::size_t(st.st_size);
	void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
	::close(fd);
	if (map == MAP_FAILED)
		throw std::runtime_error(path + ": mmap: " + std::strerror(errno));
	map_ = static_cast<const std::byte*>(map);

	if (le64_at(map_ + super_magic) != log_writes_magic)
		throw std::runtime_error(path + ": no dm-log-writes super block (bad magic)");
	if (le64_at(map_ + super_version) != log_writes_version)
		throw std::runtime_error(path + ": unknown dm-log-writes version " +
					 std::to_string(le64_at(map_ + super_version)));
	sector_size_ = le32_at(map_ + super_sectorsize);
	if (sector_size_ < 512 || sector_size_ > 65536 || (sector_size_ & (sector_size_ - 1)))
		throw std::runtime_error(path + ": bad sector size " + std::to_string(sector_size_));
	const std::uint64_t nr_entries = le64_at(map_ + super_nr_entries);

	std::uint64_t pos = sector_size_;
	entries_.reserve(nr_entries);
	for (std::uint64_t n = 0; n < nr_entries; ++n) {
		if (pos + sector_size_ > size_)
			throw std::runtime_error(path + ": entry " + std::to_string(n) + " runs past the end of the log");
		const std::byte* h = map_ + pos;
		LogWritesEntry e;
		e.number = n;
		e.sector = le64_at(h + entry_sector);
		e.nr_sectors = le64_at(h + entry_nr_sectors);
		e.flags = le64_at(h + entry_flags);
		const std::uint64_t data_len = le64_at(h + entry_data_len);
		pos += sector_size_;
		if (e.is_mark()) {
			const std::uint64_t len = std::min<std::uint64_t>(data_len, sector_size_ - entry_header_size);
			e.mark.assign(reinterpret_cast<const char*>(h + entry_header_size), len);
		} else if (!e.is_discard()) {
			e.data_offset = pos;
			pos += e.nr_sectors * sector_size_;
			if (pos > size_)
				throw std::runtime_error(path + ": data of entry " + std::to_string(n) +
							 " runs past the end of the log");
		}
		entries_.push_back(std::move(e));
	}
}

LogWritesLog::~LogWritesLog()
{
	if (map_)
		::munmap(const_cast<std::byte*>(map_), size_);
}

std::span<const std::byte> LogWritesLog::data(const LogWritesEntry& entry) const
{
	if (!entry.has_data())
		return {};
	return {map_ + entry.data_offset, std::size_t(entry.nr_sectors * sector_size_)};
}

int SparseImage::read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept
{
	if (offset > size_ || buf.size() > size_ - offset)
		return EIO;
	std::size_t done = 0;
	while (done < buf.size()) {
		const std::uint64_t at = offset + done;
		const std::uint64_t page = at / page_size;
		const std::size_t in_page = std::size_t(at % page_size);
		const std::size_t n = std::min(buf.size() - done, page_size - in_page);
		auto it = pages_.find(page);
		if (it == pages_.end())
			std::memset(buf.data() + done, 0, n);
		else
			std::memcpy(buf.data() + done, it->second->data() + in_page, n);
		done += n;
	}
	return 0;
}

int SparseImage::write_at(std::uint64_t offset, std::span<const std::byte> buf) noexcept
{
	if (offset > size_ || buf.size() > size_ - offset)
		return EIO;
	try {
		std::size_t done = 0;
		while (done < buf.size()) {
			const std::uint64_t at = offset + done;
			const std::uint64_t page = at / page_size;
			const std::size_t in_page = std::size_t(at % page_size);
			const std::size_t n = std::min(buf.size() - done, page_size - in_page);
			auto& slot = pages_[page];
			if (!slot)
				slot = std::make_shared<Page>();
			else if (slot.use_count() > 1)
				slot = std::make_shared<Page>(*slot);
			std::memcpy(slot->data() + in_page, buf.data() + done, n);
			done += n;
		}
	} catch (const std::bad_alloc&) {
		return ENOMEM;
	}
	return 0;
}

void SparseImage::save_range(int fd, std::uint64_t file_offset, std::uint64_t offset, std::uint64_t size) const
{
	for (auto it = pages_.lower_bound(offset / page_size); it != pages_.end(); ++it) {
		const std::uint64_t page_start = it->first * page_size;
		if (page_start >= offset + size)
			break;
		const std::uint64_t from = std::max(page_start, offset);
		const std::uint64_t to = std::min(page_start + page_size, offset + size);
		const std::byte* src = it->second->data() + (from - page_start);
		if (::pwrite(fd, src, to - from, off_t(file_offset + (from - offset))) != ssize_t(to - from))
			throw std::runtime_error(std::string("writing an image: ") + std::strerror(errno));
	}
}

void SparseImage::save(const std::string& file) const
{
	int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		throw std::runtime_error(file + ": " + std::strerror(errno));
	try {
		if (::ftruncate(fd, off_t(size_)) != 0)
			throw std::runtime_error(file + ": " + std::strerror(errno));
		save_range(fd, 0, 0, size_);
	} catch (...) {
		::close(fd);
		throw;
	}
	::close(fd);
}

int DeviceWindow::read_at(std::uint64_t offset, std::span<std::byte> buf) noexcept
{
	if (offset > size_ || buf.size() > size_ - offset)
		return EIO;
	return inner_.read_at(offset_ + offset, buf);
}

int DeviceWindow::write_at(std::uint64_t offset, std::span<const std::byte> buf) noexcept
{
	if (offset > size_ || buf.size() > size_ - offset)
		return EIO;
	return inner_.write_at(offset_ + offset, buf);
}

void apply_entry(const LogWritesLog& log, const LogWritesEntry& entry, Device& image)
{
	const std::uint64_t offset = entry.sector * log.sector_size();
	if (entry.is_discard()) {
		// What a discarded range reads back as is up to the device; zeros
		// is what the kernel's replay tools write for it.
		std::vector<std::byte> zeros(std::size_t(entry.nr_sectors * log.sector_size()));
		image.write_exact(offset, zeros);
		return;
	}
	if (entry.has_data())
		image.write_exact(offset, log.data(entry));
}

void apply_entry_sectors(const LogWritesLog& log, const LogWritesEntry& entry, Device& image,
			 const std::vector<bool>& sectors)
{
	if (!entry.has_data())
		return;
	const auto data = log.data(entry);
	const std::size_t ss = log.sector_size();
	for (std::size_t i = 0; i < sectors.size() && i < entry.nr_sectors; ++i)
		if (sectors[i])
			image.write_exact((entry.sector + i) * ss, data.subspan(i * ss, ss));
}

} // namespace wbkit::testing

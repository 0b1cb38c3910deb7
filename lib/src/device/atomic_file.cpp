#include "wbkit/atomic_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <streambuf>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "wbkit/errors.hpp"

namespace wbkit {

// Writes to a file descriptor and keeps the first errno, so commit() can say
// why the file is incomplete (ostream only knows that it failed).
class AtomicFile::Buffer final : public std::streambuf {
public:
	explicit Buffer(int fd) : fd_(fd), buffer_(64 * 1024) { setp(buffer_.data(), buffer_.data() + buffer_.size()); }
	int error() const noexcept { return error_; }

protected:
	int_type overflow(int_type ch) override
	{
		if (!drain())
			return traits_type::eof();
		if (!traits_type::eq_int_type(ch, traits_type::eof())) {
			*pptr() = traits_type::to_char_type(ch);
			pbump(1);
		}
		return traits_type::not_eof(ch);
	}
	int sync() override { return drain() ? 0 : -1; }

private:
	bool drain()
	{
		const char* p = pbase();
		while (p < pptr() && !error_) {
			ssize_t n = ::write(fd_, p, std::size_t(pptr() - p));
			if (n < 0) {
				if (errno != EINTR)
					error_ = errno;
				continue;
			}
			if (n == 0)
				error_ = EIO;
			p += n;
		}
		setp(buffer_.data(), buffer_.data() + buffer_.size());
		return !error_;
	}

	int fd_;
	int error_ = 0;
	std::vector<char> buffer_;
};

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)), final_path_(path_)
{
	namespace fs = std::filesystem;
	struct stat st {};
	if (::stat(path_.c_str(), &st) == 0) {
		if (!S_ISREG(st.st_mode))
			throw RefusedError(path_ + ": exists and is not a regular file; a report is only written to a "
						   "regular file (never onto a device)");
		std::error_code ec;
		final_path_ = fs::canonical(path_, ec).string(); // a symlink: replace its target, not the link
		if (ec)
			throw IoError("cannot resolve", path_, ec.value());
	} else if (errno != ENOENT) {
		throw IoError("cannot examine", path_, errno);
	}
	const fs::path target(final_path_);
	const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
	// fmt, not operator+: GCC 12 at -O3 reports a false -Wrestrict in the latter.
	std::string pattern = (dir / fmt::format(".{}.XXXXXX", target.filename().string())).string();
	fd_ = ::mkstemp(pattern.data());
	if (fd_ < 0)
		throw IoError("cannot create a file next to", path_, errno);
	temp_path_ = pattern;
	const mode_t mask = ::umask(0);
	::umask(mask);
	::fchmod(fd_, 0666 & ~mask);
	buffer_ = std::make_unique<Buffer>(fd_);
	stream_ = std::make_unique<std::ostream>(buffer_.get());
}

AtomicFile::~AtomicFile()
{
	stream_.reset();
	buffer_.reset();
	if (fd_ >= 0)
		::close(fd_);
	if (!committed_ && !temp_path_.empty())
		::unlink(temp_path_.c_str());
}

std::ostream& AtomicFile::stream() { return *stream_; }

void AtomicFile::commit()
{
	stream_->flush();
	if (int err = buffer_->error())
		throw IoError("cannot write", path_, err);
	if (!*stream_)
		throw IoError("cannot write", path_, EIO);
	if (::fsync(fd_) != 0)
		throw IoError("cannot sync", path_, errno);
	if (::close(fd_) != 0) {
		fd_ = -1;
		throw IoError("cannot write", path_, errno);
	}
	fd_ = -1;
	if (::rename(temp_path_.c_str(), final_path_.c_str()) != 0)
		throw IoError("cannot rename the finished file into place as", path_, errno);
	committed_ = true;
}

} // namespace wbkit

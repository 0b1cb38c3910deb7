// A file that is either complete or absent: written to a temporary file in
// its directory and renamed into place only when everything was written and
// synced. Reports are written this way, so a full disk, a file size limit or
// a kill never leaves a truncated report, and nothing is truncated before the
// work is done.
#pragma once

#include <memory>
#include <ostream>
#include <string>

namespace wbkit {

class AtomicFile {
public:
	// Creates the temporary file now, so a bad directory fails before any
	// work. Refuses (RefusedError) a path that exists and is not a regular
	// file: a report never goes onto a block device.
	explicit AtomicFile(std::string path);
	~AtomicFile(); // removes the temporary file unless committed
	AtomicFile(const AtomicFile&) = delete;
	AtomicFile& operator=(const AtomicFile&) = delete;

	std::ostream& stream();
	const std::string& path() const noexcept { return path_; }
	// Flushes, syncs and renames into place. Throws IoError with the path and
	// the errno of the first failed write (EFBIG, ENOSPC, ...).
	void commit();

private:
	class Buffer;
	std::string path_;       // as given, for messages
	std::string final_path_; // where it is renamed to (a symlink's target)
	std::string temp_path_;
	int fd_ = -1;
	std::unique_ptr<Buffer> buffer_;
	std::unique_ptr<std::ostream> stream_;
	bool committed_ = false;
};

} // namespace wbkit

// Operational errors. Damage found on disk is not an error: it is a Finding.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace wbkit {

// Exit codes shared by every tool (documented in docs/tools.md and each --help).
enum class ExitCode : int {
	ok = 0,          // success, nothing damaged or lost
	damage = 1,      // finished, but damage was found or something was not recovered
	usage = 2,       // bad command line
	operational = 3, // cannot open, read or write a device
	refused = 4,     // a safety check refused to go on
};

class Error : public std::runtime_error {
public:
	using std::runtime_error::runtime_error;
	virtual ExitCode exit_code() const noexcept { return ExitCode::operational; }
};

// A system call on a device failed.
class IoError : public Error {
public:
	IoError(const std::string& what, std::string path, int err);
	const std::string& path() const noexcept { return path_; }
	int error_number() const noexcept { return errno_; }

private:
	std::string path_;
	int errno_;
};

// The destination is out of room (full, over quota, past the file size
// limit): not a bad sector to narrow down and skip, but an operational error
// that stops the run.
bool is_out_of_space(int err) noexcept;

class UsageError : public Error {
public:
	using Error::Error;
	ExitCode exit_code() const noexcept override { return ExitCode::usage; }
};

// A safety check before a destructive operation said no.
class RefusedError : public Error {
public:
	using Error::Error;
	ExitCode exit_code() const noexcept override { return ExitCode::refused; }
};

} // namespace wbkit

// Reading the writeboost targets of the running kernel through dmsetup(8):
// `dmsetup status` and `dmsetup table` (--target writeboost), and dm-wbkit's
// messages `dead_cause` (for a dead target) and `error_counts`. Only
// queries: nothing here loads, suspends, changes or writes to a device.
#pragma once

#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

#include "wbkit/wb_status.hpp"

namespace wbkit {

// What a finished program printed, and how it ended: its exit code, or 128
// plus the signal that killed it.
struct ProgramOutput {
	int status = 0;
	std::string out;
	std::string err;
};

// Runs argv[0] (a path; no PATH search) with stdin from /dev/null and
// collects both outputs. Throws IoError when it cannot be started.
// own_process_group: the child gets a process group of its own, so that a
// Ctrl-C at the terminal reaches only the caller, which decides what to stop
// (wbctl: a `dmsetup suspend` must never be killed halfway).
ProgramOutput run_program(const std::vector<std::string>& argv, bool own_process_group = false);

// A program started in the background, in a process group of its own, its
// outputs collected (into pipes: a program that prints more than a pipe
// holds, 64 KiB, waits until stop() or poll() reads it). The destructor
// stops it (SIGTERM, then SIGKILL) if it still runs.
class RunningProgram {
public:
	// Throws IoError when it cannot be started.
	explicit RunningProgram(const std::vector<std::string>& argv);
	~RunningProgram();
	RunningProgram(const RunningProgram&) = delete;
	RunningProgram& operator=(const RunningProgram&) = delete;

	// Its output once it ended, else nullopt; never blocks.
	std::optional<ProgramOutput> poll();
	// Ends it if it still runs (SIGTERM; SIGKILL after `grace`), and waits.
	ProgramOutput stop(int grace_ms = 2000);
	// Whether stop() had to signal it (it was still running).
	bool stopped() const noexcept { return signalled_; }

private:
	void drain();
	pid_t pid_ = -1;
	int out_ = -1;
	int err_ = -1;
	bool signalled_ = false;
	std::optional<ProgramOutput> done_;
	ProgramOutput collected_;
};

// The program to run for `name`: itself when it holds a '/', else the first
// executable file of that name in PATH, then /usr/sbin and /sbin (cron's PATH
// lacks them; dmsetup lives there). Throws IoError (ENOENT) when none is found.
std::string find_program(const std::string& name);

class DmsetupReader {
public:
	// `program`: the dmsetup to run (find_program resolves it).
	explicit DmsetupReader(std::string program = "dmsetup");

	// Every writeboost target of every device-mapper device.
	std::vector<WbDevice> all();
	// The writeboost targets of these devices (names or paths, as dmsetup
	// takes them), named as given. Throws Error when one does not exist or
	// has no writeboost target.
	std::vector<WbDevice> named(const std::vector<std::string>& devices);

	// What went wrong without stopping the run (a dead cause that could not
	// be read, error counters that do not parse), for the caller to print as
	// warnings. A failed error_counts is none: dm-wbkit before it has no
	// such message.
	const std::vector<std::string>& warnings() const noexcept { return warnings_; }

private:
	std::string query(const std::vector<std::string>& args);
	std::vector<std::string> argv_of(const std::vector<std::string>& args) const;
	// For each dm-wbkit target: dead_cause when it is dead, error_counts.
	void read_messages(std::vector<WbDevice>& devices);

	std::string program_;
	std::vector<std::string> warnings_;
};

} // namespace wbkit

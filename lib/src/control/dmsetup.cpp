// dmsetup.hpp: running dmsetup(8) to read the writeboost targets.
#include "wbkit/dmsetup.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <csignal>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wbkit/errors.hpp"

extern char** environ;

namespace wbkit {

namespace {

struct Pipe {
	int fd[2] = {-1, -1};
	Pipe()
	{
		if (::pipe2(fd, O_CLOEXEC) != 0)
			throw IoError("cannot create a pipe", "pipe", errno);
	}
	~Pipe()
	{
		close_read();
		close_write();
	}
	void close_read()
	{
		if (fd[0] >= 0)
			::close(fd[0]);
		fd[0] = -1;
	}
	void close_write()
	{
		if (fd[1] >= 0)
			::close(fd[1]);
		fd[1] = -1;
	}
};

class SpawnActions {
public:
	SpawnActions() { ::posix_spawn_file_actions_init(&actions_); }
	~SpawnActions() { ::posix_spawn_file_actions_destroy(&actions_); }
	posix_spawn_file_actions_t* get() { return &actions_; }

private:
	posix_spawn_file_actions_t actions_;
};

// A process group of the child's own, when asked.
class SpawnAttributes {
public:
	explicit SpawnAttributes(bool own_process_group) : used_(own_process_group)
	{
		::posix_spawnattr_init(&attributes_);
		if (used_) {
			::posix_spawnattr_setpgroup(&attributes_, 0);
			::posix_spawnattr_setflags(&attributes_, POSIX_SPAWN_SETPGROUP);
		}
	}
	~SpawnAttributes() { ::posix_spawnattr_destroy(&attributes_); }
	posix_spawnattr_t* get() { return used_ ? &attributes_ : nullptr; }

private:
	bool used_;
	posix_spawnattr_t attributes_;
};

// Starts argv[0] with stdin from /dev/null and stdout and stderr into the
// write ends of out and err, which it closes here (the read ends stay).
pid_t spawn_piped(const std::vector<std::string>& argv, bool own_process_group, Pipe& out, Pipe& err)
{
	SpawnAttributes attributes(own_process_group);
	SpawnActions actions;
	::posix_spawn_file_actions_addopen(actions.get(), 0, "/dev/null", O_RDONLY, 0);
	::posix_spawn_file_actions_adddup2(actions.get(), out.fd[1], 1);
	::posix_spawn_file_actions_adddup2(actions.get(), err.fd[1], 2);
	std::vector<char*> args;
	for (const std::string& a : argv)
		args.push_back(const_cast<char*>(a.c_str()));
	args.push_back(nullptr);
	pid_t pid = 0;
	if (int rc = ::posix_spawn(&pid, argv[0].c_str(), actions.get(), attributes.get(), args.data(), environ); rc != 0)
		throw IoError("cannot run", argv[0], rc);
	out.close_write();
	err.close_write();
	return pid;
}

int wait_status(int wstatus)
{
	return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
}

bool executable_file(const std::string& path)
{
	struct stat st {};
	return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string command_text(const std::string& program, const std::vector<std::string>& args)
{
	std::string text = program;
	for (const std::string& a : args)
		text += " " + a;
	return text;
}

// The first lines of what a program said on stderr, for an error message.
std::string said(const std::string& err)
{
	std::string text = err;
	while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
		text.pop_back();
	for (char& c : text)
		if (c == '\n')
			c = ' ';
	if (text.size() > 400)
		text = text.substr(0, 400) + "...";
	return text.empty() ? "(no message)" : text;
}

} // namespace

ProgramOutput run_program(const std::vector<std::string>& argv, bool own_process_group)
{
	if (argv.empty())
		throw Error("run_program: no program");
	Pipe out, err;
	const pid_t pid = spawn_piped(argv, own_process_group, out, err);

	ProgramOutput result;
	pollfd fds[2] = {{out.fd[0], POLLIN, 0}, {err.fd[0], POLLIN, 0}};
	std::string* sinks[2] = {&result.out, &result.err};
	int open = 2;
	char buffer[65536];
	while (open > 0) {
		if (::poll(fds, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			throw IoError("cannot wait for the output of", argv[0], errno);
		}
		for (int i = 0; i < 2; ++i) {
			if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				fds[i].fd = -1;
				--open;
				continue;
			}
			sinks[i]->append(buffer, std::size_t(n));
		}
	}
	int wstatus = 0;
	while (::waitpid(pid, &wstatus, 0) < 0)
		if (errno != EINTR)
			throw IoError("cannot wait for", argv[0], errno);
	result.status = wait_status(wstatus);
	return result;
}

RunningProgram::RunningProgram(const std::vector<std::string>& argv)
{
	if (argv.empty())
		throw Error("RunningProgram: no program");
	Pipe out, err;
	pid_ = spawn_piped(argv, true, out, err);
	// Ours now: the Pipe objects must not close them.
	out_ = out.fd[0];
	err_ = err.fd[0];
	out.fd[0] = err.fd[0] = -1;
	::fcntl(out_, F_SETFL, O_NONBLOCK);
	::fcntl(err_, F_SETFL, O_NONBLOCK);
}

RunningProgram::~RunningProgram()
{
	try {
		if (!done_)
			stop(500);
	} catch (...) { // nothing to report from a destructor
	}
	if (out_ >= 0)
		::close(out_);
	if (err_ >= 0)
		::close(err_);
}

void RunningProgram::drain()
{
	char buffer[16384];
	for (int* fd : {&out_, &err_}) {
		std::string& sink = fd == &out_ ? collected_.out : collected_.err;
		while (*fd >= 0) {
			ssize_t n = ::read(*fd, buffer, sizeof buffer);
			if (n > 0) {
				sink.append(buffer, std::size_t(n));
				continue;
			}
			if (n < 0 && errno == EINTR)
				continue;
			if (n == 0) {
				::close(*fd);
				*fd = -1;
			}
			break; // EAGAIN: nothing more for now
		}
	}
}

std::optional<ProgramOutput> RunningProgram::poll()
{
	if (done_)
		return done_;
	drain();
	int wstatus = 0;
	pid_t r = ::waitpid(pid_, &wstatus, WNOHANG);
	if (r < 0 && errno != EINTR)
		throw IoError("cannot wait for a program", std::to_string(pid_), errno);
	if (r != pid_)
		return std::nullopt;
	drain();
	collected_.status = wait_status(wstatus);
	done_ = collected_;
	return done_;
}

ProgramOutput RunningProgram::stop(int grace_ms)
{
	if (poll())
		return *done_;
	signalled_ = true;
	::kill(pid_, SIGTERM);
	for (int waited = 0; waited < grace_ms; waited += 10) {
		if (poll())
			return *done_;
		::usleep(10000);
	}
	::kill(pid_, SIGKILL);
	int wstatus = 0;
	while (::waitpid(pid_, &wstatus, 0) < 0)
		if (errno != EINTR)
			throw IoError("cannot wait for a program", std::to_string(pid_), errno);
	drain();
	collected_.status = wait_status(wstatus);
	done_ = collected_;
	return *done_;
}

std::string find_program(const std::string& name)
{
	if (name.find('/') != std::string::npos) {
		if (!executable_file(name))
			throw IoError("cannot run", name, errno ? errno : ENOENT);
		return name;
	}
	std::string dirs;
	if (const char* path = std::getenv("PATH"))
		dirs = path;
	dirs += ":/usr/sbin:/sbin";
	std::size_t pos = 0;
	while (pos <= dirs.size()) {
		std::size_t end = dirs.find(':', pos);
		if (end == std::string::npos)
			end = dirs.size();
		std::string dir = dirs.substr(pos, end - pos);
		pos = end + 1;
		if (dir.empty())
			continue;
		std::string candidate = dir + "/" + name;
		if (executable_file(candidate))
			return candidate;
	}
	throw IoError("not found in PATH, /usr/sbin or /sbin (install it: apt install dmsetup)", name, ENOENT);
}

DmsetupReader::DmsetupReader(std::string program) : program_(find_program(program)) {}

std::string DmsetupReader::query(const std::vector<std::string>& args)
{
	ProgramOutput done = run_program(argv_of(args));
	if (done.status != 0)
		throw Error(fmt::format("`{}` failed (exit {}): {}", command_text(program_, args), done.status,
					said(done.err)));
	return done.out;
}

void DmsetupReader::read_messages(std::vector<WbDevice>& devices)
{
	for (WbDevice& d : devices) {
		// Only dm-wbkit knows the messages; both are read-only queries.
		if (d.status.module() != TargetModule::dm_wbkit)
			continue;
		if (d.status.dead().value_or(false)) {
			// dm-wbkit replies with the kept cause.
			const std::vector<std::string> args{"message", d.name, std::to_string(d.start), "dead_cause"};
			ProgramOutput done = run_program(argv_of(args));
			std::string cause = done.out;
			while (!cause.empty() && (cause.back() == '\n' || cause.back() == ' '))
				cause.pop_back();
			if (done.status != 0 || cause.empty())
				warnings_.push_back(fmt::format("{} is dead, but `{}` did not say why (exit {}): {}",
								d.name, command_text(program_, args), done.status,
								said(done.err)));
			else
				d.dead_cause = cause;
		}
		// A dm-wbkit older than error_counts fails the message (as
		// dm-writeboost would): no counters, and nothing to warn about.
		const std::vector<std::string> args{"message", d.name, std::to_string(d.start), "error_counts"};
		ProgramOutput done = run_program(argv_of(args));
		if (done.status != 0 || done.out.find_first_not_of(" \t\r\n") == std::string::npos)
			continue;
		try {
			d.errors = parse_error_counts(done.out);
		} catch (const StatusFormatError& e) {
			warnings_.push_back(fmt::format("{}: the reply to `{}` does not read as error counters ({}); "
							"they are not shown",
							d.name, command_text(program_, args), e.what()));
		}
	}
}

std::vector<std::string> DmsetupReader::argv_of(const std::vector<std::string>& args) const
{
	std::vector<std::string> argv{program_};
	argv.insert(argv.end(), args.begin(), args.end());
	return argv;
}

std::vector<WbDevice> DmsetupReader::all()
{
	const std::string status = query({"status", "--target", "writeboost"});
	const std::string table = query({"table", "--target", "writeboost"});
	std::vector<WbDevice> devices = read_dmsetup_output(status + "\n" + table, "dmsetup");
	read_messages(devices);
	return devices;
}

std::vector<WbDevice> DmsetupReader::named(const std::vector<std::string>& names)
{
	std::vector<WbDevice> devices;
	for (const std::string& name : names) {
		const std::string status = query({"status", "--target", "writeboost", name});
		const std::string table = query({"table", "--target", "writeboost", name});
		// One device: dmsetup prints no name, so the lines pair in order.
		std::vector<WbDevice> found = read_dmsetup_output(status + "\n" + table, "dmsetup");
		if (found.empty())
			throw Error(name + ": not a writeboost device (its table has no writeboost target)");
		for (WbDevice& d : found) {
			d.name = name;
			devices.push_back(std::move(d));
		}
	}
	read_messages(devices);
	return devices;
}

} // namespace wbkit

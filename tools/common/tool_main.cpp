#include "tool_main.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <iostream>

#include "wbkit/errors.hpp"
#include "wbkit/version.hpp"

namespace wbkit {

void add_progress_options(CLI::App& app, ProgressOptions& options)
{
	auto* quiet = app.add_flag("-q,--quiet", options.quiet, "no progress output");
	app.add_flag("--progress", options.asked,
		     "progress lines on stderr even when it is not a terminal (on a terminal: a bar, always)")
		->excludes(quiet);
	app.add_option("--progress-fd", options.machine_fd, "write `phase done total` progress lines to file descriptor N")
		->check(CLI::NonNegativeNumber);
}

const CLI::Validator& unsigned_64()
{
	static const CLI::Validator validator(
		[](std::string& text) -> std::string {
			if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
				return "not a non-negative decimal number: " + text;
			errno = 0;
			(void)std::strtoull(text.c_str(), nullptr, 10);
			if (errno == ERANGE)
				return "out of range (at most 18446744073709551615): " + text;
			return {};
		},
		"UINT64");
	return validator;
}

int run_tool(const char* name, CLI::App& app, int argc, char** argv, const std::function<int()>& body)
{
	// Past a file size limit (ulimit -f) a write must fail with EFBIG and be
	// reported with its path, not kill the tool halfway without a word.
	std::signal(SIGXFSZ, SIG_IGN);
	app.set_version_flag("--version", std::string(name) + " " + build_version(), "print the version and exit");
	try {
		app.parse(argc, argv);
	} catch (const CLI::CallForHelp&) {
		std::cout << app.help();
		return int(ExitCode::ok);
	} catch (const CLI::CallForVersion& e) {
		std::cout << e.what() << '\n';
		return int(ExitCode::ok);
	} catch (const CLI::ParseError& e) {
		std::cerr << name << ": error: " << e.what() << "\nRun with --help for usage.\n";
		return int(ExitCode::usage);
	}
	try {
		return body();
	} catch (const Error& e) {
		std::cerr << name << ": error: " << e.what() << '\n';
		return int(e.exit_code());
	} catch (const std::bad_alloc&) {
		std::cerr << name << ": error: out of memory\n";
		return int(ExitCode::operational);
	} catch (const std::exception& e) {
		std::cerr << name << ": error: " << e.what() << '\n';
		return int(ExitCode::operational);
	}
}

} // namespace wbkit

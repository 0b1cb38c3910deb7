#include "wbkit/tool_main.hpp"

#include <iostream>

#include "wbkit/errors.hpp"
#include "wbkit/version.hpp"

namespace wbkit {

int run_tool(const char* name, CLI::App& app, int argc, char** argv, const std::function<int()>& body)
{
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

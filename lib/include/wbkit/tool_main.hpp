// The shared frame of every tool's main: CLI11 parsing under our own error
// format (no CLI11_PARSE), and operational errors mapped to exit codes.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace wbkit {

// Adds --version (`name` and build_version()), parses argv into app, then
// runs body. Prints `name: error: ...` on stderr for bad usage (exit 2) and
// for exceptions (their exit code, else 3).
int run_tool(const char* name, CLI::App& app, int argc, char** argv, const std::function<int()>& body);

} // namespace wbkit

// The shared frame of every tool's main: CLI11 parsing under our own error
// format (no CLI11_PARSE), and operational errors mapped to exit codes.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "progress.hpp"

namespace wbkit {

// Adds --version (`name` and build_version()), parses argv into app, then
// runs body. Prints `name: error: ...` on stderr for bad usage (exit 2) and
// for exceptions (their exit code, else 3).
int run_tool(const char* name, CLI::App& app, int argc, char** argv, const std::function<int()>& body);

// -q, --progress and --progress-fd N, worded the same in every tool.
void add_progress_options(CLI::App& app, ProgressOptions& options);

// A decimal number in [0, 2^64-1]. CLI11 alone reads "-1" and numbers past
// 2^64 as 2^64-1; this makes them usage errors.
const CLI::Validator& unsigned_64();

} // namespace wbkit

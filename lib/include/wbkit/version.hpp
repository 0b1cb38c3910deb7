// The version every tool's --version and the Python module report.
#pragma once

namespace wbkit {

// The project version, e.g. "0.1.0" (CMake's project(VERSION)).
const char* version();
// The version and, when built from a git checkout, `git describe` of it,
// e.g. "0.1.0 (git v0.1.0-3-gc49e796-dirty)": what a bug report should name.
const char* build_version();

} // namespace wbkit

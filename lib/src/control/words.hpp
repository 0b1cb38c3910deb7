// Reading the kernel's text (dmsetup's tables and status lines, sysfs
// files): words split on white space, and unsigned decimal numbers as the
// kernel prints them. Shared by wb_status.cpp and control_*.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace wbkit {

// The words of text, split on spaces, tabs and line ends.
std::vector<std::string_view> words_of(std::string_view text);

// A decimal number in [0, 2^64 - 1], digits only, as the kernel prints them.
std::optional<std::uint64_t> decimal(std::string_view token);

} // namespace wbkit

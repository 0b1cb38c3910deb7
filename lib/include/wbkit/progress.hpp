// Progress of long work, reported by the engines (scan, replay, recovery) to
// whoever shows it: one sink type for all of them.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace wbkit {

// phase: one or two words ("scan", "verify", "replay", "reading backing");
// done and total: bytes of that phase. Called from one thread at a time.
using ProgressSink = std::function<void(std::string_view phase, std::uint64_t done, std::uint64_t total)>;

} // namespace wbkit

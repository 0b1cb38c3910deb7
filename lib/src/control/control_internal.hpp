// What the control_*.cpp files share and control.hpp does not publish: they
// were one file, and these helpers are used across the split.
#pragma once

#include <chrono>
#include <string>

#include "wbkit/control.hpp"

namespace wbkit {

// dmsetup's error output as one line of a message.
std::string trimmed(std::string text);

inline std::chrono::milliseconds ms_between(Clock::time_point a, Clock::time_point b)
{
	return std::chrono::duration_cast<std::chrono::milliseconds>(b - a);
}

// The status of the device's one target, which must be writeboost.
WbStatus read_status(System& system, const std::string& name);

// Zeroes the first and the last MiB of a cache device (control_dmsetup_system.cpp
// says why); `exclusive` false when a suspended table holds it.
void zero_cache_head(const std::string& path, bool exclusive = true);

} // namespace wbkit

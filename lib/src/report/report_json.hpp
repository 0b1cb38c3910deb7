// Inside the report module only: the JSON builders the report files share.
// nlohmann::json stays behind the library's walls; public headers never
// include it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "wbkit/findings.hpp"
#include "wbkit/log_scan.hpp"

namespace wbkit::report_detail {

template <typename T>
nlohmann::json optional_json(const std::optional<T>& value)
{
	return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json finding_json(const Finding& finding);

// Every document names its shape and version in a top-level "schema"
// (docs/schemas/<tool>-<version>.schema.json); a change that breaks a reader
// bumps the version.
inline constexpr const char* schema_wbdump = "wbdump/1";
inline constexpr const char* schema_wbreplay = "wbreplay/1";
inline constexpr const char* schema_wbrecover = "wbrecover/1";
inline constexpr const char* schema_wbstat = "wbstat/1";

// The parts every document shares, in one shape: the cache's geometry, and
// the log as the kernel's replay sees it (log.stop.reason and the rest).
nlohmann::json geometry_json(const LogScan& scan);
nlohmann::json log_json(const LogScan& scan);

} // namespace wbkit::report_detail

// Inside the report module only: the JSON builders the report files share.
// nlohmann::json stays behind the library's walls; public headers never
// include it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "wbkit/findings.hpp"

namespace wbkit::report_detail {

template <typename T>
nlohmann::json optional_json(const std::optional<T>& value)
{
	return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json finding_json(const Finding& finding);

} // namespace wbkit::report_detail

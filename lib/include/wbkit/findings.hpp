// Damage found on disk, as data: a stable code, a severity, a place, a message.
// The table in findings.cpp is the one list of codes; tools decide how to print.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace wbkit {

enum class Severity {
	info,    // worth knowing, not damage (a torn newest segment after power loss)
	warning, // inconsistent but no data depends on it
	error,   // data is or may be affected
};

enum class FindingCode {
	superblock_unreadable,
	bad_magic,
	superblock_padding_nonzero,
	cache_too_small,
	sb_record_out_of_range,
	header_unreadable,
	data_unreadable,
	length_too_large,
	slot_mismatch,
	header_padding_nonzero,
	unused_metablock_nonzero,
	metablock_padding_nonzero,
	metablock_sector_unaligned,
	metablock_sector_beyond_backing,
	checksum_mismatch,
	checksum_legacy_inverted,
	torn_newest_segment,
	append_not_committed,
	torn_rewrite_skipped,
	lost_in_flight_skipped,
	id_gap,
	id_repeat,
	valid_segments_discarded,
	log_refused,
};

struct FindingInfo {
	FindingCode code;
	std::string_view name; // stable, kebab-case: what scripts match on
	Severity severity;
	std::string_view summary;
};

std::span<const FindingInfo> all_findings();
const FindingInfo& finding_info(FindingCode code);
std::string_view severity_name(Severity severity);

// Where a finding lies. Unset members do not apply.
struct Place {
	std::optional<std::uint64_t> slot{};
	std::optional<std::uint64_t> segment_id{};
	std::optional<unsigned> metablock{};
	std::optional<std::uint64_t> backing_sector{};
	std::optional<std::uint64_t> cache_offset{}; // bytes
};

struct Finding {
	FindingCode code;
	Severity severity;
	Place place;
	std::string message;

	std::string_view name() const;
	// "slot 3, segment 12, metablock 5" or "superblock".
	std::string place_text() const;
};

Finding make_finding(FindingCode code, Place place, std::string message);

// True when any finding is a warning or an error (a tool's "damage found").
bool has_damage(const std::vector<Finding>& findings);

} // namespace wbkit

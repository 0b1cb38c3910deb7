#include "wbkit/findings.hpp"

#include <algorithm>
#include <array>
#include <fmt/format.h>

namespace wbkit {

namespace {

using enum FindingCode;
using enum Severity;

// The one list of finding codes. Names are stable: scripts match on them.
constexpr std::array finding_table{
	FindingInfo{superblock_unreadable, "superblock-unreadable", error, "the superblock region cannot be read"},
	FindingInfo{bad_magic, "bad-magic", error,
		    "no superblock magic: the cache is unformatted, and the target would format it (discarding the log)"},
	FindingInfo{superblock_padding_nonzero, "superblock-padding-nonzero", error,
		    "sector 0 holds non-zero bytes after the magic: not a valid superblock, dm-wbkit refuses the device"},
	FindingInfo{cache_too_small, "cache-too-small", error, "the cache device is smaller than the superblock and one segment"},
	FindingInfo{sb_record_out_of_range, "sb-record-out-of-range", error,
		    "the superblock record (last written-back id) is outside [max_id - nr_segments, max_id]"},
	FindingInfo{header_unreadable, "header-unreadable", error, "a segment header cannot be read"},
	FindingInfo{data_unreadable, "data-unreadable", error, "data blocks of a segment cannot be read"},
	FindingInfo{length_too_large, "length-too-large", error, "a segment header claims more than 127 blocks"},
	FindingInfo{slot_mismatch, "slot-mismatch", error, "a segment id lies in a slot other than (id - 1) mod nr_segments"},
	FindingInfo{header_padding_nonzero, "header-padding-nonzero", warning, "the segment header's padding is not zero"},
	FindingInfo{unused_metablock_nonzero, "unused-metablock-nonzero", warning,
		    "the metablock area past the segment's length is not zero"},
	FindingInfo{metablock_padding_nonzero, "metablock-padding-nonzero", warning, "a metablock's padding is not zero"},
	FindingInfo{metablock_sector_unaligned, "metablock-sector-unaligned", error,
		    "a metablock's backing sector is not a multiple of 8"},
	FindingInfo{metablock_sector_beyond_backing, "metablock-sector-beyond-backing", error,
		    "a metablock's block lies past the end of the backing device"},
	FindingInfo{checksum_mismatch, "checksum-mismatch", error, "a segment's checksum does not match its content"},
	FindingInfo{checksum_legacy_inverted, "checksum-legacy-inverted", error,
		    "a segment's checksum is the bitwise NOT of the right one (dm-writeboost before 2.0.2)"},
	FindingInfo{torn_newest_segment, "torn-newest-segment", info,
		    "the newest segment is torn, as after a power loss; it held no acknowledged flush, and replay discards it"},
	FindingInfo{append_not_committed, "append-not-committed", info,
		    "the newest append to a segment did not complete (a power cut between its two writes): the segment is "
		    "valid at its stored length, and the metablocks past it are ignored"},
	FindingInfo{torn_rewrite_skipped, "torn-rewrite-skipped", warning,
		    "a slot near the oldest of a log another writer left fails its checksum with the id one lap behind: "
		    "read as a rewrite the power cut tore, replay skips it and counts it and the segments before it as "
		    "written back; read as damage, the log would stop there (wbrecover --no-torn-rewrite)"},
	FindingInfo{lost_in_flight_skipped, "lost-in-flight-skipped", warning,
		    "a slot among the newest of a log another writer left holds the segment one lap older than the id "
		    "expected there, behind a later segment that landed: a segment write lost in flight, skipped as an "
		    "empty slot (its old segment is written back: a slot is reused only after writeback)"},
	FindingInfo{id_gap, "id-gap", error, "segment ids skip values in ring order"},
	FindingInfo{id_repeat, "id-repeat", error, "segment ids repeat or go backwards in ring order"},
	FindingInfo{valid_segments_discarded, "valid-segments-discarded", error,
		    "segments with good checksums lie after the point where replay stops, and the kernel discards them"},
	FindingInfo{log_refused, "log-refused", error,
		    "the log cannot be replayed as one ring in id order: the kernel refuses to construct on it and wbreplay "
		    "refuses without --force (wbrecover salvages what it holds)"},
};

} // namespace

std::span<const FindingInfo> all_findings() { return finding_table; }

const FindingInfo& finding_info(FindingCode code)
{
	for (const auto& info : finding_table)
		if (info.code == code)
			return info;
	// Every enumerator is in the table; the unit tests check it.
	return finding_table.front();
}

std::string_view severity_name(Severity severity)
{
	constexpr std::array<std::string_view, 3> names{"info", "warning", "error"}; // in the enumerators' order
	const auto i = std::size_t(severity);
	return i < names.size() ? names[i] : "error";
}

std::string_view Finding::name() const { return finding_info(code).name; }

std::string Finding::place_text() const
{
	std::string out;
	auto add = [&](std::string part) {
		if (!out.empty())
			out += ", ";
		out += part;
	};
	if (place.slot)
		add(fmt::format("slot {}", *place.slot));
	if (place.segment_id)
		add(fmt::format("segment {}", *place.segment_id));
	if (place.metablock)
		add(fmt::format("metablock {}", *place.metablock));
	if (place.backing_sector)
		add(fmt::format("backing sector {}", *place.backing_sector));
	if (place.cache_offset)
		add(fmt::format("cache offset {}", *place.cache_offset));
	return out.empty() ? "cache" : out;
}

Finding make_finding(FindingCode code, Place place, std::string message)
{
	return Finding{code, finding_info(code).severity, std::move(place), std::move(message)};
}

bool has_damage(const std::vector<Finding>& findings)
{
	return std::any_of(findings.begin(), findings.end(), [](const Finding& f) { return f.severity != info; });
}

} // namespace wbkit

// Reports on a scanned cache: JSON documents with stable keys, text for
// people, and the detail views (one segment, one backing sector). Shared by
// wbdump, the Python module and the tests, so they all say the same thing.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "wbkit/device.hpp"
#include "wbkit/log_scan.hpp"

namespace wbkit {

// One slot read in full: its header, checksum, read errors.
struct SlotDetail {
	std::uint64_t slot = 0;
	std::uint64_t cache_offset = 0;
	bool header_readable = false;
	bool data_readable = false;
	SegmentHeader header;
	std::optional<std::uint32_t> computed_checksum; // when header and data were readable
	SlotState state = SlotState::empty;
	std::string error; // why something could not be read
};

SlotDetail inspect_slot(Device& cache, const Geometry& geometry, std::uint64_t slot);

// Where the newest copy of one backing sector lives, and its 512 bytes.
struct SectorDetail {
	std::uint64_t backing_sector = 0;
	const SectorSource* source = nullptr; // nullptr: the backing device holds the sector
	std::uint64_t segment_id = 0;
	std::uint64_t slot = 0;
	std::uint64_t cache_offset = 0; // of the sector itself
	bool dirty = false;
	bool readable = false;
	std::vector<std::byte> data; // the cache copy, when readable
	std::string error;
};

SectorDetail inspect_sector(Device& cache, const LogScan& scan, std::uint64_t backing_sector);

nlohmann::json finding_json(const Finding& finding);
// Every JSON document names its shape and version in a top-level "schema"
// (docs/schemas/<tool>-<version>.schema.json); a change that breaks a reader
// bumps the version.
inline constexpr const char* schema_wbdump = "wbdump/1";
inline constexpr const char* schema_wbreplay = "wbreplay/1";
inline constexpr const char* schema_wbrecover = "wbrecover/1";

// The parts every document shares, in one shape: the cache's geometry, and
// the log as the kernel's replay sees it (log.stop.reason and the rest).
nlohmann::json geometry_json(const LogScan& scan);
nlohmann::json log_json(const LogScan& scan);
nlohmann::json scan_json(const LogScan& scan, const std::string& cache_path);
nlohmann::json slot_json(const SlotDetail& detail);
nlohmann::json sector_json(const SectorDetail& detail);

void print_summary(std::ostream& out, const LogScan& scan, const std::string& cache_path);
void print_findings(std::ostream& out, const std::vector<Finding>& findings);
void print_slot(std::ostream& out, const SlotDetail& detail);
void print_sector(std::ostream& out, const SectorDetail& detail);
void hexdump(std::ostream& out, std::span<const std::byte> data, std::uint64_t base_offset);

} // namespace wbkit

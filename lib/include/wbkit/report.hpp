// Rendering: the JSON documents (stable keys, documented in docs/tools.md) and
// the text for people that the tools print and the Python module returns.
// Only the tools, the bindings and the tests include this; the engines
// (scan, inspect, replay, recover) produce data and know nothing of it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "wbkit/findings.hpp"
#include "wbkit/inspect.hpp"
#include "wbkit/log_scan.hpp"
#include "wbkit/recover.hpp"
#include "wbkit/replay.hpp"
#include "wbkit/replay_run.hpp"
#include "wbkit/wb_status.hpp"

namespace wbkit {

// "1.5 GiB": sizes for people, powers of 1024.
std::string human_bytes(std::uint64_t bytes);

// Every *_json function returns one JSON document as text: compact when
// indent < 0, else pretty-printed with indent spaces per level.

std::string scan_json(const LogScan& scan, const std::string& cache_path, int indent = -1);
std::string slot_json(const SlotDetail& detail, int indent = -1);
std::string sector_json(const SectorDetail& detail, int indent = -1);

void print_summary(std::ostream& out, const LogScan& scan, const std::string& cache_path);
void print_findings(std::ostream& out, const std::vector<Finding>& findings);
void print_slot(std::ostream& out, const SlotDetail& detail);
void print_sector(std::ostream& out, const SectorDetail& detail);
void hexdump(std::ostream& out, std::span<const std::byte> data, std::uint64_t base_offset);

// One metablock of the log, in replay order.
struct LogMetablockRow {
	std::uint64_t segment_id = 0;
	std::uint64_t slot = 0;
	unsigned index = 0;
	Metablock metablock;
};

// What wbdump reports: the scan, and the views that were asked for.
struct DumpReport {
	const LogScan& scan;
	std::string cache_path;
	std::optional<SlotDetail> segment{};
	// Walks the log's metablocks in replay order when they were asked for: a
	// function, not a list, since a large cache holds millions of them.
	std::function<void(const std::function<void(const LogMetablockRow&)>&)> metablocks{};
	std::optional<SectorDetail> block{};
};

// wbdump's document (2-space indent). The write_* functions write their
// documents as they are produced: the lists that grow with the log are never
// held whole.
void write_dump_json(std::ostream& out, const DumpReport& report);
void print_dump(std::ostream& out, const DumpReport& report);

// wbreplay's document and text, from what replay_run did.
std::string replay_report_json(const ReplayRunResult& run, int indent = -1);
void write_replay_report_json(std::ostream& out, const ReplayRunResult& run);
void print_replay_report(std::ostream& out, const ReplayRunResult& run);

std::string recovery_json(const RecoveryReport& report, int indent = -1);
void write_recovery_json(std::ostream& out, const RecoveryReport& report);
void print_recovery(std::ostream& out, const RecoveryReport& report);

// wbstat: one sample of the writeboost targets, and what changed since the
// sample before it.
struct StatusReport {
	std::vector<WbDevice> devices;
	// With an interval: one entry per device, the rates since the previous
	// sample (nullopt for a target that was not in it); else empty.
	std::vector<std::optional<WbRates>> rates{};
	std::optional<double> interval_seconds{}; // as asked for
	std::string source = "dmsetup";           // or the file read ("-": stdin)
	std::int64_t time = 0;                    // of the sample, seconds since the epoch
};

// wbstat's document (`wbstat/1`, docs/schemas/wbstat-1.schema.json).
std::string status_json(const StatusReport& report, int indent = 2);
// Labelled figures with units, one block per target.
void print_status(std::ostream& out, const StatusReport& report);
// The Prometheus text exposition format (version 0.0.4), as node_exporter's
// textfile collector reads it: every metric's HELP and TYPE, then its
// samples, labelled device= and target=.
void write_status_prometheus(std::ostream& out, const StatusReport& report);

} // namespace wbkit

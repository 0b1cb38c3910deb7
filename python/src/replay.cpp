// replay.hpp: the replay plan, read-only. The module plans and explains; it
// does not write to a backing device (that is wbreplay's job, with its safety
// checks), so execute_replay() is not bound.
#include <fmt/format.h>

#include "bindings.hpp"
#include "wbkit/replay.hpp"
#include "wbkit/report.hpp"

namespace wbkit::python {

namespace {

// The Cursor points into its plan: the iterator owns the plan with it.
struct ExtentIterator {
	std::shared_ptr<const ReplayPlan> plan;
	ReplayPlan::Cursor cursor;
};

struct Plan {
	std::shared_ptr<const ReplayPlan> plan;
	std::string cache_path;
	std::string backing_path;
};

} // namespace

py::object make_plan(std::shared_ptr<const LogScan> scan, std::optional<std::uint64_t> backing_sectors,
		     std::uint64_t max_extent_bytes, std::string cache_path, std::string backing_path)
{
	ReplayOptions options{.max_extent_bytes = max_extent_bytes, .backing_sectors = backing_sectors};
	std::shared_ptr<const ReplayPlan> plan;
	{
		py::gil_scoped_release unlocked;
		plan = std::make_shared<const ReplayPlan>(replay_plan(std::move(scan), options));
	}
	return py::cast(Plan{plan, std::move(cache_path), std::move(backing_path)});
}

void bind_replay(py::module_& m)
{
	py::class_<ReplaySummary>(m, "ReplaySummary", "What a replay would write, in totals.")
		.def_readonly("segments_in_log", &ReplaySummary::segments_in_log, "Segments the replay walk applies.")
		.def_readonly("segments_written_back", &ReplaySummary::segments_written_back,
			      "Segments of the log already on the backing device.")
		.def_readonly("segments_contributing", &ReplaySummary::segments_contributing,
			      "Segments that provide at least one sector to the plan.")
		.def_readonly("dirty_blocks", &ReplaySummary::dirty_blocks, "4 KiB backing blocks with a sector to write.")
		.def_readonly("dirty_sectors", &ReplaySummary::dirty_sectors, "Sectors to write.")
		.def_readonly("bytes", &ReplaySummary::bytes, "Bytes to write: dirty_sectors * 512.")
		.def_readonly("extents", &ReplaySummary::extents, "Writes (ReplayExtent) after merging adjacent sectors.")
		.def_readonly("skipped_sectors", &ReplaySummary::skipped_sectors,
			      "Dirty sectors past the backing device's end, left out of the plan.")
		.def_property_readonly(
			"first_skipped_sector", [](const ReplaySummary& s) { return opt_object(s.first_skipped_sector); },
			"The lowest skipped sector, or None when none was skipped.")
		.def("__repr__", [](const ReplaySummary& s) {
			return fmt::format("ReplaySummary(segments_in_log={}, segments_contributing={}, dirty_blocks={}, "
					   "dirty_sectors={}, bytes={}, extents={}, skipped_sectors={})",
					   s.segments_in_log, s.segments_contributing, s.dirty_blocks, s.dirty_sectors, s.bytes,
					   s.extents, s.skipped_sectors);
		});

	py::class_<ExtentSource>(m, "ExtentSource",
				 "Sectors of an extent that lie contiguously on the cache: where to read them.")
		.def_readonly("cache_offset", &ExtentSource::cache_offset, "Byte offset on the cache device.")
		.def_readonly("extent_sector", &ExtentSource::extent_sector, "First sector, relative to the extent's start.")
		.def_readonly("sectors", &ExtentSource::sectors, "Number of sectors.")
		.def_readonly("segment_id", &ExtentSource::segment_id, "Id of the segment they come from.")
		.def_readonly("slot", &ExtentSource::slot, "Slot of the segment they come from.")
		.def("__repr__", [](const ExtentSource& s) {
			return fmt::format("ExtentSource(cache_offset={}, extent_sector={}, sectors={}, segment_id={}, slot={})",
					   s.cache_offset, s.extent_sector, s.sectors, s.segment_id, s.slot);
		});

	py::class_<ReplayExtent>(m, "ReplayExtent", "One write to the backing device, and where its sectors come from.")
		.def_readonly("backing_sector", &ReplayExtent::backing_sector, "First sector written on the backing device.")
		.def_readonly("sectors", &ReplayExtent::sectors, "Number of sectors written.")
		.def_property_readonly(
			"backing_offset",
			// In Python's integers: a wild sector near 2^64 has a byte offset past 2^64, which must not wrap.
			[](const ReplayExtent& e) -> py::object { return py::int_(e.backing_sector) * py::int_(sector_size); },
			"Byte offset on the backing device.")
		.def_property_readonly("bytes", &ReplayExtent::bytes, "Length in bytes.")
		.def_property_readonly(
			"sources",
			[](const ReplayExtent& e) {
				py::list out;
				for (const ExtentSource& s : e.sources)
					out.append(s);
				return out;
			},
			"ExtentSource list in destination order, covering the extent exactly.")
		.def("__repr__", [](const ReplayExtent& e) {
			return fmt::format("ReplayExtent(backing_sector={}, sectors={}, sources={})", e.backing_sector, e.sectors,
					   e.sources.size());
		});

	py::class_<SegmentUse>(m, "SegmentUse", "Why a non-empty slot's segment does or does not take part in the replay.")
		.def_readonly("slot", &SegmentUse::slot, "The slot.")
		.def_readonly("id", &SegmentUse::id, "Segment id; 0 when the header could not be read.")
		.def_readonly("state", &SegmentUse::state, "A SlotState, as the scan saw the slot.")
		.def_readonly("in_log", &SegmentUse::in_kernel_log, "The kernel's replay applies this segment.")
		.def_readonly("sectors_replayed", &SegmentUse::sectors_replayed,
			      "Dirty sectors the plan writes from this segment (newer copies elsewhere win).")
		.def_property_readonly(
			"reason", [](const SegmentUse& u) { return std::string(segment_reason_name(u.reason)); },
			"Stable kebab-case reason, as wbreplay --json prints it.")
		.def_readonly("data_left_behind", &SegmentUse::data_left_behind,
			      "Readable data the kernel's replay does not take.")
		.def("__repr__", [](const SegmentUse& u) {
			return fmt::format("SegmentUse(slot={}, id={}, in_log={}, sectors_replayed={}, reason='{}')", u.slot, u.id,
					   py_bool(u.in_kernel_log), u.sectors_replayed, segment_reason_name(u.reason));
		});

	py::class_<ExtentIterator>(m, "ExtentIterator",
				   "Iterator over a ReplayPlan's writes in destination order (ReplayExtent), each "
				   "computed as it is reached. Made by ReplayPlan.extents() or iter(plan).")
		.def("__iter__", [](ExtentIterator& it) -> ExtentIterator& { return it; })
		.def("__next__", [](ExtentIterator& it) {
			std::optional<ReplayExtent> extent = it.cursor.next();
			if (!extent)
				throw py::stop_iteration();
			return std::move(*extent);
		})
		.def("__repr__", [](const ExtentIterator&) { return std::string("<wbkit.ExtentIterator>"); });

	py::class_<Plan>(m, "ReplayPlan",
			 "The writes a replay of the log makes to the backing device, sorted by destination and merged. "
			 "Extents are computed as they are iterated. Made by Cache.replay_plan().")
		.def_property_readonly(
			"summary", [](const Plan& p) { return p.plan->summary(); }, "A ReplaySummary.")
		.def_property_readonly(
			"max_extent_bytes", [](const Plan& p) { return p.plan->options().max_extent_bytes; },
			"Largest single write, as given to Cache.replay_plan().")
		.def_property_readonly(
			"backing_sectors", [](const Plan& p) { return opt_object(p.plan->options().backing_sectors); },
			"Size of the backing device in sectors, when known.")
		.def_property_readonly(
			"sectors_per_segment",
			[](const Plan& p) {
				py::list out;
				for (std::uint64_t n : p.plan->sectors_per_segment())
					out.append(n);
				return out;
			},
			"Dirty sectors each segment of LogScan.log provides, by log position.")
		.def(
			"extents", [](const Plan& p) { return ExtentIterator{p.plan, p.plan->extents()}; },
			"Iterate over the ReplayExtent writes in destination order, one at a time.")
		.def("__iter__", [](const Plan& p) { return ExtentIterator{p.plan, p.plan->extents()}; })
		.def(
			"segment_uses",
			[](const Plan& p) {
				py::list out;
				for (SegmentUse& u : segment_uses(*p.plan))
					out.append(std::move(u));
				return out;
			},
			"A SegmentUse for every non-empty slot.")
		.def(
			"shortfalls",
			[](const Plan& p) {
				py::list out;
				for (const std::string& s : replay_shortfalls(*p.plan))
					out.append(s);
				return out;
			},
			"What a replay by the kernel's rules leaves behind, for people; empty when nothing.")
		.def(
			"to_json",
			[](const Plan& p) {
				ReplayRunResult run{.cache_path = p.cache_path,
						    .backing_path = p.backing_path,
						    .dry_run = true,
						    .plan = p.plan,
						    .shortfalls = replay_shortfalls(*p.plan)};
				return json_to_python(replay_report_json(run));
			},
			"The document wbreplay --dry-run --json prints, as a dict.")
		.def("__repr__", [](const Plan& p) {
			const ReplaySummary& s = p.plan->summary();
			return fmt::format("<wbkit.ReplayPlan {}: {} extents, {} bytes from {} segments>", p.cache_path, s.extents,
					   s.bytes, s.segments_contributing);
		});
}

} // namespace wbkit::python

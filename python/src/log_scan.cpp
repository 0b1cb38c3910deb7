// log_scan.hpp: the result of the replay walk. Its big vectors (slots, index,
// findings) are exposed as read-only sequence views that convert one element
// at a time, so a scan of a multi-TiB cache is never copied into Python lists.
#include <fmt/format.h>
#include <sstream>

#include "bindings.hpp"
#include "wbkit/report.hpp"

namespace wbkit::python {

namespace {

struct SlotEntry {
	std::uint64_t slot = 0;
	SlotInfo info;
};

// An index entry with what the scan knows about its segment resolved, so the
// object is useful after the scan is gone.
struct IndexEntry {
	SectorSource source;
	std::uint64_t segment_id = 0;
	std::uint64_t slot = 0;
	std::uint64_t cache_offset = 0;
	bool written_back = false;
};

IndexEntry index_entry(const LogScan& scan, const SectorSource& source)
{
	const LogSegment& seg = scan.log[source.log_index];
	return {source, seg.id, seg.slot, scan.source_offset(source), seg.written_back};
}

struct FindingsTag {
	static constexpr const char* name = "FindingList";
	static constexpr const char* what = "finding";
	static std::size_t size(const LogScan& s) { return s.findings.size(); }
	static py::object get(const LogScan& s, std::size_t i) { return py::cast(s.findings[i]); }
};
struct SlotsTag {
	static constexpr const char* name = "SlotList";
	static constexpr const char* what = "slot";
	static std::size_t size(const LogScan& s) { return s.slots.size(); }
	static py::object get(const LogScan& s, std::size_t i) { return py::cast(SlotEntry{i, s.slots[i]}); }
};
struct LogTag {
	static constexpr const char* name = "LogSegmentList";
	static constexpr const char* what = "segment";
	static std::size_t size(const LogScan& s) { return s.log.size(); }
	static py::object get(const LogScan& s, std::size_t i) { return py::cast(s.log[i]); }
};
struct IndexTag {
	static constexpr const char* name = "SectorIndex";
	static constexpr const char* what = "entry";
	static std::size_t size(const LogScan& s) { return s.index.size(); }
	static py::object get(const LogScan& s, std::size_t i) { return py::cast(index_entry(s, s.index[i])); }
};

template <typename Tag>
struct View {
	std::shared_ptr<const LogScan> scan;
};

template <typename Tag>
struct ViewIterator {
	std::shared_ptr<const LogScan> scan;
	std::size_t next = 0;
};

template <typename Tag>
void bind_view(py::module_& m, const char* doc)
{
	using V = View<Tag>;
	using I = ViewIterator<Tag>;
	py::class_<I>(m, (std::string(Tag::name) + "Iterator").c_str(),
		      (std::string("Iterator over a ") + Tag::name + ", made by iter(); yields one " + Tag::what +
		       " at a time.")
			      .c_str())
		.def("__iter__", [](I& it) -> I& { return it; })
		.def("__next__",
		     [](I& it) {
			     if (it.next >= Tag::size(*it.scan))
				     throw py::stop_iteration();
			     return Tag::get(*it.scan, it.next++);
		     })
		.def("__repr__", [](const I& it) { return fmt::format("<wbkit.{}Iterator at {}>", Tag::name, it.next); });
	py::class_<V>(m, Tag::name, doc)
		.def("__len__", [](const V& v) { return Tag::size(*v.scan); })
		.def("__getitem__",
		     [](const V& v, py::ssize_t i) {
			     const auto n = py::ssize_t(Tag::size(*v.scan));
			     if (i < 0)
				     i += n;
			     if (i < 0 || i >= n)
				     throw py::index_error(fmt::format("{} index out of range", Tag::what));
			     return Tag::get(*v.scan, std::size_t(i));
		     })
		.def("__getitem__",
		     [](const V& v, const py::slice& slice) {
			     std::size_t start = 0, stop = 0, step = 0, count = 0;
			     if (!slice.compute(Tag::size(*v.scan), &start, &stop, &step, &count))
				     throw py::error_already_set();
			     py::list out;
			     for (std::size_t k = 0; k < count; ++k, start += step)
				     out.append(Tag::get(*v.scan, start));
			     return out;
		     })
		.def("__iter__", [](const V& v) { return I{v.scan, 0}; })
		.def("__repr__", [](const V& v) {
			const std::size_t n = Tag::size(*v.scan);
			return fmt::format("<wbkit.{} of {} {}{}>", Tag::name, n, Tag::what, n == 1 ? "" : "s");
		});
}

} // namespace

void bind_log_scan(py::module_& m)
{
	std::vector<std::pair<std::string, py::object>> states;
	for (const SlotStateInfo& info : all_slot_states())
		states.emplace_back(enum_member_name(info.name), py::str(std::string(info.name)));
	NativeEnum<SlotState>::define(m, "SlotState", "Enum",
				      "What a scan made of one slot. Values are the names wbdump prints.", states);

	std::vector<std::pair<std::string, py::object>> reasons;
	for (const StopReasonInfo& info : all_stop_reasons())
		reasons.emplace_back(enum_member_name(info.name), py::str(std::string(info.name)));
	NativeEnum<StopReason>::define(m, "StopReason", "Enum",
				       "Why the replay walk ended. Values are the names wbdump --json prints.", reasons);

	py::class_<SuperblockInfo>(m, "Superblock", "The superblock: magic in sector 0, record in sector 2047.")
		.def_readonly("readable", &SuperblockInfo::readable, "Sector 0 and sector 2047 could be read.")
		.def_property_readonly(
			"magic", [](const SuperblockInfo& s) { return s.header.magic; },
			"The first 4 bytes of sector 0, little-endian (MAGIC when formatted).")
		.def_property_readonly(
			"magic_ok", [](const SuperblockInfo& s) { return s.header.magic_ok; },
			"The magic is 'WBst'; without it the target would format the cache.")
		.def_property_readonly(
			"padding_nonzero", [](const SuperblockInfo& s) { return s.header.rest_nonzero; },
			"Sector 0 holds non-zero bytes after the magic.")
		.def_readonly("record", &SuperblockInfo::record,
			      "last_writeback_segment_id as stored in sector 2047 (usually 0: never written).")
		.def("__repr__", [](const SuperblockInfo& s) {
			return fmt::format("Superblock(readable={}, magic=0x{:08x}, magic_ok={}, record={})", py_bool(s.readable),
					   s.header.magic, py_bool(s.header.magic_ok), s.record);
		});

	py::class_<SlotEntry>(m, "SlotInfo", "What the scan recorded about one slot (headers and checksum only).")
		.def_readonly("slot", &SlotEntry::slot, "The slot (0-based).")
		.def_property_readonly(
			"id", [](const SlotEntry& e) { return e.info.id; }, "Segment id in the header; 0: never written or unreadable.")
		.def_property_readonly(
			"length", [](const SlotEntry& e) { return e.info.length; }, "Number of metablocks as the header stores it.")
		.def_property_readonly(
			"stored_checksum", [](const SlotEntry& e) { return e.info.stored_checksum; },
			"The checksum the header stores.")
		.def_property_readonly(
			"computed_checksum",
			[](const SlotEntry& e) -> py::object {
				switch (e.info.state) {
				case SlotState::valid:
				case SlotState::checksum_mismatch:
				case SlotState::legacy_checksum:
					return py::int_(e.info.computed_checksum);
				default:
					return py::none();
				}
			},
			"The checksum the scan computed, or None where it computed none.")
		.def_property_readonly(
			"state", [](const SlotEntry& e) { return e.info.state; }, "A SlotState.")
		.def_property_readonly(
			"checksum_ok", [](const SlotEntry& e) { return e.info.state == SlotState::valid; },
			"The segment is valid: its checksum was computed and matches (state is SlotState.VALID).")
		.def_property_readonly(
			"ignored_metablocks", [](const SlotEntry& e) { return e.info.ignored_metablocks; },
			"Valid only with the metablocks past length read as zero (an append in place cut between its two "
			"writes, finding append-not-committed): how many it ignores. 0 otherwise.")
		.def_property_readonly(
			"in_log", [](const SlotEntry& e) { return e.info.in_log; },
			"The replay walk applied this segment.")
		.def("__repr__", [](const SlotEntry& e) {
			return fmt::format("SlotInfo(slot={}, id={}, length={}, state=SlotState.{}, in_log={})", e.slot, e.info.id,
					   e.info.length,
					   py::cast(e.info.state).attr("name").cast<std::string>(), py_bool(e.info.in_log));
		});

	py::class_<LogSegment>(m, "LogSegment", "A segment the replay walk applied.")
		.def_readonly("slot", &LogSegment::slot, "The slot it lies in.")
		.def_readonly("id", &LogSegment::id, "Segment id.")
		.def_readonly("length", &LogSegment::length, "Number of metablocks (data blocks).")
		.def_readonly("written_back", &LogSegment::written_back, "id <= last_writeback_id: already on the backing device.")
		.def("__repr__", [](const LogSegment& s) {
			return fmt::format("LogSegment(slot={}, id={}, length={}, written_back={})", s.slot, s.id, s.length,
					   py_bool(s.written_back));
		});

	py::class_<IndexEntry>(m, "SectorSource",
			       "The newest cache copy of some sectors of one 4 KiB backing block: one entry of the "
			       "scan's index.")
		.def_property_readonly(
			"block_sector", [](const IndexEntry& e) { return e.source.block_sector; },
			"Backing sector of the 4 KiB block (the metablock's sector).")
		.def_property_readonly(
			"sectors", [](const IndexEntry& e) { return e.source.sectors; },
			"Mask: sectors of the block this copy is the newest for.")
		.def_property_readonly(
			"dirty", [](const IndexEntry& e) { return e.source.dirty; },
			"Mask: sectors that are dirty and not yet written back.")
		.def_property_readonly(
			"dirty_bits", [](const IndexEntry& e) { return e.source.dirty_bits; },
			"The metablock's own dirty_bits.")
		.def_property_readonly(
			"metablock", [](const IndexEntry& e) { return e.source.metablock; },
			"Index of the metablock (= data block) within its segment.")
		.def_property_readonly(
			"log_index", [](const IndexEntry& e) { return e.source.log_index; },
			"Position of the segment in LogScan.log.")
		.def_readonly("segment_id", &IndexEntry::segment_id, "Id of the segment holding the copy.")
		.def_readonly("slot", &IndexEntry::slot, "Slot of the segment holding the copy.")
		.def_readonly("cache_offset", &IndexEntry::cache_offset, "Byte offset of the data block on the cache device.")
		.def_readonly("written_back", &IndexEntry::written_back,
			      "The segment's id <= last_writeback_id: the copy is already on the backing device.")
		.def("__repr__", [](const IndexEntry& e) {
			return fmt::format("SectorSource(block_sector={}, segment_id={}, metablock={}, sectors=0x{:02x}, "
					   "dirty=0x{:02x})",
					   e.source.block_sector, e.segment_id, e.source.metablock, e.source.sectors, e.source.dirty);
		});

	bind_view<FindingsTag>(m, "The scan's findings, in the order found. A read-only sequence.");
	bind_view<SlotsTag>(m, "One SlotInfo per slot, indexed by slot. A read-only sequence.");
	bind_view<LogTag>(m, "The segments the replay applies, oldest first. A read-only sequence.");
	bind_view<IndexTag>(m,
			    "The newest copy of every cached sector, sorted by backing sector: SectorSource entries. "
			    "A read-only sequence; elements are made as they are read.");

	auto scan_of = [](const ScanRef& r) -> const LogScan& { return *r.scan; };
	py::class_<ScanRef>(m, "LogScan",
			    "The replay walk over a cache, as the kernel target does it on construction, and what it "
			    "found. Made by Cache.scan().")
		.def_property_readonly(
			"cache_path", [](const ScanRef& r) { return r.cache_path; }, "Path of the cache that was scanned.")
		.def_property_readonly(
			"geometry", [=](const ScanRef& r) { return scan_of(r).geometry; }, "The cache's Geometry.")
		.def_property_readonly(
			"superblock",
			[=](const ScanRef& r) {
				const LogScan& s = scan_of(r);
				return SuperblockInfo{s.superblock_readable, s.superblock, s.sb_record};
			},
			"The Superblock as the scan read it.")
		.def_property_readonly(
			"verified", [=](const ScanRef& r) { return scan_of(r).verified; },
			"Checksums were verified; False for a headers-only scan.")
		.def_property_readonly(
			"max_id", [=](const ScanRef& r) { return scan_of(r).max_id; },
			"The largest segment id on the cache.")
		.def_property_readonly(
			"oldest_id", [=](const ScanRef& r) { return scan_of(r).oldest_id(); },
			"Id of the first segment the replay applies, 0 if none.")
		.def_property_readonly(
			"newest_id", [=](const ScanRef& r) { return scan_of(r).last_flushed_id; },
			"Id of the last segment the replay applies (= last_flushed_id).")
		.def_property_readonly(
			"last_flushed_id", [=](const ScanRef& r) { return scan_of(r).last_flushed_id; },
			"Id of the newest segment the replay applies, 0 if none: the target resumes after it.")
		.def_property_readonly(
			"last_writeback_id", [=](const ScanRef& r) { return scan_of(r).last_writeback_id; },
			"Segments up to this id are on the backing device already: the superblock record (capped at "
			"last_flushed_id), or one lap of the ring behind last_flushed_id when that is larger.")
		.def_property_readonly(
			"stop_reason", [=](const ScanRef& r) { return scan_of(r).stop_reason; },
			"A StopReason: why the replay walk ended.")
		.def_property_readonly(
			"stop_slot", [=](const ScanRef& r) { return opt_object(scan_of(r).stop_slot); },
			"The slot where the walk stopped, or None.")
		.def_property_readonly(
			"stop_segment_id",
			[=](const ScanRef& r) -> py::object {
				const LogScan& s = scan_of(r);
				return s.stop_slot ? py::object(py::int_(s.slots[*s.stop_slot].id)) : py::object(py::none());
			},
			"Id of the segment in the slot where the walk stopped, or None.")
		.def_property_readonly(
			"discarded_segments", [=](const ScanRef& r) { return scan_of(r).discarded_segments; },
			"Good segments after the stop point, which the kernel discards.")
		.def_property_readonly(
			"rewrite_slot", [=](const ScanRef& r) { return opt_object(scan_of(r).rewrite_slot); },
			"The slot of a torn rewrite the walk skipped (docs/FORMAT.md, replay step 2; the later one of two): "
			"the log starts after it. None when the walk skipped none.")
		.def_property_readonly(
			"rewritten_id", [=](const ScanRef& r) { return scan_of(r).rewritten_id; },
			"Id of the segment in rewrite_slot, 0 when there is none: every segment up to it counts as written "
			"back.")
		.def_property_readonly(
			"dirty_blocks", [=](const ScanRef& r) { return scan_of(r).dirty_blocks; },
			"4 KiB backing blocks with at least one sector a replay writes.")
		.def_property_readonly(
			"dirty_sectors", [=](const ScanRef& r) { return scan_of(r).dirty_sectors; },
			"Backing sectors whose newest copy is dirty and not yet written back: what a replay writes.")
		.def_property_readonly(
			"writeback_bytes", [=](const ScanRef& r) { return scan_of(r).writeback_bytes(); },
			"Bytes a replay writes to the backing device.")
		.def_property_readonly(
			"replayable", [=](const ScanRef& r) { return scan_of(r).replayable(); },
			"The superblock is readable and formatted and there is at least one slot.")
		.def_property_readonly(
			"damage", [=](const ScanRef& r) { return has_damage(scan_of(r).findings); },
			"Some finding is a warning or an error (wbdump would exit 1).")
		.def_property_readonly(
			"findings", [](const ScanRef& r) { return View<FindingsTag>{r.scan}; },
			"Every Finding, in the order found (a FindingList).")
		.def_property_readonly(
			"slots", [](const ScanRef& r) { return View<SlotsTag>{r.scan}; }, "A SlotInfo per slot (a SlotList).")
		.def_property_readonly(
			"log", [](const ScanRef& r) { return View<LogTag>{r.scan}; },
			"The segments the replay applies, oldest first (a LogSegmentList of LogSegment).")
		.def_property_readonly(
			"index", [](const ScanRef& r) { return View<IndexTag>{r.scan}; },
			"The newest copy of every cached sector, by backing sector (a SectorIndex of SectorSource).")
		.def(
			"find_sector",
			[=](const ScanRef& r, const py::int_& sector) -> py::object {
				const LogScan& s = scan_of(r);
				const std::optional<SectorSource> source = s.find_sector(to_u64(sector, "sector"));
				return source ? py::cast(index_entry(s, *source)) : py::object(py::none());
			},
			py::arg("sector"),
			"The SectorSource that decides a backing sector, or None: the backing device holds it.")
		.def(
			"to_json", [=](const ScanRef& r) { return json_to_python(scan_json(scan_of(r), r.cache_path)); },
			"The document wbdump --json prints, as a dict.")
		.def(
			"summary",
			[=](const ScanRef& r) {
				std::ostringstream out;
				print_summary(out, scan_of(r), r.cache_path);
				return out.str();
			},
			"The text wbdump prints.")
		.def("__repr__", [=](const ScanRef& r) {
			const LogScan& s = scan_of(r);
			return fmt::format("<wbkit.LogScan {}: {} slots, ids {}..{}, stop {}, {} dirty sectors, {} findings>",
					   r.cache_path, s.geometry.nr_segments, s.oldest_id(), s.last_flushed_id,
					   stop_reason_name(s.stop_reason), s.dirty_sectors, s.findings.size());
		});
}

} // namespace wbkit::python

// Cache.metablocks(): every metablock of the log in replay order, one
// segment header in memory at a time.
#include <fmt/format.h>

#include "cache.hpp"

namespace wbkit::python {

void bind_metablock_views(py::module_& m)
{
	py::class_<LogMetablock>(m, "LogMetablock", "A metablock of the log, in replay order, with its segment.")
		.def_readonly("segment_id", &LogMetablock::segment_id, "Id of the segment it belongs to.")
		.def_readonly("slot", &LogMetablock::slot, "Slot of the segment it belongs to.")
		.def_readonly("index", &LogMetablock::index, "Position within the segment (= data block index).")
		.def_property_readonly(
			"sector", [](const LogMetablock& l) { return l.metablock.sector; },
			"Backing-device sector of the 4 KiB block (a multiple of 8 when sane).")
		.def_property_readonly(
			"dirty_bits", [](const LogMetablock& l) { return l.metablock.dirty_bits; },
			"Bit j set: sector + j is dirty in this copy.")
		.def_property_readonly(
			"is_dirty", [](const LogMetablock& l) { return l.metablock.is_dirty(); },
			"Whether any sector of the block is dirty.")
		.def_property_readonly(
			"padding_nonzero", [](const LogMetablock& l) { return l.metablock.padding_nonzero; },
			"The metablock's 7 padding bytes are not zero.")
		.def_readonly("written_back", &LogMetablock::written_back, "The segment's id <= last_writeback_id.")
		.def("__repr__", [](const LogMetablock& l) {
			return fmt::format("LogMetablock(segment_id={}, slot={}, index={}, sector={}, dirty_bits=0x{:02x})",
					   l.segment_id, l.slot, l.index, l.metablock.sector, l.metablock.dirty_bits);
		});

	py::class_<MetablockIterator>(m, "MetablockIterator",
				      "Iterator over the log's metablocks in replay order, made by Cache.metablocks(): "
				      "yields LogMetablock, reading one segment header at a time.")
		.def("__iter__", [](MetablockIterator& it) -> MetablockIterator& { return it; })
		.def("__next__",
		     [](MetablockIterator& it) {
			     const auto& log = it.scan->log;
			     while (it.segment < log.size()) {
				     const LogSegment& seg = log[it.segment];
				     if (!it.loaded) {
					     auto device = it.state->device();
					     const std::uint64_t offset = it.scan->geometry.slot_offset(seg.slot);
					     SegmentHeader header;
					     {
						     // The iterator itself is only touched with the GIL held.
						     py::gil_scoped_release unlocked;
						     AlignedBuffer block(block_size);
						     device->read_exact(offset, block.span());
						     header = parse_segment_header(block.span());
					     }
					     it.header = header;
					     it.loaded = true;
					     it.next = 0;
				     }
				     if (it.next < it.header.usable_length()) {
					     unsigned i = it.next++;
					     return LogMetablock{seg.id, seg.slot, i, it.header.metablocks[i], seg.written_back};
				     }
				     ++it.segment;
				     it.loaded = false;
			     }
			     throw py::stop_iteration();
		     })
		.def("__repr__", [](const MetablockIterator& it) {
			return fmt::format("<wbkit.MetablockIterator at log segment {} of {}>", it.segment, it.scan->log.size());
		});
}

} // namespace wbkit::python

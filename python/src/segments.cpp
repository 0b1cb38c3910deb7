// Cache.segments() and Cache.slot()/segment(): one slot read in full.
#include <fmt/format.h>

#include "cache.hpp"
#include "wbkit/report.hpp"

namespace wbkit::python {

void bind_segment_views(py::module_& m)
{
	py::class_<SlotDetail>(m, "Segment",
			       "One slot read in full: its header, metablocks and checksum. What wbdump --slot shows.")
		.def_readonly("slot", &SlotDetail::slot, "The slot (0-based).")
		.def_readonly("cache_offset", &SlotDetail::cache_offset, "Byte offset of the slot on the cache device.")
		.def_property_readonly(
			"id", [](const SlotDetail& d) { return d.header.id; }, "Segment id; 0: never written.")
		.def_property_readonly(
			"length", [](const SlotDetail& d) { return d.header.length; },
			"Number of metablocks as stored (more than 127 is damage).")
		.def_property_readonly(
			"stored_checksum", [](const SlotDetail& d) { return d.header.checksum; }, "The checksum the header stores.")
		.def_property_readonly(
			"computed_checksum", [](const SlotDetail& d) { return opt_object(d.computed_checksum); },
			"None when the header or data could not be read or length is too large.")
		.def_property_readonly(
			"checksum_ok", [](const SlotDetail& d) { return d.state == SlotState::valid; },
			"The segment is valid: its checksum was computed and matches (state is SlotState.VALID).")
		.def_readonly("ignored_metablocks", &SlotDetail::ignored_metablocks,
			      "Valid only with the metablocks past length read as zero (an append in place cut between "
			      "its two writes, finding append-not-committed): how many it ignores. 0 otherwise.")
		.def_readonly("state", &SlotDetail::state, "A SlotState.")
		.def_readonly("header_readable", &SlotDetail::header_readable, "The 4 KiB header block could be read.")
		.def_readonly("data_readable", &SlotDetail::data_readable,
			      "The data blocks the checksum covers could be read.")
		.def_property_readonly(
			"error", [](const SlotDetail& d) { return d.error.empty() ? py::object(py::none()) : py::object(py::str(d.error)); },
			"Why something could not be read, or None.")
		.def_readonly("header", &SlotDetail::header, "The parsed SegmentHeader.")
		.def_property_readonly(
			"metablocks",
			[](const SlotDetail& d) {
				py::list out;
				for (unsigned i = 0; i < d.header.usable_length(); ++i)
					out.append(d.header.metablocks[i]);
				return out;
			},
			"The segment's metablocks (at most 127), as a list of Metablock.")
		.def(
			"to_json", [](const SlotDetail& d) { return json_to_python(slot_json(d)); },
			"The document wbdump --json --slot prints under 'segment' (without 'in_log').")
		.def("__repr__", [](const SlotDetail& d) {
			return fmt::format("Segment(slot={}, id={}, length={}, state=SlotState.{}, stored_checksum=0x{:08x})",
					   d.slot, d.header.id, d.header.length, enum_member_name(slot_state_name(d.state)),
					   d.header.checksum);
		});

	py::class_<SegmentIterator>(m, "SegmentIterator",
				    "Iterator over every slot of a cache in slot order, made by Cache.segments(): reads "
				    "one Segment at a time.")
		.def("__iter__", [](SegmentIterator& it) -> SegmentIterator& { return it; })
		.def("__next__",
		     [](SegmentIterator& it) {
			     if (it.next >= it.state->geometry.nr_segments)
				     throw py::stop_iteration();
			     return read_slot(*it.state, it.next++);
		     })
		.def("__repr__", [](const SegmentIterator& it) {
			return fmt::format("<wbkit.SegmentIterator at slot {} of {}>", it.next, it.state->geometry.nr_segments);
		});
}

} // namespace wbkit::python

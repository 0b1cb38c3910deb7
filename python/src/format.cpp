// format.hpp: geometry, the parsed on-disk structures and their parsers.
#include <fmt/format.h>

#include "bindings.hpp"
#include "wbkit/format.hpp"
#include "wbkit/slot_state.hpp"

namespace wbkit::python {

namespace {

// The parsers index fixed offsets; a short buffer must be refused here, as a
// ValueError, before it reaches them.
std::span<const std::byte> at_least(const py::buffer& data, py::buffer_info& info, std::size_t size, const char* what)
{
	info = data.request();
	if (info.ndim != 1 || info.itemsize != 1 || info.strides[0] != 1)
		throw py::value_error(fmt::format("{} must be a contiguous bytes-like object", what));
	if (std::size_t(info.size) < size)
		throw py::value_error(fmt::format("{} must hold at least {} bytes, not {}", what, size, info.size));
	return {static_cast<const std::byte*>(info.ptr), std::size_t(info.size)};
}

std::string metablock_repr(const Metablock& mb)
{
	return fmt::format("Metablock(sector={}, dirty_bits=0x{:02x}{})", mb.sector, mb.dirty_bits,
			   mb.padding_nonzero ? ", padding_nonzero=True" : "");
}

} // namespace

void bind_format(py::module_& m)
{
	m.attr("SECTOR_SIZE") = sector_size;
	m.attr("BLOCK_SIZE") = block_size;
	m.attr("BLOCK_SECTORS") = block_sectors;
	m.attr("SEGMENT_SIZE") = segment_size;
	m.attr("SEGMENT_SECTORS") = segment_sectors;
	m.attr("SUPERBLOCK_SIZE") = superblock_size;
	m.attr("BLOCKS_PER_SEGMENT") = blocks_per_segment;
	m.attr("MAGIC") = superblock_magic;
	m.attr("SB_RECORD_OFFSET") = std::uint64_t(WB_SB_RECORD_OFFSET);

	py::class_<Geometry> geometry(m, "Geometry",
				      "Where things lie on a cache device of a given size (docs/FORMAT.md, Geometry).\n\n"
				      "The constants of the format are class attributes: blocks_per_segment (data blocks "
				      "of 4 KiB per segment: 127), segment_bytes (512 KiB), block_bytes (4 KiB).");
	// Plain class attributes: constants need no property (and Python 3.11 drops a static property's doc).
	geometry.attr("blocks_per_segment") = blocks_per_segment;
	geometry.attr("segment_bytes") = segment_size;
	geometry.attr("block_bytes") = block_size;
	geometry
		.def_static(
			"for_cache_bytes", [](const py::int_& bytes) { return Geometry::for_cache_bytes(to_u64(bytes, "cache_bytes")); },
			py::arg("cache_bytes"), "The geometry of a cache device of this many bytes.")
		.def_readonly("cache_bytes", &Geometry::cache_bytes, "Size of the cache device in bytes.")
		.def_readonly("nr_segments", &Geometry::nr_segments, "Number of segment slots; 0 if the cache is too small.")
		.def(
			"slot_offset",
			[](const Geometry& g, const py::int_& slot) { return g.slot_offset(g.checked_slot(to_u64(slot, "slot"))); },
			py::arg("slot"), "Byte offset of slot k on the cache device.")
		.def(
			"data_block_offset",
			[](const Geometry& g, const py::int_& slot, unsigned index) {
				const std::uint64_t k = g.checked_slot(to_u64(slot, "slot"));
				if (index >= blocks_per_segment)
					throw py::value_error(fmt::format("block index {} is not in 0..{}", index, blocks_per_segment - 1));
				return g.data_block_offset(k, index);
			},
			py::arg("slot"), py::arg("index"), "Byte offset of data block `index` (0..126) of slot k.")
		.def(
			"slot_of_id",
			[](const Geometry& g, const py::int_& id) { return g.checked_slot_of_id(to_u64(id, "id")); },
			py::arg("id"), "The slot that segment `id` lives in: (id - 1) mod nr_segments.")
		.def("__eq__", [](const Geometry& a, const Geometry& b) { return a.cache_bytes == b.cache_bytes; })
		.def("__hash__", [](const Geometry& g) { return py::hash(py::int_(g.cache_bytes)); })
		.def("__repr__", [](const Geometry& g) {
			return fmt::format("Geometry(cache_bytes={}, nr_segments={}, blocks_per_segment={})", g.cache_bytes,
					   g.nr_segments, blocks_per_segment);
		});

	py::class_<Metablock>(m, "Metablock", "One metablock: the backing block a data block of a segment belongs to.")
		.def_readonly("sector", &Metablock::sector, "Backing-device sector of the 4 KiB block (a multiple of 8 when sane).")
		.def_readonly("dirty_bits", &Metablock::dirty_bits, "Bit j set: sector + j is dirty in this copy.")
		.def_readonly("padding_nonzero", &Metablock::padding_nonzero, "The 7 padding bytes are not zero.")
		.def_property_readonly("is_dirty", &Metablock::is_dirty, "Whether any sector of the block is dirty.")
		.def_property_readonly("touched_sectors", &Metablock::touched_sectors,
				       "Mask of the sectors this entry decides: its dirty ones, or all 8 for a clean entry.")
		.def("__repr__", &metablock_repr);

	py::class_<SegmentHeader>(m, "SegmentHeader", "The parsed 4 KiB header block of a segment.")
		.def_readonly("id", &SegmentHeader::id, "Segment id; 0 if never written.")
		.def_readonly("checksum", &SegmentHeader::checksum, "The stored checksum.")
		.def_readonly("length", &SegmentHeader::length, "Number of metablocks and data blocks as stored (may exceed 127).")
		.def_readonly("header_padding_nonzero", &SegmentHeader::header_padding_nonzero,
			      "Bytes 13..511 of the header sector are not zero (finding header-padding-nonzero).")
		.def_readonly("unused_metablocks_nonzero", &SegmentHeader::unused_metablocks_nonzero,
			      "The metablock area past length is not zero (finding unused-metablock-nonzero).")
		.def_property_readonly("length_valid", &SegmentHeader::length_valid, "length <= 127.")
		.def_property_readonly("usable_length", &SegmentHeader::usable_length, "min(length, 127).")
		.def_property_readonly("written_bytes", &SegmentHeader::written_bytes,
				       "Bytes the target writes when it flushes this segment, header included.")
		.def_property_readonly(
			"metablocks",
			[](const SegmentHeader& h) {
				py::list out;
				for (unsigned i = 0; i < h.usable_length(); ++i)
					out.append(h.metablocks[i]);
				return out;
			},
			"The first usable_length metablocks, as a list.")
		.def("__repr__", [](const SegmentHeader& h) {
			return fmt::format("SegmentHeader(id={}, checksum=0x{:08x}, length={})", h.id, h.checksum, h.length);
		});

	py::class_<SuperblockHeader>(m, "SuperblockHeader", "The parsed sector 0 of a cache device.")
		.def_readonly("magic", &SuperblockHeader::magic, "The first 4 bytes of sector 0, little-endian (MAGIC when formatted).")
		.def_readonly("magic_ok", &SuperblockHeader::magic_ok,
			      "magic == MAGIC ('WBst'); without it the target would format the cache.")
		.def_readonly("rest_nonzero", &SuperblockHeader::rest_nonzero, "Sector 0 holds non-zero bytes after the magic.")
		.def("__repr__", [](const SuperblockHeader& sb) {
			return fmt::format("SuperblockHeader(magic=0x{:08x}, magic_ok={}, rest_nonzero={})", sb.magic,
					   sb.magic_ok ? "True" : "False", sb.rest_nonzero ? "True" : "False");
		});

	m.def(
		"parse_segment_header",
		[](const py::buffer& data) {
			py::buffer_info info;
			return parse_segment_header(at_least(data, info, block_size, "a segment header block").first(block_size));
		},
		py::arg("data"), "Parse the first 4 KiB of a segment. Never fails on damage: it is reported in the fields.");
	m.def(
		"parse_superblock_header",
		[](const py::buffer& data) {
			py::buffer_info info;
			return parse_superblock_header(at_least(data, info, sector_size, "sector 0").first(sector_size));
		},
		py::arg("data"), "Parse sector 0 (512 bytes) of a cache device.");
	m.def(
		"parse_superblock_record",
		[](const py::buffer& data) {
			py::buffer_info info;
			return parse_superblock_record(at_least(data, info, 8, "the record sector"));
		},
		py::arg("data"), "The last_writeback_segment_id stored at the start of sector 2047.");
	m.def(
		"segment_checksum",
		[](const py::buffer& data, unsigned length) {
			if (length > blocks_per_segment)
				throw py::value_error(fmt::format("length {} is more than {}", length, blocks_per_segment));
			py::buffer_info info;
			auto bytes = at_least(data, info, block_size * (length + 1ULL), "the segment");
			py::gil_scoped_release unlocked;
			return segment_checksum(bytes, length);
		},
		py::arg("segment"), py::arg("length"),
		"CRC-32C over bytes [512, 4096 * (length + 1)) of a segment, as the header stores it.");

	py::class_<ChecksumVerdict>(m, "ChecksumVerdict",
				    "What a segment's stored checksum says (docs/FORMAT.md, Checksum): the library's one "
				    "decision, as the scan makes it.")
		.def_readonly("state", &ChecksumVerdict::state,
			      "SlotState.VALID, SlotState.LEGACY_CHECKSUM or SlotState.CHECKSUM_MISMATCH.")
		.def_readonly("computed", &ChecksumVerdict::computed,
			      "The CRC of the reading that matched; the CRC of the bytes as they are when none did.")
		.def_readonly("ignored_metablocks", &ChecksumVerdict::ignored_metablocks,
			      "Valid only with the metablocks past length read as zero (an append in place cut "
			      "between its two writes): how many it ignores. 0 otherwise.")
		.def_property_readonly("tail_ignored", &ChecksumVerdict::tail_ignored, "ignored_metablocks > 0.")
		.def("__repr__", [](const ChecksumVerdict& v) {
			return fmt::format("ChecksumVerdict(state=SlotState.{}, computed=0x{:08x}, ignored_metablocks={})",
					   enum_member_name(slot_state_name(v.state)), v.computed, v.ignored_metablocks);
		});

	m.def(
		"check_segment_checksum",
		[](const py::buffer& data) {
			py::buffer_info info;
			auto bytes = at_least(data, info, block_size, "the segment");
			const SegmentHeader h = parse_segment_header(bytes.first(block_size));
			if (!h.length_valid())
				throw py::value_error(fmt::format("length {} is more than {}", h.length, blocks_per_segment));
			bytes = at_least(data, info, block_size * (h.length + 1ULL), "the segment");
			py::gil_scoped_release unlocked;
			return checksum_verdict(h.checksum, segment_crc(bytes, h.length));
		},
		py::arg("segment"),
		"Whether a segment's stored checksum matches: the CRC of the bytes as they are, or the CRC with the "
		"metablocks past length read as zero (an append in place cut between its two writes). segment holds "
		"at least the header block and the length data blocks it names.");
}

} // namespace wbkit::python

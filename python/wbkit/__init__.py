"""Read and check a writeboost (dm-writeboost 2.2) cache device from Python.

Thin bindings of the wbkit C++ library: everything here is computed by the
same code as the wbdump tool, so both always agree.

    import wbkit
    with wbkit.open("cache.img") as cache:
        scan = cache.scan()
        print(scan.last_flushed_id, scan.dirty_sectors, scan.stop_reason)
        for finding in scan.findings:
            print(finding)

I/O errors raise OSError (with errno and filename), bad arguments ValueError;
a damaged cache is not an error: it is reported as findings.
"""

from ._wbkit import (
    BLOCK_SECTORS,
    BLOCK_SIZE,
    BLOCKS_PER_SEGMENT,
    MAGIC,
    SB_RECORD_OFFSET,
    SECTOR_SIZE,
    SEGMENT_SECTORS,
    SEGMENT_SIZE,
    SUPERBLOCK_SIZE,
    Block,
    Cache,
    Crc32c,
    Error,
    Finding,
    FindingCode,
    FindingInfo,
    FindingList,
    Geometry,
    LogMetablock,
    LogScan,
    LogSegment,
    LogSegmentList,
    Metablock,
    Place,
    RefusedError,
    Segment,
    SegmentHeader,
    Severity,
    SectorIndex,
    SectorSource,
    SlotInfo,
    SlotList,
    SlotState,
    StopReason,
    Superblock,
    SuperblockHeader,
    all_findings,
    crc32c,
    finding_info,
    open,
    parse_segment_header,
    parse_superblock_header,
    parse_superblock_record,
    segment_checksum,
)

__version__ = "0.1.0"

__all__ = [
    "BLOCK_SECTORS",
    "BLOCK_SIZE",
    "BLOCKS_PER_SEGMENT",
    "MAGIC",
    "SB_RECORD_OFFSET",
    "SECTOR_SIZE",
    "SEGMENT_SECTORS",
    "SEGMENT_SIZE",
    "SUPERBLOCK_SIZE",
    "Block",
    "Cache",
    "Crc32c",
    "Error",
    "Finding",
    "FindingCode",
    "FindingInfo",
    "FindingList",
    "Geometry",
    "LogMetablock",
    "LogScan",
    "LogSegment",
    "LogSegmentList",
    "Metablock",
    "Place",
    "RefusedError",
    "Segment",
    "SegmentHeader",
    "Severity",
    "SectorIndex",
    "SectorSource",
    "SlotInfo",
    "SlotList",
    "SlotState",
    "StopReason",
    "Superblock",
    "SuperblockHeader",
    "all_findings",
    "crc32c",
    "finding_info",
    "open",
    "parse_segment_header",
    "parse_superblock_header",
    "parse_superblock_record",
    "segment_checksum",
]

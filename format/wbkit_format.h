/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * wbkit_format.h - the writeboost on-disk format (dm-writeboost 2.2.x).
 *
 * The one definition of the on-disk layout, shared by the kernel target in
 * kmod/ and by the userspace library. Only fixed-width little-endian types;
 * every size and offset is pinned at build time, so a layout change breaks
 * the build rather than a user's disk. docs/FORMAT.md is the specification.
 *
 * Userspace must not cast buffers into these structs: it reads fields with
 * little-endian loads at the offsets pinned below (WB_*_OFFSET).
 */
#ifndef WBKIT_FORMAT_H
#define WBKIT_FORMAT_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/stddef.h>
#include <linux/build_bug.h>
#include <linux/math64.h>
#define WB_FORMAT_CHECK(cond, msg) static_assert(cond, msg)
#else
#include "wbkit_types_shim.h"
#endif

/* Geometry. A sector is 512 bytes; all sector arithmetic is 64-bit. */
#define WB_SECTOR_SHIFT		9
#define WB_SECTOR_SIZE		(1U << WB_SECTOR_SHIFT)

#define WB_SUPERBLOCK_SECTORS	2048ULL	/* sectors 0..2047, the first 1 MiB */
#define WB_SB_RECORD_SECTOR	2047ULL
#define WB_SB_RECORD_OFFSET	(WB_SB_RECORD_SECTOR << WB_SECTOR_SHIFT) /* 0xFFE00 */

#define WB_SEGMENT_SIZE_ORDER	10	/* in sectors */
#define WB_SEGMENT_SECTORS	(1ULL << WB_SEGMENT_SIZE_ORDER)
#define WB_SEGMENT_SIZE		(WB_SEGMENT_SECTORS << WB_SECTOR_SHIFT)	/* 512 KiB */

#define WB_BLOCK_SHIFT		12
#define WB_BLOCK_SIZE		(1U << WB_BLOCK_SHIFT)	/* 4 KiB cache block */
#define WB_BLOCK_SECTORS	(WB_BLOCK_SIZE >> WB_SECTOR_SHIFT)	/* 8 */
#define WB_BLOCKS_PER_SEGMENT	127	/* block 0 of a segment is its header */

#define WB_MAGIC		0x57427374U	/* "WBst", bytes 74 73 42 57 */

/* CRC-32C of an empty segment (length 0, zeroed metablock area). */
#define WB_EMPTY_SEGMENT_CHECKSUM 0x0890BE15U

/* Sector 0 of the cache device. The rest of the sector is zero. */
struct wb_superblock_header_device {
	__le32 magic;
} __packed;

/* Sector 2047 of the cache device, byte 0. */
struct wb_superblock_record_device {
	__le64 last_writeback_segment_id;
} __packed;

/*
 * Sectors 8..15 (the superblock region's second 4 KiB block), byte 0: the
 * clean-copy trust record, a wbkit addition that dm-writeboost zeroes when
 * it formats and never writes otherwise. A clean entry, and a dirty entry
 * whose segment is written back, say "the backing device holds this data".
 * That stays true only while nothing changes the backing device outside
 * the log: a write_around_mode session does, and so may an offline repair.
 * So only entries of segments with an id >= trusted_from_id may serve reads
 * after a replay (wb_clean_copy_trusted); without the magic, none may.
 */
#define WB_TRUST_SECTOR		8ULL
#define WB_TRUST_MAGIC		0x72544257U	/* "WBTr", bytes 57 42 54 72 */
#define WB_TRUST_NONE		(~0ULL)		/* no entry is trusted */

struct wb_clean_trust_device {
	__le32 magic;
	__le32 padding;		/* zero */
	__le64 trusted_from_id;
	/*
	 * The number of slots of the ring the record was written for; 0 in
	 * records older wbkit versions wrote (not recorded). See
	 * wb_replay_check_ring.
	 */
	__le64 nr_segments;
} __packed;

/* 16 bytes, so a metablock never straddles two sectors. */
struct wb_metablock_device {
	__le64 sector;		/* backing sector of the 4 KiB block, multiple of 8 */
	__u8 dirty_bits;	/* bit j: sector + j is dirty; 0 = clean entry */
	__u8 padding[16 - (8 + 1)];
} __packed;

/*
 * The first sector of a segment. Its single-sector write is assumed atomic:
 * it carries the checksum that audits the rest of the segment. The metablock
 * array follows at WB_METABLOCK_AREA_OFFSET within the 4 KiB header block.
 */
struct wb_segment_header_device {
	__le64 id;		/* 0 = never written; ids start at 1 */
	__le32 checksum;	/* CRC-32C of [512, 4096 * (length + 1)) */
	__u8 length;		/* valid metablocks and data blocks, 0..127 */
	__u8 padding[512 - (8 + 4 + 1)];
} __packed;

#define WB_SEGMENT_HEADER_SIZE		512U
#define WB_METABLOCK_SIZE		16U
#define WB_METABLOCK_AREA_OFFSET	WB_SEGMENT_HEADER_SIZE
#define WB_METABLOCK_OFFSET(i)		(WB_METABLOCK_AREA_OFFSET + WB_METABLOCK_SIZE * (i))

/* Field offsets the userspace readers use; pinned to the structs below. */
#define WB_SB_MAGIC_OFFSET		0U
#define WB_SEG_ID_OFFSET		0U
#define WB_SEG_CHECKSUM_OFFSET		8U
#define WB_SEG_LENGTH_OFFSET		12U
#define WB_SEG_PADDING_OFFSET		13U
#define WB_MB_SECTOR_OFFSET		0U
#define WB_MB_DIRTY_BITS_OFFSET		8U
#define WB_MB_PADDING_OFFSET		9U
#define WB_TRUST_MAGIC_OFFSET		0U
#define WB_TRUST_FROM_OFFSET		8U
#define WB_TRUST_SEGMENTS_OFFSET	16U

WB_FORMAT_CHECK(sizeof(struct wb_superblock_header_device) == 4, "superblock header size");
WB_FORMAT_CHECK(sizeof(struct wb_superblock_record_device) == 8, "superblock record size");
WB_FORMAT_CHECK(sizeof(struct wb_metablock_device) == WB_METABLOCK_SIZE, "metablock size");
WB_FORMAT_CHECK(sizeof(struct wb_segment_header_device) == WB_SEGMENT_HEADER_SIZE, "segment header size");
WB_FORMAT_CHECK(offsetof(struct wb_superblock_header_device, magic) == WB_SB_MAGIC_OFFSET, "magic offset");
WB_FORMAT_CHECK(offsetof(struct wb_segment_header_device, id) == WB_SEG_ID_OFFSET, "segment id offset");
WB_FORMAT_CHECK(offsetof(struct wb_segment_header_device, checksum) == WB_SEG_CHECKSUM_OFFSET, "checksum offset");
WB_FORMAT_CHECK(offsetof(struct wb_segment_header_device, length) == WB_SEG_LENGTH_OFFSET, "length offset");
WB_FORMAT_CHECK(offsetof(struct wb_segment_header_device, padding) == WB_SEG_PADDING_OFFSET, "header padding offset");
WB_FORMAT_CHECK(offsetof(struct wb_metablock_device, sector) == WB_MB_SECTOR_OFFSET, "metablock sector offset");
WB_FORMAT_CHECK(offsetof(struct wb_metablock_device, dirty_bits) == WB_MB_DIRTY_BITS_OFFSET, "dirty_bits offset");
WB_FORMAT_CHECK(offsetof(struct wb_metablock_device, padding) == WB_MB_PADDING_OFFSET, "metablock padding offset");
WB_FORMAT_CHECK(WB_SB_RECORD_OFFSET == 0xFFE00, "superblock record byte offset");
WB_FORMAT_CHECK(sizeof(struct wb_clean_trust_device) == 24, "trust record size");
WB_FORMAT_CHECK(offsetof(struct wb_clean_trust_device, magic) == WB_TRUST_MAGIC_OFFSET, "trust magic offset");
WB_FORMAT_CHECK(offsetof(struct wb_clean_trust_device, trusted_from_id) == WB_TRUST_FROM_OFFSET, "trust id offset");
WB_FORMAT_CHECK(offsetof(struct wb_clean_trust_device, nr_segments) == WB_TRUST_SEGMENTS_OFFSET, "trust ring size offset");
WB_FORMAT_CHECK(WB_TRUST_SECTOR % 8 == 0 && WB_TRUST_SECTOR + 8 <= WB_SB_RECORD_SECTOR - 7, "trust record has a 4 KiB block of its own");
WB_FORMAT_CHECK(WB_SEGMENT_SIZE == 512 * 1024, "segment size");
WB_FORMAT_CHECK(WB_BLOCK_SIZE * (WB_BLOCKS_PER_SEGMENT + 1) == WB_SEGMENT_SIZE, "blocks per segment");
WB_FORMAT_CHECK(WB_METABLOCK_OFFSET(WB_BLOCKS_PER_SEGMENT) <= WB_BLOCK_SIZE, "metablocks fit the header block");

/*
 * Appending in place (docs/FORMAT.md, "Checksum"): a writer that commits a
 * partly filled segment and later adds blocks to it writes the new data
 * blocks and the header's metablock area first, and the header's first
 * logical block (id, checksum, length) last. A power cut between the two
 * leaves the old length and checksum over a metablock area that already
 * names the new blocks. So a checksum also matches when it is the CRC with
 * the metablocks from index length on read as zero; for a header whose
 * metablock tail is zero (every whole-segment write) the two are the same.
 */

/* Whether the metablocks from index length on are all zero bytes. */
static inline bool wb_metablock_tail_is_zero(const __u8 *header_block,
					     __u32 length)
{
	__u32 i;

	for (i = WB_METABLOCK_OFFSET(length); i < WB_BLOCK_SIZE; i++)
		if (header_block[i])
			return false;
	return true;
}

/* Zeroes the metablocks from index length on (a copy to checksum). */
static inline void wb_zero_metablock_tail(__u8 *header_block, __u32 length)
{
	__u32 i;

	for (i = WB_METABLOCK_OFFSET(length); i < WB_BLOCK_SIZE; i++)
		header_block[i] = 0;
}

/* Start sector of segment slot k (0-based). */
static inline __u64 wb_slot_start_sector(__u64 slot)
{
	return WB_SUPERBLOCK_SECTORS + WB_SEGMENT_SECTORS * slot;
}

/* Cache sector of data block i (0..126) of slot k. */
static inline __u64 wb_data_block_sector(__u64 slot, __u32 i)
{
	return wb_slot_start_sector(slot) + (__u64)WB_BLOCK_SECTORS * (1 + i);
}

/* Number of whole segment slots on a cache of cache_sectors sectors. */
static inline __u64 wb_nr_segments(__u64 cache_sectors)
{
	if (cache_sectors < WB_SUPERBLOCK_SECTORS)
		return 0;
	return (cache_sectors - WB_SUPERBLOCK_SECTORS) >> WB_SEGMENT_SIZE_ORDER;
}

/*
 * Whether sector 0 (512 bytes) is a valid superblock: the magic, then
 * zeros (dm-writeboost and dm-wbkit write nothing else there). A device
 * with the magic and anything else in sector 0 is not a cache: the kernel
 * refuses it rather than replay it.
 */
static inline bool wb_superblock_valid(const __u8 *sector0)
{
	__u32 i;

	if (sector0[0] != 0x74 || sector0[1] != 0x73 || sector0[2] != 0x42 ||
	    sector0[3] != 0x57)
		return false;
	for (i = 4; i < WB_SECTOR_SIZE; i++)
		if (sector0[i])
			return false;
	return true;
}

/*
 * The replay rules, over plain integers, shared by the kernel's replay and
 * the offline tools so that both read a log the same way. None of them
 * divides by a value the caller has not checked: every function taking
 * nr_segments requires nr_segments >= 1 (a cache without a whole slot is
 * refused before any of them is called).
 */

/* a mod b for 64-bit operands, also on 32-bit kernels; b >= 1. */
static inline __u64 wb_u64_rem(__u64 a, __u64 b)
{
#ifdef __KERNEL__
	u64 rem;

	div64_u64_rem(a, b, &rem);
	return rem;
#else
	return a % b;
#endif
}

/* The slot segment id lives in: (id - 1) mod nr_segments. id >= 1. */
static inline __u64 wb_slot_of_id(__u64 id, __u64 nr_segments)
{
	return wb_u64_rem(id - 1, nr_segments);
}

/*
 * The slot replay starts from: that of max_id + 1, where the oldest segment
 * of a full ring lives. max_id is the largest id on the cache (0: empty,
 * which gives slot 0). Written as max_id mod nr_segments so that
 * max_id == U64_MAX does not wrap.
 */
static inline __u64 wb_oldest_slot(__u64 max_id, __u64 nr_segments)
{
	return wb_u64_rem(max_id, nr_segments);
}

/*
 * The slot visited at step (0-based) of the ring walk that starts at
 * oldest_slot. oldest_slot < nr_segments and step < nr_segments; computed
 * without a sum that could pass 2^64.
 */
static inline __u64 wb_ring_slot(__u64 oldest_slot, __u64 step,
				 __u64 nr_segments)
{
	__u64 to_end = nr_segments - oldest_slot;

	return step < to_end ? oldest_slot + step : step - to_end;
}

/*
 * The id that held id's slot one lap of the ring earlier, 0 if none. Before
 * a segment can be written to its slot, that one must be on the backing
 * device; so once id is on the cache, everything up to it is written back.
 */
static inline __u64 wb_previous_lap_id(__u64 id, __u64 nr_segments)
{
	return id > nr_segments ? id - nr_segments : 0;
}

/*
 * last_writeback_id after replay: the superblock record is a lower bound the
 * target saved (capped at what the log holds, since a record may be stale
 * or damaged), and the ring itself proves everything one lap behind
 * last_flushed_id was written back.
 */
static inline __u64 wb_last_writeback_id(__u64 last_flushed_id,
					 __u64 sb_record, __u64 nr_segments)
{
	__u64 by_ring = wb_previous_lap_id(last_flushed_id, nr_segments);
	__u64 by_record = sb_record < last_flushed_id ? sb_record
						      : last_flushed_id;

	return by_ring > by_record ? by_ring : by_record;
}

/*
 * How many slots from the oldest one a writer may be rewriting at once:
 * both targets open segment N only after the write of segment N - 8 has
 * completed (WB_NR_RAMBUF in kmod, NR_RAMBUF_POOL in dm-writeboost 2.2).
 */
#define WB_REWRITE_WINDOW 8

/*
 * Whether a slot whose header cannot be trusted (its checksum fails, or its
 * length is impossible), met at step `step` of the ring walk, is a rewrite
 * in progress rather than damage: a writer reuses the slots from the
 * oldest one on, in ring order, and a power cut tore its write into this
 * slot with the old header still in place (a device lands the sectors of
 * one write in any order). Then the slot holds the id one lap behind the
 * one being written there, max_id + 1 - nr_segments + step, and lies
 * within the window of slots a writer can be rewriting at once.
 *
 * Replay then drops the walk's slots up to and including this one and
 * starts the log after it, and counts their ids as written back: a writer
 * reuses a slot only after the segment in it was written back, and it
 * writes into the slots in ring order, so every slot before this one was
 * reused too; what it was writing there never completed, so nothing of it
 * was acknowledged. The slots after it must hold ids that follow one
 * another, as always. Not with one slot, nor at the newest slot, which is
 * torn as the newest is.
 *
 * Nor before the log has filled the ring once (max_id < nr_segments). Such
 * a walk starts with never-written slots, where the writer's next segments
 * go before it reuses any slot: reading a bad checksum after them as a torn
 * rewrite would take every one of those writes to have left nothing on the
 * media. Both readings are possible there; the rule keeps the one replay
 * had before it, damage, so a first-lap log keeps the part before the bad
 * segment (the device as it was at an earlier moment) instead of dropping
 * that part and everything up to the bad segment.
 *
 * Only for logs another writer left (wb_replay_walk_begin's torn_rewrites):
 * dm-wbkit invalidates a header before it rewrites the slot, so in its own
 * logs the same bad checksum is damage to an old segment, not a rewrite.
 */
static inline bool wb_torn_rewrite(__u64 step, __u64 slot_id, __u64 max_id,
				   __u64 nr_segments)
{
	return max_id >= nr_segments && step < WB_REWRITE_WINDOW &&
	       step + 1 < nr_segments && slot_id != 0 && max_id >= slot_id &&
	       max_id - slot_id == nr_segments - 1 - step;
}

/*
 * Whether a slot met at step `step` of the ring walk, holding slot_id under
 * a header that is valid or whose checksum fails, is a segment write lost
 * in flight rather than a lap out of order: the writer had several segment
 * writes in flight, a later one landed (max_id) and the one for this slot
 * did not, so the slot still holds the segment one lap older than the id
 * expected there (max_id + 1 - nr_segments + step), or that old header over
 * sectors of the new write that did land (a bad checksum). A slot is reused
 * only after the segment in it was written back, so that older segment is
 * on the backing device: the slot is a lost in-flight segment, as an empty
 * slot is (a gap), and nothing in it was acknowledged.
 *
 * Only at the newest positions a writer can have in flight behind max_id:
 * the steps before the last one whose expected id lies within
 * WB_REWRITE_WINDOW of max_id. A lap-old segment further back, followed by
 * more newer segments than a writer keeps in flight, is a lap out of order
 * (damage, or stale slots), and the walk refuses it.
 *
 * Only for logs another writer left (wb_replay_walk_begin's torn_rewrites),
 * as wb_torn_rewrite: dm-wbkit zeroes a slot's header, durably, before a
 * new segment goes into it, so a segment it lost in flight leaves an empty
 * slot, never the lap-old one.
 */
static inline bool wb_lost_in_flight(__u64 step, __u64 slot_id, __u64 max_id,
				     __u64 nr_segments)
{
	return step + 1 < nr_segments && step + WB_REWRITE_WINDOW >= nr_segments &&
	       slot_id != 0 && max_id >= slot_id &&
	       max_id - slot_id == 2 * nr_segments - 1 - step;
}

/*
 * Whether segment id is on the backing device by replay's step 4. Replay
 * writes none of such a segment's data: not its dirty entries, and not the
 * sectors an older entry of it keeps under a newer partial entry of its
 * block (the kernel writes those to the backing device so that it only
 * needs the newest entry of a block). The backing device holds its data, or
 * newer data that segments written back after it put there, and writing the
 * older copy again would roll those sectors back. So replay decides
 * last_writeback_id before it writes anything.
 */
static inline bool wb_segment_written_back(__u64 id, __u64 last_writeback_id)
{
	return id <= last_writeback_id;
}

/*
 * Whether an entry of segment id may serve reads as a copy of the backing
 * device's data after a replay (struct wb_clean_trust_device): a clean
 * entry, or any entry of a written-back segment. trusted_from_id is the
 * record's value, or WB_TRUST_NONE without its magic. Dirty data is never
 * in question: it is the newest data, whatever the record says.
 */
static inline bool wb_clean_copy_trusted(__u64 id, __u64 trusted_from_id)
{
	return trusted_from_id != WB_TRUST_NONE && id >= trusted_from_id;
}

/*
 * Whether a superblock record fits a log whose largest id is max_id: within
 * [max_id - nr_segments, max_id]. 0 means never written (the record is
 * only updated when update_sb_record_interval is set) and always fits.
 */
static inline bool wb_sb_record_in_range(__u64 sb_record, __u64 max_id,
					 __u64 nr_segments)
{
	return sb_record == 0 ||
	       (sb_record <= max_id &&
		sb_record >= wb_previous_lap_id(max_id, nr_segments));
}

/*
 * The sectors of its 4 KiB block a metablock entry decides when it is the
 * newest entry for them: its dirty sectors, or all 8 for a clean entry (a
 * newer clean copy makes every older dirty sector of the block obsolete).
 */
static inline __u8 wb_entry_sectors(__u8 dirty_bits)
{
	return dirty_bits ? dirty_bits : (__u8)((1U << WB_BLOCK_SECTORS) - 1);
}

/*
 * Which of two entries for one block wins: the one replay applies later,
 * that is the later segment in replay order (ring order from the oldest
 * slot, which is id order in an intact log) or, within one segment, the
 * higher metablock index.
 */
static inline bool wb_entry_is_newer(__u64 replay_pos_a, __u32 index_a,
				     __u64 replay_pos_b, __u32 index_b)
{
	if (replay_pos_a != replay_pos_b)
		return replay_pos_a > replay_pos_b;
	return index_a > index_b;
}

/*
 * The replay decision (docs/FORMAT.md, "Replay"), shared by the kernel's
 * construction and the tools' scan like libxfs: plain C over the slot ids,
 * the checksum verdicts, the superblock record, the trust record and the
 * geometry; no allocation, no I/O. The caller reads each slot as the walk
 * reaches it, tells wb_replay_walk_slot() what it found and does what the
 * returned action says (apply the segment, forget what it applied); then
 * wb_replay_decide() says what the log means and what must be written
 * before the target goes live. Both sides call the same code, so the
 * kernel and the tools cannot read a log differently.
 */

/* What the caller found in a slot when the walk reached it. */
enum wb_slot_verdict {
	WB_SLOT_EMPTY = 0,	/* id 0: never written, or invalidated */
	WB_SLOT_VALID,		/* length <= 127 and the checksum matches */
	WB_SLOT_BAD,		/* readable, but the checksum fails or length > 127 */
	WB_SLOT_UNREADABLE,	/* a read error (the tools; the kernel fails on one) */
};

/* What the caller does with the slot. */
enum wb_walk_action {
	WB_WALK_SKIP = 0,	/* empty, or past the end of the log */
	WB_WALK_APPLY,		/* apply the segment (replay step 3) */
	WB_WALK_RESTART,	/* a torn rewrite: forget every segment applied so
				 * far; the log starts after this slot */
	WB_WALK_STOP,		/* the log ends before this slot */
	WB_WALK_LOST,		/* a segment lost in flight over a lap-old one
				 * (wb_lost_in_flight): skip it, as an empty
				 * slot */
};

/*
 * Why a log cannot be replayed as one ring in id order. The kernel refuses
 * to construct on it and writes nothing; the tools report it and replay it
 * only when forced: replaying part of it would drop or reorder
 * acknowledged data.
 */
enum wb_replay_refusal {
	WB_REPLAY_OK = 0,
	WB_REPLAY_SLOT_MISMATCH,	/* an id sits in a slot not its own */
	WB_REPLAY_IDS_NOT_RISING,	/* an id not above the one before it */
	WB_REPLAY_STOPS_EARLY,		/* a bad segment before the newest */
	WB_REPLAY_DAMAGED_REWRITE,	/* the same, where another writer's torn
					 * rewrite could be, on a cache this
					 * target wrote (wb_replay_walk_begin) */
	WB_REPLAY_UNREADABLE,		/* a segment cannot be read */
	WB_REPLAY_RING_SHRUNK,		/* the device is smaller than its ring */
};

struct wb_replay_walk {
	/* The input of wb_replay_walk_begin. */
	__u64 nr_segments;
	__u64 max_id;
	bool torn_rewrites;
	__u64 oldest_slot;
	/* The walk so far. */
	__u64 last_applied_id;	/* 0: none since the start or the rewrite */
	__u64 last_seen_id;	/* the last readable id before the stop */
	__u64 rewritten_id;	/* the torn rewrite skipped, 0 if none */
	__u64 rewrite_slot;
	bool stopped;
	__u64 stop_slot;
	__u64 stop_id;
	enum wb_slot_verdict stop_verdict;
	bool stop_rewrite_shaped;	/* wb_torn_rewrite held, the rule was off */
	enum wb_replay_refusal refusal;	/* the first one met */
	__u64 refusal_slot;
	__u64 refusal_id;
	/*
	 * The slots whose content the walk discarded, which replay zeroes
	 * (wb_replay_plan's drop_slot): the non-empty slots of the first
	 * WB_REWRITE_WINDOW steps (a torn rewrite drops them up to its own),
	 * and the lost in-flight slots.
	 */
	__u64 head_slot[WB_REWRITE_WINDOW];
	unsigned int nr_head;
	unsigned int nr_head_dropped;	/* up to the last torn rewrite */
	__u64 lost_slot[WB_REWRITE_WINDOW];
	unsigned int nr_lost;
};

/*
 * Starts the walk of replay step 2 from the oldest slot. torn_rewrites
 * says whether the torn-rewrite rule applies: only on a log another writer
 * may have left, that is a cache without the trust record. dm-wbkit
 * invalidates a slot's header (one logical block, made durable) before it
 * rewrites the slot, so no log it wrote holds a torn rewrite; there the
 * same bad checksum is damage, and reading it as a rewrite would count
 * acknowledged segments as written back. It writes the trust record
 * before its first segment, so a cache with the record is one it wrote.
 */
static inline void wb_replay_walk_begin(struct wb_replay_walk *w,
					__u64 nr_segments, __u64 max_id,
					bool torn_rewrites)
{
	w->nr_segments = nr_segments;
	w->max_id = max_id;
	w->torn_rewrites = torn_rewrites;
	w->oldest_slot = wb_oldest_slot(max_id, nr_segments);
	w->last_applied_id = 0;
	w->last_seen_id = 0;
	w->rewritten_id = 0;
	w->rewrite_slot = 0;
	w->stopped = false;
	w->stop_slot = 0;
	w->stop_id = 0;
	w->stop_verdict = WB_SLOT_EMPTY;
	w->stop_rewrite_shaped = false;
	w->refusal = WB_REPLAY_OK;
	w->refusal_slot = 0;
	w->refusal_id = 0;
	w->nr_head = 0;
	w->nr_head_dropped = 0;
	w->nr_lost = 0;
}

static inline void wb_replay_refuse(struct wb_replay_walk *w,
				    enum wb_replay_refusal why, __u64 slot,
				    __u64 id)
{
	if (w->refusal != WB_REPLAY_OK)
		return;
	w->refusal = why;
	w->refusal_slot = slot;
	w->refusal_id = id;
}

/*
 * Step `step` (0 .. nr_segments - 1, each once, in order) of the walk: the
 * slot wb_ring_slot(oldest_slot, step) holds id (0 when empty or when its
 * header could not be read) and the caller's verdict on it. Every step is
 * visited, also after the stop, where only the slot of each id is checked
 * and the verdict is not looked at (the kernel reads no segment there).
 */
static inline enum wb_walk_action
wb_replay_walk_slot(struct wb_replay_walk *w, __u64 step, __u64 id,
		    enum wb_slot_verdict verdict)
{
	__u64 slot = wb_ring_slot(w->oldest_slot, step, w->nr_segments);

	if (verdict == WB_SLOT_EMPTY)
		return WB_WALK_SKIP;
	/* Only headers that cannot be read: nothing to replay, nothing known. */
	if (w->max_id == 0) {
		if (verdict == WB_SLOT_UNREADABLE)
			wb_replay_refuse(w, WB_REPLAY_UNREADABLE, slot, id);
		return WB_WALK_SKIP;
	}
	/*
	 * A grown cache device, stale slots, a damaged id (FORMAT.md). An id
	 * of 0 here is a header that could not be read; a read header whose
	 * data could not be read still names its id.
	 */
	if (id && wb_slot_of_id(id, w->nr_segments) != slot)
		wb_replay_refuse(w, WB_REPLAY_SLOT_MISMATCH, slot, id);
	if (w->stopped)
		return WB_WALK_SKIP;
	if (step < WB_REWRITE_WINDOW && w->nr_head < WB_REWRITE_WINDOW)
		w->head_slot[w->nr_head++] = slot;
	if (w->torn_rewrites && verdict != WB_SLOT_UNREADABLE &&
	    w->nr_lost < WB_REWRITE_WINDOW &&
	    wb_lost_in_flight(step, id, w->max_id, w->nr_segments)) {
		w->lost_slot[w->nr_lost++] = slot;
		return WB_WALK_LOST;
	}
	if (id) {
		/* A lap out of order. A gap is a header that never landed. */
		if (w->last_seen_id && id <= w->last_seen_id)
			wb_replay_refuse(w, WB_REPLAY_IDS_NOT_RISING, slot, id);
		w->last_seen_id = id;
	}
	if (verdict == WB_SLOT_VALID) {
		w->last_applied_id = id;
		return WB_WALK_APPLY;
	}
	if (verdict == WB_SLOT_BAD &&
	    wb_torn_rewrite(step, id, w->max_id, w->nr_segments)) {
		if (w->torn_rewrites) {
			w->rewritten_id = id;
			w->rewrite_slot = slot;
			w->last_applied_id = 0;
			w->nr_head_dropped = w->nr_head;
			return WB_WALK_RESTART;
		}
		w->stop_rewrite_shaped = true;
	}
	w->stopped = true;
	w->stop_slot = slot;
	w->stop_id = id;
	w->stop_verdict = verdict;
	return WB_WALK_STOP;
}

/* What the log means, and what replay writes before going live. */
struct wb_replay_plan {
	enum wb_replay_refusal refusal;
	__u64 refusal_slot;
	__u64 refusal_id;
	/* Replay step 4. */
	__u64 last_flushed_id;
	__u64 last_writeback_id;
	__u64 next_id;
	/*
	 * The clean-copy trust from now on: lowered when the superblock record
	 * names a segment the log does not hold. Then the backing device may
	 * hold data newer than any copy the log has (the record's segment was
	 * written back), so no copy of the log may serve reads as clean.
	 */
	__u64 trusted_from_id;
	bool write_trust;	/* first, FUA: trusted_from_id changed */
	/* The stop slot's header is zeroed (FUA), before anything else. */
	bool zero_stop_slot;
	__u64 stop_slot;
	/* The record names a segment beyond the log: rewritten to lw. */
	bool rewrite_record;
	/*
	 * The slots whose content the walk discarded (lost in flight, torn
	 * rewrites and the slots before them), zeroed in this order before
	 * the stop slot and before the trust record is written, each durable
	 * before the next: the last torn rewrite comes last, so that while it
	 * stands the walk still starts after it. A log left with them would
	 * not replay the same once the trust record is there (the rules that
	 * skip them are for logs another writer left).
	 */
	__u64 drop_slot[2 * WB_REWRITE_WINDOW];
	unsigned int nr_drop_slots;
};

/*
 * Replay step 4 and what follows from the walk: the refusal, if any, the
 * ids, the trust, the writes. sb_record is the superblock record's value;
 * trusted_from_id the trust record's (WB_TRUST_NONE without its magic).
 */
static inline void wb_replay_decide(const struct wb_replay_walk *w,
				    __u64 sb_record, __u64 trusted_from_id,
				    struct wb_replay_plan *p)
{
	__u64 lf, lw;
	unsigned int i;

	p->refusal = w->refusal;
	p->refusal_slot = w->refusal_slot;
	p->refusal_id = w->refusal_id;
	if (p->refusal == WB_REPLAY_OK && w->stopped) {
		p->refusal_slot = w->stop_slot;
		p->refusal_id = w->stop_id;
		/* Only the newest segment may be torn: a power cut's. */
		if (w->stop_verdict == WB_SLOT_UNREADABLE)
			p->refusal = WB_REPLAY_UNREADABLE;
		else if (w->stop_id != w->max_id)
			p->refusal = w->stop_rewrite_shaped ?
				     WB_REPLAY_DAMAGED_REWRITE :
				     WB_REPLAY_STOPS_EARLY;
	}
	/*
	 * A torn rewrite proves its id and every older one written back, so
	 * flushed too: with nothing applied after it the log still ends
	 * there, and the next id follows it, not 1.
	 */
	lf = w->last_applied_id > w->rewritten_id ? w->last_applied_id
						   : w->rewritten_id;
	lw = wb_last_writeback_id(lf, sb_record, w->nr_segments);
	if (lw < w->rewritten_id)
		lw = w->rewritten_id;
	p->last_flushed_id = lf;
	p->last_writeback_id = lw;
	p->next_id = lf + 1;
	p->trusted_from_id = trusted_from_id;
	if (sb_record > lf && trusted_from_id != WB_TRUST_NONE &&
	    trusted_from_id <= lf)
		p->trusted_from_id = lf + 1;
	p->write_trust = p->trusted_from_id != trusted_from_id;
	p->zero_stop_slot = w->stopped;
	p->stop_slot = w->stop_slot;
	p->rewrite_record = sb_record > lf;
	p->nr_drop_slots = 0;
	for (i = 0; i < w->nr_lost; i++)
		p->drop_slot[p->nr_drop_slots++] = w->lost_slot[i];
	for (i = 0; i < w->nr_head_dropped; i++)
		p->drop_slot[p->nr_drop_slots++] = w->head_slot[i];
}

/*
 * A cache device shrunk under its log: the slots past the new end are out
 * of reach, and what is left can read as an intact log of fewer segments
 * (in the first lap, ids 1..n in slots 0..n-1), whose replay would drop
 * the newer segments, dirty data included, without a word. Only the
 * trust record knows the size the log was written for (recorded_nr, 0 if
 * not recorded: dm-writeboost's logs and older wbkit records; then a
 * wrapped log still fails the slot check, a first-lap one cannot be
 * told). Called after wb_replay_decide; the shrink is the refusal, also
 * over any other one it caused.
 */
static inline void wb_replay_check_ring(struct wb_replay_plan *p,
					__u64 recorded_nr, __u64 nr_segments)
{
	if (recorded_nr <= nr_segments)
		return;
	p->refusal = WB_REPLAY_RING_SHRUNK;
	p->refusal_slot = nr_segments;
	p->refusal_id = 0;
}

/* The words for a refusal, for logs and findings. */
static inline const char *wb_replay_refusal_text(enum wb_replay_refusal why)
{
	switch (why) {
	case WB_REPLAY_OK:
		return "replayable";
	case WB_REPLAY_SLOT_MISMATCH:
		return "a segment sits in a slot other than its id's (a grown or damaged cache device)";
	case WB_REPLAY_IDS_NOT_RISING:
		return "segment ids do not rise in ring order";
	case WB_REPLAY_STOPS_EARLY:
		return "a damaged segment before the newest one: the log would stop there and drop acknowledged segments";
	case WB_REPLAY_DAMAGED_REWRITE:
		return "a damaged segment among the oldest, read as damage and not as a torn rewrite (dm-wbkit's logs cannot hold one: it invalidates headers first): the log would stop there, and counting it written back would drop acknowledged segments";
	case WB_REPLAY_UNREADABLE:
		return "a segment cannot be read";
	case WB_REPLAY_RING_SHRUNK:
		return "the cache device is smaller than the ring its log was written in (the trust record names more slots): the segments past its end, dirty data among them, would be lost";
	}
	return "unknown";
}

#endif /* WBKIT_FORMAT_H */

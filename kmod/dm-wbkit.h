/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-wbkit: a write-back cache target in the dm-writeboost style.
 *
 * The on-disk layout is format/wbkit_format.h (dm-writeboost 2.2); this file
 * holds the in-memory state only. docs/FORMAT.md is the specification.
 *
 * Locking: one spinlock (wb->lock) protects all metadata: the hash table,
 * the segment array, the open segment, the ids, the RAM buffer pool and the
 * commit waiters. Critical sections are short and never sleep: a write takes
 * its block of the open segment under the lock and copies its data outside
 * it. Every thread that sleeps for progress of another thread (a free RAM
 * buffer, a segment slot that is written back, a flushed segment, a copy in
 * progress) drops the lock while it waits and rechecks after retaking it.
 * Reads of the ids without the lock (status, wait conditions) use READ_ONCE.
 *
 * Pins keep data in place while nobody holds the lock:
 * - wb_copying(mb): writes still copying into the block's RAM buffer copy;
 *   a read or a merge of that block waits for it. A waiting read counts in
 *   seg->nr_read_waiters, which holds back new overwrites in place.
 * - seg->nr_writers: the same, per segment; the flusher waits for 0 before
 *   it checksums and writes the segment.
 * - seg->nr_buf_readers: reads copying out of a sealed segment's seg->buf
 *   (the open segment's blocks past seg->frozen are overwritten in place,
 *   so reads copy those under the lock); the buffer goes back to the pool
 *   only at 0.
 *   Writeback and the move forward copy blocks out of a kept buffer under
 *   the lock instead.
 * - seg->nr_dev_readers: reads of the slot on the cache device (remapped
 *   read hits, merges); the flusher waits for 0 before it writes a new
 *   segment into the slot. Pins are only taken through the hash table,
 *   under the lock, and a slot's entries are unhashed when it is reused
 *   (wb_get_cur), so from then on its count can only fall.
 *
 * Threads: bios are handled in the submitter's context (.map); only a read
 * of a block partly on the cache device and partly on the backing device,
 * and a partial write that must merge the older copy from the cache device,
 * go to an ordered workqueue (io_wq) because they need synchronous reads. An
 * ordered workqueue writes sealed segments to the cache device in id order
 * and completes flush/FUA bios (flush_wq, group commit), a kthread writes
 * segments back to the backing device, and a kthread runs the periodic jobs
 * (superblock record, data sync). Read-cache injection (rc_work) runs on
 * io_wq too.
 *
 * Lifecycle: the constructor only reads (the start of the cache device, to
 * refuse a foreign one) and allocates. The first preresume formats or replays and starts
 * both kthreads; postsuspend writes the RAM buffer out and stops them, so a
 * suspended instance starts no I/O of its own (a drop_caches message still
 * writes back, in its caller, as upstream allows); the next preresume
 * starts them again. A reloaded table therefore replays only after the instance it
 * replaces has gone quiet, and an aborted reload never touches a device.
 */
#ifndef DM_WBKIT_H
#define DM_WBKIT_H

#include <linux/device-mapper.h>
#include <linux/blkdev.h>
#include <linux/bio.h>
#include <linux/mutex.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <linux/kthread.h>
#include <linux/delay.h>
#include <linux/list.h>
#include <linux/types.h>

#include "wbkit_format.h"
#include "wbkit_contract.h"
#include "dm-wbkit-compat.h"

#define WB_NR_RAMBUF		8	/* open and unwritten segments at most (as upstream) */
/* Replay's torn-rewrite rule (wbkit_format.h) counts on this bound. */
static_assert(WB_NR_RAMBUF <= WB_REWRITE_WINDOW, "more segments in flight than replay allows for");
#define WB_MAX_BATCH		32	/* upper bound of nr_max_batched_writeback */
/*
 * Buffers beyond WB_NR_RAMBUF: written segments keep them (wb->retained)
 * even while WB_NR_RAMBUF segments are being filled and written, so reads
 * of the segments written last need no device read. Writeback takes none
 * (it streams its data through wb->stream), so writes never wait for
 * writeback's memory.
 */
#define WB_NR_SPARE_BUFS	3
/*
 * The buffer pool: WB_NR_RAMBUF segments not yet written, and the spare
 * ones. Buffers the segments do not use stay with the segments written
 * last (wb->retained), which serve read hits from RAM.
 */
#define WB_NR_BUFS		(WB_NR_RAMBUF + WB_NR_SPARE_BUFS)
/*
 * Writeback's data in flight (wb->stream): WB_STREAM_CHUNKS chunks of
 * WB_STREAM_CHUNK_BLOCKS blocks, 2 MiB in all, whatever the batch's size.
 * A chunk is read from the cache device (or copied from a kept buffer)
 * while the chunks before it are being written to the backing device, so
 * the backing device's queue stays full (see wb_stream_writeback).
 */
#define WB_STREAM_CHUNK_BLOCKS	128
#define WB_STREAM_CHUNKS	4
#define WB_STREAM_BLOCKS	(WB_STREAM_CHUNK_BLOCKS * WB_STREAM_CHUNKS)
/* Group commit waits at most this long for more flush/FUA bios (ns). */
#define WB_GATHER_MAX_NS	(2 * NSEC_PER_MSEC)
#define WB_STATLEN		16

/*
 * Waits for progress that only the devices make (the writeback of the slot
 * a writer needs next, a segment write, a free RAM buffer). A bio cannot be
 * failed for a signal, so the wait is uninterruptible; it lasts as long as a
 * slow backing device takes, so the task wakes every WB_WAIT_SLICE and goes
 * back to sleep, as submit_bio_wait does, and the hung-task detector does
 * not report a device that is slow but moving. So that a wait that never
 * ends (a device that never completes, a cycle of waits) cannot go unseen
 * either, each one reports itself once it has lasted slow_wait_secs (the
 * module parameter, by default the hung-task timeout): its place and the
 * task's stack, in the kernel log (wb_wait_slow, dm-wbkit-core.c).
 */
#define WB_WAIT_SLICE		HZ
struct wb_wait_clock {
	unsigned long start;
	bool reported;
};

void wb_wait_slow(struct wb_wait_clock *clock, const char *func, int line);
#define wb_wait_io(wq, condition)					\
	do {								\
		struct wb_wait_clock __clock = { jiffies, false };	\
									\
		while (!wait_event_timeout(wq, condition, WB_WAIT_SLICE)) \
			wb_wait_slow(&__clock, __func__, __LINE__);	\
	} while (0)
#define WB_ALL_DIRTY		0xffU

/*
 * One cache block of one segment slot. In the lookup (wb->htable) while it
 * is the newest copy of its block: dirty (not yet on the backing device), or
 * clean (written back, or a read-cache copy) and served from the cache
 * device until its slot is reused or a write replaces it.
 *
 * There is one per cache block, so its size is the device's memory cost:
 * 12 bytes, with no pointers (the chain links are indices into wb->mbs) and
 * no per-block count of writes copying in (that lives beside the segment's
 * RAM buffer, the only place such copies go, see wb_copying). kmod/README.md
 * states the whole formula, held to these sizes by WB_MEM_* (format/).
 */
struct wb_metablock {
	/*
	 * Under lock: 0 while not in the lookup; else the next entry of its
	 * hash chain as index + 1 into wb->mbs, or WB_HT_END for the last.
	 */
	u32 ht_next;
	/* The backing 4 KiB block (sector / 8), 40 bits: see wb_mb_sector. */
	u32 block_lo;
	u8 block_hi;
	/*
	 * Sectors the copy holds. In the log: data_bits while dirty, 0 for a
	 * clean copy (a read-cache block, whose data_bits are all set).
	 */
	u8 data_bits;
	/*
	 * dirty and obsolete share one byte, which a write of either reads
	 * and rewrites: both are written only under the lock or by replay.
	 */
	bool dirty:1;
	/*
	 * Superseded during replay: its data is on the backing device or
	 * obsolete, so writeback skips it. An entry superseded at run time
	 * stays writable: its successor may not be on the cache device yet.
	 */
	bool obsolete:1;
	/*
	 * Dirty, dropped by a discard (wb_discard): writeback skips it at
	 * once after a passdown, without one once every tombstone is on the
	 * cache device (wb->last_tombstone_id).
	 */
	bool discarded:1;
	/*
	 * Replay only: the dirty sectors a newer, partial entry of the block
	 * left to this superseded one, written after the walk (see
	 * wb_write_kept_sectors).
	 */
	u8 replay_keep;
};

#define WB_HT_END		U32_MAX
/*
 * Discards that one wb_discard takes at most (1 GiB): it walks the range a
 * block at a time in the worker, so a larger one is split by the block
 * layer instead of holding the worker for seconds.
 */
#define WB_MAX_DISCARD_SECTORS	(1024U * 2048)
/* 40 bits of 4 KiB blocks: the largest target, in sectors. */
#define WB_MAX_TARGET_SECTORS	(1ULL << (40 + 3))

static inline sector_t wb_mb_sector(const struct wb_metablock *mb)
{
	return (((u64)mb->block_hi << 32) | mb->block_lo) << 3;
}

static inline void wb_mb_set_sector(struct wb_metablock *mb, sector_t sector)
{
	mb->block_lo = (u32)(sector >> 3);
	mb->block_hi = (u8)(sector >> 35);
}

static inline bool wb_mb_hashed(const struct wb_metablock *mb)
{
	return mb->ht_next != 0;
}

/* One segment slot of the ring. */
struct wb_segment {
	u64 id;			/* 0: the slot holds nothing of the log */
	u32 slot;
	u8 length;		/* valid metablocks */
	/*
	 * Under lock: blocks [0, frozen) of the open segment were taken by a
	 * commit (wb_append_segment) and are never overwritten in place again:
	 * the committed header's checksum covers them on the slot. A write to
	 * one of them takes a new block of the segment instead.
	 */
	u8 frozen;
	/*
	 * Flusher only: blocks [0, on_slot) and a header naming them are on
	 * the slot, durable (an append in place); 0 before the first append.
	 */
	u8 on_slot;
	/*
	 * RAM buffer: while the segment is not yet on the cache device, and
	 * after that, equal to the slot's data, until the pool needs it back
	 * (wb->retained), so that reads of recent writes need no device read.
	 */
	void *buf;
	/*
	 * Flusher only: the slot's header on the cache device is zero (format,
	 * or zeroed ahead of reuse), so no torn write can sit behind it.
	 */
	bool header_zeroed;
	unsigned int nr_writers;	/* under lock, see the locking rules */
	/*
	 * Under lock: reads waiting for writes to finish copying into one of
	 * the segment's blocks. New overwrites in place wait while it is not
	 * 0, so that a stream of them cannot starve a read.
	 */
	unsigned int nr_read_waiters;
	atomic_t nr_buf_readers;
	atomic_t nr_dev_readers;
	/*
	 * Flusher only: CRC-32C register (seeded 0, not inverted) of data
	 * blocks [0, on_slot), so an append checksums only its new blocks.
	 */
	u32 data_crc;
	struct list_head flush_node;
	struct list_head retain_node;	/* in wb->retained while buf is kept */
	struct wb_metablock *mb;	/* WB_BLOCKS_PER_SEGMENT entries */
};

enum wb_dev_kind { WB_DEV_BACKING, WB_DEV_CACHE };
enum wb_op { WB_OP_READ, WB_OP_WRITE, WB_OP_FLUSH };

/* The first fatal I/O error: why the target is dead. */
struct wb_cause {
	int err;
	enum wb_dev_kind dev;
	enum wb_op op;
	u64 sector;
};

/*
 * Error counters, the reply to the message error_counts in this order.
 * kmod/README.md's fault table says which row counts where and what it
 * does: only some rows make the target dead.
 */
/*
 * The error counters (wbkit_contract.h). backing_read: user reads, that bio
 * fails; backing_write: writeback (fatal), write-around (the bio);
 * cache_read_fallback: clean copies served from the backing device;
 * failed_requests: bios failed while the target stayed live; transient:
 * -EAGAIN, -ENOMEM, retried or passed up, never fatal.
 */
#define WB_ERR_ENUM(e, name, effect) WB_ERR_##e,
enum wb_err_counter {
	WB_ERROR_COUNTER_ROWS(WB_ERR_ENUM)
	WB_ERR_NR,
};

#undef WB_ERR_ENUM

/* One dirty block scheduled for writeback. */
struct wb_writeback_entry {
	sector_t sector;
	/*
	 * Its segment: id last_writeback_id + 1 + batch_idx. Below the batch
	 * size a segment of the batch, else one of the window behind it
	 * (a block written ahead, see wb_collect_ahead).
	 */
	u32 batch_idx;
	u8 idx;			/* block within the segment */
	u8 data_bits;
};

/*
 * A full 4 KiB read miss staged for the read cache: its data is copied
 * when the read ends, and the cell is injected into the log as a clean
 * block once every cell of the generation is used (as dm-writeboost does).
 */
struct wb_rc_cell {
	struct hlist_node node;	/* in wb->rc_hash while staged */
	sector_t sector;
	bool cancelled;		/* under lock: a write, or part of a sequential run */
	bool failed;		/* set before its read counts as ended */
};

struct wb_rc_key {
	sector_t sector;
	u32 idx;
};

enum wb_remap {
	WB_REMAP_NONE,
	WB_REMAP_BACKING,
	WB_REMAP_CACHE,
	WB_REMAP_READ_CACHE,	/* to the backing device, data kept in a cell */
	WB_REMAP_WRITE_AROUND,	/* a write (or flush) to the backing device */
};

/*
 * Every bio the target builds itself comes from its own bio_set, with the
 * start sector in front: after completion bi_iter has advanced to the end.
 */
struct wb_bio {
	sector_t sector;
	struct bio bio;
};

struct wb_per_bio {
	enum wb_remap remap;	/* sent to a device as is */
	sector_t sector;	/* where, for the cause of an error */
	enum wb_op op;		/* what, for the cause of an error */
	struct wb_segment *seg;	/* WB_REMAP_CACHE: pinned (nr_dev_readers) */
	/*
	 * WB_REMAP_CACHE of a clean copy: where the same data is on the
	 * backing device, for a read that fails on the cache device.
	 */
	struct wb_metablock *mb;
	bool clean;
	sector_t backing_sector;
	/*
	 * flush/FUA: completes once segment commit_id is durable, or its first
	 * commit_len blocks are (an append, WB_COMMIT_WHOLE: the whole segment)
	 */
	u64 commit_id;
	u8 commit_len;
	/* WB_REMAP_READ_CACHE and WB_REMAP_CACHE: the data, at map time */
	struct bvec_iter iter;
	u32 cell;		/* WB_REMAP_READ_CACHE */
};

/*
 * What wb_read and wb_write did with a bio: finished it (or will, once its
 * segment is durable), remapped it for the caller to submit, or left it
 * for the worker because it needs a synchronous read first.
 */
enum wb_map_result {
	WB_MAP_SUBMITTED,
	WB_MAP_REMAPPED,
	WB_MAP_DEFER,
};

/* Tunables, in dm-writeboost's order of its optional arguments. */
/* The table options (wbkit_contract.h). */
#define WB_T_ENUM(e, key, min, max, def, fixed, error) WB_T_##e,
enum wb_tunable {
	WB_TUNABLE_ROWS(WB_T_ENUM)
	WB_T_NR,
};

#undef WB_T_ENUM

/* Bits in wb->flags */
#define WB_F_DEAD	0	/* fail-stop, never clears */
#define WB_F_SUSPENDED	1	/* from postsuspend to the next resume */
#define WB_F_STARTED	2	/* formatted or replayed: the instance went live */
/* From presuspend to resume (or presuspend_undo): long waits give up. */
#define WB_F_SUSPENDING	3
/* The writeback thread is being stopped: it starts no batch. */
#define WB_F_STOPPING_WRITEBACK	4

struct wb_device {
	struct dm_target *ti;
	struct dm_dev *backing_dev;
	struct dm_dev *cache_dev;
	unsigned long flags;
	struct bio_set bio_set;

	/* Geometry */
	u64 nr_segments;
	sector_t cache_sectors;
	sector_t backing_sectors;

	/* Metadata, under lock */
	spinlock_t lock;
	struct wb_segment *segs;
	struct wb_metablock *mbs;
	/* Chain heads: index + 1 into mbs of the first entry; 0 or WB_HT_END: empty. */
	u32 *htable;
	u32 ht_buckets;
	struct wb_segment *cur;		/* open segment, NULL if none */
	u64 last_sealed_id;		/* highest id handed to the flusher */
	u64 last_flushed_id;		/* highest id written to the cache device */
	u64 last_durable_id;		/* highest id flushed (or FUA) there */
	u64 last_writeback_id;		/* highest id on the backing device */
	/*
	 * The clean-copy trust record as on the cache device (format header,
	 * struct wb_clean_trust_device). Preresume only.
	 */
	u64 trusted_from_id;
	u64 trust_nr_segments;	/* the trust record's ring size, 0 if none */
	u64 nr_dirty;			/* hashed copies that are dirty */
	/*
	 * Discards, one at a time (they raise trusted_from_id at run time);
	 * the newest segment holding a tombstone, under lock.
	 */
	struct mutex discard_lock;
	u64 last_tombstone_id;
	/*
	 * A discard without passdown is placing its tombstones: its flagged
	 * copies are written back meanwhile (the backing device still holds
	 * older data of their blocks). Under lock.
	 */
	bool tombstones_pending;
	/*
	 * The discards went on to the backing device, which holds the
	 * discarded content durably before any copy is flagged: writeback
	 * skips a flagged copy at once. Under lock.
	 */
	bool discard_passdown;
	atomic64_t nr_discarded_blocks;	/* cached blocks a discard dropped */
	atomic64_t nr_discarded_dirty;	/* of them, dirty: never written back */
	void *rambuf[WB_NR_BUFS];	/* WB_SEGMENT_SIZE each */
	unsigned int nr_free_rambuf;
	void *free_rambuf[WB_NR_BUFS];
	unsigned int nr_seg_bufs;	/* held by open and unwritten segments */
	/*
	 * Written segments that keep their RAM buffer, oldest first: when no
	 * buffer is free, a new segment takes the oldest one. Writeback
	 * copies blocks out of them instead of reading the cache device.
	 */
	struct list_head retained;
	struct list_head flush_queue;	/* sealed, in id order */
	wait_queue_head_t wait;		/* any progress, or death */
	wait_queue_head_t copy_wait;	/* a pin dropped to 0 */
	struct bio_list commit_waiters;	/* flush/FUA bios, see wb_per_bio */
	u64 commit_id;			/* highest id somebody needs durable */
	u8 commit_len;			/* ... and its blocks, as wb_per_bio */
	/* The open segment's blocks that are durable (wb_append_segment) */
	u64 append_durable_id;
	u8 append_durable_len;
	/* Group commit (wb_gather_commits): */
	unsigned int nr_open_commits;	/* commit waiters of the open segment */
	unsigned int last_commit_group;	/* bios the last commit completed */
	wait_queue_head_t commit_wait;	/* nr_open_commits went up */

	/* Bio path */
	spinlock_t bio_lock;
	struct bio_list deferred;
	/* Clean-copy reads that failed on the cache device, see wb_fallback. */
	struct bio_list fallback;
	struct workqueue_struct *io_wq;
	struct work_struct io_work;
	/*
	 * wb_fallback has a queue of its own: its bio pins a slot, and work
	 * on io_wq can wait for that slot to be written (wb_get_cur waits for
	 * the flusher, which waits for the pin), so behind that work the
	 * unpin would never run.
	 */
	struct workqueue_struct *fallback_wq;
	struct work_struct fallback_work;
	void *fallback_bounce;		/* 4 KiB, fallback_work only */
	void *bounce;			/* 4 KiB, bio worker only */
	void *bounce2;			/* 4 KiB, bio worker only */
	void *zero_block;		/* 4 KiB of zeros, never written to */

	/* Flusher */
	struct workqueue_struct *flush_wq;
	struct work_struct flush_work;
	bool zero_unflushed;		/* flusher only: a zeroed header not yet flushed */
	void *commit_header;		/* flusher only: 4 KiB, an append's header */
	u64 last_seg_write_ns;		/* flusher only: how long the last one took */

	/* Writeback daemon */
	struct task_struct *writeback_task;
	struct mutex batch_lock;	/* one writeback batch at a time */
	wait_queue_head_t writeback_wait;
	void *stream;			/* WB_STREAM_BLOCKS, under batch_lock */
	struct wb_writeback_entry *writeback_entries;
	atomic_t drop_caches;
	unsigned int nr_cur_batched;	/* segments in the last batch, 0: none yet */
	/*
	 * Writeback's recent time per segment and per block written (ns,
	 * under wb->lock), when the batch in progress should end (0: none),
	 * and when the next segment may open while the ring is short of free
	 * slots (wb_pace_open).
	 */
	u64 writeback_ns_per_seg;
	u64 writeback_ns_per_block;
	u64 batch_due_ns;
	u64 next_open_ns;
	/* Background writeback allowed (wb_update_writeback_allowed). */
	bool writeback_allowed;

	/*
	 * Read cache. Cells are reserved from rc_nr_free down to 0, under
	 * lock; rc_pending counts reserved reads not ended, plus one per cell
	 * not yet reserved, so it reaches 0 when the generation is complete
	 * and rc_work injects it.
	 */
	struct wb_rc_cell *rc_cells;
	void *rc_data;			/* 4 KiB per cell; NULL until read caching is on */
	struct wb_rc_key *rc_sorted;	/* rc_work only: cells by sector */
	struct hlist_head *rc_hash;
	unsigned int rc_hash_bits;
	u32 rc_nr;			/* nr_read_cache_cells */
	u32 rc_nr_free;
	atomic_t rc_pending;
	sector_t rc_last_sector;	/* the sequential run being read */
	u32 rc_seqcount;
	bool rc_over_threshold;
	struct work_struct rc_work;
	/* Write-around writes not ended: read misses are not staged meanwhile. */
	atomic_t nr_wa_inflight;

	/* Periodic daemon: superblock record and data sync */
	struct task_struct *periodic_task;
	/* Held for one round of the periodic thread (wb_stop_periodic_daemon). */
	struct mutex periodic_lock;

	/*
	 * The mapped device whose table holds this instance, and its place in
	 * the list of every instance (wb_claim_devices).
	 */
	struct mapped_device *md;
	struct list_head instance_node;

	/* Tunables */
	unsigned int tunable[WB_T_NR];
	/* The keys the table line gave, in its order, for STATUSTYPE_TABLE. */
	u8 ctr_keys[WB_T_NR];
	unsigned int nr_ctr_keys;
	bool ctr_count_given;		/* "<#optargs>" present, maybe 0 */
	bool write_around;		/* write_around_mode 1 */

	/* Statistics */
	atomic64_t stat[WB_STATLEN];
	atomic64_t nr_partial_flushed;
	/* When a write last went into the log (wb_forward_wanted). */
	unsigned long last_write_jiffies;
	/* Moved forward instead of written back (wb_forward_heads). */
	atomic64_t nr_forwarded_segs;
	atomic64_t nr_forwarded_blocks;

	atomic64_t nr_errors[WB_ERR_NR];

	/* Dead state */
	int dead_err;			/* first error, set once with cmpxchg */
	struct wb_cause cause;
};

/* dm-wbkit-core.c: checksum, dead state, error counts (and wb_wait_slow) */
u32 wb_checksum(const void *seg_buf, u8 length);
u32 wb_checksum_parts(const void *header_block, const void *data, u8 length);
bool wb_checksum_matches(void *seg_buf, u8 length);
void wb_set_dead(struct wb_device *wb, enum wb_dev_kind dev, enum wb_op op,
		 u64 sector, int err);
void wb_count_error(struct wb_device *wb, enum wb_dev_kind dev, enum wb_op op);
void wb_fail_request(struct wb_device *wb, enum wb_op op, u64 sector, int err);
const char *wb_op_name(enum wb_op op);

/* dm-wbkit-devio.c: the target's own I/O, synchronous and asynchronous */
int wb_sync_io(struct wb_device *wb, enum wb_dev_kind dev, blk_opf_t opf,
	       sector_t sector, void *buf, unsigned int len);
int wb_flush_dev(struct wb_device *wb, enum wb_dev_kind dev);
int wb_sync_io_nofail(struct wb_device *wb, enum wb_dev_kind dev,
		      blk_opf_t opf, sector_t sector, void *buf,
		      unsigned int len);

struct wb_aio {
	atomic_t pending;
	int err;
	u64 err_sector;
	struct completion done;
};

void wb_aio_init(struct wb_aio *aio);
void wb_aio_submit(struct wb_device *wb, struct wb_aio *aio,
		   enum wb_dev_kind dev, blk_opf_t opf, sector_t sector,
		   void *buf, unsigned int len);
int wb_aio_wait(struct wb_aio *aio);

/* dm-wbkit-hash.c: the lookup, backing block -> newest cached copy */
struct wb_metablock *wb_ht_lookup(struct wb_device *wb, sector_t block);
void wb_ht_add(struct wb_device *wb, struct wb_metablock *mb);
void wb_ht_del(struct wb_device *wb, struct wb_metablock *mb);
void wb_unhash_entries(struct wb_device *wb, struct wb_segment *seg,
		       unsigned int n);
void wb_mark_clean(struct wb_device *wb, struct wb_metablock *mb);

/* dm-wbkit-format.c: format, superblock and trust records, format guard */
int wb_format(struct wb_device *wb, char **error);
void wb_write_sb_record(struct wb_device *wb, void *blk, u64 id);
int wb_write_trust(struct wb_device *wb, u64 trusted_from_id);
int wb_check_cache_signature(struct wb_device *wb, bool *blank, char **error);

/* dm-wbkit-replay.c: the first resume, format or replay */
int wb_format_or_replay(struct wb_device *wb, char **error);

/* dm-wbkit-flush.c: free slots, buffer pool, open segment, group commit */
u64 wb_free_slots(struct wb_device *wb);
u64 wb_low_slots(struct wb_device *wb);
bool wb_ring_short(struct wb_device *wb);
u64 wb_open_pace_ns(struct wb_device *wb, u64 now);
bool wb_lock_batch(struct wb_device *wb, bool daemon);
void wb_unlock_batch(struct wb_device *wb);
int __wb_get_cur(struct wb_device *wb, bool wait_slot);
static inline int wb_get_cur(struct wb_device *wb)
{
	return __wb_get_cur(wb, true);
}

int wb_wait_flushed(struct wb_device *wb, u64 id);
u64 wb_seal_for_flush(struct wb_device *wb);
bool wb_add_commit_waiter(struct wb_device *wb, struct bio *bio, u64 id,
			  u8 len);
void wb_commit_open(struct wb_device *wb);
bool wb_is_durable(struct wb_device *wb, u64 id, u8 len);
void wb_seal(struct wb_device *wb);
void wb_commit(struct wb_device *wb);
void wb_flush_work(struct work_struct *work);
void wb_unpin_dev(struct wb_device *wb, struct wb_segment *seg);
void wb_unpin_buf(struct wb_device *wb, struct wb_segment *seg);
void wb_reclaim_buf(struct wb_device *wb, struct wb_segment *seg);
void wb_wait_free_buf(struct wb_device *wb);

/* dm-wbkit-io.c: the bio path */
int writeboost_map(struct dm_target *ti, struct bio *bio);
int writeboost_end_io(struct dm_target *ti, struct bio *bio,
		      blk_status_t *error);
void wb_io_work(struct work_struct *work);
void wb_fallback_work(struct work_struct *work);

/* dm-wbkit-rcache.c: read cache cells */
int wb_rc_alloc_data(struct wb_device *wb);
bool wb_rc_reserve(struct wb_device *wb, struct wb_per_bio *pb,
		   sector_t block);
void wb_rc_read_done(struct wb_device *wb, struct bio *bio,
		     struct wb_per_bio *pb, bool failed);
void wb_rc_invalidate(struct wb_device *wb, sector_t block);
void wb_rc_work(struct work_struct *work);

/* dm-wbkit-stream.c: a batch's writes, written ahead and streamed */
unsigned int wb_collect_ahead(struct wb_device *wb, u64 lw,
			      unsigned int n, unsigned int nr);
struct wb_metablock *wb_entry_mb(struct wb_device *wb, u64 lw,
				 const struct wb_writeback_entry *e);
int wb_stream_writeback(struct wb_device *wb, u64 lw, unsigned int nr,
			blk_opf_t write_opf, sector_t *err_sector);

/* dm-wbkit-writeback.c: a writeback batch */
bool wb_writeback_urgent(struct wb_device *wb);
void wb_writeback_batch_locked(struct wb_device *wb);

/* dm-wbkit-forward.c: moving small segments forward in the log */
bool wb_forward_wanted(struct wb_device *wb);
bool wb_forward_heads(struct wb_device *wb);

/* dm-wbkit-daemon.c: the writeback and periodic daemons */
void wb_writeback_batch(struct wb_device *wb);
void wb_stop_writeback_daemon(struct wb_device *wb);
void wb_stop_periodic_daemon(struct wb_device *wb);
int wb_writeback_daemon(void *data);
int wb_periodic_daemon(void *data);
bool wb_should_writeback(struct wb_device *wb);
void wb_update_writeback_allowed(struct wb_device *wb, unsigned long *ticks,
				 unsigned long *at);

/* dm-wbkit-message.c: tunables, messages and status */
struct wb_tunable_def {
	const char *name;
	struct dm_arg arg;
	unsigned int def;
	bool fixed;	/* only the table line sets it */
};

extern const struct wb_tunable_def wb_tunables[WB_T_NR];
int wb_parse_optargs(struct wb_device *wb, struct dm_arg_set *as,
		     char **error);
int writeboost_message(struct dm_target *ti, unsigned int argc, char **argv,
		       char *result, unsigned int maxlen);
void writeboost_status(struct dm_target *ti, status_type_t type,
		       unsigned int status_flags, char *result,
		       unsigned int maxlen);

static inline bool wb_dead(struct wb_device *wb)
{
	return test_bit(WB_F_DEAD, &wb->flags);
}

/*
 * A transient error (BLK_STS_RESOURCE is -ENOMEM, BLK_STS_AGAIN -EAGAIN)
 * says nothing about the data: a bio of the target's own is sent again,
 * a bio from above fails with it alone.
 */
static inline bool wb_err_transient(int err)
{
	return err == -ENOMEM || err == -EAGAIN;
}

/*
 * No reason to die: it is waited out and counted. True (after the wait)
 * when the caller should try again.
 */
static inline bool wb_retry_transient(struct wb_device *wb, int err)
{
	if (!wb_err_transient(err))
		return false;
	atomic64_inc(&wb->nr_errors[WB_ERR_TRANSIENT]);
	msleep(100);
	return true;
}

/*
 * The next run of consecutive set bits of a block's sector bits, at or
 * after *start: sectors [*start, *end). False when none is left. A block's
 * dirty sectors go to the backing device as one write per run.
 */
static inline bool wb_next_run(u8 bits, unsigned int *start, unsigned int *end)
{
	unsigned int i = *start;

	while (i < WB_BLOCK_SECTORS && !(bits & (1U << i)))
		i++;
	if (i == WB_BLOCK_SECTORS)
		return false;
	*start = i;
	while (i < WB_BLOCK_SECTORS && (bits & (1U << i)))
		i++;
	*end = i;
	return true;
}

/*
 * Group commit: the open segment holds at least as many commit waiters as
 * the last commit completed, so sealing it need not wait for more. Read
 * without wb->lock too, in wb_gather_commits' wait condition.
 */
/* A commit of segment id's first len blocks: WB_COMMIT_WHOLE, all of them. */
#define WB_COMMIT_WHOLE		(WB_BLOCKS_PER_SEGMENT + 1)

/*
 * Whether the first len blocks of segment id are durable on the cache
 * device: the whole segment is, or an append made those blocks durable
 * while the segment stayed open. Called with wb->lock held.
 */
static inline bool wb_commit_durable(struct wb_device *wb, u64 id, u8 len)
{
	return id <= wb->last_durable_id ||
	       (id == wb->append_durable_id && len <= wb->append_durable_len);
}

static inline bool wb_commit_group_gathered(struct wb_device *wb)
{
	return READ_ONCE(wb->nr_open_commits) >=
	       READ_ONCE(wb->last_commit_group);
}

static inline struct block_device *wb_bdev(struct wb_device *wb,
					   enum wb_dev_kind dev)
{
	return dev == WB_DEV_CACHE ? wb->cache_dev->bdev : wb->backing_dev->bdev;
}

/*
 * Scratch space for construction and replay, before the threads start:
 * writeback's stream, WB_SCRATCH_SIZE bytes.
 */
#define WB_SCRATCH_SIZE		(WB_STREAM_BLOCKS * WB_BLOCK_SIZE)
static inline void *wb_scratch(struct wb_device *wb)
{
	return wb->stream;
}

/* Slot of segment id (ids start at 1). */
static inline u32 wb_id_to_slot(struct wb_device *wb, u64 id)
{
	return (u32)wb_slot_of_id(id, wb->nr_segments);
}

static inline struct wb_segment *wb_seg_of_id(struct wb_device *wb, u64 id)
{
	return &wb->segs[wb_id_to_slot(wb, id)];
}

static inline unsigned long wb_mb_index(struct wb_device *wb,
					struct wb_metablock *mb)
{
	return (unsigned long)(mb - wb->mbs);
}

static inline struct wb_segment *wb_mb_seg(struct wb_device *wb,
					   struct wb_metablock *mb)
{
	return &wb->segs[wb_mb_index(wb, mb) / WB_BLOCKS_PER_SEGMENT];
}

static inline u8 wb_mb_idx(struct wb_device *wb, struct wb_metablock *mb)
{
	return wb_mb_index(wb, mb) % WB_BLOCKS_PER_SEGMENT;
}

/*
 * Writes copying into a block (any number of them) happen only while its
 * segment has a RAM buffer, so their counts live behind the buffer's 512
 * KiB, one per block, and cost nothing per cache block.
 */
#define WB_RAMBUF_SIZE	(WB_SEGMENT_SIZE + \
			 WB_BLOCKS_PER_SEGMENT * sizeof(unsigned int))

/* Under lock, and only while mb's segment has its buffer. */
static inline unsigned int *wb_copying(struct wb_device *wb,
				       struct wb_metablock *mb)
{
	return (unsigned int *)(wb_mb_seg(wb, mb)->buf + WB_SEGMENT_SIZE) +
	       wb_mb_idx(wb, mb);
}

/* Under lock. */
static inline unsigned int wb_nr_copying(struct wb_device *wb,
					 struct wb_metablock *mb)
{
	return wb_mb_seg(wb, mb)->buf ? *wb_copying(wb, mb) : 0;
}

/* Cache sector of a metablock's data block. */
static inline sector_t wb_mb_cache_sector(struct wb_device *wb,
					  struct wb_metablock *mb)
{
	return wb_data_block_sector(wb_mb_seg(wb, mb)->slot, wb_mb_idx(wb, mb));
}

/*
 * The first logical block of a slot's header: it holds the id, the length
 * and the checksum. Replay reads only it to find the ids, and a header is
 * invalidated by zeroing only it: a single-block write cannot tear, so a
 * zeroing write that a power cut interrupts leaves either the old header
 * whole or an empty slot, never an old id over changed metablocks.
 */
static inline unsigned int wb_header_lbs(struct wb_device *wb)
{
	return max_t(unsigned int, WB_SECTOR_SIZE,
		     bdev_logical_block_size(wb->cache_dev->bdev));
}

/* Bytes of a segment that a flush writes: header block plus data blocks. */
static inline unsigned int wb_seg_bytes(u8 length)
{
	return WB_BLOCK_SIZE * (1U + length);
}

#endif /* DM_WBKIT_H */

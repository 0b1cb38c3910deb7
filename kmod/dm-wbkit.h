/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-wbkit: a write-back cache target in the dm-writeboost style.
 *
 * The on-disk layout is format/wbkit_format.h (dm-writeboost 2.2); this file
 * holds the in-memory state only. docs/FORMAT.md is the specification.
 *
 * Locking: one mutex (wb->lock) protects all metadata: the hash table, the
 * segment array, the open segment, the ids and the RAM buffer pool. Every
 * thread that sleeps for progress of another thread (a free RAM buffer, a
 * segment slot that is written back, a flushed segment) drops the mutex while
 * it waits on wb->wait and rechecks after retaking it. Reads of the ids
 * without the mutex (status, wait conditions) use READ_ONCE.
 *
 * Threads: an ordered workqueue processes every bio in arrival order (io_wq),
 * an ordered workqueue writes sealed segments to the cache device in id order
 * (flush_wq), a kthread writes segments back to the backing device, and a
 * kthread runs the periodic jobs (superblock record, data sync).
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
#include <linux/list.h>
#include <linux/types.h>

#include "wbkit_format.h"

#define DM_MSG_PREFIX "writeboost"

#define WB_NR_RAMBUF		4	/* RAM buffer segments in the pool */
#define WB_MAX_BATCH		32	/* upper bound of nr_max_batched_writeback */
#define WB_STATLEN		16
#define WB_ALL_DIRTY		0xffU

/* One cache block of one segment slot. */
struct wb_metablock {
	/* Linked in wb->htable while this is the newest dirty copy of its block. */
	struct hlist_node ht_node;
	sector_t sector;	/* backing sector of the 4 KiB block */
	u8 dirty_bits;		/* as written in the log */
	/*
	 * Superseded during replay: its data is on the backing device or
	 * obsolete, so writeback skips it. An entry superseded at run time
	 * stays writable: its successor may not be on the cache device yet.
	 */
	bool obsolete;
};

/* One segment slot of the ring. */
struct wb_segment {
	u64 id;			/* 0: the slot holds nothing of the log */
	u32 slot;
	u8 length;		/* valid metablocks */
	void *buf;		/* RAM buffer while not yet on the cache device */
	struct list_head flush_node;
	struct wb_metablock *mb;	/* WB_BLOCKS_PER_SEGMENT entries */
};

enum wb_dev_kind { WB_DEV_BACKING, WB_DEV_CACHE };

/* The first fatal I/O error: why the target is dead. */
struct wb_cause {
	int err;
	enum wb_dev_kind dev;
	const char *op;
	u64 sector;
};

/* One dirty block scheduled for writeback. */
struct wb_wb_entry {
	sector_t sector;
	u32 batch_idx;		/* which segment of the batch */
	u8 idx;			/* block within the segment */
	u8 dirty_bits;
};

struct wb_per_bio {
	bool remapped;		/* sent to the backing device as is */
	sector_t sector;	/* where, for the cause of an error */
};

/* Tunables; the ctr_given mask says which keys the table line named. */
enum wb_tunable {
	WB_T_WRITEBACK_THRESHOLD,
	WB_T_NR_MAX_BATCHED_WRITEBACK,
	WB_T_UPDATE_SB_RECORD_INTERVAL,
	WB_T_SYNC_DATA_INTERVAL,
	WB_T_READ_CACHE_THRESHOLD,
	WB_T_WRITE_AROUND_MODE,
	WB_T_NR,
};

/* Bits in wb->flags */
#define WB_F_DEAD	0	/* fail-stop, never clears */
#define WB_F_SUSPENDED	1	/* between postsuspend and resume */

struct wb_device {
	struct dm_target *ti;
	struct dm_dev *backing_dev;
	struct dm_dev *cache_dev;
	unsigned long flags;

	/* Geometry */
	u64 nr_segments;
	sector_t cache_sectors;
	sector_t backing_sectors;

	/* Metadata, under lock */
	struct mutex lock;
	struct wb_segment *segs;
	struct wb_metablock *mbs;
	struct hlist_head *htable;
	unsigned int htable_bits;
	struct wb_segment *cur;		/* open segment, NULL if none */
	u64 last_sealed_id;		/* highest id handed to the flusher */
	u64 last_flushed_id;		/* highest id on the cache device */
	u64 last_writeback_id;		/* highest id on the backing device */
	u64 nr_dirty;			/* newest dirty copies not written back */
	void *rambuf[WB_NR_RAMBUF];
	unsigned int nr_free_rambuf;
	void *free_rambuf[WB_NR_RAMBUF];
	struct list_head flush_queue;	/* sealed, in id order */
	wait_queue_head_t wait;		/* any progress, or death */

	/* Bio path */
	spinlock_t bio_lock;
	struct bio_list deferred;
	struct workqueue_struct *io_wq;
	struct work_struct io_work;
	void *bounce;			/* 4 KiB, bio worker only */
	void *bounce2;			/* 4 KiB, bio worker only */
	void *zero_block;		/* 4 KiB of zeros, never written to */

	/* Flusher */
	struct workqueue_struct *flush_wq;
	struct work_struct flush_work;

	/* Writeback daemon */
	struct task_struct *wb_task;
	wait_queue_head_t wb_wait;
	void *wb_buf[WB_MAX_BATCH];
	struct wb_wb_entry *wb_entries;
	atomic_t drop_caches;

	/* Periodic daemon: superblock record and data sync */
	struct task_struct *periodic_task;

	/* Tunables */
	unsigned int tunable[WB_T_NR];
	unsigned int ctr_given;		/* bit per enum wb_tunable */

	/* Statistics */
	atomic64_t stat[WB_STATLEN];
	atomic64_t nr_partial_flushed;

	/* Dead state */
	int dead_err;			/* first error, set once with cmpxchg */
	struct wb_cause cause;
};

/* dm-wbkit-metadata.c */
u32 wb_checksum(const void *seg_buf, u8 length);
int wb_sync_io(struct wb_device *wb, enum wb_dev_kind dev, blk_opf_t opf,
	       sector_t sector, void *buf, unsigned int len);
int wb_flush_dev(struct wb_device *wb, enum wb_dev_kind dev);
void wb_set_dead(struct wb_device *wb, enum wb_dev_kind dev, const char *op,
		 u64 sector, int err);
int wb_format_or_replay(struct wb_device *wb, char **error);
struct wb_metablock *wb_ht_lookup(struct wb_device *wb, sector_t block);
void wb_ht_add(struct wb_device *wb, struct wb_metablock *mb);
void wb_ht_del(struct wb_device *wb, struct wb_metablock *mb);
void wb_seal(struct wb_device *wb);
void wb_flush_work(struct work_struct *work);

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

/* dm-wbkit-daemon.c */
int wb_writeback_daemon(void *data);
int wb_periodic_daemon(void *data);
bool wb_should_writeback(struct wb_device *wb);

static inline bool wb_dead(struct wb_device *wb)
{
	return test_bit(WB_F_DEAD, &wb->flags);
}

static inline struct block_device *wb_bdev(struct wb_device *wb,
					   enum wb_dev_kind dev)
{
	return dev == WB_DEV_CACHE ? wb->cache_dev->bdev : wb->backing_dev->bdev;
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

/* Cache sector of a metablock's data block. */
static inline sector_t wb_mb_cache_sector(struct wb_device *wb,
					  struct wb_metablock *mb)
{
	return wb_data_block_sector(wb_mb_seg(wb, mb)->slot, wb_mb_idx(wb, mb));
}

/* Bytes of a segment that a flush writes: header block plus data blocks. */
static inline unsigned int wb_seg_bytes(u8 length)
{
	return WB_BLOCK_SIZE * (1U + length);
}

#endif /* DM_WBKIT_H */
